// Package events publishes every cluster's status changes as CloudEvents (structured JSON, specversion 1.0) on
// NATS JetStream, acknowledged (decision D5, dcm-contract.md §4).
//
// Per cluster the publisher keeps the last status the bus acknowledged and the newest status not yet delivered
// (latest wins). The first change of a cluster goes out at once; further changes within the debounce window after
// a publish are coalesced and sent when the window ends. A failed publish is retried with exponential backoff,
// forever; a status is marked delivered only after the JetStream ack, so nothing that was not superseded is lost.
// When no stream captures the subject, it falls back to a core NATS publish (and says so once in the log).
package events

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	cloudevents "github.com/cloudevents/sdk-go/v2"
	"github.com/google/uuid"
	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
	"github.com/prometheus/client_golang/prometheus"
	"k8s.io/client-go/util/workqueue"

	"github.com/dcm-sp/acm-cluster-sp/internal/status"
)

// Naming is the subject, type and source templates ({providerName}, {instanceId}).
type Naming struct{ Subject, Type, Source string }

// Presets: "design" is the design document's naming; "spm" is what today's DCM registry consumes.
var Presets = map[string]Naming{
	"design": {Subject: "dcm.providers.{providerName}.cluster.instances.{instanceId}.status", Type: "dcm.providers.{providerName}.status.update", Source: "{providerName}"},
	"spm":    {Subject: "dcm.cluster", Type: "dcm.status.cluster", Source: "dcm/providers/{providerName}"},
}

// ResolveNaming applies per-field overrides to a preset.
func ResolveNaming(preset string, override Naming) (Naming, error) {
	n, ok := Presets[preset]
	if !ok {
		return Naming{}, fmt.Errorf("unknown status preset %q (design, spm)", preset)
	}
	if override.Subject != "" {
		n.Subject = override.Subject
	}
	if override.Type != "" {
		n.Type = override.Type
	}
	if override.Source != "" {
		n.Source = override.Source
	}
	return n, nil
}

// SubjectFor is the NATS subject of an instance's events under these names ("*" as id gives the wildcard subject).
func (n Naming) SubjectFor(provider, id string) string { return expand(n.Subject, provider, id) }

func expand(tmpl, provider, id string) string {
	return strings.NewReplacer("{providerName}", provider, "{instanceId}", id).Replace(tmpl)
}

// Options configure a Publisher.
type Options struct {
	URL          string
	ProviderName string
	Naming       Naming
	Debounce     time.Duration // coalescing window after a publish (default 1s; 0 = none)
	RetryMin     time.Duration // first retry delay (default 1s)
	RetryMax     time.Duration // longest retry delay (default 30s)
	Timeout      time.Duration // one publish attempt (default 5s)
	Workers      int           // parallel publishes (default 8)
	Registry     prometheus.Registerer
	Log          *slog.Logger
}

// Data is the CloudEvent payload SPM stores: the instance id, the status and its message.
type Data struct {
	ID      string `json:"id"`
	Status  string `json:"status"`
	Message string `json:"message"`
}

type state struct{ status, message string }

type entry struct {
	pending     *state    // newest status not yet delivered
	acked       *state    // last status the bus acknowledged
	ackedGen    uint64    // resync generation of that ack
	lastPublish time.Time // end of the last successful publish (debounce window start)
	dueAt       time.Time // when the pending status is scheduled
}

// Publisher turns status reports into acknowledged CloudEvents.
type Publisher struct {
	o     Options
	log   *slog.Logger
	queue atomic.Pointer[workqueue.TypedRateLimitingInterface[string]] // set while Start runs (a leadership term)
	m     *metrics

	conn     atomic.Pointer[nats.Conn]
	js       atomic.Pointer[jetstream.JetStream]
	fellBack atomic.Bool

	mu        sync.Mutex
	entries   map[string]*entry
	noStream  map[string]time.Time // subjects no stream captures, until when
	gen       uint64
	delivered []func(id string, st status.Status)
}

