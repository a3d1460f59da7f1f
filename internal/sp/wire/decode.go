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

// canonicalKeys returns a copy of spec whose alias keys carry their canonical names at the three objects that have
// aliases (the spec, nodes, provider_hints.acm); both spellings of one key is a conflict, named at the canonical
// field (under at). An alias whose parent is not an object stays as it is, for the domain to refuse.
func canonicalKeys(spec map[string]any, at string) (map[string]any, []clusters.FieldError) {
	var conflicts []clusters.FieldError
	out := rename(spec, "", at, &conflicts)
	if nodes, ok := out["nodes"].(map[string]any); ok {
		out["nodes"] = rename(nodes, "nodes", at, &conflicts)
	}
	if hints, ok := out["provider_hints"].(map[string]any); ok {
		if acm, ok := hints["acm"].(map[string]any); ok {
			hints = rename(hints, "provider_hints", at, &conflicts) // a copy: no aliases at this level
			hints["acm"] = rename(acm, "provider_hints.acm", at, &conflicts)
			out["provider_hints"] = hints
		}
	}
	return out, conflicts
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

func join(path, key string) string {
	if path == "" {
		return key
	}
	return path + "." + key
}
