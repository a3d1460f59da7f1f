package app

import (
	"encoding/json"
	"fmt"
	"net/http"
	"net/url"
	"os"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	vegeta "github.com/tsenart/vegeta/v12/lib"
	"k8s.io/client-go/rest"

	"github.com/dcm-sp/acm-cluster-sp/internal/sp/meta"
)

// Open-loop load: requests leave at a constant rate (vegeta's pacer and its own workers, as many as the answers
// need), so a slow answer cannot hold back the next request and the tail is the tail a client at that rate sees.
// The same rates are sent, in the same run, to what a user would call instead of the SP: kube-apiserver's GET of a
// HostedCluster and its LIST of 50 HostedClusters by label selector (the hub the SP reads), through client-go's
// HTTP client (HTTP/2, the hub's credentials).
//
//	BENCH_GET_RATES=500,1000,2000,4000  GET rates (requests per second)
//	BENCH_LIST_RATES=100,250,500        LIST(50) rates

// openPct are an open-loop run's latency quantiles (vegeta's t-digest) and how many requests they summarise.
type openPct struct {
	p50, p99, p999 time.Duration
	n, failed      uint64
	codes          map[string]int
}

func (p openPct) String() string {
	s := fmt.Sprintf("%s / %s / %s (%d requests", fmtDur(p.p50), fmtDur(p.p99), fmtDur(p.p999), p.n)
	if p.failed > 0 {
		s += fmt.Sprintf(", %d failed: %v", p.failed, p.codes)
	}
	return s + ")"
}

// firstN stops a pacer after n requests: a run sends exactly b.N.
type firstN struct {
	vegeta.Pacer
	n uint64
}

func (p firstN) Pace(elapsed time.Duration, hits uint64) (time.Duration, bool) {
	if hits >= p.n {
		return 0, true
	}
	return p.Pacer.Pace(elapsed, hits)
}

// openLoop sends b.N GETs of target(i) at rate per second through c and returns the latency quantiles. An answer
// other than 200 (or none within 30 s) is counted and reported, not fatal: past its capacity a server's failures
// are what a client at that rate sees.
func openLoop(b *testing.B, c *http.Client, rate int, target func(i uint64) string) openPct {
	b.Helper()
	var seq atomic.Uint64
	targeter := func(t *vegeta.Target) error {
		t.Method, t.URL = http.MethodGet, target(seq.Add(1)-1)
		return nil
	}
	attacker := vegeta.NewAttacker(vegeta.Client(c))
	var m vegeta.Metrics
	b.ResetTimer()
	for res := range attacker.Attack(targeter, firstN{vegeta.Rate{Freq: rate, Per: time.Second}, uint64(b.N)}, 0, "") {
		m.Add(res)
	}
	b.StopTimer()
	m.Close()
	p := openPct{p50: m.Latencies.Quantile(0.5), p99: m.Latencies.Quantile(0.99), p999: m.Latencies.Quantile(0.999), n: m.Requests,
		failed: m.Requests - uint64(m.Success*float64(m.Requests)+0.5), codes: m.StatusCodes}
	if p.failed > 0 {
		b.Logf("%d of %d requests at %d/s failed: status codes %v, errors %v", p.failed, m.Requests, rate, m.StatusCodes, m.Errors)
	}
	b.ReportMetric(float64(p.p50.Microseconds()), "p50-µs")
	b.ReportMetric(float64(p.p99.Microseconds()), "p99-µs")
	b.ReportMetric(float64(p.p999.Microseconds()), "p99.9-µs")
	b.ReportMetric(m.Rate, "sent/s")
	return p
}

// spread maps the i-th request to one of n items, visiting all of them in a fixed scattered order.
func spread(i uint64, n int) int { return int((i * 7919) % uint64(n)) }

func rates(b *testing.B, env, def string) []int {
	s := os.Getenv(env)
	if s == "" {
		s = def
	}
	var out []int
	for _, part := range strings.Split(s, ",") {
		n, err := strconv.Atoi(strings.TrimSpace(part))
		if err != nil || n <= 0 {
			b.Fatalf("%s=%q: a list of positive rates", env, s)
		}
		out = append(out, n)
	}
	return out
}

// hubClient is the load generator's client to kube-apiserver: client-go's, with the hub's credentials.
func hubClient(b *testing.B) *http.Client {
	c, err := rest.HTTPClientFor(testHub.Config)
	if err != nil {
		b.Fatal(err)
	}
	c.Timeout = 30 * time.Second
	return c
}

const hostedClustersPath = "/apis/hypershift.openshift.io/v1beta1/namespaces/" + benchNS + "/hostedclusters"

