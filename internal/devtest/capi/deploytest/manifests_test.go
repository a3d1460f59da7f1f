package deploytest

import (
	"context"
	"io"
	"slices"
	"strings"
	"testing"

	"github.com/prometheus/client_golang/prometheus"
	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/runtime"
	ctrlmetrics "sigs.k8s.io/controller-runtime/pkg/metrics"

	"github.com/dcm-sp/acm-cluster-sp/internal/capiprivate/cli"
	"github.com/dcm-sp/acm-cluster-sp/internal/capiprivate/inject"
	"github.com/dcm-sp/acm-cluster-sp/internal/capiprivate/migrate/controller"
	"github.com/dcm-sp/acm-cluster-sp/internal/capiprivate/proxy"
	"github.com/dcm-sp/acm-cluster-sp/internal/capiprivate/rbacmirror"
	"github.com/dcm-sp/acm-cluster-sp/internal/capiprivate/webhook"
	"github.com/dcm-sp/acm-cluster-sp/internal/devtest/manifesttest"
)

// capiWords are the label names capi-private's rules use, and up — Prometheus's own health of a scrape target, the
// one series no component registers: a rule on another metric nobody here exports fails the test.
var capiWords = manifesttest.Words("job", "name", "namespace", "pod", "phase", "reason", "result", "kind", "code",
	"component", "controller", "state", "up")

// exported are the registries of what capi-private's components export: the conversion webhook, the proxy
// sidecar and the injector register their own metrics; the RBAC mirror and the migrator serve controller-runtime's
// registry (its controller and leader election metrics register themselves when the packages that use them are
// linked, as migrate/controller is here), with the migration metrics in it.
func exported(t *testing.T) []prometheus.Registerer {
	t.Helper()
	own := prometheus.NewRegistry()
	if _, err := webhook.NewMetrics(own); err != nil {
		t.Fatal(err)
	}
	if _, err := proxy.NewMetrics(own); err != nil {
		t.Fatal(err)
	}
	if _, err := inject.NewMetrics(own); err != nil {
		t.Fatal(err)
	}
	if _, err := inject.NewCertActions(own); err != nil {
		t.Fatal(err)
	}
	if _, err := rbacmirror.NewSquatted(own); err != nil {
		t.Fatal(err)
	}
	mig := prometheus.NewRegistry()
	controller.NewMetrics(mig)
	return []prometheus.Registerer{own, mig, ctrlmetrics.Registry}
}

// Every alert of deploy/capi-private is written against metrics its components export; each has a severity, a
// summary, a for, and a section in docs/capi-private-operations.md saying what to do.
func TestAlertRulesUseExportedMetrics(t *testing.T) {
	rules := manifesttest.AlertRules(manifesttest.Render(t, Dir))
	if len(rules) < 15 {
		t.Fatalf("%d alert rules rendered from %s", len(rules), Dir)
	}
	regs := exported(t)
	for _, r := range rules {
		name, expr := manifesttest.CheckAlert(t, r, "docs/capi-private-operations.md")
		names := manifesttest.MetricNames(expr, capiWords)
		if len(names) == 0 && !strings.Contains(expr, "up{") {
			t.Errorf("%s: no metric in %q", name, expr)
		}
		for _, m := range names {
			found := false
			for _, reg := range regs {
				found = found || manifesttest.Registered(reg, m)
			}
			if !found {
				t.Errorf("%s: %s is not a metric capi-private exports (expr %q)", name, m, expr)
			}
		}
	}
}

// The identifier check can fail: a made-up metric is not found in the registries.
func TestExportedRejectsUnknownMetric(t *testing.T) {
	for _, reg := range exported(t) {
		if manifesttest.Registered(reg, "capi_private_made_up_total") {
			t.Fatal("a made-up metric counts as registered")
		}
	}
}

func typed(t *testing.T, u *unstructured.Unstructured, into any) {
	t.Helper()
	if u == nil {
		t.Fatal("object not rendered")
	}
	if err := runtime.DefaultUnstructuredConverter.FromUnstructured(u.Object, into); err != nil {
		t.Fatal(err)
	}
}

