package provision

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"sync"
	"testing"

	hyperv1 "github.com/openshift/hypershift/api/hypershift/v1beta1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/util/validation/field"
	clusterv1 "open-cluster-management.io/api/cluster/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/dcm-sp/acm-cluster-sp/internal/sp/clusters"
	"github.com/dcm-sp/acm-cluster-sp/internal/sp/meta"
	"github.com/dcm-sp/acm-cluster-sp/internal/sp/render"
)

const (
	id1 = "0b7e0f7e-8a43-4c1d-9d3f-111111111111"
	id2 = "0b7e0f7e-8a43-4c1d-9d3f-222222222222"
)

// A create writes the HostedCluster with the stored spec, its owned children and the instance lock it owns.
func TestCreateNew(t *testing.T) {
	f := newFixture(t)
	c := f.create(id1, "", kubevirtBody("alpha", 2))
	if c.ID != id1 || c.Namespace != testNS {
		t.Fatalf("answered %+v", c)
	}
	hc := f.hostedCluster("alpha")
	if meta.InstanceID(hc.Labels) != id1 || hc.Annotations[meta.AnnotationSpec] == "" || !slices.Contains(hc.Finalizers, meta.FinalizerStatus) {
		t.Fatalf("HostedCluster labels %v annotations %v finalizers %v", hc.Labels, hc.Annotations, hc.Finalizers)
	}
	if hc.Spec.Release.Image != "quay.io/openshift-release-dev/ocp-release:4.17.29-multi" {
		t.Fatalf("release %s, want the newest 4.17 image set", hc.Spec.Release.Image)
	}
	var np hyperv1.NodePool
	if err := f.get(&np, testNS, "alpha"); err != nil || !ownedBy(np.OwnerReferences, hc) {
		t.Fatalf("NodePool: %v, owners %v", err, np.OwnerReferences)
	}
	for _, name := range []string{render.PullSecretName("alpha"), render.EtcdKeySecretName("alpha")} {
		var s corev1.Secret
		if err := f.get(&s, testNS, name); err != nil || !ownedBy(s.OwnerReferences, hc) {
			t.Fatalf("Secret %s: %v, owners %v", name, err, s.OwnerReferences)
		}
	}
	var lock corev1.ConfigMap
	if err := f.get(&lock, testNS, render.InstanceLockName(testProvider, id1)); err != nil || len(lock.OwnerReferences) != 1 || !ownedBy(lock.OwnerReferences, hc) {
		t.Fatalf("instance lock: %v, owners %v", err, lock.OwnerReferences)
	}
	if got, err := f.svc.Get(context.Background(), id1); err != nil || got.ID != id1 {
		t.Fatalf("GET after the create: %v, %v", got, err)
	}
}

// The same id with the same spec is an idempotent replay (200, the same cluster); with another spec a 409.
func TestCreateReplayAndConflict(t *testing.T) {
	f := newFixture(t)
	first := f.create(id1, "", kubevirtBody("alpha", 2))
	c, created, err := f.svc.Create(context.Background(), id1, "", []byte(kubevirtBody("alpha", 2)))
	if err != nil || created || c.ID != first.ID || string(c.Spec) != string(first.Spec) {
		t.Fatalf("replay: created %v, %v, %+v", created, err, c)
	}
	_, _, err = f.svc.Create(context.Background(), id1, "", []byte(kubevirtBody("alpha", 3)))
	if clusters.KindOf(err) != clusters.KindConflict || !strings.Contains(err.Error(), "different spec") {
		t.Fatalf("same id, other spec: %v, want a 409", err)
	}
	_, _, err = f.svc.Create(context.Background(), id2, "", []byte(kubevirtBody("alpha", 2)))
	if clusters.KindOf(err) != clusters.KindConflict || !strings.Contains(err.Error(), id1) {
		t.Fatalf("another id, same name: %v, want a 409 naming %s", err, id1)
	}
}

