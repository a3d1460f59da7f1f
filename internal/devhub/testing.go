package devhub

import (
	"context"
	"fmt"
	"log/slog"
	"os"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// RunTests is a TestMain body: it starts one hub for the whole test package, hands it to set, runs the tests,
// runs the cleanup set returned (stopping whatever still talks to the hub) and stops the hub. Tests isolate
// themselves with NewNamespace rather than restarting the control plane.
func RunTests(m *testing.M, opts Options, set func(*Hub) (cleanup func())) int {
	if opts.Log == nil && os.Getenv("DEVHUB_VERBOSE") != "" {
		opts.Log = slog.New(slog.NewTextHandler(os.Stderr, nil))
	}
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	h, err := Start(ctx, opts)
	cancel()
	if err != nil {
		fmt.Fprintln(os.Stderr, "devhub:", err)
		return 1
	}
	cleanup := set(h)
	code := m.Run()
	if cleanup != nil {
		cleanup()
	}
	if err := h.Stop(); err != nil {
		fmt.Fprintln(os.Stderr, "devhub: stop:", err)
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
