package wire

import (
	"bytes"
	"encoding/json"
	"fmt"
	"sort"
	"strings"

	"github.com/dcm-sp/acm-cluster-sp/internal/sp/clusters"
)

// ParseSpec reads a create body and validates it: DecodeSpec, then clusters.NewSpec.
func ParseSpec(body []byte, sc clusters.SpecContext) (*clusters.Spec, error) {
	raw, at, err := DecodeSpec(body)
	if err != nil {
		return nil, err
	}
	return clusters.NewSpec(raw, at, sc)
}

// DecodeSpec reads a create body — the wrapped DCM form {"spec": …} or a bare spec — into the spec object with
// canonical (snake_case) keys, and at, the field path the spec sits at in the body ("spec" or ""), which prefixes
// the fields the domain names in its errors. Malformed JSON, anything but one object, a key beside "spec" and both
// spellings of one key are KindInvalid errors.
func DecodeSpec(body []byte) (raw map[string]any, at string, err error) {
	var top any
	if err := decode(body, &top, "request body is not valid JSON"); err != nil {
		return nil, "", err
	}
	root, ok := top.(map[string]any)
	if !ok {
		return nil, "", clusters.Invalid("request body must be a JSON object")
	}
	if inner, ok := root["spec"].(map[string]any); ok {
		for k := range root {
			if k != "spec" {
				return nil, "", clusters.InvalidFields([]clusters.FieldError{{Field: k, Message: "unknown field: the DCM form is {\"spec\": {…}} alone"}})
			}
		}
		root, at = inner, "spec"
	} else if _, present := root["spec"]; present {
		return nil, "", clusters.InvalidFields([]clusters.FieldError{{Field: "spec", Message: "must be an object"}})
	}
	raw, conflicts := canonicalKeys(root, at)
	if len(conflicts) > 0 {
		return nil, "", clusters.InvalidFields(conflicts)
	}
	return raw, at, nil
}

// decode reads one JSON value into dst, numbers as json.Number (a count stays exact, and 3.0 stays 3.0 in the echo);
// notJSON starts the message of a syntax or type error.
func decode(body []byte, dst any, notJSON string) error {
	dec := json.NewDecoder(bytes.NewReader(body))
	dec.UseNumber()
	if err := dec.Decode(dst); err != nil {
		return clusters.Invalid("%s: %s", notJSON, strings.TrimPrefix(err.Error(), "json: "))
	}
	if dec.More() {
		return clusters.Invalid("request body has data after the JSON object")
	}
	return nil
}

// aliases maps the design's camelCase spellings to canonical keys, per object path (docs/dcm.md).
var aliases = map[string]map[string]string{
	"":                   {"serviceType": "service_type", "providerHints": "provider_hints"},
	"nodes":              {"controlPlane": "control_plane", "worker": "workers"},
	"provider_hints.acm": {"baseDomain": "base_domain", "infraEnv": "infra_env", "agentLabels": "agent_labels", "provisioningType": "provisioning_type"},
}

// canonicalKeys returns a copy of spec whose alias keys carry their canonical names, at every path that has
// aliases; both spellings of one key is a conflict, named at the canonical field (under at).
func canonicalKeys(spec map[string]any, at string) (map[string]any, []clusters.FieldError) {
	var conflicts []clusters.FieldError
	var walk func(obj map[string]any, path string) map[string]any
	walk = func(obj map[string]any, path string) map[string]any {
		out := rename(obj, path, at, &conflicts)
		for _, child := range []string{"nodes", "provider_hints", "provider_hints.acm"} {
			if parent, key := split(child); parent == path {
				if m, ok := out[key].(map[string]any); ok {
					out[key] = walk(m, child)
				}
			}
		}
		return out
	}
	return walk(spec, ""), conflicts
}

// rename copies obj with the aliases of path renamed (sorted, so conflicts come in a stable order).
func rename(obj map[string]any, path, at string, conflicts *[]clusters.FieldError) map[string]any {
	out := make(map[string]any, len(obj))
	for k, v := range obj {
		out[k] = v
	}
	keys := make([]string, 0, len(aliases[path]))
	for alias := range aliases[path] {
		keys = append(keys, alias)
	}
	sort.Strings(keys)
	for _, alias := range keys {
		canon := aliases[path][alias]
		v, ok := out[alias]
		if !ok {
			continue
		}
		if _, both := out[canon]; both {
			*conflicts = append(*conflicts, clusters.FieldError{Field: join(at, join(path, canon)), Message: fmt.Sprintf("both %q and %q given; use %q", canon, alias, canon)})
			continue
		}
		delete(out, alias)
		out[canon] = v
	}
	return out
}

func split(path string) (parent, key string) {
	if i := strings.LastIndex(path, "."); i >= 0 {
		return path[:i], path[i+1:]
	}
	return "", path
}

func join(path, key string) string {
	if path == "" {
		return key
	}
	return path + "." + key
}
