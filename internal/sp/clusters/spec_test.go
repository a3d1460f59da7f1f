package clusters

import (
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

var sc = SpecContext{Namespace: "clusters", AgentNamespace: "hardware-inventory", DefaultPlatform: "kubevirt", DefaultInfraEnv: ""}

// decodeJSON decodes a spec object the way internal/sp/wire hands it over: numbers as json.Number.
func decodeJSON(t *testing.T, body string) map[string]any {
	t.Helper()
	dec := json.NewDecoder(strings.NewReader(body))
	dec.UseNumber()
	var raw map[string]any
	if err := dec.Decode(&raw); err != nil {
		t.Fatalf("test body %s: %v", body, err)
	}
	return raw
}

func TestNewSpecNormalization(t *testing.T) {
	ps := base64.StdEncoding.EncodeToString([]byte(`{"auths":{"r.example.com":{"auth":"eDp5"}}}`))
	body := `{"version": "1.30", "metadata": {"name": "c1"}, "status": "READY", "id": "forged",
	  "kubeconfig": "forged", "kubeconfig_omitted": "forbidden", "pull_secret": "` + ps + `"}`
	s, err := NewSpec(decodeJSON(t, body), "spec", sc)
	if err != nil {
		t.Fatal(err)
	}
	for _, gone := range []string{"status", "forged", "kubeconfig", "forbidden", "pull_secret", ps} {
		if strings.Contains(s.JSON, gone) {
			t.Errorf("canonical spec still contains %q: %s", gone, s.JSON)
		}
	}
	if !strings.Contains(s.JSON, `"service_type":"cluster"`) || !strings.Contains(s.JSON, `"provider_hints":{"acm":{"platform":"kubevirt"}}`) {
		t.Errorf("defaults not filled in: %s", s.JSON)
	}
	if string(s.PullSecret) != `{"auths":{"r.example.com":{"auth":"eDp5"}}}` {
		t.Errorf("pull secret %q", s.PullSecret)
	}
	// Other providers' hints are dropped (never stored nor echoed), only acm is read.
	raw := decodeJSON(t, `{"version":"1.30","metadata":{"name":"c1"},"provider_hints":{"other":{"token":"s3cret"}}}`)
	s, err = NewSpec(raw, "", sc)
	if err != nil || !strings.Contains(s.JSON, `"provider_hints":{"acm":{"platform":"kubevirt"}}`) || strings.Contains(s.JSON, "s3cret") {
		t.Fatalf("%v %s", err, s.JSON)
	}
	// NewSpec normalizes a copy: what it was given is left as it was.
	if hints := raw["provider_hints"].(map[string]any); hints["other"] == nil || hints["acm"] != nil || raw["service_type"] != nil {
		t.Fatalf("NewSpec changed its input: %v", raw)
	}
	// An integral float count is an integer.
	s, err = NewSpec(decodeJSON(t, `{"version":"1.30","metadata":{"name":"c1"},"nodes":{"workers":{"count":3.0}}}`), "", sc)
	if err != nil || *s.Workers.Count != 3 {
		t.Fatalf("count 3.0: %v", err)
	}
}

func TestNewSpecErrors(t *testing.T) {
	baremetal := SpecContext{Namespace: "clusters", DefaultPlatform: "baremetal"}
	cases := []struct {
		name   string
		body   string
		at     string // where the spec sits in the request ("spec" in the DCM form)
		ctx    *SpecContext
		kind   Kind
		fields []string // fields named in the error
		has    string
	}{
		{name: "empty", body: `{}`, kind: KindInvalid, fields: []string{"metadata.name", "version"}},
		{name: "wrapped names fields under spec", body: `{"metadata": {}}`, at: "spec", kind: KindInvalid, fields: []string{"spec.metadata.name", "spec.version"}},
		{name: "name not label", body: `{"version":"1.30","metadata":{"name":"Dev_Cluster"}}`, kind: KindInvalid, fields: []string{"metadata.name"}, has: "DNS label"},
		{name: "name too long for ns", body: `{"version":"1.30","metadata":{"name":"` + strings.Repeat("a", 55) + `"}}`, kind: KindInvalid, has: "at most 54 characters"},
		{name: "reserved name", body: `{"version":"1.30","metadata":{"name":"local-cluster"}}`, kind: KindInvalid, has: "reserved"},
		{name: "reserved prefix", body: `{"version":"1.30","metadata":{"name":"openshift-x"}}`, kind: KindInvalid, has: "reserved"},
		{name: "namespace as name", body: `{"version":"1.30","metadata":{"name":"clusters"}}`, kind: KindInvalid, has: "reserved"},
		{name: "agent namespace as name", body: `{"version":"1.30","metadata":{"name":"hardware-inventory"}}`, kind: KindInvalid, has: "reserved"},
		{name: "version number", body: `{"version":1.30,"metadata":{"name":"c1"}}`, kind: KindInvalid, fields: []string{"version"}},
		{name: "service type", body: `{"service_type":"vm","version":"1.30","metadata":{"name":"c1"}}`, kind: KindInvalid, fields: []string{"service_type"}},
		{name: "zero workers", body: `{"version":"1.30","metadata":{"name":"c1"},"nodes":{"workers":{"count":0}}}`, kind: KindInvalid, fields: []string{"nodes.workers.count"}, has: "at least 1"},
		{name: "string count", body: `{"version":"1.30","metadata":{"name":"c1"},"nodes":{"workers":{"count":"3"}}}`, kind: KindInvalid, fields: []string{"nodes.workers.count"}},
		{name: "fractional cpu", body: `{"version":"1.30","metadata":{"name":"c1"},"nodes":{"workers":{"cpu":2.5}}}`, kind: KindInvalid, fields: []string{"nodes.workers.cpu"}},
		{name: "huge count", body: `{"version":"1.30","metadata":{"name":"c1"},"nodes":{"workers":{"count":99999999999}}}`, kind: KindInvalid, has: "at most 1000"},
		{name: "control plane count 2", body: `{"version":"1.30","metadata":{"name":"c1"},"nodes":{"control_plane":{"count":2}}}`, kind: KindInvalid, has: "1, 3 or 5"},
		{name: "control plane cpu 1", body: `{"version":"1.30","metadata":{"name":"c1"},"nodes":{"control_plane":{"cpu":1}}}`, kind: KindInvalid, has: "at least 2"},
		{name: "zero memory", body: `{"version":"1.30","metadata":{"name":"c1"},"nodes":{"workers":{"memory":"0GB"}}}`, kind: KindInvalid, fields: []string{"nodes.workers.memory"}, has: "greater than zero"},
		{name: "bad size", body: `{"version":"1.30","metadata":{"name":"c1"},"nodes":{"workers":{"memory":"32 GB"}}}`, kind: KindInvalid, has: "not a size"},
		{name: "small kubevirt disk", body: `{"version":"1.30","metadata":{"name":"c1"},"nodes":{"workers":{"storage":"10GB"}}}`, kind: KindInvalid, has: "at least 16GB"},
		{name: "aws", body: `{"version":"1.30","metadata":{"name":"c1"},"provider_hints":{"acm":{"platform":"aws"}}}`, kind: KindUnprocessable, has: `platform "aws" is not supported`},
		{name: "hive", body: `{"version":"1.30","metadata":{"name":"c1"},"provider_hints":{"acm":{"provisioning_type":"hive"}}}`, kind: KindUnprocessable, has: "hive"},
		{name: "baremetal no domain", body: `{"version":"1.30","metadata":{"name":"c1"},"provider_hints":{"acm":{"platform":"baremetal","infra_env":"x"}}}`, kind: KindInvalid, fields: []string{"provider_hints.acm.base_domain"}},
		{name: "baremetal no infraenv", body: `{"version":"1.30","metadata":{"name":"c1"},"provider_hints":{"acm":{"base_domain":"example.com"}}}`, ctx: &baremetal, kind: KindInvalid, fields: []string{"provider_hints.acm.infra_env"}},
		{name: "bad base domain", body: `{"version":"1.30","metadata":{"name":"c1"},"provider_hints":{"acm":{"base_domain":"Example .com"}}}`, kind: KindInvalid, fields: []string{"provider_hints.acm.base_domain"}},
		{name: "bad agent label", body: `{"version":"1.30","metadata":{"name":"c1"},"provider_hints":{"acm":{"agent_labels":{"bad key!":"x"}}}}`, kind: KindInvalid, fields: []string{"provider_hints.acm.agent_labels"}},
		{name: "label value not string", body: `{"version":"1.30","metadata":{"name":"c1","labels":{"a":1}}}`, kind: KindInvalid, fields: []string{"metadata.labels.a"}},
		{name: "bad pull secret", body: `{"version":"1.30","metadata":{"name":"c1"},"pull_secret":"bm90LWpzb24="}`, kind: KindInvalid, fields: []string{"pull_secret"}},
		{name: "nodes not object", body: `{"version":"1.30","metadata":{"name":"c1"},"nodes":[]}`, kind: KindInvalid, fields: []string{"nodes"}},
		// Unknown keys are refused wherever the API defines the object, naming the field.
		{name: "unknown top-level key", body: `{"version":"1.30","metadata":{"name":"c1"},"pullSecret":"eyJhdXRocyI6e319"}`, kind: KindInvalid, fields: []string{"pullSecret"}, has: "unknown field"},
		{name: "unknown wrapped key", body: `{"version":"1.30","metadata":{"name":"c1"},"token":"abc"}`, at: "spec", kind: KindInvalid, fields: []string{"spec.token"}},
		{name: "unknown worker key", body: `{"version":"1.30","metadata":{"name":"c1"},"nodes":{"workers":{"gpu":1}}}`, kind: KindInvalid, fields: []string{"nodes.workers.gpu"}, has: "count, cpu, memory, storage"},
		{name: "unknown metadata key", body: `{"version":"1.30","metadata":{"name":"c1","annotations":{"a":"b"}}}`, kind: KindInvalid, fields: []string{"metadata.annotations"}},
		{name: "unknown acm key", body: `{"version":"1.30","metadata":{"name":"c1"},"provider_hints":{"acm":{"pull_secret":"x"}}}`, kind: KindInvalid, fields: []string{"provider_hints.acm.pull_secret"}},
		// Sizes are bounded (never overflowing into the Agent minimums).
		{name: "memory huge", body: `{"version":"1.30","metadata":{"name":"c1"},"nodes":{"workers":{"memory":"99999999TB"}}}`, kind: KindInvalid, fields: []string{"nodes.workers.memory"}, has: "larger than 64TiB"},
		{name: "memory 9e9999999 (seconds of CPU if parsed)", body: `{"version":"1.30","metadata":{"name":"c1"},"nodes":{"workers":{"memory":"9e9999999"}}}`, kind: KindInvalid, fields: []string{"nodes.workers.memory"}, has: "exponent out of range"},
		{name: "memory 1e400", body: `{"version":"1.30","metadata":{"name":"c1"},"nodes":{"workers":{"memory":"1e400"}}}`, kind: KindInvalid, fields: []string{"nodes.workers.memory"}},
		{name: "storage exabytes", body: `{"version":"1.30","metadata":{"name":"c1"},"nodes":{"workers":{"storage":"9999999999999999999999E"}}}`, kind: KindInvalid, fields: []string{"nodes.workers.storage"}},
		{name: "memory millibytes", body: `{"version":"1.30","metadata":{"name":"c1"},"nodes":{"workers":{"memory":"1m"}}}`, kind: KindInvalid, fields: []string{"nodes.workers.memory"}, has: "smaller than 1GiB"},
		{name: "storage over 1PiB", body: `{"version":"1.30","metadata":{"name":"c1"},"nodes":{"workers":{"storage":"2Pi"}}}`, kind: KindInvalid, fields: []string{"nodes.workers.storage"}, has: "larger than 1PiB"},
		{name: "control plane memory tiny", body: `{"version":"1.30","metadata":{"name":"c1"},"nodes":{"control_plane":{"memory":"512MB"}}}`, kind: KindInvalid, fields: []string{"nodes.control_plane.memory"}},
		{name: "cpu too many", body: `{"version":"1.30","metadata":{"name":"c1"},"nodes":{"workers":{"cpu":1025}}}`, kind: KindInvalid, fields: []string{"nodes.workers.cpu"}, has: "at most 1024"},
		// base_domain follows the HostedCluster CRD's rule (a numeric TLD passed IsDNS1123Subdomain and became a 500).
		{name: "numeric tld", body: `{"version":"1.30","metadata":{"name":"c1"},"provider_hints":{"acm":{"base_domain":"10.0.0.1"}}}`, kind: KindInvalid, fields: []string{"provider_hints.acm.base_domain"}},
		{name: "trailing dot", body: `{"version":"1.30","metadata":{"name":"c1"},"provider_hints":{"acm":{"base_domain":"example.com."}}}`, kind: KindInvalid, fields: []string{"provider_hints.acm.base_domain"}},
		{name: "domain too long", body: `{"version":"1.30","metadata":{"name":"c1"},"provider_hints":{"acm":{"base_domain":"` + strings.Repeat("a", 250) + `.com"}}}`, kind: KindInvalid, fields: []string{"provider_hints.acm.base_domain"}},
		// The spec is capped so the stored annotation always fits.
		{name: "spec too large", body: `{"version":"1.30","metadata":{"name":"c1","labels":{` + manyLabels(700) + `}}}`, kind: KindInvalid, fields: []string{"spec"}, has: "at most 32768"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			ctx := sc
			if c.ctx != nil {
				ctx = *c.ctx
			}
			_, err := NewSpec(decodeJSON(t, c.body), c.at, ctx)
			if err == nil {
				t.Fatal("accepted")
			}
			if KindOf(err) != c.kind {
				t.Fatalf("kind %d, want %d: %v", KindOf(err), c.kind, err)
			}
			if c.has != "" && !strings.Contains(err.Error(), c.has) {
				t.Errorf("error %q does not contain %q", err, c.has)
			}
			var e *Error
			_ = errors.As(err, &e)
			for _, f := range c.fields {
				found := false
				for _, fe := range e.Fields {
					found = found || fe.Field == f
				}
				if !found {
					t.Errorf("error does not name field %s: %+v", f, e.Fields)
				}
			}
		})
	}
}

