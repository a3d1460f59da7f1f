package provision

import (
	"context"
	"testing"

	hyperv1 "github.com/openshift/hypershift/api/hypershift/v1beta1"
	clusterv1 "open-cluster-management.io/api/cluster/v1"

	"github.com/dcm-sp/acm-cluster-sp/internal/sp/clusters"
	"github.com/dcm-sp/acm-cluster-sp/internal/sp/meta"
	"github.com/dcm-sp/acm-cluster-sp/internal/sp/status"
)

// A DELETE starts the deletion (ACM objects first, then the HostedCluster with the clean-up annotation); once the
// cluster is gone, a replay with the same Idempotency-Key is answered 204 again, another key or none a 404.
func TestDeleteKeyedReplay(t *testing.T) {
	f := newFixture(t, manageACM)
	ctx := context.Background()
	f.create(id1, "", kubevirtBody("alpha", 2))
	f.operatorFinalizer("alpha")
	if !f.exists(&clusterv1.ManagedCluster{}, "", "alpha") {
		t.Fatal("no ManagedCluster after the create")
	}
	if err := f.svc.Delete(ctx, id1, "del-1"); err != nil {
		t.Fatal(err)
	}
	hc := f.hostedCluster("alpha")
	if hc.DeletionTimestamp == nil || hc.Annotations[meta.AnnotationCleanupCloudResources] != "true" {
		t.Fatalf("HostedCluster after the DELETE: deletion %v, annotations %v", hc.DeletionTimestamp, hc.Annotations)
	}
	if f.exists(&clusterv1.ManagedCluster{}, "", "alpha") {
		t.Fatal("the ManagedCluster was not deleted")
	}
	if c, err := f.svc.Get(ctx, id1); err != nil || c.Status != status.Deleting {
		t.Fatalf("GET right after the DELETE: %v, %v", c, err)
	}
	if err := f.svc.Delete(ctx, id1, "del-1"); err != nil {
		t.Fatalf("replay while deleting: %v", err)
	}

	f.finishDeletion("alpha")
	if f.exists(&hyperv1.HostedCluster{}, testNS, "alpha") {
		t.Fatal("the HostedCluster is still there")
	}
	if err := f.svc.Delete(ctx, id1, "del-1"); err != nil {
		t.Fatalf("keyed replay after the cluster is gone: %v, want 204", err)
	}
	for _, key := range []string{"del-2", ""} {
		if err := f.svc.Delete(ctx, id1, key); clusters.KindOf(err) != clusters.KindNotFound {
			t.Fatalf("DELETE with key %q after the cluster is gone: %v, want a 404", key, err)
		}
	}
}

// An id the SP never had is a 404, keyed or not.
func TestDeleteUnknown(t *testing.T) {
	f := newFixture(t)
	for _, key := range []string{"", "del-1"} {
		if err := f.svc.Delete(context.Background(), id1, key); clusters.KindOf(err) != clusters.KindNotFound {
			t.Fatalf("DELETE of an unknown id with key %q: %v, want a 404", key, err)
		}
	}
}

// A cluster whose control plane namespace another HostedCluster shares is deleted without that namespace.
func TestDeleteKeepsASharedControlPlaneNamespace(t *testing.T) {
	f := newFixture(t)
	f.create(id1, "", kubevirtBody("al-pha", 2))
	f.seed(&hyperv1.HostedCluster{ObjectMeta: objectMeta(testNS+"-al", "pha")})
	if err := f.svc.Delete(context.Background(), id1, ""); err != nil {
		t.Fatal(err)
	}
	if hc := f.hostedCluster("al-pha"); hc.Annotations[hyperv1.SkipControlPlaneNamespaceDeletionAnnotation] != "true" {
		t.Fatalf("annotations %v: the shared namespace would be deleted", hc.Annotations)
	}
}
