package capihub

import (
	"context"
	"fmt"
	"os"
	"testing"
	"time"

	"github.com/go-logr/logr"
	"k8s.io/klog/v2"
	ctrllog "sigs.k8s.io/controller-runtime/pkg/log"
)

// Main is a TestMain body: it starts one Env for the whole test package, stores it in *env, runs the tests and
// stops it. Set CAPI_TESTENV_VERBOSE=1 for client and kube-controller-manager logs.
//
//	var env *capihub.Env
//	func TestMain(m *testing.M) { os.Exit(capihub.Main(m, &env)) }
func Main(m *testing.M, env **Env) int { return MainWith(m, env, Options{}) }

// Setup prepares what a test package shares once the Env runs (ctx bounds it); the returned func undoes it before
// the Env stops.
type Setup func(ctx context.Context, e *Env) (cleanup func(), err error)

// MainWith is Main with options (BinDir, ServiceAccounts; ControllerManagerOutput is set from
// CAPI_TESTENV_VERBOSE) and an optional setup.
func MainWith(m *testing.M, env **Env, opts Options, setup ...Setup) int {
	if os.Getenv("CAPI_TESTENV_VERBOSE") != "" {
		opts.ControllerManagerOutput = os.Stderr
	} else {
		// client-go and controller-runtime log through process-wide loggers; keep test output to test results.
		klog.SetLogger(logr.Discard())
		ctrllog.SetLogger(logr.Discard())
	}
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	e, err := Start(ctx, opts)
	if err != nil {
		fmt.Fprintln(os.Stderr, "capihub:", err)
		return 1
	}
	fmt.Fprintln(os.Stderr, "capihub started:", e.Timings)
	*env = e
	code := 0
	var cleanups []func()
	for _, s := range setup {
		undo, err := s(ctx, e)
		if err != nil {
			fmt.Fprintln(os.Stderr, "capihub: setup:", err)
			code = 1
			break
		}
		cleanups = append(cleanups, undo)
	}
	if code == 0 {
		code = m.Run()
	}
	for i := len(cleanups) - 1; i >= 0; i-- {
		cleanups[i]()
	}
	if err := e.Stop(); err != nil {
		fmt.Fprintln(os.Stderr, "capihub: stop:", err)
		if code == 0 {
			code = 1
		}
	}
	return code
}
