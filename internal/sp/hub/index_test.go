package hub

import (
	"fmt"
	"slices"
	"testing"
	"time"

	hyperv1 "github.com/openshift/hypershift/api/hypershift/v1beta1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/utils/ptr"
	clusterv1 "open-cluster-management.io/api/cluster/v1"

	"github.com/dcm-sp/acm-cluster-sp/internal/sp/clusters"
	"github.com/dcm-sp/acm-cluster-sp/internal/sp/meta"
)

var t0 = time.Date(2026, 11, 22, 10, 0, 0, 0, time.UTC)

func hc(id string, created time.Duration) *hyperv1.HostedCluster {
	return &hyperv1.HostedCluster{ObjectMeta: metav1.ObjectMeta{
		Name: "c-" + id, Namespace: "clusters", UID: types.UID("uid-" + id), Labels: meta.Labels("sp", id),
		CreationTimestamp: metav1.NewTime(t0.Add(created)), Finalizers: []string{meta.FinalizerStatus, meta.FinalizerHyperShift},
	}}
}

func ids(views []clusters.View) string {
	s := ""
	for _, v := range views {
		s += v.ID + " "
	}
	return s
}

func TestPageOrderAndKeyset(t *testing.T) {
	x := NewIndex("sp")
	// same creation second for b and a: the id breaks the tie
	for _, c := range []struct {
		id string
		at time.Duration
	}{{"c", 2 * time.Second}, {"b", time.Second}, {"a", time.Second}, {"d", 3 * time.Second}} {
		x.PutHostedCluster(hc(c.id, c.at))
	}
	page, more := x.AppendPage(nil, nil, 2)
	if ids(page) != "a b " || !more {
		t.Fatalf("first page %q more=%v", ids(page), more)
	}
	after := clusters.Key{Created: page[1].HostedCluster.CreationTimestamp.Time, ID: page[1].ID}
	// A cluster inserted before the cursor and one deleted after it change nothing for the remaining pages.
	x.PutHostedCluster(hc("0", 0))
	x.DeleteHostedCluster(hc("c", 2*time.Second))
	page, more = x.AppendPage(nil, &after, 2)
	if ids(page) != "d " || more {
		t.Fatalf("second page %q more=%v", ids(page), more)
	}
	if x.Len() != 4 {
		t.Fatalf("len %d", x.Len())
	}
}

func TestGoneClustersAreSkipped(t *testing.T) {
	x := NewIndex("sp")
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
	if page, _ := x.AppendPage(nil, nil, 10); len(page) != 0 {
		t.Fatalf("a gone cluster is listed: %q", ids(page))
	}
	if (clusters.View{}).Gone() != true {
		t.Fatal("no HostedCluster: gone")
	}
}

// A view's NodePools are sorted by name and follow every change; a view handed out before a change keeps what it
// was given.
func TestViewNodePools(t *testing.T) {
	x := NewIndex("sp")
	x.PutHostedCluster(hc("a", 0))
	names := func(v clusters.View) []string {
		var out []string
		for _, np := range v.NodePools {
			out = append(out, np.Name)
		}
		return out
	}
	pool := func(name string) *hyperv1.NodePool {
		return &hyperv1.NodePool{ObjectMeta: metav1.ObjectMeta{Name: name, Labels: meta.Labels("sp", "a")}}
	}
	for _, n := range []string{"c-a-2", "c-a-0", "c-a-1"} {
		x.PutNodePool(pool(n))
	}
	before, _ := x.Get("a")
	if got := names(before); !slices.Equal(got, []string{"c-a-0", "c-a-1", "c-a-2"}) {
		t.Fatalf("NodePools %v, want sorted", got)
	}
	x.DeleteNodePool(pool("c-a-1"))
	x.PutNodePool(pool("c-a-3"))
	after, _ := x.Get("a")
	if got := names(after); !slices.Equal(got, []string{"c-a-0", "c-a-2", "c-a-3"}) {
		t.Fatalf("NodePools after a delete and an add %v", got)
	}
	if got := names(before); !slices.Equal(got, []string{"c-a-0", "c-a-1", "c-a-2"}) {
		t.Fatalf("an earlier view changed: %v", got)
	}
	if page, _ := x.AppendPage(nil, nil, 10); len(page) != 1 || !slices.Equal(names(page[0]), names(after)) {
		t.Fatalf("page %v", page)
	}
}