// New prepares a publisher; Connect and Run start it.
func New(o Options) *Publisher {
	if o.Debounce < 0 {
		o.Debounce = 0
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
	if o.Log == nil {
		o.Log = slog.New(slog.DiscardHandler)
	}
	p := &Publisher{
		o: o, log: o.Log, entries: map[string]*entry{},
	}
	p.m = newMetrics(o.Registry, p.pendingCount)
	return p
}

// Connect dials NATS without blocking: an unreachable server is retried in the background, forever.
func (p *Publisher) Connect() error {
	nc, err := nats.Connect(p.o.URL,
		nats.Name("acm-cluster-sp/"+p.o.ProviderName),
		nats.RetryOnFailedConnect(true),
		nats.MaxReconnects(-1),
		nats.ReconnectWait(time.Second),
		nats.ReconnectBufSize(-1), // fail publishes fast while disconnected; they are retried from the pending state
		nats.DisconnectErrHandler(func(_ *nats.Conn, err error) {
			if err != nil { // nil: our own Close/Drain
				p.log.Warn("NATS disconnected", "error", err)
			}
		}),
		nats.ReconnectHandler(func(c *nats.Conn) {
			p.log.Info("NATS reconnected", "url", c.ConnectedUrlRedacted())
			p.retryNow()
		}),
		nats.ConnectHandler(func(c *nats.Conn) {
			p.log.Info("NATS connected", "url", c.ConnectedUrlRedacted())
			p.retryNow()
		}),
	)
	if err != nil {
		return fmt.Errorf("NATS %s: %w", p.o.URL, err)
	}
	js, err := jetstream.New(nc)
	if err != nil {
		nc.Close()
		return err
	}
	p.conn.Store(nc)
	p.js.Store(&js)
	return nil
}

// Connected reports the NATS connection state (for the health check).
func (p *Publisher) Connected() (bool, string) {
	nc := p.conn.Load()
	if nc == nil {
		return false, "not connected"
	}
	if nc.IsConnected() {
		return true, "connected to " + nc.ConnectedUrlRedacted()
	}
	return false, strings.ToLower(nc.Status().String()) + " " + p.o.URL
}

// OnDelivered registers f to be called after a status was acknowledged (the reconciler waits for DELETED).
func (p *Publisher) OnDelivered(f func(id string, st status.Status)) {
	p.mu.Lock()
	p.delivered = append(p.delivered, f)
	p.mu.Unlock()
}

// Report hands over the current status of an instance. It is queued when it differs from what the bus last
// acknowledged in this resync generation; a newer report replaces an older undelivered one.
func (p *Publisher) Report(id string, st status.Status, message string) {
	s := state{string(st), message}
	now := time.Now()
	p.mu.Lock()
	e := p.entries[id]
	if e == nil {
		e = &entry{}
		p.entries[id] = e
	}
	if e.acked != nil && *e.acked == s && e.ackedGen == p.gen && e.pending == nil {
		p.mu.Unlock()
		return
	}
	if e.pending != nil && *e.pending == s {
		p.mu.Unlock()
		return
	}
	e.pending = &s
	delay := time.Duration(0)
	if !e.lastPublish.IsZero() {
		if end := e.lastPublish.Add(p.o.Debounce); end.After(now) {
			delay = end.Sub(now)
		}
	}
	scheduled := !e.dueAt.IsZero() && !e.dueAt.After(now.Add(delay))
	if !scheduled {
		e.dueAt = now.Add(delay)
	}
	p.mu.Unlock()
	if !scheduled {
		p.add(id, delay)
	}
}

// add schedules an instance's publish (a no-op while not running: Start picks up everything pending).
func (p *Publisher) add(id string, after time.Duration) {
	q := p.queue.Load()
	if q == nil {
		return
	}
	if after > 0 {
		(*q).AddAfter(id, after)
	} else {
		(*q).Add(id)
	}
}

// Delivered reports whether the bus acknowledged this status as the instance's latest.
func (p *Publisher) Delivered(id string, st status.Status) bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	e := p.entries[id]
	return e != nil && e.acked != nil && e.acked.status == string(st) && e.pending == nil
}

// Forget drops an instance whose deletion is complete.
func (p *Publisher) Forget(id string) {
	p.mu.Lock()
	if e := p.entries[id]; e != nil && e.pending == nil {
		delete(p.entries, id)
	}
	p.mu.Unlock()
}

// Resync starts a new generation: every instance reported from now on is published again, even unchanged
// (consumers are idempotent; a registry that lost an event heals).
func (p *Publisher) Resync() {
	p.mu.Lock()
	p.gen++
	p.mu.Unlock()
}