// hubListURL is kube-apiserver's LIST of 50 of the SP's HostedClusters by label selector, from continue token tok.
func hubListURL(tok string) string {
	q := url.Values{"labelSelector": {meta.LabelProvider + "=" + benchProvider}, "limit": {"50"}}
	if tok != "" {
		q.Set("continue", tok)
	}
	return hubURL(hostedClustersPath + "?" + q.Encode())
}

// hubURL is path on kube-apiserver.
func hubURL(path string) string { return strings.TrimSuffix(testHub.Config.Host, "/") + path }

// hubPageTokens collects the continue token of every page of hubListURL ("" for the first). Collected right before
// a run: kube-apiserver refuses a token older than its last compaction.
func hubPageTokens(b *testing.B, c *http.Client) []string {
	tokens := []string{""}
	for {
		resp, err := c.Get(hubListURL(tokens[len(tokens)-1]))
		if err != nil {
			b.Fatal(err)
		}
		var page struct {
			Metadata struct {
				Continue string `json:"continue"`
			} `json:"metadata"`
		}
		err = json.NewDecoder(resp.Body).Decode(&page)
		resp.Body.Close()
		if err != nil || resp.StatusCode != http.StatusOK {
			b.Fatalf("hub LIST: %d %v", resp.StatusCode, err)
		}
		if page.Metadata.Continue == "" {
			return tokens
		}
		tokens = append(tokens, page.Metadata.Continue)
	}
}

// openLoopRuns measures GET and LIST(50) open-loop, against the SP and against kube-apiserver at the same rates,
// and records each pair with the ratio of their p99s.
func openLoopRuns(b *testing.B, n int, col string, sp *benchSP, ids []string, spTokens []string, nameOf func(string) string) {
	hub := hubClient(b)
	names := make([]string, len(ids))
	for i, id := range ids {
		names[i] = nameOf(id)
	}
	best, measured := 0, false
	for _, rate := range rates(b, "BENCH_GET_RATES", "500,1000,2000,4000") {
		var spP, hubP openPct
		b.Run(fmt.Sprintf("n=%d/open-loop/GET/rate=%d/sp", n, rate), func(b *testing.B) {
			spP = openLoop(b, benchHTTP, rate, func(i uint64) string {
				return sp.url + "/api/v1alpha1/clusters/" + ids[spread(i, len(ids))]
			})
		})
		b.Run(fmt.Sprintf("n=%d/open-loop/GET/rate=%d/hub", n, rate), func(b *testing.B) {
			hubP = openLoop(b, hub, rate, func(i uint64) string {
				return hubURL(hostedClustersPath + "/" + names[spread(i, len(names))])
			})
		})
		recordPair(col, fmt.Sprintf("open-loop GET %d/s p50 / p99 / p99.9", rate), spP, hubP)
		measured = measured || spP.n > 0
		if spP.n > 0 && spP.failed == 0 && spP.p99 <= time.Millisecond && rate > best {
			best = rate
		}
	}
	switch {
	case best > 0:
		record(col, "highest open-loop GET rate measured with p99 ≤ 1 ms", fmt.Sprintf("%d/s", best))
	case measured:
		record(col, "highest open-loop GET rate measured with p99 ≤ 1 ms", "none")
	}
	for _, rate := range rates(b, "BENCH_LIST_RATES", "100,250,500") {
		var spP, hubP openPct
		b.Run(fmt.Sprintf("n=%d/open-loop/LIST50/rate=%d/sp", n, rate), func(b *testing.B) {
			spP = openLoop(b, benchHTTP, rate, func(i uint64) string {
				u := sp.url + "/api/v1alpha1/clusters?max_page_size=50"
				if t := spTokens[spread(i, len(spTokens))]; t != "" {
					u += "&page_token=" + t
				}
				return u
			})
		})
		b.Run(fmt.Sprintf("n=%d/open-loop/LIST50/rate=%d/hub", n, rate), func(b *testing.B) {
			tokens := hubPageTokens(b, hub) // openLoop's timer starts after
			hubP = openLoop(b, hub, rate, func(i uint64) string { return hubListURL(tokens[spread(i, len(tokens))]) })
		})
		recordPair(col, fmt.Sprintf("open-loop LIST(50) %d/s p50 / p99 / p99.9", rate), spP, hubP)
	}
}

// recordPair records the SP's quantiles beside kube-apiserver's, with how many times lower the SP's p99 is.
func recordPair(col, row string, sp, hub openPct) {
	if sp.n == 0 || hub.n == 0 { // filtered out by -bench
		return
	}
	record(col, row+": SP", sp.String())
	record(col, row+": kube-apiserver", fmt.Sprintf("%s; SP p99 %.1f× lower", hub, float64(hub.p99)/float64(max(sp.p99, time.Microsecond))))
}
