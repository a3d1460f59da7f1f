package capipods

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

	"github.com/dcm-sp/acm-cluster-sp/internal/devtest/capi/capihub"
)

// One hub and one harness for the package's integration tests (CI has two cores): tests keep apart by namespace
// and read the ledger per namespace.
var (
	env     *capihub.Env
	harness *Harness
	// proxyServer is an in-process capi-private proxy in front of env's hub; viaProxy an admin client through it.
	proxyServer *RunningProxy
	viaProxy    client.Client
)

// TestMain starts the hub (capihub), an in-process proxy and the harness, runs the tests, and stops them in reverse
// order. Set
// CAPI_TESTENV_VERBOSE=1 for every manager's log.
func TestMain(m *testing.M) { os.Exit(run(m)) }

func run(m *testing.M) int {
	var opts capihub.Options
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
	start := time.Now()
	var err error
	if env, err = capihub.Start(ctx, opts); err != nil {
		fmt.Fprintln(os.Stderr, "capihub:", err)
		_ = env.Stop()
		return 1
	}
	defer func() {
		began := time.Now()
		if err := env.Stop(); err != nil {
			fmt.Fprintln(os.Stderr, "capihub: stop:", err)
		}
		fmt.Fprintln(os.Stderr, "capihub stopped in", time.Since(began).Round(time.Millisecond))
	}()
	workload, err := env.Kubeconfig(capihub.AdminUser, env.AdminToken)
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	if proxyServer, err = StartProxy(ctx, ProxyOptions{Upstream: env.Config}); err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	defer func() {
		if err := proxyServer.Stop(); err != nil {
			fmt.Fprintln(os.Stderr, "proxy: stop:", err)
		}
	}()
	if viaProxy, err = client.New(proxyServer.Config(env.AdminToken), client.Options{Scheme: NewScheme()}); err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	if harness, err = New(ctx, Options{
		Direct: env.TokenConfig(env.AdminToken), Proxied: proxyServer.Config(env.AdminToken), WorkloadKubeconfig: workload, Log: log,
	}); err != nil {
		fmt.Fprintln(os.Stderr, "capipods:", err)
		return 1
	}
	fmt.Fprintf(os.Stderr, "capihub started: %s; harness ready after %s\n", env.Timings, time.Since(start).Round(time.Millisecond))
	code := m.Run()
	began := time.Now()
	defer func() { fmt.Fprintln(os.Stderr, "harness stopped in", time.Since(began).Round(time.Millisecond)) }()
	if err := harness.Stop(); err != nil {
		fmt.Fprintln(os.Stderr, "capipods: stop:", err)
		code = max(code, 1)
	}
	return code
}
