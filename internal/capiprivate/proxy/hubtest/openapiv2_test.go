package hubtest

import (
	"encoding/json"
	"runtime"
	"strings"
	"testing"
	"time"

	"k8s.io/client-go/discovery"

	"github.com/dcm-sp/acm-cluster-sp/internal/capiprivate/proxy"
)

// /openapi/v2 through the proxy is translated like v3: no private group anywhere in it (descriptions come from
// the upstream CRD schemas, which name the standard groups), the private definitions under the standard names,
// the platform's own dropped; a discovery client reading the protobuf encoding sees the same, and kubectl explain
// on the v2 document works.
func TestOpenAPIV2ThroughProxy(t *testing.T) {
	ps := startProxy(t, proxy.Options{})
	t0 := time.Now()
	code, hdr, body := rawRequest(t, "GET", ps.URL+"/openapi/v2", env.AdminToken, nil, "Accept", "application/json")
	if code != 200 {
		t.Fatalf("GET /openapi/v2: %d %.200s", code, body)
	}
	t.Logf("/openapi/v2 through the proxy: %d bytes in %v", len(body), time.Since(t0))
	for _, private := range []string{"cluster.hypershift.openshift.io", "io.openshift.hypershift.cluster", "ClusterHypershiftOpenshiftIo", "clusterHypershiftOpenshiftIo"} {
		if i := strings.Index(string(body), private); i >= 0 {
			t.Errorf("the proxied /openapi/v2 names %q: …%s…", private, body[max(0, i-120):min(len(body), i+80)])
		}
	}
	if etag := hdr.Get("Etag"); etag != "" && !strings.HasSuffix(strings.Trim(etag, `"`), "-"+hashOf()) {
		t.Errorf("ETag %s lacks the mapping hash", etag)
	}
	var doc struct {
		Paths       map[string]json.RawMessage `json:"paths"`
		Definitions map[string]struct {
			GVK []struct{ Group, Kind, Version string } `json:"x-kubernetes-group-version-kind"`
		} `json:"definitions"`
	}
	if err := json.Unmarshal(body, &doc); err != nil {
		t.Fatal(err)
	}
	for name, want := range map[string]string{
		"io.x-k8s.cluster.v1beta2.Machine":                         stdCore,
		"io.x-k8s.cluster.v1beta1.Machine":                         stdCore,
		"io.x-k8s.cluster.infrastructure.v1beta2.AWSMachine":       stdInfra,
		"io.x-k8s.cluster.infrastructure.v1alpha1.KubevirtMachine": stdInfra,
	} {
		d, ok := doc.Definitions[name]
		if !ok || len(d.GVK) != 1 || d.GVK[0].Group != want {
			t.Errorf("definition %s: %v %+v", name, ok, d.GVK)
		}
	}
	if _, ok := doc.Paths["/apis/cluster.x-k8s.io/v1beta2/namespaces/{namespace}/machines/{name}"]; !ok {
		t.Errorf("no standard Machine path")
	}
	if n := ps.metric(t, "capi_private_proxy_objects_filtered_total", "kind", "discovery"); n == 0 {
		t.Errorf("no platform definitions or paths dropped")
	}

	// client-go's discovery asks for protobuf: the proxy translates the JSON and encodes it back.
	// Discovery's own timeout (32 s) is raised: the race detector makes gnostic's parse of the ~6 MB document about
	// ten times slower than in the released binary (1.4 s here without -race, 13 s with it; under CI's load more).
	// What a user waits is measured by BenchmarkOpenAPIV2.
	cfg := ps.config(env.AdminToken)
	cfg.Timeout = 3 * time.Minute
	dc, err := discovery.NewDiscoveryClientForConfig(cfg)
	if err != nil {
		t.Fatal(err)
	}
	var before runtime.MemStats
	runtime.ReadMemStats(&before)
	t0 = time.Now()
	pb, err := dc.OpenAPISchema()
	if err != nil {
		t.Fatalf("discovery OpenAPISchema through the proxy: %v", err)
	}
	var after runtime.MemStats
	runtime.ReadMemStats(&after)
	t.Logf("protobuf encoding: %v, %d definitions, %.1f MiB allocated in the test process (proxy in-process)",
		time.Since(t0), len(pb.GetDefinitions().GetAdditionalProperties()), float64(after.TotalAlloc-before.TotalAlloc)/(1<<20))
	found := false
	for _, p := range pb.GetDefinitions().GetAdditionalProperties() {
		if strings.Contains(p.GetName(), "io.openshift.hypershift.cluster") {
			t.Errorf("protobuf definition %s", p.GetName())
		}
		found = found || p.GetName() == "io.x-k8s.cluster.v1beta2.Machine"
	}
	if !found {
		t.Error("protobuf document lacks io.x-k8s.cluster.v1beta2.Machine")
	}
	if n := ps.metric(t, "capi_private_proxy_forced_json_total", "requested", "protobuf"); n == 0 {
		t.Error("the protobuf request was not counted as forced to JSON")
	}

	// kubectl explain on the v2 document.
	out, err := kubectl(t, startProxyTLS(t, proxy.Options{}), env.AdminToken, "explain", "machines.spec.infrastructureRef", "--api-version", stdCore+"/v1beta2", "--output", "plaintext-openapiv2")
	if err != nil || !strings.Contains(out, "apiGroup") || strings.Contains(out, "hypershift") {
		t.Errorf("kubectl explain --output plaintext-openapiv2: %v\n%s", err, out)
	}
}
