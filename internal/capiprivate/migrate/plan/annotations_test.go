package plan

import (
	"testing"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/types"
)

func TestControlPlaneNamespace(t *testing.T) {
	for _, c := range []struct{ ns, name, want string }{
		{"clusters", "demo", "clusters-demo"},
		{"clusters", "demo.example", "clusters-demo-example"}, // HyperShift makes the name's dots dashes
		{"team-a", "b", "team-a-b"},
	} {
		if got := ControlPlaneNamespace(c.ns, c.name); got != c.want {
			t.Errorf("ControlPlaneNamespace(%q, %q) = %q, want %q", c.ns, c.name, got, c.want)
		}
	}
}

func TestTwinned(t *testing.T) {
	obj := func(uid string) unstructured.Unstructured {
		u := unstructured.Unstructured{}
		u.SetUID(types.UID(uid))
		return u
	}
	old := []unstructured.Unstructured{obj("a"), obj("b"), obj("c")}
	got := Twinned(old, UIDMap{"a": {UID: "ta"}, "c": {UID: "tc"}, "gone": {UID: "tg"}})
	if len(got) != 2 || got[0].GetUID() != "a" || got[1].GetUID() != "c" {
		t.Fatalf("Twinned = %v, want a and c (b has no twin of this run: it is never deleted)", got)
	}
}
