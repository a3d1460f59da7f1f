package app

import (
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	"github.com/prometheus/client_golang/prometheus"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"

	"github.com/dcm-sp/acm-cluster-sp/internal/testpki"
)

// promQLWords are the identifiers the rules may use besides metric names: PromQL functions, aggregations and
// keywords, and label names. An identifier outside this list and the SP's registry fails the test — a rule on a
// metric someone else exports (up, kube_*) is a decision to make here, not by accident.
var promQLWords = map[string]bool{
	"sum": true, "min": true, "max": true, "by": true, "and": true, "or": true, "unless": true, "absent": true,
	"rate": true, "increase": true, "min_over_time": true, "histogram_quantile": true, "time": true,
	"job": true, "pod": true, "check": true, "informational": true, "code": true, "result": true, "file": true, "le": true,
}

var identifier = regexp.MustCompile(`[a-zA-Z_:][a-zA-Z0-9_:]*`)

// metricNames returns the identifiers of a PromQL expression that are not inside quotes or a range's brackets.
func metricNames(expr string) []string {
	expr = regexp.MustCompile(`"[^"]*"|\[[^\]]*\]`).ReplaceAllString(expr, " ")
	var out []string
	for _, id := range identifier.FindAllString(expr, -1) {
		if !promQLWords[id] {
			out = append(out, id)
		}
	}
	return out
}

// registered reports whether reg has a collector of this metric family (a histogram's _bucket, _sum and _count are
// its series): registering another collector of the same name fails with a conflict exactly when one exists.
func registered(reg *prometheus.Registry, name string) bool {
	for _, suffix := range []string{"_bucket", "_sum", "_count"} {
		if base, ok := strings.CutSuffix(name, suffix); ok && registered(reg, base) {
			return true
		}
	}
	probe := prometheus.NewGauge(prometheus.GaugeOpts{Name: name, Help: "probe"})
	err := reg.Register(probe)
	if err == nil {
		reg.Unregister(probe)
		return false
	}
	return strings.Contains(err.Error(), "previously registered descriptor with the same fully-qualified name")
}

// Every alert of deploy/ is written against metrics the SP exports: the rules are rendered as kustomize renders
// them, and every metric name they use must be registered by an SP that runs every optional part (status events,
// registration, TLS, the HTTP API). Each alert also has a severity, a summary and its section in docs/operations.md.
func TestAlertRulesUseExportedMetrics(t *testing.T) {
	var rules []map[string]any
	for _, o := range renderManifests(t, "deploy") {
		if o.GetKind() != "PrometheusRule" {
			continue
		}
		groups, _, _ := unstructured.NestedSlice(o.Object, "spec", "groups")
		for _, g := range groups {
			rs, _, _ := unstructured.NestedSlice(g.(map[string]any), "rules")
			for _, r := range rs {
				rules = append(rules, r.(map[string]any))
			}
		}
	}
	if len(rules) < 10 {
		t.Fatalf("%d alert rules rendered from deploy/", len(rules))
	}

	dir := t.TempDir()
	ca := testpki.NewCA(t, "alerts-ca")
	serving := ca.Serving(t, "sp")
	cfg := testConfig("restricted")
	cfg.ProviderName = "sp-alerts"
	cfg.NATSURL = "nats://127.0.0.1:1"
	cfg.RegistrationURL, cfg.APIHost = "http://127.0.0.1:1/api/v1alpha1", "https://127.0.0.1:8443"
	cfg.TLSCertFile = testpki.WriteFile(t, dir, "tls.crt", serving.CertPEM)
	cfg.TLSKeyFile = testpki.WriteFile(t, dir, "tls.key", serving.KeyPEM)
	a, err := New(&cfg, Options{RestConfig: testHub.Config})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := a.server.Handler(a.Registry); err != nil { // the HTTP metrics are registered with the routes
		t.Fatal(err)
	}

	docs, err := os.ReadFile(filepath.Join("..", "..", "docs", "operations.md"))
	if err != nil {
		t.Fatal(err)
	}
	for _, r := range rules {
		name, _ := r["alert"].(string)
		expr, _ := r["expr"].(string)
		labels, _ := r["labels"].(map[string]any)
		annotations, _ := r["annotations"].(map[string]any)
		if labels["severity"] != "warning" && labels["severity"] != "critical" || annotations["summary"] == nil || r["for"] == nil {
			t.Errorf("%s: needs severity warning|critical, a summary and a for: %v", name, r)
		}
		if !strings.Contains(string(docs), "### "+name) {
			t.Errorf("%s: docs/operations.md has no section %q saying what to do", name, "### "+name)
		}
		names := metricNames(expr)
		if len(names) == 0 {
			t.Errorf("%s: no metric in %q", name, expr)
		}
		for _, m := range names {
			if !strings.HasPrefix(m, "acm_sp_") || !registered(a.Registry, m) {
				t.Errorf("%s: %s is not a metric the SP exports (expr %q)", name, m, expr)
			}
		}
	}
}
