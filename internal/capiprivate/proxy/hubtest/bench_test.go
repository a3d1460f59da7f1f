package hubtest

import (
	"bufio"
	"bytes"
	"context"
	"fmt"
	"io"
	"net/http"
	"os"
	"slices"
	"sort"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/dcm-sp/acm-cluster-sp/internal/capiprivate/translate"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/rest"
)

// The benchmarks of `make bench-capi` (their figures are in docs/capi-private.md): the capi-private binary runs as a
// subprocess (its heap and RSS are its own), and each iteration sends the same request once directly to kube-apiserver
// (HTTPS, HTTP/2) and once through the proxy (plain HTTP on loopback, then HTTPS/HTTP/2 upstream), alternating which
// goes first, so both see the same load. Latencies are whole round trips with the body read; the table is printed at
// the end.

const benchNS = "bench-capi"

var (
	benchOnce sync.Once
	benchErr  error
	rowsMu    sync.Mutex
	rows      = map[string]string{}
	rowOrder  []string
)

// benchFixture creates 5,000 Machines of ~8 KB in benchNS once.
func benchFixture(b *testing.B) {
	b.Helper()
	benchOnce.Do(func() {
		start := time.Now()
		if _, err := rawCreateNamespace(benchNS); err != nil {
			benchErr = err
			return
		}
		createMachines(b, benchNS, 5000, 8)
		fmt.Fprintf(os.Stderr, "bench fixture: 5,000 Machines in %s\n", time.Since(start).Round(time.Second))
	})
	if benchErr != nil {
		b.Fatal(benchErr)
	}
}

func rawCreateNamespace(name string) (int, error) {
	req, _ := http.NewRequest("POST", hubURL()+"/api/v1/namespaces", strings.NewReader(`{"apiVersion":"v1","kind":"Namespace","metadata":{"name":"`+name+`"}}`))
	req.Header.Set("Authorization", "Bearer "+env.AdminToken)
	req.Header.Set("Content-Type", "application/json")
	resp, err := hcNoT().Do(req)
	if err != nil {
		return 0, err
	}
	_ = resp.Body.Close()
	if resp.StatusCode != 201 && resp.StatusCode != 409 {
		return resp.StatusCode, fmt.Errorf("creating namespace: %d", resp.StatusCode)
	}
	return resp.StatusCode, nil
}

func hcNoT() *http.Client { return httpClient(nil) }

// side is one way to reach kube-apiserver.
type side struct {
	base string
	c    *http.Client
}

func sides(b *testing.B, pp *proxyProcess) (direct, proxied side) {
	b.Helper()
	tr, err := rest.TransportFor(&rest.Config{Host: env.Config.Host, TLSClientConfig: rest.TLSClientConfig{CAData: env.Config.CAData}})
	if err != nil {
		b.Fatal(err)
	}
	ptr := http.DefaultTransport.(*http.Transport).Clone()
	ptr.MaxIdleConnsPerHost = 64
	return side{hubURL(), &http.Client{Transport: tr}}, side{pp.URL, &http.Client{Transport: ptr}}
}

// do sends one request and reads the whole (JSON) answer; it returns the round trip time.
func (s side) do(b *testing.B, method, path string, body []byte, ct string) time.Duration {
	return s.doAccept(b, method, path, body, ct, "application/json")
}

// doAccept is do asking for the answer in accept.
func (s side) doAccept(b *testing.B, method, path string, body []byte, ct, accept string) time.Duration {
	var r io.Reader
	if body != nil {
		r = bytes.NewReader(body)
	}
	req, _ := http.NewRequest(method, s.base+path, r)
	req.Header.Set("Authorization", "Bearer "+env.AdminToken)
	req.Header.Set("Accept", accept)
	if ct != "" {
		req.Header.Set("Content-Type", ct)
	}
	t0 := time.Now()
	resp, err := s.c.Do(req)
	if err != nil {
		b.Fatal(err)
	}
	_, err = io.Copy(io.Discard, resp.Body)
	_ = resp.Body.Close()
	d := time.Since(t0)
	if err != nil || resp.StatusCode >= 300 {
		b.Fatalf("%s %s%s: %d %v", method, s.base, path, resp.StatusCode, err)
	}
	return d
}

type lat []time.Duration

