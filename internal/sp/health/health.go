// Package health runs the SP's health checks in the background and answers from their last results, so the
// health endpoints return within milliseconds even when the hub hangs (docs/dcm.md, section "Health").
//
// Each check has a timeout; a check that does not answer in time is unhealthy ("no answer within 2s"). The checks
// that decide the overall status are the design's (hub, hypershift, kubevirt, baremetal) and events (a stream stores
// the status events); informational ones (nats, registration) are reported but never make the SP unhealthy.
package health

import (
	"context"
	"sync"
	"time"

	"github.com/dcm-sp/acm-cluster-sp/internal/buildinfo"
	"github.com/dcm-sp/acm-cluster-sp/internal/sp/redact"
	"github.com/dcm-sp/acm-cluster-sp/pkg/api"
)

// Check is one named health check.
type Check struct {
	Name          string
	Informational bool // reported, but does not decide the overall status
	// Run returns whether the check passes and a human-readable message. It must honour ctx. The Checker passes
	// every message through redact.Text before anyone sees it (the health endpoints answer unauthenticated
	// callers); a check should still describe errors by redact.Cause, which keeps their meaning.
	Run func(ctx context.Context) (ok bool, message string)
}

type result struct {
	ok      bool
	message string
	at      time.Time
}

// Checker runs checks periodically and serves their latest results.
type Checker struct {
	checks   []Check
	interval time.Duration
	timeout  time.Duration
	started  time.Time
	now      func() time.Time
	ready    func() bool // extra readiness condition (caches synced)

	mu      sync.RWMutex
	results map[string]result
	kick    chan struct{}
}

// Options tune a Checker.
type Options struct {
	Interval time.Duration // default 10s
	Timeout  time.Duration // per check, default 2s
	// Ready decides /readyz (the caches have synced).
	Ready func() bool
}

// New returns a Checker; call Run to start it.
func New(checks []Check, o Options) *Checker {
	if o.Interval == 0 {
		o.Interval = 10 * time.Second
	}
	if o.Timeout == 0 {
		o.Timeout = 2 * time.Second
	}
	if o.Ready == nil {
		o.Ready = func() bool { return true }
	}
	return &Checker{checks: checks, interval: o.Interval, timeout: o.Timeout, started: time.Now(), now: time.Now, ready: o.Ready,
		results: map[string]result{}, kick: make(chan struct{}, 1)}
}

// Run refreshes the results every interval until ctx ends.
func (c *Checker) Run(ctx context.Context) error {
	t := time.NewTicker(c.interval)
	defer t.Stop()
	for {
		c.RunOnce(ctx)
		select {
		case <-ctx.Done():
			return nil
		case <-t.C:
		case <-c.kick:
		}
	}
}

// Refresh asks for a new round of checks soon (e.g. after a dependency changed).
func (c *Checker) Refresh() {
	select {
	case c.kick <- struct{}{}:
	default:
	}
}

// RunOnce runs every check now (in parallel, each bounded by the timeout) and stores the results.
func (c *Checker) RunOnce(ctx context.Context) {
	var wg sync.WaitGroup
	for _, ch := range c.checks {
		wg.Add(1)
		go func(ch Check) {
			defer wg.Done()
			r := c.runOne(ctx, ch)
			c.mu.Lock()
			c.results[ch.Name] = r
			c.mu.Unlock()
		}(ch)
	}
	wg.Wait()
}

func (c *Checker) runOne(ctx context.Context, ch Check) result {
	cctx, cancel := context.WithTimeout(ctx, c.timeout)
	defer cancel()
	done := make(chan result, 1)
	go func() {
		ok, msg := ch.Run(cctx)
		done <- result{ok: ok, message: redact.Text(msg), at: c.now()}
	}()
	select {
	case r := <-done:
		return r
	case <-cctx.Done():
		return result{ok: false, message: "no answer within " + c.timeout.String(), at: c.now()}
	}
}

// Report returns the latest health; it never blocks on a check.
func (c *Checker) Report() api.Health {
	now := c.now()
	c.mu.RLock()
	defer c.mu.RUnlock()
	h := api.Health{Status: api.HealthStatusHealthy, Version: buildinfo.Version(), Uptime: int64(now.Sub(c.started).Seconds()), Checks: []api.HealthCheck{}}
	for _, ch := range c.checks {
		r, ran := c.results[ch.Name]
		if !ran {
			r = result{ok: false, message: "not checked yet", at: now}
		}
		st := api.HealthCheckStatusHealthy
		if !r.ok {
			st = api.HealthCheckStatusUnhealthy
			if !ch.Informational {
				h.Status = api.HealthStatusUnhealthy
			}
		}
		age := int64(now.Sub(r.at).Seconds())
		hc := api.HealthCheck{Name: ch.Name, Status: st, Message: r.message, AgeSeconds: &age}
		if ch.Informational {
			t := true
			hc.Informational = &t
		}
		h.Checks = append(h.Checks, hc)
	}
	return h
}

// Ready reports whether this replica can serve (/readyz): its caches have synced. It does not follow the health
// checks: a degraded HyperShift operator or InfraEnv is what the health document reports to DCM, and taking every
// replica out of the Service for it would turn a degraded hub into an outage of reads and health polls too.
func (c *Checker) Ready() bool { return c.ready() }
