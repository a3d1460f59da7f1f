package wire

import (
	"encoding/json"
	"errors"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"

	"github.com/dcm-sp/acm-cluster-sp/internal/sp/clusters"
)

var sc = clusters.SpecContext{Namespace: "clusters", AgentNamespace: "hardware-inventory", DefaultPlatform: "kubevirt"}

// The design document's two example payloads (verbatim) and the DCM wire form, from api/v1alpha1/examples.
var (
	designKubeVirt  = example("design-kubevirt.json")
	designBareMetal = example("design-baremetal.json")
	dcmForm         = example("dcm-kubevirt.json")
)

func example(name string) string {
	data, err := os.ReadFile(filepath.Join("..", "..", "..", "api", "v1alpha1", "examples", name))
	if err != nil {
		panic(err)
	}
	return string(data)
}

// The design's camelCase examples parse as the snake_case DCM form does.
func TestParseDesignExamples(t *testing.T) {
	s, err := ParseSpec([]byte(designKubeVirt), sc)
	if err != nil {
		t.Fatal(err)
	}
	if s.Name != "dev-cluster-01" || s.Version != "4.15" || s.Platform != clusters.KubeVirt || s.BaseDomain != "example.com" ||
		s.ControlPlane.Count != 3 || *s.ControlPlane.CPU != 4 || s.ControlPlane.Memory.String() != "16Gi" ||
		*s.Workers.Count != 3 || *s.Workers.CPU != 8 || s.Workers.Memory.String() != "32Gi" || s.Workers.Storage.String() != "250Gi" {
		t.Fatalf("kubevirt example parsed as %+v", s)
	}
	want := `{"metadata":{"name":"dev-cluster-01"},"nodes":{"control_plane":{"count":3,"cpu":4,"memory":"16GB","storage":"120GB"},"workers":{"count":3,"cpu":8,"memory":"32GB","storage":"250GB"}},"provider_hints":{"acm":{"base_domain":"example.com","platform":"kubevirt"}},"service_type":"cluster","version":"4.15"}`
	if s.JSON != want {
		t.Fatalf("canonical spec\n got %s\nwant %s", s.JSON, want)
	}

	s, err = ParseSpec([]byte(designBareMetal), clusters.SpecContext{Namespace: "clusters", DefaultPlatform: "kubevirt"})
	if err != nil {
		t.Fatal(err)
	}
	if s.Platform != clusters.BareMetal || s.InfraEnv != "production-infraenv" || s.AgentLabels["location"] != "datacenter-1" || s.AgentLabels["role"] != "worker" {
		t.Fatalf("baremetal example parsed as %+v", s)
	}
	if !strings.Contains(s.JSON, `"agent_labels":{"location":"datacenter-1","role":"worker"}`) || !strings.Contains(s.JSON, `"infra_env":"production-infraenv"`) {
		t.Fatalf("baremetal canonical %s", s.JSON)
	}
}

// The DCM form and the design's flat camelCase form of the same request normalize to the same spec, which is what
// makes a retried POST idempotent whatever spelling the client used.
func TestFormsNormalizeAlike(t *testing.T) {
	flat := strings.Replace(designKubeVirt, `"4.15"`, `"1.30"`, 1)
	flat = strings.Replace(flat, `"metadata": {"name": "dev-cluster-01"}`, `"metadata": {"name": "dev-cluster-01", "labels": {"team": "a"}}`, 1)
	a, err := ParseSpec([]byte(dcmForm), sc)
	if err != nil {
		t.Fatal(err)
	}
	b, err := ParseSpec([]byte(flat), sc)
	if err != nil {
		t.Fatal(err)
	}
	if a.JSON != b.JSON {
		t.Fatalf("forms differ:\n%s\n%s", a.JSON, b.JSON)
	}
	// A flat snake_case spec (the future DCM Agent's raw body) too.
	var wrapped map[string]json.RawMessage
	_ = json.Unmarshal([]byte(dcmForm), &wrapped)
	c, err := ParseSpec(wrapped["spec"], sc)
	if err != nil || c.JSON != a.JSON {
		t.Fatalf("raw spec: %v\n%s", err, c.JSON)
	}
	// The Environment Agent's body: the bare spec with the read-only fields the control plane's catalog merges in
	// (api_endpoint, console_url, kubeconfig, all empty), accepted and ignored.
	d, err := ParseSpec([]byte(example("agent-kubevirt.json")), sc)
	if err != nil || d.JSON != a.JSON {
		t.Fatalf("the agent's body: %v\n%s", err, d.JSON)
	}
}