func (l lat) p(q float64) time.Duration {
	if len(l) == 0 {
		return 0
	}
	s := slices.Clone(l)
	sort.Slice(s, func(i, j int) bool { return s[i] < s[j] })
	return s[min(len(s)-1, int(q*float64(len(s))))]
}

func ms(d time.Duration) string { return fmt.Sprintf("%.2f", float64(d)/1e6) }

// report adds the benchmark's metrics and its table row (the last run of a benchmark wins).
func report(b *testing.B, name string, d, p lat, extra string) {
	b.Helper()
	r50, r95, r99 := ratio(p.p(.5), d.p(.5)), ratio(p.p(.95), d.p(.95)), ratio(p.p(.99), d.p(.99))
	b.ReportMetric(float64(d.p(.95))/1e6, "direct-p95-ms")
	b.ReportMetric(float64(p.p(.95))/1e6, "proxied-p95-ms")
	b.ReportMetric(r95, "p95-ratio")
	b.ReportMetric(float64(p.p(.99)-d.p(.99))/1e6, "added-p99-ms")
	row := fmt.Sprintf("| %s | %d | %s / %s / %s | %s / %s / %s | %.3f / %.3f / %.3f | %s | %s |", name, len(d),
		ms(d.p(.5)), ms(d.p(.95)), ms(d.p(.99)), ms(p.p(.5)), ms(p.p(.95)), ms(p.p(.99)), r50, r95, r99, ms(p.p(.99)-d.p(.99)), extra)
	rowsMu.Lock()
	defer rowsMu.Unlock()
	if _, ok := rows[name]; !ok {
		rowOrder = append(rowOrder, name)
	}
	rows[name] = row
}

func ratio(a, b time.Duration) float64 {
	if b == 0 {
		return 0
	}
	return float64(a) / float64(b)
}

// printBenchTable prints the table of the benchmarks that ran (from TestMain).
func printBenchTable() {
	rowsMu.Lock()
	defer rowsMu.Unlock()
	if len(rowOrder) == 0 {
		return
	}
	load, _ := os.ReadFile("/proc/loadavg")
	fmt.Printf("\ncapi-private proxy overhead (loopback, %d-core machine, load average at the end: %s)\n\n", numCPU(), strings.TrimSpace(string(load)))
	fmt.Println("| measure | n | direct p50 / p95 / p99 ms | proxied p50 / p95 / p99 ms | ratio p50 / p95 / p99 | added p99 ms | proxy memory and notes |")
	fmt.Println("|---|---|---|---|---|---|---|")
	for _, n := range rowOrder {
		fmt.Println(rows[n])
	}
}

// alternate runs op for both sides b.N times, alternating which goes first.
func alternate(b *testing.B, d, p side, op func(s side, i int) time.Duration) (lat, lat) {
	var dl, pl lat
	for i := 0; b.Loop(); i++ {
		if i%2 == 0 {
			dl = append(dl, op(d, i))
			pl = append(pl, op(p, i))
		} else {
			pl = append(pl, op(p, i))
			dl = append(dl, op(d, i))
		}
	}
	return dl, pl
}

const machinePath = "/apis/cluster.x-k8s.io/v1beta2/namespaces/" + benchNS + "/machines"

func path(s side, p string) string {
	if strings.HasPrefix(s.base, "https://") {
		return strings.Replace(p, "/apis/cluster.x-k8s.io/", "/apis/cluster.hypershift.openshift.io/", 1)
	}
	return p
}

func BenchmarkMachineGETc1(b *testing.B) {
	benchFixture(b)
	pp := startProxyProcess(b)
	d, p := sides(b, pp)
	dl, pl := alternate(b, d, p, func(s side, _ int) time.Duration {
		return s.do(b, "GET", path(s, machinePath+"/m-0000"), nil, "")
	})
	report(b, "Machine GET (~8 KB), c=1", dl, pl, "")
}

// parallel runs op with 8 goroutines, each iteration once per side, alternating.
func parallel(b *testing.B, d, p side, op func(s side, worker, i int) time.Duration) (lat, lat) {
	var mu sync.Mutex
	var dl, pl lat
	b.SetParallelism(max(1, 8/numCPU()))
	var worker int
	b.RunParallel(func(pb *testing.PB) {
		mu.Lock()
		w := worker
		worker++
		mu.Unlock()
		var ld, lp lat
		for i := 0; pb.Next(); i++ {
			if i%2 == 0 {
				ld = append(ld, op(d, w, i))
				lp = append(lp, op(p, w, i))
			} else {
				lp = append(lp, op(p, w, i))
				ld = append(ld, op(d, w, i))
			}
		}
		mu.Lock()
		dl, pl = append(dl, ld...), append(pl, lp...)
		mu.Unlock()
	})
	return dl, pl
}

