package hub

import (
	"fmt"
	"testing"
	"time"

	hyperv1 "github.com/openshift/hypershift/api/hypershift/v1beta1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/utils/ptr"
	clusterv1 "open-cluster-management.io/api/cluster/v1"

	"github.com/dcm-sp/acm-cluster-sp/internal/meta"
)

var t0 = time.Date(2026, 11, 22, 10, 0, 0, 0, time.UTC)

func hc(id string, created time.Duration) *hyperv1.HostedCluster {
	return &hyperv1.HostedCluster{ObjectMeta: metav1.ObjectMeta{
		Name: "c-" + id, Namespace: "clusters", UID: types.UID("uid-" + id), Labels: meta.Labels(id),
		CreationTimestamp: metav1.NewTime(t0.Add(created)), Finalizers: []string{meta.FinalizerStatus, meta.FinalizerHyperShift},
	}}
}

func ids(views []View) string {
	s := ""
	for _, v := range views {
		s += v.ID + " "
	}
	return s
}

func TestPageOrderAndKeyset(t *testing.T) {
	x := NewIndex()
	// same creation second for b and a: the id breaks the tie
	for _, c := range []struct {
		id string
		at time.Duration
	}{{"c", 2 * time.Second}, {"b", time.Second}, {"a", time.Second}, {"d", 3 * time.Second}} {
		x.PutHostedCluster(hc(c.id, c.at))
	}
	page, more := x.Page(nil, 2)
	if ids(page) != "a b " || !more {
		t.Fatalf("first page %q more=%v", ids(page), more)
	}
	after := Key{Created: page[1].HostedCluster.CreationTimestamp.Time, ID: page[1].ID}
	// A cluster inserted before the cursor and one deleted after it change nothing for the remaining pages.
	x.PutHostedCluster(hc("0", 0))
	x.DeleteHostedCluster(hc("c", 2*time.Second))
	page, more = x.Page(&after, 2)
	if ids(page) != "d " || more {
		t.Fatalf("second page %q more=%v", ids(page), more)
	}
	if x.Len() != 4 {
		t.Fatalf("len %d", x.Len())
	}
}

func TestGoneClustersAreSkipped(t *testing.T) {
	x := NewIndex()
	deleting := hc("del", 0)
	deleting.DeletionTimestamp = ptr.To(metav1.NewTime(t0))
	x.PutHostedCluster(deleting)
	if v, _ := x.Get("del"); v.Gone() {
		t.Fatal("a cluster the operator still holds is not gone")
	}
	done := deleting.DeepCopy()
	done.Finalizers = []string{meta.FinalizerStatus} // the operator is finished; only the SP's finalizer is left
	x.PutHostedCluster(done)
	v, ok := x.Get("del")
	if !ok || !v.Gone() {
		t.Fatal("only the status finalizer left: gone for DCM")
	}
	if page, _ := x.Page(nil, 10); len(page) != 0 {
		t.Fatalf("a gone cluster is listed: %q", ids(page))
	}
	if (View{}).Gone() != true {
		t.Fatal("no HostedCluster: gone")
	}
}

func TestViewAssembly(t *testing.T) {
	x := NewIndex()
	var changed []string
	x.OnChange(func(id string) { changed = append(changed, id) })

	// A NodePool seen before its HostedCluster is kept.
	np := &hyperv1.NodePool{ObjectMeta: metav1.ObjectMeta{Name: "c-a", Labels: meta.Labels("a")}}
	x.PutNodePool(np)
	if v, ok := x.Get("a"); !ok || v.HostedCluster != nil || len(v.NodePools) != 1 {
		t.Fatalf("orphan NodePool: %+v %v", v, ok)
	}
	h := hc("a", 0)
	h.Status.KubeConfig = &corev1.LocalObjectReference{Name: "c-a-admin-kubeconfig"}
	x.PutHostedCluster(h)
	x.PutSecret(&corev1.Secret{ObjectMeta: metav1.ObjectMeta{Name: "c-a-admin-kubeconfig", Labels: meta.Labels("a")}, Data: map[string][]byte{"kubeconfig": []byte("kc")}})
	x.PutManagedCluster(&clusterv1.ManagedCluster{ObjectMeta: metav1.ObjectMeta{Name: "c-a", Labels: meta.Labels("a")}})
	v, _ := x.Get("a")
	if string(v.Kubeconfig) != "kc" || v.ManagedCluster == nil || len(v.NodePools) != 1 {
		t.Fatalf("view %+v", v)
	}
	// A ManagedCluster of the same name that belongs to another instance is not this cluster's.
	x.PutManagedCluster(&clusterv1.ManagedCluster{ObjectMeta: metav1.ObjectMeta{Name: "c-a", Labels: meta.Labels("other")}})
	if v, _ := x.Get("a"); v.ManagedCluster != nil {
		t.Fatal("foreign ManagedCluster attached")
	}
	if id, ok := x.IDByName("c-a"); !ok || id != "a" {
		t.Fatalf("IDByName %q %v", id, ok)
	}
	if fmt.Sprint(changed) != "[a a a a other]" {
		t.Fatalf("notifications %v", changed)
	}

	// A stale delete (another object of the same name, older UID) does not remove the current one.
	stale := hc("a", 0)
	stale.UID = "uid-old"
	x.DeleteHostedCluster(stale)
	if v, _ := x.Get("a"); v.HostedCluster == nil {
		t.Fatal("stale delete removed the HostedCluster")
	}
	x.DeleteHostedCluster(h)
	x.DeleteNodePool(np)
	if _, ok := x.Get("a"); ok {
		t.Fatal("instance still known after its objects were deleted")
	}
}
