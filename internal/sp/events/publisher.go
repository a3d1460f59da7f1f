// Package events publishes every cluster's status changes as CloudEvents (structured JSON, specversion 1.0) on
// NATS JetStream, acknowledged.
//
// Per cluster the publisher keeps the last status the bus acknowledged and the newest status not yet delivered
// (latest wins). A new status goes out at once. A new message within the status last delivered goes out once it has
// stayed unchanged for the settle time (so a burst of them, as HyperShift writes its conditions one after the other,
// is one event with the last), at the latest a debounce window after the first one not yet delivered. Further
// changes within the debounce window after a publish are coalesced and sent when the window ends — except the burst
// a new status begins, which follows it as soon as it has settled: at most two events per cluster in a window, the
// second only right after a new status. A failed publish is retried with exponential backoff, forever; a status is
// marked delivered only after the JetStream ack, so nothing that was not superseded is lost.
//
// A resync re-publishes every cluster's unchanged status. Those re-publishes wait in a backlog that is fed to the
// workers only while their queue is short, so a real change reported meanwhile goes out after a handful of them,
// not after thousands (at 10,000 clusters a resync is 10,000 publishes).
//
// A status is never counted delivered without a stream: when no JetStream stream captures the subject, statuses
// are held and retried, the `events` health check turns unhealthy with the reason, and acm_sp_events_no_stream is
// 1. With CreateStream the publisher creates (or updates) its own stream for its subjects, with a stated retention,
// unless another stream already captures them.
package events

import (
	"context"
	"log/slog"
	"sync"
	"sync/atomic"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
	"github.com/prometheus/client_golang/prometheus"

	"github.com/dcm-sp/acm-cluster-sp/internal/sp/leaderloop"
	"github.com/dcm-sp/acm-cluster-sp/internal/sp/status"
)

// Options configure a Publisher.
type Options struct {
	URL          string // may carry user:password; shown redacted everywhere
	Credentials  Credentials
	ProviderName string
	Naming       Naming
	Debounce     time.Duration // coalescing window after a publish (default 1s; 0 = none)
	// Settle is how long a new message within a cluster's delivered status must stay unchanged before it is
	// published (the trailing edge; 0 = at once), bounded by Debounce after its first unpublished change. A new
	// status does not settle.
	Settle   time.Duration
	RetryMin time.Duration // first retry delay (default 1s)
	RetryMax time.Duration // longest retry delay (default 30s)
	Timeout  time.Duration // one publish attempt (default 5s)
	Workers  int           // parallel publishes (default 8)
	// Vocabulary decides the word an event carries for a reported status (its EventStatus); nil: the status itself.
	Vocabulary status.Vocabulary
	// CreateStream makes the publisher create or update its own stream (StreamName()) for its subjects, keeping
	// messages for StreamMaxAge, unless another stream already captures them.
	CreateStream bool
	StreamMaxAge time.Duration // default 168h
	// Fence reports whether this replica may publish now (it certainly leads); nil: always. A status is held,
	// not sent, while it says no.
	Fence    func() bool
	Registry prometheus.Registerer
	Log      *slog.Logger
}

// Publisher turns status reports into acknowledged CloudEvents.
type Publisher struct {
	o    Options
	log  *slog.Logger
	loop *leaderloop.Loop // the term's queue and workers (terms never overlap)
	m    *metrics

	connMu sync.Mutex // one Connect at a time
	conn   atomic.Pointer[nats.Conn]
	js     atomic.Pointer[jetstream.JetStream]

	mu        sync.Mutex
	entries   map[string]*entry
	backlog   []string      // ids of re-publishes in resync order (an id whose entry is no longer backlog is skipped)
	fed       chan struct{} // a re-publish joined the backlog
	stream    streamState
	gen       uint64
	delivered []func(id string, st status.Status)
}

