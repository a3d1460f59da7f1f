package app

import (
	"context"
	"fmt"
	"io"
	"math/rand"
	"net/http"
	"os"
	"sort"
	"strconv"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	hyperv1 "github.com/openshift/hypershift/api/hypershift/v1beta1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/dcm-sp/acm-cluster-sp/internal/devhub"

	"github.com/dcm-sp/acm-cluster-sp/pkg/api"
)

// BenchmarkAPIAtScale measures, through HTTP on the real local hub, GET and LIST (page 50) latency with 1,000 and
// 10,000 clusters, and the create throughput. Targets (issue 3): GET p99 ≤ 2 ms, LIST p99 ≤ 5 ms at 10,000.
// BENCH_CLUSTERS=1000,10000 (default) sets the sizes.
func BenchmarkAPIAtScale(b *testing.B) {
	sizes := []int{1000, 10000}
	if s := os.Getenv("BENCH_CLUSTERS"); s != "" {
		sizes = nil
		for _, part := range splitComma(s) {
			n, err := strconv.Atoi(part)
			if err != nil {
				b.Fatal(err)
			}
			sizes = append(sizes, n)
		}
	}
	cfg := testConfig("bench")
	cfg.EnabledPlatforms = []string{"kubevirt"}
	sp := startSP(b, cfg, Options{})
	tr := &http.Transport{MaxIdleConnsPerHost: 64}
	httpc := &http.Client{Transport: tr}

	have := 0
	for _, n := range sizes {
		began := time.Now()
		created := createRange(b, sp, httpc, have, n)
		elapsed := time.Since(began)
		have = n
		rate := float64(created) / elapsed.Seconds()

		var ids []string
		for page := range pages(b, sp, 100) {
			for _, c := range page {
				ids = append(ids, c.Id)
			}
		}
		if len(ids) != n {
			b.Fatalf("listed %d clusters, want %d", len(ids), n)
		}
		time.Sleep(3 * time.Second) // let the reconciler and informers settle after the creates
		get := measure(b, httpc, 3000, func(r *rand.Rand) string { return sp.URL + "/api/v1alpha1/clusters/" + ids[r.Intn(len(ids))] })
		tokens := pageTokens(b, sp, 50)
		list := measure(b, httpc, 1000, func(r *rand.Rand) string {
			u := sp.URL + "/api/v1alpha1/clusters?max_page_size=50"
			if t := tokens[r.Intn(len(tokens))]; t != "" {
				u += "&page_token=" + t
			}
			return u
		})
		fmt.Printf("clusters=%-6d creates/s=%-6.0f GET p50=%-8s p99=%-8s LIST(50) p50=%-8s p99=%-8s\n",
			n, rate, get.p50, get.p99, list.p50, list.p99)
		b.ReportMetric(float64(get.p99.Microseconds()), fmt.Sprintf("get-p99-µs@%d", n))
		b.ReportMetric(float64(list.p99.Microseconds()), fmt.Sprintf("list50-p99-µs@%d", n))
		b.ReportMetric(rate, fmt.Sprintf("creates/s@%d", n))
	}
}

func splitComma(s string) []string {
	var out []string
	start := 0
	for i := 0; i <= len(s); i++ {
		if i == len(s) || s[i] == ',' {
			if i > start {
				out = append(out, s[start:i])
			}
			start = i + 1
		}
	}
	return out
}

// createRange creates clusters bench-<from>…bench-<to-1> through the API with 16 parallel clients.
func createRange(b *testing.B, sp *testSP, httpc *http.Client, from, to int) int {
	var next atomic.Int64
	next.Store(int64(from))
	var wg sync.WaitGroup
	var failed atomic.Value
	for w := 0; w < 16; w++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for {
				i := int(next.Add(1) - 1)
				if i >= to || failed.Load() != nil {
					return
				}
				name := fmt.Sprintf("bench-%05d", i)
				req, _ := http.NewRequest(http.MethodPost, sp.URL+"/api/v1alpha1/clusters?id="+name, bytesReader(kubevirtBody(name, 2)))
				req.Header.Set("Content-Type", "application/json")
				resp, err := httpc.Do(req)
				if err != nil {
					failed.Store(err.Error())
					return
				}
				body, _ := io.ReadAll(resp.Body)
				resp.Body.Close()
				if resp.StatusCode != http.StatusCreated {
					failed.Store(fmt.Sprintf("%s: %d %s", name, resp.StatusCode, body))
					return
				}
			}
		}()
	}
	wg.Wait()
	if f := failed.Load(); f != nil {
		b.Fatal(f)
	}
	return to - from
}

type latencies struct{ p50, p99 time.Duration }

// measure issues n GETs one after the other (latency, not throughput) and returns the percentiles.
func measure(b *testing.B, httpc *http.Client, n int, url func(*rand.Rand) string) latencies {
	d := make([]time.Duration, n)
	var next atomic.Int64
	var wg sync.WaitGroup
	for w := 0; w < 1; w++ {
		wg.Add(1)
		go func(seed int64) {
			defer wg.Done()
			r := rand.New(rand.NewSource(seed))
			for {
				i := int(next.Add(1) - 1)
				if i >= n {
					return
				}
				u := url(r)
				start := time.Now()
				resp, err := httpc.Get(u)
				if err != nil {
					b.Error(err)
					return
				}
				_, _ = io.Copy(io.Discard, resp.Body)
				resp.Body.Close()
				d[i] = time.Since(start)
				if resp.StatusCode != http.StatusOK {
					b.Errorf("GET %s: %d", u, resp.StatusCode)
					return
				}
			}
		}(int64(w))
	}
	wg.Wait()
	sort.Slice(d, func(i, j int) bool { return d[i] < d[j] })
	return latencies{p50: d[n/2].Round(time.Microsecond), p99: d[n*99/100].Round(time.Microsecond)}
}

