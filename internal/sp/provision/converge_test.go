package provision

import (
	"context"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	hyperv1 "github.com/openshift/hypershift/api/hypershift/v1beta1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
	clusterv1 "open-cluster-management.io/api/cluster/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/dcm-sp/acm-cluster-sp/internal/sp/clusters"
	"github.com/dcm-sp/acm-cluster-sp/internal/sp/meta"
	"github.com/dcm-sp/acm-cluster-sp/internal/sp/render"
)

// Converge recreates a child deleted by hand, owned by the HostedCluster.
func TestConvergeRecreatesMissingChild(t *testing.T) {
	f := newFixture(t)
	f.create(id1, "", kubevirtBody("alpha", 2))
	if err := f.client.Delete(context.Background(), &hyperv1.NodePool{ObjectMeta: objectMeta(testNS, "alpha")}); err != nil {
		t.Fatal(err)
	}
	hc := f.hostedCluster("alpha")
	if err := f.svc.Converge(context.Background(), hc); err != nil {
		t.Fatal(err)
	}
	var np hyperv1.NodePool
	if err := f.get(&np, testNS, "alpha"); err != nil || !ownedBy(np.OwnerReferences, hc) || ptr.Deref(np.Spec.Replicas, 0) != 2 {
		t.Fatalf("NodePool after Converge: %v, owners %v", err, np.OwnerReferences)
	}
}

// Converge gives a child made before ownerReferences and the provider label existed both (adoption).
func TestConvergeAdoptsOlderChildren(t *testing.T) {
	f := newFixture(t)
	f.create(id1, "", kubevirtBody("alpha", 2))
	var s corev1.Secret
	if err := f.get(&s, testNS, render.PullSecretName("alpha")); err != nil {
		t.Fatal(err)
	}
	s.OwnerReferences = nil
	delete(s.Labels, meta.LabelProvider)
	if err := f.client.Update(context.Background(), &s); err != nil {
		t.Fatal(err)
	}
	hc := f.hostedCluster("alpha")
	if err := f.svc.Converge(context.Background(), hc); err != nil {
		t.Fatal(err)
	}
	if err := f.get(&s, testNS, render.PullSecretName("alpha")); err != nil || !ownedBy(s.OwnerReferences, hc) || s.Labels[meta.LabelProvider] != testProvider {
		t.Fatalf("Secret after Converge: %v, owners %v, labels %v", err, s.OwnerReferences, s.Labels)
	}
}

// Converge recreates nothing while the control plane namespace is not the cluster's own (older than its
// HostedCluster: HyperShift would act in someone else's namespace), nor for a cluster being deleted.
func TestConvergeLeavesForeignControlPlaneNamespace(t *testing.T) {
	f := newFixture(t)
	f.create(id1, "", kubevirtBody("alpha", 2))
	f.seed(&corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ControlPlaneNamespace(testNS, "alpha"), CreationTimestamp: metav1.NewTime(testEpoch.Add(-time.Hour))}})
	if err := f.client.Delete(context.Background(), &hyperv1.NodePool{ObjectMeta: objectMeta(testNS, "alpha")}); err != nil {
		t.Fatal(err)
	}
	err := f.svc.Converge(context.Background(), f.hostedCluster("alpha"))
	if clusters.KindOf(err) != clusters.KindConflict || !strings.Contains(err.Error(), "existed before its HostedCluster") {
		t.Fatalf("Converge with a foreign control plane namespace: %v, want a conflict", err)
	}
	if f.exists(&hyperv1.NodePool{}, testNS, "alpha") {
		t.Fatal("the NodePool was recreated into a namespace that is not the cluster's")
	}
}