// DecodeSpec's own refusals: syntax, shape, the DCM form, both spellings of a key. Each is a 400 naming what is
// wrong, before any rule of the domain runs.
func TestDecodeSpecErrors(t *testing.T) {
	cases := []struct {
		name, body string
		fields     []string // the fields named, in order
		has        string
	}{
		{name: "malformed", body: `{"spec": `, has: "request body is not valid JSON: unexpected EOF"},
		{name: "empty body", body: ``, has: "request body is not valid JSON: EOF"},
		{name: "syntax error", body: `{"version": 4.}`, has: "request body is not valid JSON: invalid character '}' after decimal point in numeric literal"},
		{name: "array", body: `[1,2]`, has: "request body must be a JSON object"},
		{name: "string", body: `"x"`, has: "request body must be a JSON object"},
		{name: "null", body: `null`, has: "request body must be a JSON object"},
		{name: "trailing", body: `{"version":"1.30","metadata":{"name":"c1"}} {}`, has: "request body has data after the JSON object"},
		{name: "too deep", body: strings.Repeat("[", 10001) + strings.Repeat("]", 10001), has: "exceeded max depth"},
		{name: "spec not object", body: `{"spec": "x"}`, fields: []string{"spec"}, has: "spec: must be an object"},
		{name: "spec null", body: `{"spec": null}`, fields: []string{"spec"}, has: "spec: must be an object"},
		{name: "key beside spec", body: `{"spec":{"version":"1.30"},"token":"abc"}`, fields: []string{"token"}, has: `the DCM form is {"spec": {…}} alone`},
		{name: "both spellings", body: `{"nodes":{"worker":{"count":1},"workers":{"count":2}}}`, fields: []string{"nodes.workers"}, has: `both "workers" and "worker" given; use "workers"`},
		{name: "both top-level spellings", body: `{"serviceType":"cluster","service_type":"cluster"}`, fields: []string{"service_type"}},
		{name: "both spellings in the DCM form", body: `{"spec":{"provider_hints":{"acm":{"baseDomain":"a.com","base_domain":"b.com"}}}}`, fields: []string{"spec.provider_hints.acm.base_domain"}},
		{name: "every conflict, in path order", body: `{"providerHints":{"acm":{"infraEnv":"a","infra_env":"b","agentLabels":{},"agent_labels":{}}},"serviceType":"cluster","service_type":"cluster"}`,
			fields: []string{"service_type", "provider_hints.acm.agent_labels", "provider_hints.acm.infra_env"}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			raw, _, err := DecodeSpec([]byte(c.body))
			var e *clusters.Error
			if !errors.As(err, &e) || e.Kind != clusters.KindInvalid {
				t.Fatalf("got %v (%v), want a 400", err, raw)
			}
			if !strings.Contains(e.Message, c.has) {
				t.Errorf("message %q does not contain %q", e.Message, c.has)
			}
			var fields []string
			for _, f := range e.Fields {
				fields = append(fields, f.Field)
			}
			if !reflect.DeepEqual(fields, c.fields) {
				t.Errorf("fields %v, want %v", fields, c.fields)
			}
		})
	}
}

