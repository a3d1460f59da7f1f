package provision

import (
	"context"
	"strings"
	"testing"
	"time"

	hyperv1 "github.com/openshift/hypershift/api/hypershift/v1beta1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/dcm-sp/acm-cluster-sp/internal/sp/clusters"
	"github.com/dcm-sp/acm-cluster-sp/internal/sp/meta"
	"github.com/dcm-sp/acm-cluster-sp/internal/sp/render"
	"github.com/dcm-sp/acm-cluster-sp/internal/sp/wire"
)

// A retry that reaches a replica whose cache has not seen the first create yet is answered from the API server:
// the same spec is a replay (200), another spec a 409.
func TestCreateReplayThroughLaggingCache(t *testing.T) {
	f := newFixture(t)
	f.unseen = lagging
	f.create(id1, "", kubevirtBody("alpha", 2))
	if _, ok := f.index.Get(id1); ok {
		t.Fatal("the lagging index saw the create")
	}
	c, created, err := f.svc.Create(context.Background(), id1, "", []byte(kubevirtBody("alpha", 2)))
	if err != nil || created || c.ID != id1 {
		t.Fatalf("retry on a lagging replica: created %v, %v", created, err)
	}
	if _, _, err := f.svc.Create(context.Background(), id1, "", []byte(kubevirtBody("alpha", 3))); clusters.KindOf(err) != clusters.KindConflict {
		t.Fatalf("other spec on a lagging replica: %v, want a 409", err)
	}
	if _, _, err := f.svc.Create(context.Background(), id1, "", []byte(kubevirtBody("beta", 2))); clusters.KindOf(err) != clusters.KindConflict || !strings.Contains(err.Error(), "different spec") {
		t.Fatalf("same id, other name, on a lagging replica (the instance lock decides): %v, want a 409", err)
	}
}

// A HostedCluster of the name created between the checks and the create (another instance's, or this instance's
// by another replica) decides from what the API server holds.
func TestCreateHostedClusterCollision(t *testing.T) {
	for _, c := range []struct {
		name     string
		rival    string // the instance id on the rival HostedCluster
		spec     string
		wantKind clusters.Kind // 0: a replay
	}{
		{"another instance", id2, kubevirtBody("alpha", 2), clusters.KindConflict},
		{"this instance, same spec", id1, kubevirtBody("alpha", 2), 0},
		{"this instance, other spec", id1, kubevirtBody("alpha", 3), clusters.KindConflict},
	} {
		t.Run(c.name, func(t *testing.T) {
			f := newFixture(t)
			spec, err := wire.ParseSpec([]byte(c.spec), f.svc.Writer.cfg.Spec)
			if err != nil {
				t.Fatal(err)
			}
			request, err := wire.ParseSpec([]byte(kubevirtBody("alpha", 2)), f.svc.Writer.cfg.Spec)
			if err != nil {
				t.Fatal(err)
			}
			f.unseen = lagging // the rival's HostedCluster is not in this replica's cache
			// The instance lock is the first create: let the rival in just before the HostedCluster's instead.
			if err := f.client.Create(context.Background(), render.InstanceLock(testProvider, testNS, id1, request.JSON)); err != nil {
				t.Fatal(err)
			}
			f.before = func(ctx context.Context, cl client.Client, obj client.Object) {
				rival := &hyperv1.HostedCluster{ObjectMeta: metav1.ObjectMeta{Namespace: testNS, Name: "alpha", UID: "rival", CreationTimestamp: metav1.NewTime(testEpoch),
					Labels:      map[string]string{meta.LabelInstanceID: c.rival, meta.LabelProvider: testProvider},
					Annotations: map[string]string{meta.AnnotationSpec: spec.JSON}}}
				if err := cl.Create(ctx, rival); err != nil {
					t.Error(err)
				}
			}
			_, created, err := f.svc.Create(context.Background(), id1, "", []byte(kubevirtBody("alpha", 2)))
			switch {
			case c.wantKind == 0 && (err != nil || created):
				t.Fatalf("got created %v, %v; want a replay", created, err)
			case c.wantKind != 0 && clusters.KindOf(err) != c.wantKind:
				t.Fatalf("got %v, want kind %v", err, c.wantKind)
			}
		})
	}
}

// The instance lock of another spec refuses a create while its own create may still be running; once stale (no
// HostedCluster after staleLockAge), it is removed and the create goes on.
func TestCreateInstanceLock(t *testing.T) {
	f := newFixture(t)
	lock := render.InstanceLock(testProvider, testNS, id1, `{"other":"spec"}`)
	lock.CreationTimestamp = metav1.NewTime(testEpoch.Add(time.Minute - staleLockAge/2))
	f.seed(lock)
	if _, _, err := f.svc.Create(context.Background(), id1, "", []byte(kubevirtBody("alpha", 2))); clusters.KindOf(err) != clusters.KindConflict || !strings.Contains(err.Error(), "being created with a different spec") {
		t.Fatalf("a fresh lock of another spec: %v, want a 409", err)
	}
	var cm corev1.ConfigMap
	if err := f.get(&cm, testNS, lock.Name); err != nil {
		t.Fatal(err)
	}
	cm.CreationTimestamp = metav1.NewTime(testEpoch.Add(-staleLockAge))
	if err := f.client.Update(context.Background(), &cm); err != nil {
		t.Fatal(err)
	}
	f.create(id1, "", kubevirtBody("alpha", 2))
	if err := f.get(&cm, testNS, lock.Name); err != nil || cm.Annotations[meta.AnnotationSpec] != f.hostedCluster("alpha").Annotations[meta.AnnotationSpec] {
		t.Fatalf("the lock after the create: %v, spec %q", err, cm.Annotations[meta.AnnotationSpec])
	}
}