// The injector's MutatingWebhookConfiguration is the one inject.WebhookConfiguration builds for the built-in
// component table and operator selector (the same Deployment flags: none of them changed).
func TestInjectorWebhookIsTheCodes(t *testing.T) {
	objs := manifesttest.Render(t, Dir)
	var got admissionregistrationv1.MutatingWebhookConfiguration
	typed(t, manifesttest.Find(objs, "MutatingWebhookConfiguration", "capi-private-inject"), &got)
	c := inject.DefaultConfig("unused")
	sel, err := labels.Parse(inject.DefaultOperatorSelector)
	if err != nil {
		t.Fatal(err)
	}
	c.OperatorSelector = sel
	path, port := inject.Path, int32(443)
	want := inject.WebhookConfiguration(got.Name, &c, admissionregistrationv1.WebhookClientConfig{Service: &admissionregistrationv1.ServiceReference{
		Namespace: Namespace, Name: "capi-private-inject", Path: &path, Port: &port}})
	if !equality.Semantic.DeepEqual(got.Webhooks, want.Webhooks) {
		t.Errorf("deployed webhooks differ from inject.WebhookConfiguration:\n got %+v\nwant %+v", got.Webhooks, want.Webhooks)
	}
}

// The injector's and the mirror's ClusterRoles, the leader election Role and the migrator's records Role are exactly the rules their
// packages state (which their own hub tests run with).
func TestRBACIsTheCodes(t *testing.T) {
	objs := manifesttest.Render(t, Dir)
	for _, c := range []struct {
		kind, name string
		want       []rbacv1.PolicyRule
	}{
		{"ClusterRole", "capi-private-inject", inject.Rules()},
		{"ClusterRole", "capi-private-rbac-mirror", rbacmirror.Rules()},
		{"Role", "capi-private-leader-election", inject.LeaderElectionRules()},
		{"Role", "capi-private-migrate-records", controller.RecordRules()},
		{"Role", "capi-private-inject-keys", inject.KeyRules()},
	} {
		var got rbacv1.ClusterRole // a Role's rules decode the same
		typed(t, manifesttest.Find(objs, c.kind, c.name), &got)
		if !equality.Semantic.DeepEqual(got.Rules, c.want) {
			t.Errorf("%s %s rules %+v, want %+v", c.kind, c.name, got.Rules, c.want)
		}
	}
}

// The migrator lists and re-points exactly controller.DependentKinds outside the CAPI groups: its ClusterRole
// holds controller.DependentRules and lists no resource of every group.
func TestMigratorListsOnlyWhatItMoves(t *testing.T) {
	var got rbacv1.ClusterRole
	typed(t, manifesttest.Find(manifesttest.Render(t, Dir), "ClusterRole", "capi-private-migrate"), &got)
	for _, want := range controller.DependentRules() {
		if !slices.ContainsFunc(got.Rules, func(r rbacv1.PolicyRule) bool { return equality.Semantic.DeepEqual(r, want) }) {
			t.Errorf("capi-private-migrate lacks %+v", want)
		}
	}
	capi := func(g string) bool {
		return strings.HasSuffix(g, "cluster.x-k8s.io") || strings.HasSuffix(g, "cluster.hypershift.openshift.io")
	}
	for _, r := range got.Rules {
		if slices.Contains(r.APIGroups, "*") || slices.Contains(r.Resources, "*") && !allOf(r.APIGroups, capi) {
			t.Errorf("capi-private-migrate has a wildcard rule outside the CAPI groups: %+v", r)
		}
	}
}

func allOf(ss []string, f func(string) bool) bool {
	return !slices.ContainsFunc(ss, func(s string) bool { return !f(s) })
}

// Every Deployment's arguments are flags its subcommand accepts (with $(POD_IP) and $(PROXY_IMAGE) as the kubelet
// expands them): `--help` after them parses them first and fails on an unknown flag.
func TestDeploymentArgsParse(t *testing.T) {
	n := 0
	for _, o := range manifesttest.Render(t, Dir) {
		if o.GetKind() != "Deployment" {
			continue
		}
		containers, _, _ := unstructured.NestedSlice(o.Object, "spec", "template", "spec", "containers")
		args, _, _ := unstructured.NestedStringSlice(containers[0].(map[string]any), "args")
		for i, a := range args {
			args[i] = strings.NewReplacer("$(POD_IP)", "10.0.0.7", "$(PROXY_IMAGE)", "quay.io/x/capi-private:v1").Replace(a)
		}
		if code := cli.Main(context.Background(), append(args, "--help"), io.Discard, io.Discard); code != 0 {
			var stderr strings.Builder
			cli.Main(context.Background(), append(args, "--help"), io.Discard, &stderr)
			t.Errorf("Deployment %s: args %v: %s", o.GetName(), args, stderr.String())
		}
		n++
	}
	if n != 4 {
		t.Errorf("%d Deployments, want 4 (webhook, inject, rbac-mirror, migrate)", n)
	}
}
