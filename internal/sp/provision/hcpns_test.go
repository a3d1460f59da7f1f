package provision

import (
	"reflect"
	"strings"
	"testing"
	"time"

	hyperv1 "github.com/openshift/hypershift/api/hypershift/v1beta1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"

	"github.com/dcm-sp/acm-cluster-sp/internal/sp/clusters"
)

func TestControlPlaneNamespaceRivals(t *testing.T) {
	self := types.NamespacedName{Namespace: "clusters", Name: "x-bar"}
	got := controlPlaneNamespaceRivals(ControlPlaneNamespace("clusters", "x-bar"), self)
	want := []types.NamespacedName{{Namespace: "clusters-x", Name: "bar"}}
	if !reflect.DeepEqual(got, want) {
		t.Fatalf("rivals of clusters/x-bar: %v, want %v", got, want)
	}
	if got := controlPlaneNamespaceRivals("clusters-demo", types.NamespacedName{Namespace: "clusters", Name: "demo"}); len(got) != 0 {
		t.Fatalf("a name without dashes has no rival: %v", got)
	}
	got = controlPlaneNamespaceRivals("a-b-c-d", types.NamespacedName{Namespace: "a-b", Name: "c-d"})
	want = []types.NamespacedName{{Namespace: "a", Name: "b-c-d"}, {Namespace: "a-b-c", Name: "d"}}
	if !reflect.DeepEqual(got, want) {
		t.Fatalf("rivals of a-b/c-d: %v, want %v", got, want)
	}
	if ControlPlaneNamespace("clusters", "a.b") != "clusters-a-b" {
		t.Fatal("dots become dashes, as HyperShift names it")
	}
}

// The control plane namespace is the cluster's own only when HyperShift made it for this HostedCluster.
func TestControlPlaneNamespaceVerdict(t *testing.T) {
	t0 := time.Date(2026, 11, 26, 10, 0, 0, 0, time.UTC)
	ns := func(created time.Time, deleting bool) *metav1.PartialObjectMetadata {
		m := &metav1.PartialObjectMetadata{ObjectMeta: metav1.ObjectMeta{Name: "clusters-x-bar", CreationTimestamp: metav1.NewTime(created)}}
		if deleting {
			m.DeletionTimestamp = &metav1.Time{Time: created.Add(time.Hour)}
		}
		return m
	}
	self := &hyperv1.HostedCluster{ObjectMeta: metav1.ObjectMeta{Name: "x-bar", Namespace: "clusters", CreationTimestamp: metav1.NewTime(t0)}}
	for _, c := range []struct {
		name  string
		ns    *metav1.PartialObjectMetadata
		self  *hyperv1.HostedCluster
		rival string
		want  string // "" allowed, else a fragment of the 409's message
	}{
		{"create, no namespace", nil, nil, "", ""},
		{"create, the namespace exists", ns(t0.Add(-time.Hour), false), nil, "", "already exists on the hub"},
		{"create, the namespace is being deleted", ns(t0.Add(-time.Hour), true), nil, "", "still being deleted"},
		{"create, another HostedCluster maps there", nil, nil, "clusters-x/bar", "also that of HostedCluster clusters-x/bar"},
		{"ours: made after the HostedCluster", ns(t0.Add(2*time.Second), false), self, "", ""},
		{"ours: made in the same second", ns(t0, false), self, "", ""},
		{"ours, not made yet", nil, self, "", ""},
		{"older than the HostedCluster: someone else's", ns(t0.Add(-time.Minute), false), self, "", "existed before its HostedCluster"},
		{"ours, but another HostedCluster maps there", ns(t0.Add(time.Second), false), self, "clusters-x/bar", "also that of HostedCluster clusters-x/bar"},
	} {
		t.Run(c.name, func(t *testing.T) {
			err := controlPlaneNamespaceVerdict("x-bar", "clusters-x-bar", c.ns, c.self, c.rival)
			switch {
			case c.want == "" && err != nil:
				t.Fatalf("refused: %v", err)
			case c.want != "" && (err == nil || clusters.KindOf(err) != clusters.KindConflict || !strings.Contains(err.Error(), c.want)):
				t.Fatalf("got %v, want a conflict saying %q", err, c.want)
			}
		})
	}
}