// retryNow moves every pending instance to the front after a (re)connect instead of waiting out its backoff.
func (p *Publisher) retryNow() {
	p.mu.Lock()
	var ids []string
	for id, e := range p.entries {
		if e.pending != nil {
			ids = append(ids, id)
			e.dueAt = time.Now()
		}
	}
	p.mu.Unlock()
	q := p.queue.Load()
	for _, id := range ids {
		if q != nil {
			(*q).Forget(id)
		}
		p.add(id, 0)
	}
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

// Start publishes until ctx ends, then tries (bounded) to deliver what is still pending. It runs on the leader
// only, and may be called again after it returned (a new leadership term).
func (p *Publisher) Start(ctx context.Context) error {
	if p.conn.Load() == nil {
		if err := p.Connect(); err != nil {
			return err
		}
	}
	q := workqueue.NewTypedRateLimitingQueueWithConfig(
		workqueue.NewTypedItemExponentialFailureRateLimiter[string](p.o.RetryMin, p.o.RetryMax),
		workqueue.TypedRateLimitingQueueConfig[string]{Name: "events"})
	p.queue.Store(&q)
	p.retryNow() // whatever is pending from before this term
	var wg sync.WaitGroup
	for i := 0; i < p.o.Workers; i++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for p.processNext(q) {
			}
		}()
	}
	<-ctx.Done()
	p.flush(5 * time.Second)
	p.queue.Store(nil)
	q.ShutDown()
	wg.Wait()
	return nil
}

// Close drains and closes the NATS connection (process shutdown).
func (p *Publisher) Close() {
	if nc := p.conn.Load(); nc != nil {
		_ = nc.Drain()
	}
}

// flush tries once more to publish every pending status, within the deadline.
func (p *Publisher) flush(within time.Duration) {
	deadline := time.Now().Add(within)
	p.mu.Lock()
	var ids []string
	for id, e := range p.entries {
		if e.pending != nil {
			ids = append(ids, id)
		}
	}
	p.mu.Unlock()
	for _, id := range ids {
		if time.Now().After(deadline) {
			p.log.Warn("shutdown: statuses left unpublished; the next leader republishes them", "count", len(ids))
			return
		}
		p.publishPending(id)
	}
}

func (p *Publisher) processNext(q workqueue.TypedRateLimitingInterface[string]) bool {
	id, shutdown := q.Get()
	if shutdown {
		return false
	}
	defer q.Done(id)
	switch p.publishPending(id) {
	case errNothing:
	case nil:
		q.Forget(id)
	default:
		p.m.retried.Inc()
		q.AddRateLimited(id)
	}
	return true
}

var errNothing = errors.New("nothing pending")

// publishPending publishes the instance's pending status and records the outcome.
func (p *Publisher) publishPending(id string) error {
	p.mu.Lock()
	e := p.entries[id]
	if e == nil || e.pending == nil {
		p.mu.Unlock()
		return errNothing
	}
	if wait := time.Until(e.dueAt); wait > 0 {
		p.mu.Unlock()
		p.add(id, wait) // the debounce window has not ended yet
		return errNothing
	}
	s := *e.pending
	p.mu.Unlock()

	began := time.Now()
	err := p.publish(id, s)
	p.m.latency.Observe(time.Since(began).Seconds())
	if err != nil {
		p.m.failed.Inc()
		p.log.Warn("status event not delivered; will retry", "id", id, "status", s.status, "error", err)
		return err
	}
	p.m.published.WithLabelValues(s.status).Inc()

	p.mu.Lock()
	e.acked, e.ackedGen, e.lastPublish = &s, p.gen, time.Now()
	superseded := e.pending != nil && *e.pending != s
	if !superseded {
		e.pending, e.dueAt = nil, time.Time{}
	} else {
		e.dueAt = e.lastPublish.Add(p.o.Debounce)
	}
	listeners := p.delivered
	p.mu.Unlock()
	if superseded {
		p.add(id, p.o.Debounce)
	}
	for _, f := range listeners {
		f(id, status.Status(s.status))
	}
	return nil
}

