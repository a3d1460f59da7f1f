package sphub

import (
	"context"
	"fmt"
	"log/slog"
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

// RunTests is a TestMain body: it starts one hub for the whole test package, hands it to set, runs the tests,
// runs the cleanup set returned (stopping whatever still talks to the hub) and stops the hub. Tests isolate
// themselves with NewNamespace rather than restarting the control plane.
func RunTests(m *testing.M, opts Options, set func(*Hub) (cleanup func())) int {
	if os.Getenv("DEVHUB_VERBOSE") != "" {
		if opts.Log == nil {
			opts.Log = slog.New(slog.NewTextHandler(os.Stderr, nil))
		}
	} else {
		// client-go and controller-runtime log through process-wide loggers; keep test output to test results.
		klog.SetLogger(logr.Discard())
		ctrllog.SetLogger(logr.Discard())
	}
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	h, err := Start(ctx, opts)
	cancel()
	if err != nil {
		fmt.Fprintln(os.Stderr, "sphub:", err)
		return 1
	}
	cleanup := set(h)
	code := m.Run()
	if cleanup != nil {
		cleanup()
	}
	if err := h.Stop(); err != nil {
		fmt.Fprintln(os.Stderr, "sphub: stop:", err)
	}
	return code
}

var nsCounter atomic.Int64

// NewNamespace creates a fresh namespace for one test. Namespaces are never deleted (a bare API server has no
// namespace controller, so they would stay Terminating); the hub is thrown away after the package.
func (h *Hub) NewNamespace(t testing.TB, prefix string) string {
	t.Helper()
	name := fmt.Sprintf("%s-%d-%d", strings.ToLower(prefix), os.Getpid()%10000, nsCounter.Add(1))
	if len(name) > 40 {
		name = name[len(name)-40:]
		name = strings.TrimLeft(name, "-")
	}
	ns := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: name}}
	if err := h.Client.Create(context.Background(), ns); err != nil {
		t.Fatalf("creating namespace %s: %v", name, err)
	}
	return name
}
