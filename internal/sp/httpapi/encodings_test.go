package httpapi

import (
	"fmt"
	"testing"
)

// An encoding is kept per build: a new build of a cluster, or build 0, never answers with an old encoding.
func TestEncodingCacheKeysByBuild(t *testing.T) {
	ec := newEncodingCache()
	ec.put("a", 1, []byte("a1"))
	if got := string(ec.get("a", 1)); got != "a1" {
		t.Fatalf("build 1: %q", got)
	}
	if got := ec.get("a", 2); got != nil {
		t.Fatalf("build 2 answered %q from build 1", got)
	}
	ec.put("a", 2, []byte("a2"))
	if got := string(ec.get("a", 2)); got != "a2" {
		t.Fatalf("build 2: %q", got)
	}
	ec.put("b", 0, []byte("b0"))
	if got := ec.get("b", 0); got != nil {
		t.Fatalf("build 0 was kept: %q", got)
	}
}

// The clusters asked for stay cached however many generations pass, also when there are many more of them than a
// first generation holds; the others are dropped, so memory follows the clusters still listed.
func TestEncodingCacheForgetsClustersNobodyAsksFor(t *testing.T) {
	const live = 3 * minGeneration
	for _, gone := range []int{0, 100} {
		ec := newEncodingCache()
		for i := range gone {
			ec.put(fmt.Sprint(live+i), 1, []byte("x")) // clusters deleted since
		}
		for round := range 6 {
			for i := range live { // a LIST of every live cluster
				if ec.get(fmt.Sprint(i), 1) == nil {
					ec.put(fmt.Sprint(i), 1, []byte("x"))
					if round > 2 {
						t.Fatalf("%d gone, round %d: cluster %d lost its encoding", gone, round, i)
					}
				}
			}
		}
		if n := ec.len(); n != live {
			t.Fatalf("%d gone: %d entries kept, want the %d live clusters", gone, n, live)
		}
	}
}