// Without ?id= the Idempotency-Key names the instance: its replay is the same cluster, the key with another spec a
// 422, and a key whose cluster was deleted does not bring it back.
func TestCreateIdempotencyKey(t *testing.T) {
	f := newFixture(t)
	ctx := context.Background()
	first, created, err := f.svc.Create(ctx, "", "key-1", []byte(kubevirtBody("alpha", 2)))
	if err != nil || !created || first.ID != clusters.KeyID("key-1") {
		t.Fatalf("keyed create: %v, %v, %+v", created, err, first)
	}
	again, created, err := f.svc.Create(ctx, "", "key-1", []byte(kubevirtBody("alpha", 2)))
	if err != nil || created || again.ID != first.ID {
		t.Fatalf("keyed replay: created %v, %v, %+v", created, err, again)
	}
	if _, _, err := f.svc.Create(ctx, "", "key-1", []byte(kubevirtBody("alpha", 3))); clusters.KindOf(err) != clusters.KindUnprocessable || !strings.Contains(err.Error(), "Idempotency-Key") {
		t.Fatalf("key reused with another spec: %v, want a 422", err)
	}
	if _, _, err := f.svc.Create(ctx, "", "key with spaces", []byte(kubevirtBody("beta", 2))); clusters.KindOf(err) != clusters.KindInvalid {
		t.Fatalf("invalid key: %v, want a 400", err)
	}

	// Deleted (and gone): the key's deletion record refuses a late replay of the create.
	if err := f.svc.Delete(ctx, first.ID, ""); err != nil {
		t.Fatal(err)
	}
	f.finishDeletion("alpha")
	if _, _, err := f.svc.Create(ctx, "", "key-1", []byte(kubevirtBody("alpha", 2))); clusters.KindOf(err) != clusters.KindConflict || !strings.Contains(err.Error(), "was deleted") {
		t.Fatalf("replay of a deleted keyed create: %v, want a 409", err)
	}
}

// A name is refused while anything on the hub that is not this instance's holds it.
func TestCreateNameTaken(t *testing.T) {
	other := func(labels map[string]string) metav1.ObjectMeta {
		return metav1.ObjectMeta{Name: "alpha", Labels: labels}
	}
	foreign := map[string]string{meta.LabelInstanceID: id2, meta.LabelProvider: "another-provider"}
	for _, c := range []struct {
		name string
		seed func(f *fixture)
		want string
	}{
		{name: "HostedCluster of another provider", seed: func(f *fixture) {
			f.seed(&hyperv1.HostedCluster{ObjectMeta: metav1.ObjectMeta{Namespace: testNS, Name: "alpha", Labels: foreign}})
		}, want: "is used by instance " + id2},
		{name: "unlabelled HostedCluster", seed: func(f *fixture) {
			f.seed(&hyperv1.HostedCluster{ObjectMeta: metav1.ObjectMeta{Namespace: testNS, Name: "alpha"}})
		}, want: "HostedCluster alpha exists"},
		{name: "ManagedCluster", seed: func(f *fixture) {
			f.seed(&clusterv1.ManagedCluster{ObjectMeta: other(nil)})
		}, want: "ManagedCluster alpha exists"},
		{name: "ACM's cluster namespace", seed: func(f *fixture) {
			f.seed(&corev1.Namespace{ObjectMeta: other(nil)})
		}, want: "namespace alpha exists"},
		{name: "control plane namespace", seed: func(f *fixture) {
			f.seed(&corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ControlPlaneNamespace(testNS, "alpha")}})
		}, want: "already exists on the hub"},
		{name: "a HostedCluster whose control plane namespace is the same", seed: func(f *fixture) {
			f.seed(&hyperv1.HostedCluster{ObjectMeta: metav1.ObjectMeta{Namespace: testNS + "-al", Name: "pha"}})
		}, want: "also that of HostedCluster"},
	} {
		t.Run(c.name, func(t *testing.T) {
			f := newFixture(t, manageACM)
			// the cluster name must split at a dash for a rival namespace/name pair
			body := kubevirtBody("alpha", 2)
			if strings.HasPrefix(c.name, "a HostedCluster whose") {
				body = kubevirtBody("al-pha", 2)
			}
			c.seed(f)
			_, _, err := f.svc.Create(context.Background(), id1, "", []byte(body))
			if clusters.KindOf(err) != clusters.KindConflict || !strings.Contains(err.Error(), c.want) {
				t.Fatalf("got %v, want a 409 saying %q", err, c.want)
			}
			if f.exists(&corev1.ConfigMap{}, testNS, render.InstanceLockName(testProvider, id1)) {
				t.Fatal("the refused create left its instance lock")
			}
		})
	}
}

