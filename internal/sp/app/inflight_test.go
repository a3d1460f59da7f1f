package app

import (
	"context"
	"net/http"
	"path"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/dcm-sp/acm-cluster-sp/internal/devtest/sp/faultproxy"
	"github.com/dcm-sp/acm-cluster-sp/internal/sp/meta"
)

// The reconciler leaves a create in flight to the create: the hub holds the create's NodePool write (a slow API
// server), the HostedCluster it wrote first reaches the leader's cache, and the reconciler looks at the instance
// — its first status event is published while the write is held — but writes none of its children. After the release
// every object of the instance was created exactly once: one POST per object, none refused as already there.
func TestReconcilerLeavesACreateInFlight(t *testing.T) {
	t.Parallel()
	const ns, provider = "events", "sp-inflight" // a namespace the simulator plays, shared with other providers
	px, err := faultproxy.Start(testHub.Config)
	if err != nil {
		t.Fatal(err)
	}
	defer px.Close()
	sp := startSP(t, eventsConfig(ns, provider, testHub.NATSURL), Options{RestConfig: px.Config()})
	name := uniqueName("inflight")
	id := "inst-" + name
	stream := watchEvents(t, testHub.NATSURL, provider, id)

	var mu sync.Mutex
	posts := map[string]int{} // by resource (the collection's last path segment)
	held := false
	px.SetRule(func(r faultproxy.Request) faultproxy.Verdict {
		if r.Method != http.MethodPost {
			return faultproxy.Pass
		}
		resource := r.Path[strings.LastIndex(r.Path, "/")+1:]
		if resource == "klusterletaddonconfigs" && !strings.Contains(r.Path, "/namespaces/"+name+"/") {
			return faultproxy.Pass // another instance's, in its own cluster namespace (a run with -count)
		}
		mu.Lock()
		defer mu.Unlock()
		posts[resource]++
		if resource == "nodepools" && !held {
			held = true
			return faultproxy.Hold
		}
		return faultproxy.Pass
	})
	t.Cleanup(px.Release)

	created := make(chan int, 1)
	go func() {
		code, _, raw := sp.create(t, id, kubevirtBody(name, 1))
		if code != http.StatusCreated {
			t.Errorf("create: %d %s", code, raw)
		}
		created <- code
	}()
	waitFor(t, time.Minute, "the create's NodePool write to be held", func() bool { return px.Held() == 1 })
	// The reconciler had its chance: it looked at the instance (its first status event, PENDING or PROVISIONING
	// as far as the simulated operator has got) while the write was still held.
	stream.next(time.Minute)
	if px.Held() != 1 {
		t.Fatal("the NodePool write was released before the reconciler looked")
	}
	mu.Lock()
	during := map[string]int{}
	for k, v := range posts {
		during[k] = v
	}
	mu.Unlock()
	px.Release()
	if code := <-created; code != http.StatusCreated {
		t.FailNow()
	}
	// The reconciler converges the instance once its create is done (its KlusterletAddonConfig), and the cluster
	// comes up.
	stream.until("READY", 2*time.Minute)

	secrets := &corev1.SecretList{}
	if err := testHub.Client.List(context.Background(), secrets, client.InNamespace(ns), client.MatchingLabels{meta.LabelInstanceID: id}); err != nil {
		t.Fatal(err)
	}
	ours := 0 // the operator's, which it writes once the control plane is available, are not the SP's writes
	for _, s := range secrets.Items {
		if s.Name != name+"-admin-kubeconfig" && s.Name != name+"-kubeadmin-password" {
			ours++
		}
	}
	// The objects of the instance: the KlusterletAddonConfig too, written by the create when ACM's cluster namespace
	// is already there (and remembered: the reconciler does not write it again), else by the reconciler.
	want := map[string]int{"configmaps": 1, "hostedclusters": 1, "nodepools": 1, "secrets": ours, "managedclusters": 1, "klusterletaddonconfigs": 1}
	mu.Lock()
	defer mu.Unlock()
	if during["nodepools"] != 1 {
		t.Errorf("NodePool creates while the create's was held: %d, want 1 (the create's own)", during["nodepools"])
	}
	for resource, n := range want {
		if posts[resource] != n {
			t.Errorf("POSTs of %s: %d, want %d (all: %v; while held: %v)", resource, posts[resource], n, posts, during)
		}
	}
}

// The reconciler does not create again what a create has just written while its cache does not show it yet: the
// leader's ManagedCluster informer is frozen (its watch cut, every relist refused), a cluster is created, and the
// reconciler converges it on every step of the simulated operator up to READY — each time without the new
// ManagedCluster in its cache. The ManagedCluster is still POSTed once, by the create.
func TestReconcilerAwaitsACreatedChild(t *testing.T) {
	t.Parallel()
	const ns, provider = "events", "sp-awaits"
	px, err := faultproxy.Start(testHub.Config)
	if err != nil {
		t.Fatal(err)
	}
	defer px.Close()
	sp := startSP(t, eventsConfig(ns, provider, testHub.NATSURL), Options{RestConfig: px.Config()})
	name := uniqueName("awaits")
	id := "inst-" + name
	stream := watchEvents(t, testHub.NATSURL, provider, id)

	var refused, mcPosts atomic.Int32
	px.SetRule(func(r faultproxy.Request) faultproxy.Verdict {
		if path.Base(r.Path) != "managedclusters" {
			return faultproxy.Pass
		}
		if r.Method == http.MethodPost {
			mcPosts.Add(1)
		}
		if faultproxy.Informer(r) {
			refused.Add(1)
			return faultproxy.Abort
		}
		return faultproxy.Pass
	})
	if px.DropWatches() == 0 {
		t.Fatal("the SP has no watch to cut")
	}
	waitFor(t, 30*time.Second, "the ManagedCluster informer to be refused after its watch was cut", func() bool { return refused.Load() > 0 })

	if code, _, raw := sp.create(t, id, kubevirtBody(name, 1)); code != http.StatusCreated {
		t.Fatalf("create: %d %s", code, raw)
	}
	// Every step of the simulated operator after the create is a reconcile of the instance from the leader's cache,
	// which never shows the ManagedCluster.
	stream.until("READY", 2*time.Minute)
	if n := mcPosts.Load(); n != 1 {
		t.Errorf("ManagedCluster POSTs: %d, want 1 (the create's)", n)
	}
}
