package controller_test

import (
	"context"
	"fmt"
	"os"
	"testing"
	"time"

	"github.com/go-logr/logr"
	"github.com/go-logr/stdr"
	"k8s.io/klog/v2"
	"sigs.k8s.io/controller-runtime/pkg/client"
	ctrllog "sigs.k8s.io/controller-runtime/pkg/log"

	"github.com/dcm-sp/acm-cluster-sp/internal/capiprivate/inject"
	"github.com/dcm-sp/acm-cluster-sp/internal/devtest/capi/capihub"
	"github.com/dcm-sp/acm-cluster-sp/internal/devtest/capi/capipods"
	"github.com/dcm-sp/acm-cluster-sp/internal/devtest/capi/injecttest"
)

// One hub (kube-apiserver, etcd, kube-controller-manager's garbage collector, the conversion webhook), one proxy
// and one capipods harness (upstream CAPI and the ledger provider in simulated pods) for the package's
// integration tests; tests keep apart by namespace and read the ledger per namespace.
var (
	env      *capihub.Env
	harness  *capipods.Harness
	proxy    *capipods.RunningProxy
	viaProxy client.Client
)

func TestMain(m *testing.M) { os.Exit(run(m)) }

func run(m *testing.M) int {
	// ServiceAccount admission: the injector's readiness probe creates a HyperShift-shaped Pod (its projected
	// kube-api-access volume comes from the plugin).
	opts := capihub.Options{ServiceAccounts: true}
	log := logr.Discard()
	if os.Getenv("CAPI_TESTENV_VERBOSE") != "" {
		opts.ControllerManagerOutput = os.Stderr
		log = stdr.New(nil)
		stdr.SetVerbosity(4)
	} else {
		klog.SetLogger(logr.Discard())
	}
	ctrllog.SetLogger(log)
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	var err error
	if env, err = capihub.Start(ctx, opts); err != nil {
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
	if proxy, err = capipods.StartProxy(ctx, capipods.ProxyOptions{Upstream: env.Config}); err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	defer func() { _ = proxy.Stop() }()
	if viaProxy, err = client.New(proxy.Config(env.AdminToken), client.Options{Scheme: capipods.NewScheme()}); err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	if harness, err = capipods.New(ctx, capipods.Options{
		Direct: env.TokenConfig(env.AdminToken), Proxied: proxy.Config(env.AdminToken), WorkloadKubeconfig: workload, Log: log,
	}); err != nil {
		fmt.Fprintln(os.Stderr, "capipods:", err)
		return 1
	}
	stopInjector, err := startInjector(ctx)
	if err != nil {
		fmt.Fprintln(os.Stderr, "injector:", err)
		return 1
	}
	defer stopInjector()
	fmt.Fprintf(os.Stderr, "capihub started: %s\n", env.Timings)
	code := m.Run()
	if err := harness.Stop(); err != nil {
		fmt.Fprintln(os.Stderr, "capipods: stop:", err)
		code = max(code, 1)
	}
	return code
}

// startInjector runs the sidecar injector (`capi-private inject`, in this process) as installed.
func startInjector(ctx context.Context) (func(), error) {
	in, err := injecttest.StartInstalled(ctx, env.Client, injecttest.InjectorOptions{
		Kube: env.TokenConfig(env.AdminToken), Config: inject.DefaultConfig("registry.example/capi-private:test"),
		CertFile: env.WebhookCertFile, KeyFile: env.WebhookKeyFile, CA: env.WebhookCA,
	})
	if err != nil {
		return nil, err
	}
	return func() { _ = in.Stop() }, nil
}
