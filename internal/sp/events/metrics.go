package events

import "github.com/prometheus/client_golang/prometheus"

// The publisher's Prometheus metrics.

type metrics struct {
	published *prometheus.CounterVec
	failed    prometheus.Counter
	retried   prometheus.Counter
	latency   prometheus.Histogram
}

func newMetrics(reg prometheus.Registerer, pending, noStream func() float64) *metrics {
	m := &metrics{
		published: prometheus.NewCounterVec(prometheus.CounterOpts{Name: "acm_sp_events_published_total", Help: "Status events acknowledged by NATS, by status."}, []string{"status"}),
		failed:    prometheus.NewCounter(prometheus.CounterOpts{Name: "acm_sp_events_failed_total", Help: "Status event publish attempts that failed."}),
		retried:   prometheus.NewCounter(prometheus.CounterOpts{Name: "acm_sp_events_retried_total", Help: "Status events scheduled for another attempt."}),
		latency: prometheus.NewHistogram(prometheus.HistogramOpts{Name: "acm_sp_events_publish_seconds", Help: "Time to publish one status event and receive its ack.",
			Buckets: []float64{.0005, .001, .0025, .005, .01, .025, .05, .1, .25, .5, 1, 2.5, 5}}),
	}
	if reg != nil {
		reg.MustRegister(m.published, m.failed, m.retried, m.latency,
			prometheus.NewGaugeFunc(prometheus.GaugeOpts{Name: "acm_sp_events_pending", Help: "Clusters with a status not yet delivered."}, pending),
			prometheus.NewGaugeFunc(prometheus.GaugeOpts{Name: "acm_sp_events_no_stream", Help: "1 while no JetStream stream captures the status subjects (statuses are held, not delivered)."}, noStream))
	}
	return m
}

func (p *Publisher) pendingCount() float64 {
	p.mu.Lock()
	defer p.mu.Unlock()
	n := 0
	for _, e := range p.entries {
		if e.pending != nil {
			n++
		}
	}
	return float64(n)
}