func TestConvergeLeavesDeletingCluster(t *testing.T) {
	f := newFixture(t)
	f.create(id1, "", kubevirtBody("alpha", 2))
	f.operatorFinalizer("alpha")
	if err := f.svc.Delete(context.Background(), id1, ""); err != nil {
		t.Fatal(err)
	}
	if err := f.client.Delete(context.Background(), &hyperv1.NodePool{ObjectMeta: objectMeta(testNS, "alpha")}); err != nil {
		t.Fatal(err)
	}
	// The cache's copy may not show the deletion yet: the API server's does.
	stale := f.hostedCluster("alpha")
	stale.DeletionTimestamp = nil
	if err := f.svc.Converge(context.Background(), stale); err != nil {
		t.Fatal(err)
	}
	if f.exists(&hyperv1.NodePool{}, testNS, "alpha") {
		t.Fatal("Converge recreated the NodePool of a cluster being deleted")
	}
}

// Converge carries out an accepted scale: the NodePool gets the new replicas.
func TestConvergeOperatesScale(t *testing.T) {
	f := newFixture(t)
	f.create(id1, "", kubevirtBody("alpha", 2))
	f.installed("alpha", "4.17.29")
	if _, err := f.svc.Update(context.Background(), id1, []byte(scaleTo3), ""); err != nil {
		t.Fatal(err)
	}
	if err := f.svc.Converge(context.Background(), f.hostedCluster("alpha")); err != nil {
		t.Fatal(err)
	}
	var np hyperv1.NodePool
	if err := f.get(&np, testNS, "alpha"); err != nil || ptr.Deref(np.Spec.Replicas, 0) != 3 {
		t.Fatalf("NodePool after the scale's convergence: %v, replicas %v", err, np.Spec.Replicas)
	}
}

// RemoveStatusFinalizer removes the SP's finalizer and no other.
func TestRemoveStatusFinalizer(t *testing.T) {
	f := newFixture(t)
	f.create(id1, "", kubevirtBody("alpha", 2))
	f.operatorFinalizer("alpha")
	if err := f.svc.Converger.RemoveStatusFinalizer(context.Background(), f.hostedCluster("alpha")); err != nil {
		t.Fatal(err)
	}
	if got := f.hostedCluster("alpha").Finalizers; len(got) != 1 || got[0] != "hypershift.openshift.io/finalizer" {
		t.Fatalf("finalizers %v", got)
	}
}

// The orphan sweep removes, past the grace period, what belongs to this provider but to no live cluster: a
// ManagedCluster, an unowned instance lock, an expired deletion record; the live cluster's objects stay.
func TestSweepOrphans(t *testing.T) {
	f := newFixture(t, manageACM)
	ctx := context.Background()
	f.create(id1, "", kubevirtBody("alpha", 2))
	orphan := map[string]string{meta.LabelInstanceID: id2, meta.LabelProvider: testProvider, meta.LabelManagedBy: meta.ManagedByValue, meta.LabelServiceType: meta.ServiceTypeValue}
	f.seed(&clusterv1.ManagedCluster{ObjectMeta: metav1.ObjectMeta{Name: "gone", Labels: orphan}},
		render.InstanceLock(testProvider, testNS, id2, "{}"),
		forgedTombstone(id2, testEpoch, nil))
	known := func(id string) bool { return id == id1 }
	f.svc.Converger.now = func() time.Time { return testEpoch.Add(2 * time.Hour) }
	f.svc.SweepOrphans(ctx, known, time.Hour)
	if f.exists(&clusterv1.ManagedCluster{}, "", "gone") {
		t.Fatal("the orphaned ManagedCluster stays")
	}
	if f.exists(&corev1.ConfigMap{}, testNS, render.InstanceLockName(testProvider, id2)) {
		t.Fatal("the orphaned instance lock stays")
	}
	if f.exists(&corev1.ConfigMap{}, testNS, tombstoneName(testProvider, id2)) {
		t.Fatal("the expired deletion record stays")
	}
	if !f.exists(&clusterv1.ManagedCluster{}, "", "alpha") || !f.exists(&corev1.ConfigMap{}, testNS, render.InstanceLockName(testProvider, id1)) {
		t.Fatal("the sweep removed a live cluster's objects")
	}
}