func TestViewAssembly(t *testing.T) {
	x := NewIndex("sp")
	var changed []string
	x.OnChange(func(id string) { changed = append(changed, id) })

	// A NodePool seen before its HostedCluster is kept.
	np := &hyperv1.NodePool{ObjectMeta: metav1.ObjectMeta{Name: "c-a", Labels: meta.Labels("sp", "a")}}
	x.PutNodePool(np)
	if v, ok := x.Get("a"); !ok || v.HostedCluster != nil || len(v.NodePools) != 1 {
		t.Fatalf("orphan NodePool: %+v %v", v, ok)
	}
	h := hc("a", 0)
	h.Status.KubeConfig = &corev1.LocalObjectReference{Name: "c-a-admin-kubeconfig"}
	x.PutHostedCluster(h)
	// The admin kubeconfig is found by the name the HostedCluster gives, labelled or not (older operators).
	x.PutSecret(&metav1.PartialObjectMetadata{ObjectMeta: metav1.ObjectMeta{Name: "c-a-admin-kubeconfig", Namespace: "clusters", ResourceVersion: "7"}})
	x.PutManagedCluster(&clusterv1.ManagedCluster{ObjectMeta: metav1.ObjectMeta{Name: "c-a", Labels: meta.Labels("sp", "a")}})
	v, _ := x.Get("a")
	if v.Kubeconfig != (clusters.SecretRef{Name: "c-a-admin-kubeconfig", ResourceVersion: "7", Cluster: "c-a", ClusterUID: "uid-a"}) || v.ManagedCluster == nil || len(v.NodePools) != 1 {
		t.Fatalf("view %+v", v)
	}
	// A ManagedCluster of the same name that belongs to another instance is not this cluster's.
	x.PutManagedCluster(&clusterv1.ManagedCluster{ObjectMeta: metav1.ObjectMeta{Name: "c-a", Labels: meta.Labels("sp", "other")}})
	if v, _ := x.Get("a"); v.ManagedCluster != nil {
		t.Fatal("foreign ManagedCluster attached")
	}
	if id, ok := x.IDByName("c-a"); !ok || id != "a" {
		t.Fatalf("IDByName %q %v", id, ok)
	}
	if fmt.Sprint(changed) != "[a a a other]" {
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

// Two SPs sharing a namespace: objects labelled for another provider are not in this one's index; unlabelled ones
// (made before the label existed) are, until the reconciler labels them.
func TestProviderScope(t *testing.T) {
	x := NewIndex("sp")
	mine, theirs, legacy := hc("m", 0), hc("t", time.Second), hc("l", 2*time.Second)
	theirs.Labels = meta.Labels("other-sp", "t")
	delete(legacy.Labels, meta.LabelProvider)
	for _, h := range []*hyperv1.HostedCluster{mine, theirs, legacy} {
		x.PutHostedCluster(h)
	}
	page, _ := x.AppendPage(nil, nil, 10)
	if ids(page) != "m l " {
		t.Fatalf("visible %q", ids(page))
	}
	// Relabelled for the other provider: gone from this index.
	moved := legacy.DeepCopy()
	moved.Labels = meta.Labels("other-sp", "l")
	x.PutHostedCluster(moved)
	if _, ok := x.Get("l"); ok {
		t.Fatal("a cluster relabelled for another provider is still visible")
	}
}

// A HostedCluster's admin kubeconfig is served only from a Secret that belongs to it: owned by its UID, or named
// as HyperShift names it (<name>-admin-kubeconfig). Whoever can write a HostedCluster's status must not be able to
// point it at another cluster's kubeconfig, nor at any other Secret of the namespace.
func TestKubeconfigOnlyFromTheClustersOwnSecret(t *testing.T) {
	owned := func(name, uid string) []metav1.OwnerReference {
		return []metav1.OwnerReference{{APIVersion: hyperv1.GroupVersion.String(), Kind: "HostedCluster", Name: name, UID: types.UID(uid)}}
	}
	secret := func(name string, owners []metav1.OwnerReference) *metav1.PartialObjectMetadata {
		return &metav1.PartialObjectMetadata{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: "clusters", ResourceVersion: "7", OwnerReferences: owners}}
	}
	for _, c := range []struct {
		name   string
		secret *metav1.PartialObjectMetadata
		served bool
	}{
		{"HyperShift's name and owner", secret("c-a-admin-kubeconfig", owned("c-a", "uid-a")), true},
		{"HyperShift's name, no owner (an older operator)", secret("c-a-admin-kubeconfig", nil), true},
		{"another name, owned by this cluster's UID", secret("custom", owned("c-a", "uid-a")), true},
		{"another cluster's admin kubeconfig", secret("c-b-admin-kubeconfig", owned("c-b", "uid-b")), false},
		{"another cluster's, without owner", secret("c-b-admin-kubeconfig", nil), false},
		{"any other Secret of the namespace", secret("c-b-pull-secret", nil), false},
		{"owned by a former cluster of the same name (other UID)", secret("custom", owned("c-a", "uid-old")), false},
		{"owned by something else of that UID", secret("custom", []metav1.OwnerReference{{APIVersion: "v1", Kind: "ConfigMap", Name: "c-a", UID: "uid-a"}}), false},
	} {
		t.Run(c.name, func(t *testing.T) {
			x := NewIndex("sp")
			a := hc("a", 0)
			a.Status.KubeConfig = &corev1.LocalObjectReference{Name: c.secret.Name}
			x.PutHostedCluster(a)
			x.PutSecret(c.secret)
			v, _ := x.Get("a")
			if served := v.Kubeconfig.Name != ""; served != c.served {
				t.Fatalf("kubeconfig from %s (owners %v) served=%v, want %v", c.secret.Name, c.secret.OwnerReferences, served, c.served)
			}
		})
	}
}
