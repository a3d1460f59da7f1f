package migratetest

import (
	"context"
	"fmt"
	"os"
	"testing"
	"time"

	"github.com/go-logr/logr"
	hyperv1 "github.com/openshift/hypershift/api/hypershift/v1beta1"
	"github.com/prometheus/client_golang/prometheus"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/klog/v2"
	"sigs.k8s.io/controller-runtime/pkg/client"
	ctrllog "sigs.k8s.io/controller-runtime/pkg/log"

	"github.com/dcm-sp/acm-cluster-sp/internal/capiprivate/inject"
	"github.com/dcm-sp/acm-cluster-sp/internal/capiprivate/migrate/controller"
	"github.com/dcm-sp/acm-cluster-sp/internal/capiprivate/migrate/plan"
	"github.com/dcm-sp/acm-cluster-sp/internal/devtest/capi/capihub"
	"github.com/dcm-sp/acm-cluster-sp/internal/devtest/capi/capipods"
	"github.com/dcm-sp/acm-cluster-sp/internal/devtest/capi/deploytest"
	"github.com/dcm-sp/acm-cluster-sp/internal/devtest/capi/injecttest"
	"github.com/dcm-sp/acm-cluster-sp/internal/devtest/manifesttest"
	"github.com/dcm-sp/acm-cluster-sp/internal/devtest/testwait"
)

var (
	env     *capihub.Env
	harness *capipods.Harness
)

func TestMain(m *testing.M) { os.Exit(run(m)) }

// run starts the hub (with ServiceAccount admission, for the injector's probe Pod), a proxy (the private
// operator's), the CAPI harness and the sidecar injector as installed (the migrator's switch rolls through it).
func run(m *testing.M) int {
	klog.SetLogger(logr.Discard())
	ctrllog.SetLogger(logr.Discard())
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	var err error
	if env, err = capihub.Start(ctx, capihub.Options{ServiceAccounts: true}); err != nil {
		fmt.Fprintln(os.Stderr, "capihub:", err)
		_ = env.Stop()
		return 1
	}
	defer func() { _ = env.Stop() }()
	workload, err := env.Kubeconfig(capihub.AdminUser, env.AdminToken)
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	proxy, err := capipods.StartProxy(ctx, capipods.ProxyOptions{Upstream: env.Config})
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	defer func() { _ = proxy.Stop() }()
	if harness, err = capipods.New(ctx, capipods.Options{
		Direct: env.TokenConfig(env.AdminToken), Proxied: proxy.Config(env.AdminToken), WorkloadKubeconfig: workload,
	}); err != nil {
		fmt.Fprintln(os.Stderr, "capipods:", err)
		return 1
	}
	in, err := injecttest.StartInstalled(ctx, env.Client, injecttest.InjectorOptions{
		Kube: env.TokenConfig(env.AdminToken), Config: inject.DefaultConfig("registry.example/capi-private:test"),
		CertFile: env.WebhookCertFile, KeyFile: env.WebhookKeyFile, CA: env.WebhookCA,
	})
	if err != nil {
		fmt.Fprintln(os.Stderr, "injector:", err)
		return 1
	}
	defer func() { _ = in.Stop() }()
	code := m.Run()
	if err := harness.Stop(); err != nil {
		fmt.Fprintln(os.Stderr, "capipods: stop:", err)
		code = max(code, 1)
	}
	return code
}

// The classifier and the migrator, as deployed (leader-elected on their Lease in capi-private, the conversion probe
// in capi-private, talking to kube-apiserver directly) and as their ServiceAccount with the install's RBAC, migrate
// a legacy hosted cluster of one MachineDeployment of two Machines to the private groups: the whole run is never
// answered 403.
func TestMigratorRunsAsItsServiceAccount(t *testing.T) {
	ctx := t.Context()
	n, err := deploytest.ApplyRBAC(ctx, env.Client, manifesttest.Render(t, deploytest.Dir))
	if err != nil {
		t.Fatal(err)
	}
	id, err := deploytest.As(ctx, env.Config, deploytest.MigrateSA)
	if err != nil {
		t.Fatal(err)
	}
	ns := env.NewNamespace(t, "clusters")
	inNS := func(hc *hyperv1.HostedCluster) bool { return hc.Namespace == ns }
	for _, o := range []struct {
		name string
		mode capipods.Mode
		env  map[string]string
	}{{"legacy", capipods.Direct, capipods.LegacyOperatorEnv}, {"private", capipods.Proxied, capipods.PrivateOperatorEnv}} {
		op, err := harness.StartHyperShiftOperator(ctx, o.name+"-"+ns, o.mode, o.env, inNS)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { _ = op.Stop() })
	}
	spec := capipods.LegacyHostedCluster(ns, "alpha", 1, 2)
	spec.Annotations = map[string]string{plan.ScopeAnnotation: plan.ScopeLegacy}
	hc, err := harness.CreateHostedCluster(ctx, spec)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = env.Client.Delete(context.Background(), namespaceObject(hc.Namespace())) })
	if _, err := hc.WaitMachinesRunning(ctx, capipods.StandardGroups, 2, 4*time.Minute); err != nil {
		t.Fatal(err)
	}

	mig, err := controller.Start(context.Background(), id.Config, controller.RunOptions{
		Options: controller.Options{Namespace: ns, ProbeNamespace: deploytest.Namespace, StateNamespace: deploytest.Namespace, Config: plan.Config{
			QuietWindow: 2 * time.Second, HealthWindow: 3 * time.Second, Poll: 300 * time.Millisecond,
		}},
		LeaderElection: true, LeaderElectionNamespace: deploytest.Namespace, Registry: prometheus.NewRegistry(),
		LeaseDuration: time.Minute, // renewed in time on a loaded machine (see the controller package's rig)
	})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = mig.Stop() })
	key := client.ObjectKey{Namespace: ns, Name: "alpha"}
	var last map[string]string
	if !testwait.Poll(4*time.Minute, func() bool {
		h := &hyperv1.HostedCluster{}
		if err := harness.Client.Get(ctx, key, h); err != nil {
			return len(id.Forbidden.List()) > 0
		}
		last = h.Annotations
		return last[plan.PrivateTypesAnnotation] == "true" && last[plan.InProgressAnnotation] == "" && last[plan.PhaseAnnotation] == "" ||
			last[plan.FailedAnnotation] != "" || len(id.Forbidden.List()) > 0
	}) {
		t.Fatalf("not migrated within 4 minutes: annotations %v (403s %v)", last, id.Forbidden.List())
	}
	t.Logf("applied %d RBAC objects; %s: %d requests answered, %d forbidden; annotations %v", n, deploytest.MigrateSA,
		id.Forbidden.Requests(), len(id.Forbidden.List()), last)
	if f := id.Forbidden.List(); len(f) > 0 {
		t.Fatalf("the migrator was answered 403: %v", f)
	}
	if last[plan.FailedAnnotation] != "" {
		t.Fatalf("the migration failed: %v", last)
	}
}

func namespaceObject(name string) client.Object {
	o := &corev1.Namespace{}
	o.Name = name
	return o
}
