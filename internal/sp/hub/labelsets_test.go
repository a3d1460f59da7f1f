package hub

import (
	"maps"
	"reflect"
	"testing"

	hyperv1 "github.com/openshift/hypershift/api/hypershift/v1beta1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	clusterv1 "open-cluster-management.io/api/cluster/v1"

	"github.com/dcm-sp/acm-cluster-sp/internal/sp/meta"
)

// A cluster's objects, each decoded with its own copy of its labels, hold one map per distinct label set after the
// informers' transform; a deletion drops the instance.
func TestRenderedLabelsShared(t *testing.T) {
	shared := newLabelSets()
	transform := trimTransform(shared)
	rendered := func() metav1.ObjectMeta {
		return metav1.ObjectMeta{Name: "alpha", Namespace: "clusters", Labels: meta.Labels("p", "id-1")}
	}
	kept := func(obj any) map[string]string {
		t.Helper()
		out, err := transform(obj)
		if err != nil {
			t.Fatal(err)
		}
		return out.(metav1.Object).GetLabels()
	}
	same := func(a, b map[string]string) bool {
		return reflect.ValueOf(a).UnsafePointer() == reflect.ValueOf(b).UnsafePointer()
	}

	hc := kept(&hyperv1.HostedCluster{ObjectMeta: rendered()})
	np := kept(&hyperv1.NodePool{ObjectMeta: rendered()})
	sec := kept(&metav1.PartialObjectMetadata{ObjectMeta: rendered()})
	if !same(hc, np) || !same(hc, sec) {
		t.Error("the HostedCluster, NodePool and Secret of one cluster keep separate maps of the same labels")
	}
	if !maps.Equal(hc, meta.Labels("p", "id-1")) {
		t.Errorf("shared labels %v, want %v", hc, meta.Labels("p", "id-1"))
	}

	// Objects with other labels share theirs with their equals (the Secrets' extra labels), never with the rest;
	// values are unchanged.
	withExtra := func() metav1.ObjectMeta {
		m := rendered()
		m.Labels[meta.LabelSafeToDelete] = "true"
		return m
	}
	secA := kept(&metav1.PartialObjectMetadata{ObjectMeta: withExtra()})
	secB := kept(&metav1.PartialObjectMetadata{ObjectMeta: withExtra()})
	if !same(secA, secB) || same(secA, hc) || !maps.Equal(secA, withExtra().Labels) {
		t.Errorf("Secrets with extra labels: %v and %v (shared: %v; with the HostedCluster's: %v)", secA, secB, same(secA, secB), same(secA, hc))
	}
	other := rendered()
	other.Labels = meta.Labels("q", "id-1")
	if got := kept(&metav1.PartialObjectMetadata{ObjectMeta: other}); same(got, hc) || !maps.Equal(got, meta.Labels("q", "id-1")) {
		t.Errorf("another provider's labels: %v (shared with the HostedCluster's: %v)", got, same(got, hc))
	}
	// The instance has three sets now (the rendered, the Secrets', another provider's): a fourth is kept
	// (maxSetsPerInstance), a fifth is not.
	fourth, fifth := rendered(), rendered()
	fourth.Labels["n"], fifth.Labels["n"] = "4", "5"
	if a, b := kept(&hyperv1.NodePool{ObjectMeta: fourth}), kept(&hyperv1.NodePool{ObjectMeta: *fourth.DeepCopy()}); !same(a, b) {
		t.Error("a fourth label set is not shared")
	}
	if a, b := kept(&hyperv1.NodePool{ObjectMeta: fifth}), kept(&hyperv1.NodePool{ObjectMeta: *fifth.DeepCopy()}); same(a, b) || len(shared.byID["id-1"]) != maxSetsPerInstance {
		t.Errorf("a fifth label set: shared %v, %d sets kept (want %d)", same(a, b), len(shared.byID["id-1"]), maxSetsPerInstance)
	}
	mcMeta := rendered()
	mcMeta.Labels["cloud"] = "auto-detect"
	if mc := kept(&clusterv1.ManagedCluster{ObjectMeta: mcMeta}); same(mc, hc) || mc["cloud"] != "auto-detect" {
		t.Errorf("the ManagedCluster's labels %v were replaced", mc)
	}

	// A deletion drops the instance: the table holds no more instances than the cache.
	deleted := 0
	forgetting(shared, func(*hyperv1.NodePool) { deleted++ })(&hyperv1.NodePool{ObjectMeta: rendered()})
	if deleted != 1 || shared.len() != 0 {
		t.Fatalf("after a deletion: deleted %d, %d instances kept", deleted, shared.len())
	}
	if again := kept(&hyperv1.NodePool{ObjectMeta: rendered()}); same(again, hc) || shared.len() != 1 {
		t.Errorf("after the deletion a new object shares the old map (%v) or starts no entry (%d)", same(again, hc), shared.len())
	}
}