// DecodeSpec hands the domain the spec object with canonical keys, wherever the API defines an alias, and says where
// the spec sat; numbers stay exact.
func TestDecodeSpec(t *testing.T) {
	cases := []struct {
		name, body, want, at string
	}{
		{name: "bare snake_case", body: `{"service_type":"cluster","nodes":{"workers":{"count":3}}}`, want: `{"nodes":{"workers":{"count":3}},"service_type":"cluster"}`},
		{name: "bare camelCase", body: `{"serviceType":"cluster","providerHints":{"acm":{"baseDomain":"example.com","infraEnv":"ie","agentLabels":{"a":"b"},"provisioningType":"hypershift"}},"nodes":{"controlPlane":{"count":3},"worker":{"count":2}}}`,
			want: `{"nodes":{"control_plane":{"count":3},"workers":{"count":2}},"provider_hints":{"acm":{"agent_labels":{"a":"b"},"base_domain":"example.com","infra_env":"ie","provisioning_type":"hypershift"}},"service_type":"cluster"}`},
		{name: "DCM form", body: `{"spec":{"providerHints":{"acm":{"baseDomain":"example.com"}}}}`, at: "spec", want: `{"provider_hints":{"acm":{"base_domain":"example.com"}}}`},
		{name: "aliases only where the API defines them", body: `{"metadata":{"serviceType":"x"},"nodes":{"workers":{"controlPlane":1}},"provider_hints":{"other":{"baseDomain":"x"}}}`,
			want: `{"metadata":{"serviceType":"x"},"nodes":{"workers":{"controlPlane":1}},"provider_hints":{"other":{"baseDomain":"x"}}}`},
		{name: "an alias beside a non-object keeps it for the domain to refuse", body: `{"nodes":"x","providerHints":[1]}`, want: `{"nodes":"x","provider_hints":[1]}`},
		{name: "numbers exact", body: `{"nodes":{"workers":{"count":3.0,"cpu":12345678901234567890}}}`, want: `{"nodes":{"workers":{"count":3.0,"cpu":12345678901234567890}}}`},
		{name: "unknown keys pass (the domain refuses them)", body: `{"token":"abc"}`, want: `{"token":"abc"}`},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			raw, at, err := DecodeSpec([]byte(c.body))
			if err != nil {
				t.Fatal(err)
			}
			got, _ := json.Marshal(raw)
			if string(got) != c.want || at != c.at {
				t.Fatalf("got %s at %q\nwant %s at %q", got, at, c.want, c.at)
			}
		})
	}
}

