package httpapi

import (
	"bytes"
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"strconv"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/dcm-sp/acm-cluster-sp/pkg/api"
)

// An encoding is kept per build: a new build of a cluster, or build 0, never answers with an old encoding.
func TestEncodingCacheKeysByBuild(t *testing.T) {
	ec := newEncodingCache()
	ec.put("a", 1, []byte("a1"))
	if got := ec.get("a", 1); got == nil || string(*got) != "a1" {
		t.Fatalf("build 1: %q", got)
	}
	if got := ec.get("a", 2); got != nil {
		t.Fatalf("build 2 answered %q from build 1", got)
	}
	ec.put("a", 2, []byte("a2"))
	if got := ec.get("a", 2); got == nil || string(*got) != "a2" {
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

// A LIST page written piece by piece from the cached encodings is byte for byte what encoding/json writes for the
// same api.ClusterList (with and without a next page), and its Content-Length is its length.
func TestListPageIsTheEncodedClusterList(t *testing.T) {
	now := time.Date(2026, 12, 6, 19, 0, 0, 0, time.UTC)
	svc := &oneCluster{c: sampleCluster(now)}
	h, err := NewServer(svc, noHealth{}, fuzzGuard{}, Options{}).Handler(prometheus.NewRegistry())
	if err != nil {
		t.Fatal(err)
	}
	for _, size := range []int{0, 1, 3} {
		for _, token := range []string{"", "dG9rZW4"} {
			svc.next = token
			rec := httptest.NewRecorder()
			h.ServeHTTP(rec, httptest.NewRequest(http.MethodGet, fmt.Sprintf("/api/v1alpha1/clusters?max_page_size=%d", max(size, 1)), nil))
			if size == 0 {
				svc.empty = true
				rec = httptest.NewRecorder()
				h.ServeHTTP(rec, httptest.NewRequest(http.MethodGet, "/api/v1alpha1/clusters", nil))
				svc.empty = false
			}
			want := api.ClusterList{Results: []api.Cluster{}}
			if token != "" {
				want.NextPageToken = &token
			}
			for range size {
				want.Results = append(want.Results, toAPI(&svc.c))
			}
			var buf bytes.Buffer
			if err := json.NewEncoder(&buf).Encode(want); err != nil {
				t.Fatal(err)
			}
			if rec.Code != http.StatusOK || rec.Body.String() != buf.String() {
				t.Fatalf("size %d, token %q: %d\n got %s\nwant %s", size, token, rec.Code, rec.Body, &buf)
			}
			if cl := rec.Header().Get("Content-Length"); cl != strconv.Itoa(buf.Len()) {
				t.Fatalf("size %d, token %q: Content-Length %s, body %d bytes", size, token, cl, buf.Len())
			}
		}
	}
}