// Event builds the CloudEvent of one status.
func (p *Publisher) Event(id string, st status.Status, message string) (cloudevents.Event, string, error) {
	subject := p.o.Naming.SubjectFor(p.o.ProviderName, id)
	ev := cloudevents.NewEvent(cloudevents.VersionV1)
	ev.SetID(uuid.NewString())
	ev.SetSource(expand(p.o.Naming.Source, p.o.ProviderName, id))
	ev.SetType(expand(p.o.Naming.Type, p.o.ProviderName, id))
	ev.SetSubject(subject)
	ev.SetTime(time.Now().UTC())
	if err := ev.SetData(cloudevents.ApplicationJSON, Data{ID: id, Status: string(st), Message: message}); err != nil {
		return ev, "", err
	}
	return ev, subject, ev.Validate()
}

func (p *Publisher) publish(id string, s state) error {
	jsp := p.js.Load()
	nc := p.conn.Load()
	if jsp == nil || nc == nil {
		return errors.New("NATS not connected yet")
	}
	ev, subject, err := p.Event(id, status.Status(s.status), s.message)
	if err != nil {
		return fmt.Errorf("building the CloudEvent: %w", err)
	}
	payload, err := json.Marshal(ev) // structured mode: the whole event is the message
	if err != nil {
		return err
	}
	ctx, cancel := context.WithTimeout(context.Background(), p.o.Timeout)
	defer cancel()
	if !p.noStreamFor(subject) {
		_, err = (*jsp).Publish(ctx, subject, payload)
		switch {
		case err == nil:
			return nil
		case errors.Is(err, jetstream.ErrNoStreamResponse) || errors.Is(err, nats.ErrNoResponders):
		case errors.Is(err, context.DeadlineExceeded) || errors.Is(err, nats.ErrTimeout):
			// A core subscriber on the subject receives the publish but never acks it: ask whether any stream
			// captures the subject before retrying.
			lctx, lcancel := context.WithTimeout(context.Background(), p.o.Timeout)
			_, lerr := (*jsp).StreamNameBySubject(lctx, subject)
			lcancel()
			if !errors.Is(lerr, jetstream.ErrStreamNotFound) {
				return err
			}
		default:
			return err
		}
		p.markNoStream(subject)
	}
	// No stream captures this subject: deliver it as a plain NATS message (not persisted).
	if p.fellBack.CompareAndSwap(false, true) {
		p.log.Warn("no JetStream stream captures the status subject; publishing with core NATS (messages are not persisted; create a stream for it)", "subject", subject)
	}
	if err := nc.Publish(subject, payload); err != nil {
		return err
	}
	return nc.FlushTimeout(p.o.Timeout)
}

// noStreamTTL is how long a subject known to have no stream goes straight to core NATS before JetStream is tried
// again (a stream created later is picked up within it).
const noStreamTTL = time.Minute

func (p *Publisher) noStreamFor(subject string) bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	until, ok := p.noStream[subject]
	return ok && time.Now().Before(until)
}

func (p *Publisher) markNoStream(subject string) {
	p.mu.Lock()
	if p.noStream == nil || len(p.noStream) > 10000 {
		p.noStream = map[string]time.Time{}
	}
	p.noStream[subject] = time.Now().Add(noStreamTTL)
	p.mu.Unlock()
}

type metrics struct {
	published *prometheus.CounterVec
	failed    prometheus.Counter
	retried   prometheus.Counter
	latency   prometheus.Histogram
}

func newMetrics(reg prometheus.Registerer, pending func() float64) *metrics {
	m := &metrics{
		published: prometheus.NewCounterVec(prometheus.CounterOpts{Name: "acm_sp_events_published_total", Help: "Status events acknowledged by NATS, by status."}, []string{"status"}),
		failed:    prometheus.NewCounter(prometheus.CounterOpts{Name: "acm_sp_events_failed_total", Help: "Status event publish attempts that failed."}),
		retried:   prometheus.NewCounter(prometheus.CounterOpts{Name: "acm_sp_events_retried_total", Help: "Status events scheduled for another attempt."}),
		latency: prometheus.NewHistogram(prometheus.HistogramOpts{Name: "acm_sp_events_publish_seconds", Help: "Time to publish one status event and receive its ack.",
			Buckets: []float64{.0005, .001, .0025, .005, .01, .025, .05, .1, .25, .5, 1, 2.5, 5}}),
	}
	if reg != nil {
		reg.MustRegister(m.published, m.failed, m.retried, m.latency,
			prometheus.NewGaugeFunc(prometheus.GaugeOpts{Name: "acm_sp_events_pending", Help: "Clusters with a status not yet delivered."}, pending))
	}
	return m
}
