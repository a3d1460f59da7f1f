package localhub

import (
	"bytes"
	"context"
	"os"
	"path/filepath"
	"sync"
	"sync/atomic"
	"testing"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
)

// Two hubs started at once from a base the cache does not hold: Build runs once, both hubs hold what it wrote, and
// each has its own copy (a write to one is not in the other, nor in the next start); Stop removes a hub's copy.
func TestBase(t *testing.T) {
	bin := DefaultBinDir()
	if err := CheckBinaries(bin, "kube-apiserver", "etcd", "kubectl"); err != nil {
		t.Fatal(err)
	}
	t.Setenv("XDG_CACHE_HOME", t.TempDir())
	var builds atomic.Int32
	base := &Base{Key: "localhub test", Build: func(ctx context.Context, cfg *rest.Config) error {
		builds.Add(1)
		_, err := kubernetes.NewForConfigOrDie(cfg).CoreV1().ConfigMaps("default").Create(ctx,
			&corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: "from-base"}}, metav1.CreateOptions{})
		return err
	}}
	start := func() *Hub {
		h, err := Start(Options{BinDir: bin, Base: base})
		if err != nil {
			t.Error(err)
			return nil
		}
		t.Cleanup(func() { _ = h.Stop() })
		return h
	}
	hubs := make([]*Hub, 2)
	var wg sync.WaitGroup
	for i := range hubs {
		wg.Go(func() { hubs[i] = start() })
	}
	wg.Wait()
	if t.Failed() {
		t.FailNow()
	}
	if n := builds.Load(); n != 1 {
		t.Fatalf("Build ran %d times for two starts, want once", n)
	}
	ctx := t.Context()
	configMaps := func(h *Hub) func(name string) error {
		return func(name string) error {
			_, err := kubernetes.NewForConfigOrDie(h.Config).CoreV1().ConfigMaps("default").Get(ctx, name, metav1.GetOptions{})
			return err
		}
	}
	for i, h := range hubs {
		if err := configMaps(h)("from-base"); err != nil {
			t.Fatalf("hub %d: the base's ConfigMap: %v", i, err)
		}
	}
	if _, err := kubernetes.NewForConfigOrDie(hubs[0].Config).CoreV1().ConfigMaps("default").Create(ctx,
		&corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: "hub-0-only"}}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	if err := configMaps(hubs[1])("hub-0-only"); !apierrors.IsNotFound(err) {
		t.Fatalf("hub 1 reading hub 0's ConfigMap: %v, want NotFound (each hub has its own copy)", err)
	}
	// Each hub's processes are its own: the CPU time of hub 0's kube-apiserver and etcd, which have served it, is
	// found and counted.
	api, etcd, err := hubs[0].CPUTime()
	if err != nil || api <= 0 || etcd <= 0 {
		t.Fatalf("hub 0's CPU time: kube-apiserver %v, etcd %v, %v", api, etcd, err)
	}
	data := hubs[0].etcdData
	if err := hubs[0].Stop(); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(data); !os.IsNotExist(err) {
		t.Fatalf("hub 0's etcd data %s after Stop: %v, want removed", data, err)
	}
	third := start()
	if third == nil {
		t.FailNow()
	}
	if err := configMaps(third)("hub-0-only"); !apierrors.IsNotFound(err) {
		t.Fatalf("a later hub reading hub 0's ConfigMap: %v, want NotFound (the base is never written)", err)
	}
	if n := builds.Load(); n != 1 {
		t.Fatalf("Build ran %d times for three starts, want once", n)
	}
}

// copyTree copies files byte for byte with their modes, and writes runs of zeros as holes.
func TestCopyTree(t *testing.T) {
	src, dst := t.TempDir(), t.TempDir()
	content := append(append(bytes.Repeat([]byte{0}, 3<<20), []byte("wal entry")...), bytes.Repeat([]byte{0}, 100)...)
	if err := os.MkdirAll(filepath.Join(src, "member", "wal"), 0o700); err != nil {
		t.Fatal(err)
	}
	files := map[string][]byte{"member/wal/0.wal": content, "member/snap/db": []byte("bolt"), "empty": nil}
	for name, data := range files {
		if err := os.MkdirAll(filepath.Dir(filepath.Join(src, name)), 0o700); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(src, name), data, 0o600); err != nil {
			t.Fatal(err)
		}
	}
	if err := copyTree(src, dst); err != nil {
		t.Fatal(err)
	}
	for name, want := range files {
		got, err := os.ReadFile(filepath.Join(dst, name))
		if err != nil {
			t.Fatal(err)
		}
		if !bytes.Equal(got, want) {
			t.Errorf("%s: %d bytes copied, want %d equal bytes", name, len(got), len(want))
		}
		fi, err := os.Stat(filepath.Join(dst, name))
		if err != nil {
			t.Fatal(err)
		}
		if fi.Mode().Perm() != 0o600 {
			t.Errorf("%s: mode %v, want 0600", name, fi.Mode().Perm())
		}
	}
	fi, err := os.Stat(filepath.Join(dst, "member"))
	if err != nil {
		t.Fatal(err)
	}
	if fi.Mode().Perm() != 0o700 {
		t.Errorf("member directory: mode %v, want 0700", fi.Mode().Perm())
	}
}