// pages walks the whole list.
func pages(b *testing.B, sp *testSP, size int32) <-chan []api.Cluster {
	ch := make(chan []api.Cluster)
	go func() {
		defer close(ch)
		params := &api.ListClustersParams{MaxPageSize: ptr.To(size)}
		for {
			resp, err := sp.Client.ListClustersWithResponse(context.Background(), params)
			if err != nil || resp.JSON200 == nil {
				b.Error(err)
				return
			}
			ch <- resp.JSON200.Results
			if resp.JSON200.NextPageToken == nil {
				return
			}
			params.PageToken = resp.JSON200.NextPageToken
		}
	}()
	return ch
}

// pageTokens collects the token of every page of the given size ("" for the first).
func pageTokens(b *testing.B, sp *testSP, size int32) []string {
	tokens := []string{""}
	params := &api.ListClustersParams{MaxPageSize: ptr.To(size)}
	for {
		resp, err := sp.Client.ListClustersWithResponse(context.Background(), params)
		if err != nil || resp.JSON200 == nil {
			b.Fatal(err)
		}
		if resp.JSON200.NextPageToken == nil {
			return tokens
		}
		tokens = append(tokens, *resp.JSON200.NextPageToken)
		params.PageToken = resp.JSON200.NextPageToken
	}
}

// BenchmarkStatusEventLatency measures the time from a HostedCluster status update on the hub to the status event
// being delivered from JetStream (after its ack), over 1,000 updates spread across 200 clusters with the default
// debounce (1 s: each cluster is updated at most every 1.5 s, so nothing is coalesced). Target p99 ≤ 250 ms.
func BenchmarkStatusEventLatency(b *testing.B) {
	cfg := eventsConfig("benchev", "sp-benchev", testHub.NATSURL)
	cfg.StatusDebounce = time.Second
	sp := startSP(b, cfg, Options{})
	const clusters, updates = 200, 1000
	ids := createMany(b, sp, "ev", clusters)
	ctx := context.Background()

	// The current HostedCluster of every instance, kept from our own writes.
	hcs := map[string]*hyperv1.HostedCluster{}
	for _, id := range ids {
		hc := &hyperv1.HostedCluster{}
		if err := testHub.Client.Get(ctx, client.ObjectKey{Namespace: "benchev", Name: id}, hc); err != nil {
			b.Fatal(err)
		}
		hcs[id] = hc
	}
	time.Sleep(2 * time.Second) // the start-up PENDING events go out first

	reader, err := devhub.NewEventReader(ctx, testHub.NATSURL, "dcm.providers.sp-benchev.cluster.instances.*.status")
	if err != nil {
		b.Fatal(err)
	}
	defer reader.Close()
	received := make(chan string, updates*2)
	go func() {
		for {
			ev, ok, err := reader.Next(500 * time.Millisecond)
			if err != nil {
				return
			}
			if ok {
				received <- eventData(b, ev).Message
			}
		}
	}()

	sent := make(map[string]time.Time, updates)
	var mu sync.Mutex
	interval := 1500 * time.Millisecond / clusters // each cluster every 1.5 s
	began := time.Now()
	go func() {
		for i := 0; i < updates; i++ {
			id := ids[i%clusters]
			hc := hcs[id]
			marker := fmt.Sprintf("bench-%04d", i)
			now := metav1.Now()
			hc.Status.Conditions = []metav1.Condition{
				{Type: "Degraded", Status: metav1.ConditionFalse, Reason: "AsExpected", LastTransitionTime: now},
				{Type: "Available", Status: metav1.ConditionFalse, Reason: "WaitingForAvailable", Message: marker, LastTransitionTime: now},
			}
			mu.Lock()
			sent["Control plane starting: "+marker] = time.Now()
			mu.Unlock()
			if err := testHub.Client.Status().Update(ctx, hc); err != nil {
				b.Error(err)
				return
			}
			if wait := time.Until(began.Add(time.Duration(i+1) * interval)); wait > 0 {
				time.Sleep(wait)
			}
		}
	}()
	var lat []time.Duration
	deadline := time.After(2 * time.Minute)
	for len(lat) < updates {
		select {
		case msg := <-received:
			at := time.Now()
			mu.Lock()
			t0, ok := sent[msg]
			delete(sent, msg)
			mu.Unlock()
			if ok {
				lat = append(lat, at.Sub(t0))
			}
		case <-deadline:
			b.Fatalf("only %d of %d events arrived", len(lat), updates)
		}
	}
	sort.Slice(lat, func(i, j int) bool { return lat[i] < lat[j] })
	p50, p99 := lat[len(lat)/2], lat[len(lat)*99/100]
	fmt.Printf("status events: updates=%d clusters=%d debounce=1s  update→acked event p50=%s p99=%s max=%s\n",
		updates, clusters, p50.Round(100*time.Microsecond), p99.Round(100*time.Microsecond), lat[len(lat)-1].Round(100*time.Microsecond))
	b.ReportMetric(float64(p50.Microseconds()), "event-p50-µs")
	b.ReportMetric(float64(p99.Microseconds()), "event-p99-µs")
}