// What a create or the reconciler ensured once is remembered per instance (the reconciler does not read the lock a
// create owned again), and forgotten once the index no longer knows the cluster; LiveView reads the API server (nil
// HostedCluster: gone).
func TestConvergerMemoryAndLiveView(t *testing.T) {
	f := newFixture(t)
	ctx := context.Background()
	f.create(id1, "", kubevirtBody("alpha", 2))
	if n := f.svc.Remembered(); n != 1 {
		t.Fatalf("remembered %d instances after a create, want 1", n)
	}
	hc := f.hostedCluster("alpha")
	if err := f.svc.Converge(ctx, hc); err != nil {
		t.Fatal(err)
	}
	if n := f.svc.Remembered(); n != 1 {
		t.Fatalf("remembered %d instances after a convergence, want 1", n)
	}
	v, err := f.svc.LiveView(ctx, id1, hc)
	if err != nil || v.HostedCluster == nil || len(v.NodePools) != 1 {
		t.Fatalf("LiveView: %v, %+v", err, v)
	}
	f.operatorFinalizer("alpha")
	if err := f.svc.Delete(ctx, id1, ""); err != nil {
		t.Fatal(err)
	}
	f.finishDeletion("alpha")
	if v, err := f.svc.LiveView(ctx, id1, hc); err != nil || v.HostedCluster != nil {
		t.Fatalf("LiveView of a gone cluster: %v, %+v", err, v)
	}
	if _, known := f.index.Get(id1); known {
		t.Fatal("the index still knows the deleted cluster")
	}
	if n := f.svc.Remembered(); n != 0 {
		t.Fatalf("remembered %d instances after the index dropped the cluster", n)
	}
}

// The reconciler does not create again what this process's create has just written while its caches do not show it
// yet (the HostedCluster in the cache, a child not yet): the children are expected for a while — even when the
// events of the create's Secrets reached the index before its HostedCluster's, when the index did not know the
// instance yet — then created again if they still do not show (deleted before the cache saw them). A child the
// API server answers is already there is expected again.
func TestConvergeAwaitsTheCreatesChildren(t *testing.T) {
	f := newFixture(t, manageACM, func(c *Config) { c.CacheWait = 10 * time.Millisecond })
	ctx := context.Background()
	f.mu.Lock()
	f.unseen = func(obj client.Object) bool { _, secret := obj.(*corev1.Secret); return !secret }
	f.mu.Unlock()
	f.create(id1, "", kubevirtBody("alpha", 2))
	if _, ok := f.index.Secret(render.PullSecretName("alpha")); !ok {
		t.Fatal("the index did not see the create's Secrets")
	}
	hc := f.hostedCluster("alpha")
	f.index.PutHostedCluster(hc) // its event comes after the Secrets'
	var mu sync.Mutex
	var created []string
	f.mu.Lock()
	f.onCreate = func(obj client.Object) {
		mu.Lock()
		created = append(created, kindOf(obj)+"/"+obj.GetName())
		mu.Unlock()
	}
	f.mu.Unlock()
	if err := f.svc.Converge(ctx, hc); err != nil {
		t.Fatal(err)
	}
	mu.Lock()
	again := slices.Clone(created)
	mu.Unlock()
	if len(again) != 0 {
		t.Fatalf("the reconciler created %v again while the index lagged behind the create", again)
	}

	// Still not shown a minute later: created again (each answered as already there).
	later := testEpoch.Add(time.Minute + expectFor)
	f.svc.Converger.now = func() time.Time { return later }
	if err := f.svc.Converge(ctx, hc); err != nil {
		t.Fatal(err)
	}
	mu.Lock()
	for _, want := range []string{"NodePool/alpha", "ManagedCluster/alpha"} {
		if !slices.Contains(created, want) {
			t.Errorf("after expectFor the reconciler created %v, want %s among them", created, want)
		}
	}
	created = nil
	mu.Unlock()
	// Already there, so expected again: the next look creates nothing.
	if err := f.svc.Converge(ctx, hc); err != nil {
		t.Fatal(err)
	}
	mu.Lock()
	defer mu.Unlock()
	if len(created) != 0 {
		t.Fatalf("the reconciler created %v again right after they were answered as already there", created)
	}
}
