package provision

import (
	"slices"
	"testing"
	"time"

	"github.com/dcm-sp/acm-cluster-sp/internal/sp/clusters"
	"github.com/dcm-sp/acm-cluster-sp/internal/sp/render"
)

func TestExpectations(t *testing.T) {
	t0 := time.Date(2026, 12, 7, 0, 0, 0, 0, time.UTC)
	np, mc := child{kindNodePool, "a"}, child{kindManagedCluster, "a"}
	for _, c := range []struct {
		name  string
		steps func(e *expectations) bool
		want  bool
		left  int // instances with expectations after the steps
	}{
		{"nothing created: not expected", func(e *expectations) bool { return e.pending("x", np, false, t0) }, false, 0},
		{"created, not shown: expected", func(e *expectations) bool {
			e.add("x", np, t0)
			return e.pending("x", np, false, t0.Add(time.Second))
		}, true, 1},
		{"created and shown: met, dropped", func(e *expectations) bool {
			e.add("x", np, t0)
			e.pending("x", np, true, t0.Add(time.Second))
			return e.pending("x", np, false, t0.Add(2*time.Second))
		}, false, 0},
		{"not shown within expectFor: expired, dropped", func(e *expectations) bool {
			e.add("x", np, t0)
			return e.pending("x", np, false, t0.Add(expectFor))
		}, false, 0},
		{"another child of the instance: not expected", func(e *expectations) bool {
			e.add("x", np, t0)
			return e.pending("x", mc, false, t0)
		}, false, 1},
		{"another instance: not expected", func(e *expectations) bool {
			e.add("x", np, t0)
			return e.pending("y", np, false, t0)
		}, false, 1},
		{"observed drops the expired ones only", func(e *expectations) bool {
			e.add("x", np, t0)
			e.add("x", mc, t0.Add(expectFor/2))
			e.observed("x", func(child) bool { return false }, t0.Add(expectFor))
			return e.pending("x", mc, false, t0.Add(expectFor)) && !e.pending("x", np, false, t0)
		}, true, 1},
		{"observed drops what the index shows", func(e *expectations) bool {
			e.add("x", np, t0)
			e.add("x", mc, t0)
			e.observed("x", func(c child) bool { return c == np }, t0)
			return !e.pending("x", np, false, t0) && e.pending("x", mc, false, t0)
		}, true, 1},
		{"observed of an instance whose every expectation ended forgets it", func(e *expectations) bool {
			e.add("x", np, t0)
			e.observed("x", func(child) bool { return false }, t0.Add(2*expectFor))
			return false
		}, false, 0},
		{"forget drops the instance", func(e *expectations) bool {
			e.add("x", np, t0)
			e.add("x", mc, t0)
			e.forget("x")
			return e.pending("x", np, false, t0)
		}, false, 0},
	} {
		var e expectations
		if got := c.steps(&e); got != c.want || e.instances() != c.left {
			t.Errorf("%s: %v with %d instances left, want %v with %d", c.name, got, e.instances(), c.want, c.left)
		}
	}
}

// The children's kinds, as kindOf names the objects a create renders.
func TestChildKinds(t *testing.T) {
	objs := render.Render(render.Input{ID: "x", Provider: "p", Name: "alpha", Namespace: "ns", Platform: clusters.KubeVirt,
		PullSecret: []byte(`{}`), EtcdEncryptionKey: make([]byte, 32), ManagedCluster: true})
	got := []string{kindOf(objs.NodePool), kindOf(objs.ManagedCluster)}
	for _, s := range objs.Secrets {
		got = append(got, kindOf(s))
	}
	want := []string{kindNodePool, kindManagedCluster}
	for range objs.Secrets {
		want = append(want, kindSecret)
	}
	if !slices.Equal(got, want) {
		t.Fatalf("kinds %v, want %v", got, want)
	}
}
