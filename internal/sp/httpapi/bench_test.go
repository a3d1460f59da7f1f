package httpapi

import (
	"context"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/dcm-sp/acm-cluster-sp/internal/sp/clusters"
)

// oneCluster serves one READY cluster (from a cache: Build set) and pages of copies of it.
type oneCluster struct {
	c     clusters.Cluster
	next  string // the next page token List answers
	empty bool   // List answers no clusters
}

func (o *oneCluster) Create(context.Context, string, string, []byte) (*clusters.Cluster, bool, error) {
	return nil, false, nil
}

// Get answers the cluster itself for its id, as the caches do (shared), and a copy renamed id for any other.
func (o *oneCluster) Get(_ context.Context, id string) (*clusters.Cluster, error) {
	if id == o.c.ID {
		return &o.c, nil
	}
	c := o.c
	c.ID = id
	return &c, nil
}
func (o *oneCluster) List(_ context.Context, size *int, _ string) ([]*clusters.Cluster, string, error) {
	n := 50
	if size != nil {
		n = *size
	}
	if o.empty {
		n = 0
	}
	out := make([]*clusters.Cluster, n)
	for i := range out {
		out[i] = &o.c
	}
	return out, o.next, nil
}
func (o *oneCluster) Delete(context.Context, string, string) error { return nil }
func (o *oneCluster) Update(context.Context, string, []byte, string) (*clusters.Cluster, error) {
	return nil, nil
}
func (o *oneCluster) Kubeconfig(context.Context, *clusters.Cluster) ([]byte, error) { return nil, nil }

// sampleCluster is a READY KubeVirt cluster as the caches build it (Build set: its encoding is kept).
func sampleCluster(now time.Time) clusters.Cluster {
	return clusters.Cluster{ID: "c1", Spec: json.RawMessage(`{"metadata":{"name":"c1"},"version":"1.31","nodes":{"control_plane":{"count":3},"workers":{"count":2,"cpu":4,"memory":"16Gi","storage":"120Gi"}}}`),
		Status: "READY", Platform: "kubevirt", Version: "1.31", OpenShiftVersion: "4.18.3", APIEndpoint: "https://api.c1.example.com:6443",
		ConsoleURL: "https://console.c1.example.com", Namespace: "clusters", CreateTime: now, UpdateTime: now, Build: 7, ETag: `"abc"`}
}

// What the HTTP layer alone costs a GET and a LIST(50) (routing, validation, authorization, metrics, the cached
// encoding), with a service that answers from memory; internal/sp/app's BenchmarkAtScale measures the whole SP.
func BenchmarkHandler(b *testing.B) {
	svc := &oneCluster{c: sampleCluster(time.Now()), next: "MTcwMDAwMDAwMDAwMDAwMDAwMC94qqqqqg"}
	svc.c.ID = "0b6c4c2e-8d8e-4c55-9b1e-2f0f3d7a9c11"
	h, err := NewServer(svc, noHealth{}, fuzzGuard{}, Options{}).Handler(prometheus.NewRegistry())
	if err != nil {
		b.Fatal(err)
	}
	for _, c := range []struct{ name, url string }{
		{"GET", "/api/v1alpha1/clusters/0b6c4c2e-8d8e-4c55-9b1e-2f0f3d7a9c11"},
		{"LIST50", "/api/v1alpha1/clusters?max_page_size=50&page_token=MTcwMDAwMDAwMDAwMDAwMDAwMC94qqqqqg"},
	} {
		b.Run(c.name, func(b *testing.B) {
			r := httptest.NewRequest(http.MethodGet, c.url, nil)
			w := &discard{h: http.Header{}}
			b.ReportAllocs()
			for b.Loop() {
				clear(w.h)
				w.code = 0
				h.ServeHTTP(w, r)
				if w.code != http.StatusOK {
					b.Fatal(w.code)
				}
			}
		})
	}
}

type discard struct {
	h    http.Header
	code int
}

func (w *discard) Header() http.Header         { return w.h }
func (w *discard) Write(p []byte) (int, error) { return len(p), nil }
func (w *discard) WriteHeader(code int)        { w.code = code }
