package hub

import (
	"context"
	"net/http"
	"net/url"
	"strconv"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"k8s.io/client-go/rest"
	clientmetrics "k8s.io/client-go/tools/metrics"
)

// Metrics count what the SP's hub client meets: every answer of the hub's API server by status code (a 429 is the
// hub's API Priority and Fairness throttling the SP; 5xx and "error", a request that got no answer, are hub
// errors), and the time client-go's own rate limiter (hubQPS, hubBurst) held requests back.
type Metrics struct {
	requests *prometheus.CounterVec
}

// NewMetrics returns the hub client's metrics; Instrument connects a client configuration to them.
func NewMetrics() *Metrics {
	return &Metrics{requests: prometheus.NewCounterVec(prometheus.CounterOpts{Name: "acm_sp_hub_requests_total",
		Help: "Requests of the SP's hub client by the hub's answer: the HTTP status code, or error when none came (every retry counts)."}, []string{"code"})}
}

// Collectors are the metrics to register.
func (m *Metrics) Collectors() []prometheus.Collector {
	return []prometheus.Collector{m.requests, rateLimiterWait}
}

// Instrument counts every request made with cfg (and configurations copied from it afterwards) by its answer.
func (m *Metrics) Instrument(cfg *rest.Config) {
	registerClientGoMetrics()
	prev := cfg.WrapTransport
	cfg.WrapTransport = func(rt http.RoundTripper) http.RoundTripper {
		if prev != nil {
			rt = prev(rt)
		}
		return countingTransport{next: rt, requests: m.requests}
	}
}

type countingTransport struct {
	next     http.RoundTripper
	requests *prometheus.CounterVec
}

func (t countingTransport) RoundTrip(r *http.Request) (*http.Response, error) {
	resp, err := t.next.RoundTrip(r)
	code := "error"
	if err == nil {
		code = strconv.Itoa(resp.StatusCode)
	}
	t.requests.WithLabelValues(code).Inc()
	return resp, err
}

// rateLimiterWait is fed by client-go's rate limiter, which reports to process-wide hooks: it is registered once per
// process, and every App's registry exports the same histogram. (client-go takes only the first registration of its
// hooks; the production binary links nothing else that registers them.)
var rateLimiterWait = prometheus.NewHistogram(prometheus.HistogramOpts{Name: "acm_sp_hub_rate_limiter_wait_seconds",
	Help:    "Time requests to the hub waited for client-go's client-side rate limiter (hubQPS, hubBurst).",
	Buckets: []float64{.001, .01, .1, .5, 1, 2.5, 5, 10, 30}})

var registerOnce sync.Once

func registerClientGoMetrics() {
	registerOnce.Do(func() {
		clientmetrics.Register(clientmetrics.RegisterOpts{RateLimiterLatency: waitObserver{}})
	})
}

type waitObserver struct{}

func (waitObserver) Observe(_ context.Context, _ string, _ url.URL, latency time.Duration) {
	rateLimiterWait.Observe(latency.Seconds())
}