// A child the hub refuses rolls back exactly what the request created: a Secret that existed before stays, and
// nothing of the instance is remembered.
func TestCreateRollsBackOnRefusedChild(t *testing.T) {
	f := newFixture(t)
	// A Secret this instance made earlier (an interrupted attempt) is adopted, not created: the rollback keeps it.
	earlier := &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: testNS, Name: render.PullSecretName("alpha"),
		Labels: map[string]string{meta.LabelInstanceID: id1, meta.LabelProvider: testProvider}}}
	f.seed(earlier)
	f.fail("create", "NodePool", "", apierrors.NewInvalid(schema.GroupKind{Group: hyperv1.GroupVersion.Group, Kind: "NodePool"}, "alpha",
		field.ErrorList{field.Invalid(field.NewPath("spec", "replicas"), 2, "refused")}))
	_, _, err := f.svc.Create(context.Background(), id1, "", []byte(kubevirtBody("alpha", 2)))
	if clusters.KindOf(err) != clusters.KindUnprocessable {
		t.Fatalf("refused NodePool: %v, want a 422", err)
	}
	if f.exists(&hyperv1.HostedCluster{}, testNS, "alpha") {
		t.Fatal("the HostedCluster this request created is left behind")
	}
	if f.exists(&corev1.Secret{}, testNS, render.EtcdKeySecretName("alpha")) {
		t.Fatal("the etcd key Secret this request created is left behind")
	}
	if f.exists(&corev1.ConfigMap{}, testNS, render.InstanceLockName(testProvider, id1)) {
		t.Fatal("the instance lock this request took is left behind")
	}
	if !f.exists(&corev1.Secret{}, testNS, render.PullSecretName("alpha")) {
		t.Fatal("the rollback deleted a Secret this request did not create")
	}
	if n := f.svc.Remembered(); n != 0 {
		t.Fatalf("remembered %d instances after the rollback, want 0", n)
	}
}

// A transient failure after the HostedCluster exists is left to the reconciler: the cluster stays (201).
func TestCreateLeavesTransientFailureToTheReconciler(t *testing.T) {
	f := newFixture(t)
	f.fail("create", "NodePool", "", apierrors.NewServiceUnavailable("etcd leader change"))
	c, created, err := f.svc.Create(context.Background(), id1, "", []byte(kubevirtBody("alpha", 2)))
	if err != nil || !created || c.ID != id1 {
		t.Fatalf("create with a transient child failure: %v, %v", created, err)
	}
	if !f.exists(&hyperv1.HostedCluster{}, testNS, "alpha") {
		t.Fatal("the HostedCluster was rolled back on a transient failure")
	}
}

// A platform not offered, a version without image set: refused before anything is written.
func TestCreateRefusesBeforeWriting(t *testing.T) {
	f := newFixture(t)
	f.svc.Writer.cfg.Platforms = func() []string { return []string{"kubevirt"} }
	if _, _, err := f.svc.Create(context.Background(), id1, "", []byte(baremetalBody("alpha", 2))); clusters.KindOf(err) != clusters.KindUnprocessable {
		t.Fatalf("platform not offered: %v, want a 422", err)
	}
	body := strings.Replace(kubevirtBody("alpha", 2), `"4.17"`, `"4.16"`, 1)
	if _, _, err := f.svc.Create(context.Background(), id1, "", []byte(body)); clusters.KindOf(err) != clusters.KindUnprocessable {
		t.Fatalf("version without image set: %v, want a 422", err)
	}
	f.site.synced = false
	if _, _, err := f.svc.Create(context.Background(), id1, "", []byte(kubevirtBody("alpha", 2))); clusters.KindOf(err) != clusters.KindUnavailable {
		t.Fatalf("caches not synced: %v, want a 503", err)
	}
	var list hyperv1.HostedClusterList
	if err := f.client.List(context.Background(), &list); err != nil || len(list.Items) != 0 {
		t.Fatalf("refused creates wrote %d HostedClusters (%v)", len(list.Items), err)
	}
}

// A create marks its instance in flight from its first write to its answer, so that the reconciler of this process
// leaves the instance to it (Converger.Creating); the mark goes with the answer, refused or not.
func TestCreateIsInFlightWhileItWrites(t *testing.T) {
	f := newFixture(t)
	var mu sync.Mutex
	seen := map[string]bool{}
	f.onCreate = func(obj client.Object) {
		mu.Lock()
		defer mu.Unlock()
		seen[fmt.Sprintf("%T %s", obj, obj.GetName())] = f.svc.Converger.Creating(id1)
	}
	f.create(id1, "", kubevirtBody("alpha", 2))
	f.onCreate = nil
	if len(seen) < 5 {
		t.Fatalf("saw %d creates: %v", len(seen), seen)
	}
	for what, inFlight := range seen {
		if !inFlight {
			t.Errorf("%s was written while the instance was not in flight", what)
		}
	}
	if f.svc.Converger.Creating(id1) {
		t.Fatal("the instance is still in flight after the create answered")
	}
	if _, _, err := f.svc.Writer.Create(context.Background(), id1, "", []byte(kubevirtBody("other", 3))); err == nil {
		t.Fatal("a conflicting create was accepted")
	}
	if f.svc.Converger.Creating(id1) {
		t.Fatal("the instance is still in flight after a refused create")
	}
}