func BenchmarkC8(b *testing.B) {
	benchFixture(b)
	pp := startProxyProcess(b)
	d, p := sides(b, pp)
	b.Run("GET", func(b *testing.B) {
		dl, pl := parallel(b, d, p, func(s side, w, _ int) time.Duration {
			return s.do(b, "GET", path(s, fmt.Sprintf("%s/m-%04d", machinePath, w)), nil, "")
		})
		report(b, "Machine GET, c=8", dl, pl, "")
	})
	b.Run("LIST50", func(b *testing.B) {
		dl, pl := parallel(b, d, p, func(s side, _, _ int) time.Duration {
			return s.do(b, "GET", path(s, machinePath+"?limit=50"), nil, "")
		})
		report(b, "Machine LIST limit=50, c=8", dl, pl, "")
	})
	b.Run("PATCH", func(b *testing.B) {
		dl, pl := parallel(b, d, p, func(s side, w, i int) time.Duration {
			patch := fmt.Appendf(nil, `{"metadata":{"labels":{"bench":"%d"}}}`, i)
			return s.do(b, "PATCH", path(s, fmt.Sprintf("%s/m-%04d", machinePath, 100+w)), patch, "application/merge-patch+json")
		})
		report(b, "Machine PATCH (merge), c=8", dl, pl, "")
	})
}

// memSampler scrapes the proxy's heap in use and RSS every 50 ms.
type memSampler struct {
	stop            chan struct{}
	done            chan struct{}
	base, heap, rss float64
}

func sampleMemory(b *testing.B, pp *proxyProcess) *memSampler {
	m := &memSampler{stop: make(chan struct{}), done: make(chan struct{})}
	read := func() (float64, float64) {
		g := pp.scrape(b)
		return metric(b, g, "go_memstats_heap_inuse_bytes"), metric(b, g, "process_resident_memory_bytes")
	}
	m.base, m.rss = read()
	m.heap = m.base
	go func() {
		defer close(m.done)
		tick := time.NewTicker(50 * time.Millisecond)
		defer tick.Stop()
		for {
			select {
			case <-m.stop:
				return
			case <-tick.C:
				h, r := read()
				m.heap, m.rss = max(m.heap, h), max(m.rss, r)
			}
		}
	}()
	return m
}

func (m *memSampler) end() string {
	close(m.stop)
	<-m.done
	return fmt.Sprintf("heap growth %.1f MiB, RSS max %.1f MiB", (m.heap-m.base)/(1<<20), m.rss/(1<<20))
}

func BenchmarkLIST(b *testing.B) {
	benchFixture(b)
	for _, n := range []int{500, 1000, 5000} {
		b.Run(fmt.Sprint(n), func(b *testing.B) {
			pp := startProxyProcess(b)
			d, p := sides(b, pp)
			mem := sampleMemory(b, pp)
			q := fmt.Sprintf("?limit=%d", n)
			if n == 5000 {
				q = ""
			}
			dl, pl := alternate(b, d, p, func(s side, _ int) time.Duration {
				return s.do(b, "GET", path(s, machinePath+q), nil, "")
			})
			report(b, fmt.Sprintf("Machine LIST of %d", n), dl, pl, mem.end())
		})
	}
}

// BenchmarkOpenAPIV2 fetches the whole Swagger 2.0 document (~6 MB on the test hub, every private CRD in it) as
// JSON and as the protobuf client-go's discovery asks for: through the proxy the JSON is translated on every
// request and the protobuf encoding of a translated document is kept per upstream ETag.
func BenchmarkOpenAPIV2(b *testing.B) {
	for _, accept := range []string{"application/json", translate.OpenAPIV2Protobuf} {
		name := "json"
		if accept != "application/json" {
			name = "protobuf"
		}
		b.Run(name, func(b *testing.B) {
			pp := startProxyProcess(b)
			d, p := sides(b, pp)
			mem := sampleMemory(b, pp)
			dl, pl := alternate(b, d, p, func(s side, _ int) time.Duration {
				return s.doAccept(b, "GET", "/openapi/v2", nil, "", accept)
			})
			report(b, "/openapi/v2 "+name, dl, pl, mem.end())
		})
	}
}

