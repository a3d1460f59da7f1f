package provision

import (
	"testing"
	"time"

	"github.com/dcm-sp/acm-cluster-sp/internal/sp/clusters"
)

func TestViewCache(t *testing.T) {
	t0 := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	vc := newViewCache()
	vc.changed("a", false)

	since := vc.sequence()
	vc.put("a", since, &clusters.Cluster{ID: "a", StatusMessage: "one"}, t0)
	if c, ok := vc.get("a", t0.Add(time.Second)); !ok || c.StatusMessage != "one" {
		t.Fatalf("get after put: %v %+v", ok, c)
	}

	// A change reported after the view was read: the build from that view is not kept.
	since = vc.sequence()
	vc.changed("a", false)
	if _, ok := vc.get("a", t0); ok {
		t.Fatal("a change must drop the cached resource")
	}
	vc.put("a", since, &clusters.Cluster{ID: "a", StatusMessage: "stale"}, t0)
	if _, ok := vc.get("a", t0); ok {
		t.Fatal("a build overtaken by a change was kept")
	}

	// A status with a deadline expires at it; a clock that went back misses.
	since = vc.sequence()
	vc.put("a", since, &clusters.Cluster{ID: "a", RecheckAt: t0.Add(time.Minute)}, t0)
	if _, ok := vc.get("a", t0.Add(59*time.Second)); !ok {
		t.Fatal("valid before RecheckAt")
	}
	if _, ok := vc.get("a", t0.Add(time.Minute)); ok {
		t.Fatal("expired at RecheckAt")
	}
	if _, ok := vc.get("a", t0.Add(-time.Second)); ok {
		t.Fatal("built in the future of the clock")
	}

	// A cluster gone is forgotten, and a build read before its removal is not stored again.
	since = vc.sequence()
	vc.changed("a", true)
	vc.put("a", since, &clusters.Cluster{ID: "a"}, t0)
	if vc.len() != 0 {
		t.Fatalf("%d slots after removal, want 0", vc.len())
	}
	// A build of another cluster read after the removal is stored.
	vc.put("b", vc.sequence(), &clusters.Cluster{ID: "b"}, t0)
	if _, ok := vc.get("b", t0); !ok {
		t.Fatal("b not cached")
	}
}
