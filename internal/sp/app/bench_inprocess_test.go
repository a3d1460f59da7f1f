package app

import (
	"fmt"
	"net/http"
	"net/http/httptest"
	"runtime"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
)

// What one GET and one LIST(50) cost the SP itself: its HTTP handler (routing, request validation, the cached
// resource's encoding, metrics) called in the benchmark's process, no socket, by an SP replica built in process on
// the seeded namespace (a follower beside the benchmarked process). Requests are made once and reused, and the
// response writer discards, so the allocations counted are the handler's.

// discardWriter is a reusable http.ResponseWriter that keeps only the status.
type discardWriter struct {
	h    http.Header
	code int
}

func (w *discardWriter) Header() http.Header         { return w.h }
func (w *discardWriter) Write(p []byte) (int, error) { return len(p), nil }
func (w *discardWriter) WriteHeader(code int)        { w.code = code }

// allocsPerOp serves b.N requests (cycling through reqs) and reports the allocations and bytes per request.
func allocsPerOp(b *testing.B, h http.Handler, reqs []*http.Request) (allocs, bytes float64) {
	w := &discardWriter{h: http.Header{}}
	var before, after runtime.MemStats
	runtime.GC()
	runtime.ReadMemStats(&before)
	b.ReportAllocs()
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		clear(w.h)
		w.code = http.StatusOK
		h.ServeHTTP(w, reqs[i%len(reqs)])
		if w.code != http.StatusOK {
			b.Fatalf("%s: %d", reqs[i%len(reqs)].URL, w.code)
		}
	}
	b.StopTimer()
	runtime.ReadMemStats(&after)
	return float64(after.Mallocs-before.Mallocs) / float64(b.N), float64(after.TotalAlloc-before.TotalAlloc) / float64(b.N)
}

func inProcessRuns(b *testing.B, n int, col string, ids, tokens []string) {
	cfg := testConfig(benchNS)
	cfg.ProviderName = benchProvider
	cfg.EnabledPlatforms = []string{"kubevirt"}
	sp := startSP(b, cfg, Options{})
	h, err := sp.App.server.Handler(prometheus.NewRegistry())
	if err != nil {
		b.Fatal(err)
	}
	// Setup: the replica's caches hold every cluster and it has built each resource once (a first LIST round).
	last := ids[len(ids)-1]
	waitFor(b, 5*time.Minute, "the in-process replica to serve every cluster", func() bool {
		code, _ := sp.get(b, last)
		return code == http.StatusOK
	})
	pageTokens(b, sp.URL, 50)

	gets := make([]*http.Request, min(len(ids), 1024))
	for i := range gets {
		gets[i] = httptest.NewRequest(http.MethodGet, "/api/v1alpha1/clusters/"+ids[spread(uint64(i), len(ids))], nil)
	}
	lists := make([]*http.Request, len(tokens))
	for i, t := range tokens {
		u := "/api/v1alpha1/clusters?max_page_size=50"
		if t != "" {
			u += "&page_token=" + t
		}
		lists[i] = httptest.NewRequest(http.MethodGet, u, nil)
	}
	for _, c := range []struct {
		name string
		reqs []*http.Request
	}{{"GET", gets}, {"LIST50", lists}} {
		b.Run(fmt.Sprintf("n=%d/in-process/%s", n, c.name), func(b *testing.B) {
			start := time.Now()
			allocs, bytes := allocsPerOp(b, h, c.reqs)
			record(col, fmt.Sprintf("in process, no socket: %s time / allocations / bytes per request", c.name),
				fmt.Sprintf("%s / %.0f / %.1f KB", fmtDur(time.Since(start)/time.Duration(b.N)), allocs, bytes/1024))
		})
	}
	sp.stop()
}