// New prepares a publisher; Connect and Run start it.
func New(o Options) *Publisher {
	if o.Debounce < 0 {
		o.Debounce = 0
	}
	if o.Settle < 0 {
		o.Settle = 0
	}
	if o.RetryMin == 0 {
		o.RetryMin = time.Second
	}
	if o.RetryMax == 0 {
		o.RetryMax = 30 * time.Second
	}
	if o.Timeout == 0 {
		o.Timeout = 5 * time.Second
	}
	if o.Workers == 0 {
		o.Workers = 8
	}
	if o.StreamMaxAge == 0 {
		o.StreamMaxAge = 168 * time.Hour
	}
	if o.Log == nil {
		o.Log = slog.New(slog.DiscardHandler)
	}
	p := &Publisher{
		o: o, log: o.Log, entries: map[string]*entry{}, fed: make(chan struct{}, 1),
	}
	p.m = newMetrics(o.Registry, p.pendingCount, p.noStreamGauge)
	p.loop = leaderloop.New(leaderloop.Options{Name: "events", Workers: o.Workers, RetryMin: o.RetryMin, RetryMax: o.RetryMax,
		Handle: p.handle})
	return p
}

// Options are the options the publisher runs with (defaults applied).
func (p *Publisher) Options() Options { return p.o }

// OnDelivered registers f to be called after a status was acknowledged (the reconciler waits for DELETED).
func (p *Publisher) OnDelivered(f func(id string, st status.Status)) {
	p.mu.Lock()
	p.delivered = append(p.delivered, f)
	p.mu.Unlock()
}

// Delivered reports whether the bus acknowledged this status as the instance's latest (a re-publish of it still
// waiting does not make it less delivered).
func (p *Publisher) Delivered(id string, st status.Status) bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	e := p.entries[id]
	return e != nil && e.acked != nil && e.acked.status == string(st) && (e.pending == nil || *e.pending == *e.acked)
}

// Forget drops an instance whose deletion is complete; one with a status still undelivered is dropped once that
// status is delivered.
func (p *Publisher) Forget(id string) {
	p.mu.Lock()
	if e := p.entries[id]; e != nil {
		if e.pending == nil {
			delete(p.entries, id)
		} else {
			e.forget = true
		}
	}
	p.mu.Unlock()
}

// Tracked is how many instances the publisher holds state for (tests: memory follows the live clusters).
func (p *Publisher) Tracked() int {
	p.mu.Lock()
	defer p.mu.Unlock()
	return len(p.entries)
}

// Queued is how many instances wait in the publisher's queue for a worker (due now; those waiting out their
// debounce or backoff are not counted; 0 between terms).
func (p *Publisher) Queued() int { return p.loop.Len() }

// Resync starts a new generation: every instance reported from now on is published again, even unchanged
// (consumers are idempotent; a registry that lost an event heals).
func (p *Publisher) Resync() {
	p.mu.Lock()
	p.gen++
	p.mu.Unlock()
}

// Start publishes until ctx ends, then tries (bounded) to deliver what is still pending. It runs on the leader
// only, and may be called again after it returned (a new leadership term); terms never overlap: a Start waits for
// the previous one to have returned. At the end of a term the publisher forgets every instance: the next leader
// (maybe this replica again) re-reports them all from the hub.
func (p *Publisher) Start(ctx context.Context) error {
	if ctx.Err() != nil {
		return nil
	}
	if err := p.Connect(); err != nil {
		return err
	}
	p.loop.Run(ctx, leaderloop.Term{
		Begin: func(ctx context.Context) {
			if p.o.CreateStream {
				p.ensureStream(context.WithoutCancel(ctx))
			}
			p.retryNow() // whatever is pending from before this term
		},
		While: func(ctx context.Context) {
			var feeding sync.WaitGroup
			feeding.Go(func() { p.feedBacklog(ctx) })
			<-ctx.Done()
			// The final flush runs after the term's ctx ended, bounded by its own timeout.
			fctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 5*time.Second)
			p.flush(fctx)
			cancel()
			feeding.Wait()
		},
		End: func() {
			p.mu.Lock()
			clear(p.entries)
			p.backlog = nil
			p.mu.Unlock()
		},
	})
	return nil
}
