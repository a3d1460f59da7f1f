package capihub

import (
	"context"
	"fmt"
	"os"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/go-logr/logr"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
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

var nsCounter atomic.Int64

// NewNamespace creates a namespace for one test; the namespace controller deletes it (and what is left in it)
// after the test.
func (e *Env) NewNamespace(t testing.TB, prefix string) string {
	t.Helper()
	name := fmt.Sprintf("%s-%d", strings.ToLower(prefix), nsCounter.Add(1))
	ns := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: name}}
	if err := e.Client.Create(context.Background(), ns); err != nil {
		t.Fatalf("creating namespace %s: %v", name, err)
	}
	t.Cleanup(func() { _ = e.Client.Delete(context.Background(), ns) })
	return name
}