// BenchmarkWatch200: 200 watches through the proxy and 20 direct ones on the same Machines; every write's event
// is timed from the write's start to its arrival on each stream (frames are not decoded beyond their
// resourceVersion). Each iteration is one write.
func BenchmarkWatch200(b *testing.B) {
	benchFixture(b)
	pp := startProxyProcess(b)
	d, p := sides(b, pp)
	mem := sampleMemory(b, pp)
	ctx, cancel := context.WithCancel(context.Background())
	list, err := direct(b).Resource(gvr(privCore, "v1beta2", "machines")).Namespace(benchNS).List(ctx, metav1.ListOptions{Limit: 1})
	if err != nil {
		b.Fatal(err)
	}
	rv := list.GetResourceVersion()
	type stream struct {
		proxied bool
		mu      sync.Mutex
		seen    []string
		at      []time.Time
	}
	var streams []*stream
	var wg sync.WaitGroup
	open := func(s side, proxied bool) {
		st := &stream{proxied: proxied}
		streams = append(streams, st)
		req, _ := http.NewRequestWithContext(ctx, "GET", s.base+path(s, machinePath+"?watch=true&resourceVersion="+rv+"&fieldSelector=metadata.name%3Dm-4999"), nil)
		req.Header.Set("Authorization", "Bearer "+env.AdminToken)
		resp, err := s.c.Do(req)
		if err != nil || resp.StatusCode != 200 {
			b.Fatalf("watch: %v", err)
		}
		wg.Go(func() {
			defer resp.Body.Close()
			sc := bufio.NewScanner(resp.Body)
			sc.Buffer(make([]byte, 64<<10), 16<<20)
			key := []byte(`"resourceVersion":"`)
			for sc.Scan() {
				now := time.Now()
				line := sc.Bytes()
				i := bytes.Index(line, key)
				if i < 0 {
					continue
				}
				v := line[i+len(key):]
				v = v[:bytes.IndexByte(v, '"')]
				st.mu.Lock()
				st.seen, st.at = append(st.seen, string(v)), append(st.at, now)
				st.mu.Unlock()
			}
		})
	}
	for range 200 {
		open(p, true)
	}
	for range 20 {
		open(d, false)
	}
	waitFor(b, 30*time.Second, "200 watches", func() (bool, error) {
		return metric(b, pp.scrape(b), "capi_private_proxy_watches_active") == 200, nil
	})
	var starts []time.Time
	var rvs []string
	res := direct(b).Resource(gvr(privCore, "v1beta2", "machines")).Namespace(benchNS)
	for i := 0; b.Loop(); i++ {
		t0 := time.Now()
		o, err := res.Patch(ctx, "m-4999", "application/merge-patch+json", fmt.Appendf(nil, `{"metadata":{"labels":{"watch":"%d"}}}`, i), metav1.PatchOptions{})
		if err != nil {
			b.Fatal(err)
		}
		starts, rvs = append(starts, t0), append(rvs, o.GetResourceVersion())
	}
	b.StopTimer()
	waitFor(b, 60*time.Second, "every stream to see every event", func() (bool, error) {
		for _, st := range streams {
			st.mu.Lock()
			n := len(st.seen)
			st.mu.Unlock()
			if n < len(rvs) {
				return false, nil
			}
		}
		return true, nil
	})
	var dl, pl lat
	bad := 0
	for _, st := range streams {
		if !slices.Equal(st.seen, rvs) {
			bad++
		}
		for i := range rvs {
			if st.proxied {
				pl = append(pl, st.at[i].Sub(starts[i]))
			} else {
				dl = append(dl, st.at[i].Sub(starts[i]))
			}
		}
	}
	memNote := mem.end()
	cancel()
	wg.Wait()
	waitFor(b, 30*time.Second, "watches_active back to 0", func() (bool, error) {
		return metric(b, pp.scrape(b), "capi_private_proxy_watches_active") == 0, nil
	})
	if bad > 0 {
		b.Errorf("%d streams lost or reordered events", bad)
	}
	report(b, "200 watches: event latency from write start", dl, pl,
		fmt.Sprintf("%s; %d writes × 220 streams, lost or reordered: %d; watches_active back to 0", memNote, len(rvs), bad))
}