// DecodePatch: the body must be {"spec": {…}}; the result is the stored spec with the patch applied.
func TestDecodePatch(t *testing.T) {
	const stored = `{"metadata":{"labels":{"team":"a"},"name":"c1"},"nodes":{"workers":{"count":3,"memory":"16GB"}},"service_type":"cluster","version":"4.17"}`
	cases := []struct {
		name, body  string
		merged      string // the merged spec's JSON
		errHas      string
		errField    string
		internalErr bool
	}{
		{name: "scale", body: `{"spec":{"nodes":{"workers":{"count":5}}}}`,
			merged: `{"metadata":{"labels":{"team":"a"},"name":"c1"},"nodes":{"workers":{"count":5,"memory":"16GB"}},"service_type":"cluster","version":"4.17"}`},
		{name: "null deletes", body: `{"spec":{"metadata":{"labels":null},"nodes":{"workers":{"memory":null}}}}`,
			merged: `{"metadata":{"name":"c1"},"nodes":{"workers":{"count":3}},"service_type":"cluster","version":"4.17"}`},
		{name: "a new object loses its nulls", body: `{"spec":{"provider_hints":{"acm":{"autoscaling":{"min":2,"max":null}}}}}`,
			merged: `{"metadata":{"labels":{"team":"a"},"name":"c1"},"nodes":{"workers":{"count":3,"memory":"16GB"}},"provider_hints":{"acm":{"autoscaling":{"min":2}}},"service_type":"cluster","version":"4.17"}`},
		{name: "a scalar replaces an object", body: `{"spec":{"nodes":7}}`,
			merged: `{"metadata":{"labels":{"team":"a"},"name":"c1"},"nodes":7,"service_type":"cluster","version":"4.17"}`},
		{name: "empty patch", body: `{"spec":{}}`, merged: stored},
		{name: "keys as sent (no alias renamed)", body: `{"spec":{"serviceType":"cluster"}}`,
			merged: `{"metadata":{"labels":{"team":"a"},"name":"c1"},"nodes":{"workers":{"count":3,"memory":"16GB"}},"serviceType":"cluster","service_type":"cluster","version":"4.17"}`},
		{name: "not JSON", body: `{"spec":`, errHas: "request body is not a JSON object: unexpected EOF"},
		{name: "an array", body: `[]`, errHas: "request body is not a JSON object: cannot unmarshal array into Go value of type map[string]interface {}"},
		{name: "trailing data", body: `{"spec":{}} {}`, errHas: "request body has data after the JSON object"},
		{name: "not a spec patch", body: `{"version":"4.18"}`, errField: "version", errHas: `version: unknown field: an update is a merge patch of {"spec": {…}}`},
		{name: "null body", body: `null`, errField: "spec", errHas: "spec: must be an object"},
		{name: "spec null", body: `{"spec":null}`, errField: "spec", errHas: "spec: must be an object"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			p, err := DecodePatch([]byte(c.body), stored)
			if c.errHas != "" {
				var e *clusters.Error
				if !errors.As(err, &e) || e.Kind != clusters.KindInvalid || e.Message != c.errHas {
					t.Fatalf("got %v, want a 400 %q", err, c.errHas)
				}
				if c.errField != "" && (len(e.Fields) != 1 || e.Fields[0].Field != c.errField) {
					t.Fatalf("fields %+v, want %s", e.Fields, c.errField)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			got, _ := json.Marshal(p.Merged)
			if string(got) != c.merged {
				t.Fatalf("merged\n got %s\nwant %s", got, c.merged)
			}
			if old, _ := json.Marshal(p.Stored); string(old) != stored {
				t.Fatalf("the stored spec changed: %s", old)
			}
		})
	}
}

// Stored numbers (decoded as float64) and patched ones come out of the merge as one type, the one NewSpec reads.
func TestDecodePatchNumbers(t *testing.T) {
	p, err := DecodePatch([]byte(`{"spec":{"nodes":{"workers":{"cpu":4}}}}`), `{"nodes":{"workers":{"count":3}}}`)
	if err != nil {
		t.Fatal(err)
	}
	w := p.Merged["nodes"].(map[string]any)["workers"].(map[string]any)
	if _, ok := w["count"].(json.Number); !ok {
		t.Errorf("stored count is %T", w["count"])
	}
	if _, ok := w["cpu"].(json.Number); !ok {
		t.Errorf("patched cpu is %T", w["cpu"])
	}
	if _, err := DecodePatch([]byte(`{"spec":{}}`), `not json`); clusters.KindOf(err) != clusters.KindInternal {
		t.Errorf("an unreadable stored spec: %v, want an internal error", err)
	}
}

// RFC 7396's own examples (appendix A).
func TestMergePatch(t *testing.T) {
	cases := []struct{ target, patch, want string }{
		{`{"a":"b"}`, `{"a":"c"}`, `{"a":"c"}`},
		{`{"a":"b"}`, `{"b":"c"}`, `{"a":"b","b":"c"}`},
		{`{"a":"b"}`, `{"a":null}`, `{}`},
		{`{"a":"b","b":"c"}`, `{"a":null}`, `{"b":"c"}`},
		{`{"a":["b"]}`, `{"a":"c"}`, `{"a":"c"}`},
		{`{"a":"c"}`, `{"a":["b"]}`, `{"a":["b"]}`},
		{`{"a":{"b":"c"}}`, `{"a":{"b":"d","c":null}}`, `{"a":{"b":"d"}}`},
		{`{"a":[{"b":"c"}]}`, `{"a":[1]}`, `{"a":[1]}`},
		{`{"e":null}`, `{"a":1}`, `{"a":1,"e":null}`},
		{`{}`, `{"a":{"bb":{"ccc":null}}}`, `{"a":{"bb":{}}}`},
	}
	for _, c := range cases {
		var target, patch map[string]any
		_ = json.Unmarshal([]byte(c.target), &target)
		_ = json.Unmarshal([]byte(c.patch), &patch)
		before, _ := json.Marshal(target)
		got, _ := json.Marshal(MergePatch(target, patch))
		if string(got) != c.want {
			t.Errorf("MergePatch(%s, %s) = %s, want %s", c.target, c.patch, got, c.want)
		}
		if after, _ := json.Marshal(target); string(after) != string(before) {
			t.Errorf("MergePatch changed its target: %s", after)
		}
	}
}
