package app

import (
	"strings"
	"testing"

	"github.com/dcm-sp/acm-cluster-sp/internal/devtest/manifesttest"
	"github.com/dcm-sp/acm-cluster-sp/internal/devtest/testpki"
)

// spWords are the label names the SP's rules use besides manifesttest.PromQLWords. An identifier outside those and
// the SP's registry fails the test — a rule on a metric someone else exports (up, kube_*) is a decision to make
// here, not by accident.
var spWords = manifesttest.Words("job", "pod", "check", "informational", "code", "result", "file", "loop")

// Every alert of deploy/ is written against metrics the SP exports: the rules are rendered as kustomize renders
// them, and every metric name they use must be registered by an SP that runs every optional part (status events,
// registration, TLS, the HTTP API). Each alert also has a severity, a summary and its section in docs/operations.md.
func TestAlertRulesUseExportedMetrics(t *testing.T) {
	t.Parallel()
	rules := manifesttest.AlertRules(manifesttest.Render(t, "deploy"))
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

	for _, r := range rules {
		name, expr := manifesttest.CheckAlert(t, r, "docs/operations.md")
		names := manifesttest.MetricNames(expr, spWords)
		if len(names) == 0 {
			t.Errorf("%s: no metric in %q", name, expr)
		}
		for _, m := range names {
			if !strings.HasPrefix(m, "acm_sp_") || !manifesttest.Registered(a.Registry, m) {
				t.Errorf("%s: %s is not a metric the SP exports (expr %q)", name, m, expr)
			}
		}
	}
}