func manyLabels(n int) string {
	parts := make([]string, n)
	for i := range parts {
		parts[i] = fmt.Sprintf(`"label-%04d":"%s"`, i, strings.Repeat("v", 40))
	}
	return strings.Join(parts, ",")
}

// The base-domain rule is the HostedCluster CRD's own: read it from the CRD the hub installs.
func TestBaseDomainRuleMatchesTheCRD(t *testing.T) {
	data, err := os.ReadFile(filepath.Join("..", "..", "devtest", "sp", "sphub", "crds", "hostedclusters.hypershift.openshift.io.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	want := "self.matches('" + strings.ReplaceAll(baseDomainRE.String(), `\`, `\\`) + "')"
	if !strings.Contains(string(data), want) {
		t.Fatalf("the HostedCluster CRD no longer contains %s: update baseDomainRE", want)
	}
	for _, ok := range []string{"example.com", "apps.hub.example.co", "localdomain", "a-b.example.org"} {
		if !baseDomainRE.MatchString(ok) {
			t.Errorf("%s refused", ok)
		}
	}
}

func TestParseSize(t *testing.T) {
	const gi = int64(1) << 30
	cases := map[string]int64{"32GB": 32 * gi, "16Gi": 16 * gi, "512MB": 512 << 20, "2TB": 2 << 40, "17179869184": 16 * gi, "0032GB": 32 * gi, "20G": 20e9}
	for in, want := range cases {
		q, err := ParseSize(in)
		if err != nil || q.Value() != want {
			t.Errorf("ParseSize(%q) = %d, %v; want %d", in, q.Value(), err, want)
		}
	}
	for _, bad := range []string{"0GB", "-1Gi", "32gb", "32 GB", "", "lots", "1.5TB", "9e9999999", "1E999999999", "1e-99999", strings.Repeat("9", 40)} {
		if _, err := ParseSize(bad); err == nil {
			t.Errorf("ParseSize(%q) accepted", bad)
		}
	}
}
