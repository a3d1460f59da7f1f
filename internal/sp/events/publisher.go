// Package events publishes every cluster's status changes as CloudEvents (structured JSON, specversion 1.0) on
// NATS JetStream, acknowledged.
//
// Per cluster the publisher keeps the last status the bus acknowledged and the newest status not yet delivered
// (latest wins). The first change of a cluster goes out at once; further changes within the debounce window after
// a publish are coalesced and sent when the window ends. A failed publish is retried with exponential backoff,
// forever; a status is marked delivered only after the JetStream ack, so nothing that was not superseded is lost.
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
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"os"
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

	"github.com/dcm-sp/acm-cluster-sp/internal/sp/redact"
	"github.com/dcm-sp/acm-cluster-sp/internal/sp/status"
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

// Credentials are how the publisher proves itself to NATS, through nats.go's own options. Files are read when a
// connection is made, so rotated credentials are picked up at the next reconnect.
type Credentials struct {
	CredsFile    string // user JWT + NKey seed (.creds)
	NkeySeedFile string
	User         string // with PasswordFile
	PasswordFile string
	CAFile       string // server verification (TLS)
	CertFile     string // client certificate (mutual TLS), with KeyFile
	KeyFile      string
}

// natsOptions turns the credentials into nats.go options.
func (c Credentials) natsOptions() ([]nats.Option, error) {
	var opts []nats.Option
	if c.CredsFile != "" {
		opts = append(opts, nats.UserCredentials(c.CredsFile))
	}
	if c.NkeySeedFile != "" {
		o, err := nats.NkeyOptionFromSeed(c.NkeySeedFile)
		if err != nil {
			return nil, fmt.Errorf("natsNkeySeedFile %s: not a valid NKey seed file", c.NkeySeedFile)
		}
		opts = append(opts, o)
	}
	if c.User != "" {
		if _, err := readSecretFile(c.PasswordFile); err != nil {
			return nil, fmt.Errorf("natsPasswordFile: %w", err)
		}
		user, file := c.User, c.PasswordFile
		opts = append(opts, nats.UserInfoHandler(func() (string, string) {
			pw, _ := readSecretFile(file)
			return user, pw
		}))
	}
	if c.CAFile != "" {
		opts = append(opts, nats.RootCAs(c.CAFile))
	}
	if c.CertFile != "" {
		opts = append(opts, nats.ClientCert(c.CertFile, c.KeyFile))
	}
	return opts, nil
}

// readSecretFile reads a one-line secret; errors name the file, never its content.
func readSecretFile(path string) (string, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return "", fmt.Errorf("cannot read %s", path)
	}
	return strings.TrimRight(string(data), "\r\n"), nil
}

// Options configure a Publisher.
type Options struct {
	URL          string // may carry user:password; shown redacted everywhere
	Credentials  Credentials
	ProviderName string
	Naming       Naming
	Debounce     time.Duration // coalescing window after a publish (default 1s; 0 = none)
	RetryMin     time.Duration // first retry delay (default 1s)
	RetryMax     time.Duration // longest retry delay (default 30s)
	Timeout      time.Duration // one publish attempt (default 5s)
	Workers      int           // parallel publishes (default 8)
	// UpdatingStatus is the status string UPDATING is published as (config updatingStatus): UPDATING by default,
	// or DCM's PROGRESSING (DCM folded its UPDATING into PROGRESSING).
	UpdatingStatus string
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

// Data is the CloudEvent payload: the instance id, the status and its message (what SPM stores), and what the
// cluster produced (output_spec: its endpoints once known, never a secret), which DCM's control plane reads.
type Data struct {
	ID         string         `json:"id"`
	Status     string         `json:"status"`
	Message    string         `json:"message"`
	OutputSpec *status.Output `json:"output_spec,omitempty"`
}

type state struct {
	status, message string
	out             status.Output
}

type entry struct {
	pending     *state    // newest status not yet delivered
	acked       *state    // last status the bus acknowledged
	ackedGen    uint64    // resync generation of that ack
	lastPublish time.Time // end of the last successful publish (debounce window start)
	dueAt       time.Time // when the pending status is scheduled
	forget      bool      // drop the entry once pending is delivered
	backlog     bool      // pending is an unchanged re-publish waiting in the backlog, not in the queue
}

// Publisher turns status reports into acknowledged CloudEvents.
type Publisher struct {
	o     Options
	log   *slog.Logger
	queue atomic.Pointer[workqueue.TypedRateLimitingInterface[string]] // set while Start runs (a leadership term)
	m     *metrics

	conn atomic.Pointer[nats.Conn]
	js   atomic.Pointer[jetstream.JetStream]

	// terms orders leadership terms: a term's Start returns only after its workers stopped and its queue was
	// cleared, and the next term's Start begins only then.
	terms sync.Mutex

	mu        sync.Mutex
	entries   map[string]*entry
	backlog   []string      // ids of re-publishes in resync order (an id whose entry is no longer backlog is skipped)
	fed       chan struct{} // a re-publish joined the backlog
	stream    streamState
	gen       uint64
	delivered []func(id string, st status.Status)
}

// streamState is what the publisher last learned about the stream that stores its subjects.
type streamState struct {
	known   bool      // a publish or a probe has answered
	name    string    // the stream capturing the subjects ("" = none)
	checked time.Time // when
	ensured time.Time // last CreateStream attempt
	err     string    // why the last CreateStream attempt failed
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
	return p
}

// Options are the options the publisher runs with (defaults applied).
func (p *Publisher) Options() Options { return p.o }

// Connect dials NATS without blocking: an unreachable server is retried in the background, forever.
func (p *Publisher) Connect() error {
	creds, err := p.o.Credentials.natsOptions()
	if err != nil {
		return err
	}
	nc, err := nats.Connect(p.o.URL, append(creds,
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
		nats.ErrorHandler(func(_ *nats.Conn, _ *nats.Subscription, err error) {
			p.log.Warn("NATS error", "error", err)
		}),
	)...)
	if err != nil {
		return fmt.Errorf("NATS %s: %w", redact.URL(p.o.URL), err)
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

// Connected reports the NATS connection state for the health check, which answers unauthenticated callers: it
// names no URL, host or credential.
func (p *Publisher) Connected() (bool, string) {
	nc := p.conn.Load()
	if nc == nil {
		return false, "not connected"
	}
	if nc.IsConnected() {
		return true, "connected"
	}
	msg := strings.ToLower(nc.Status().String())
	if err := nc.LastError(); err != nil {
		msg += ": " + redact.Cause(err)
	}
	return false, msg
}

// OnDelivered registers f to be called after a status was acknowledged (the reconciler waits for DELETED).
func (p *Publisher) OnDelivered(f func(id string, st status.Status)) {
	p.mu.Lock()
	p.delivered = append(p.delivered, f)
	p.mu.Unlock()
}

// Report hands over the current status of an instance. It is queued when it differs (status, message or output)
// from what the bus last acknowledged in this resync generation; a newer report replaces an older undelivered one.
func (p *Publisher) Report(id string, r status.Report) {
	s := state{string(r.Status), r.Message, r.Output}
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
	e.forget = false
	if e.pending != nil && *e.pending == s {
		p.mu.Unlock()
		return
	}
	if e.pending == nil && e.acked != nil && *e.acked == s {
		// Unchanged since its last ack, reported again after a resync: it waits its turn in the backlog.
		e.pending, e.backlog = &s, true
		p.backlog = append(p.backlog, id)
		p.mu.Unlock()
		select {
		case p.fed <- struct{}{}:
		default:
		}
		return
	}
	e.backlog = false // a change: scheduled now (its place in the backlog, if any, is skipped)
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
		if e.pending != nil && !e.backlog {
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
// only, and may be called again after it returned (a new leadership term); terms never overlap: a Start waits for
// the previous one to have returned. At the end of a term the publisher forgets every instance: the next leader
// (maybe this replica again) re-reports them all from the hub.
func (p *Publisher) Start(ctx context.Context) error {
	p.terms.Lock()
	defer p.terms.Unlock()
	if ctx.Err() != nil {
		return nil
	}
	if p.conn.Load() == nil {
		if err := p.Connect(); err != nil {
			return err
		}
	}
	q := workqueue.NewTypedRateLimitingQueueWithConfig(
		workqueue.NewTypedItemExponentialFailureRateLimiter[string](p.o.RetryMin, p.o.RetryMax),
		workqueue.TypedRateLimitingQueueConfig[string]{Name: "events"})
	// Publishes in flight finish, and the final flush runs, after the term's ctx ended: they are bounded by their
	// own timeouts instead.
	pctx := context.WithoutCancel(ctx)
	p.queue.Store(&q)
	if p.o.CreateStream {
		p.ensureStream(pctx)
	}
	p.retryNow() // whatever is pending from before this term
	var wg sync.WaitGroup
	feedCtx, stopFeed := context.WithCancel(ctx)
	wg.Add(1)
	go func() {
		defer wg.Done()
		p.feedBacklog(feedCtx, q)
	}()
	for i := 0; i < p.o.Workers; i++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for p.processNext(pctx, q) {
			}
		}()
	}
	<-ctx.Done()
	fctx, cancel := context.WithTimeout(pctx, 5*time.Second)
	p.flush(fctx)
	cancel()
	p.queue.CompareAndSwap(&q, nil)
	stopFeed()
	q.ShutDown()
	wg.Wait()
	p.mu.Lock()
	clear(p.entries)
	p.backlog = nil
	p.mu.Unlock()
	return nil
}

// feedBacklog moves re-publishes from the backlog to the queue while the queue holds fewer than Workers items,
// until ctx ends.
func (p *Publisher) feedBacklog(ctx context.Context, q workqueue.TypedRateLimitingInterface[string]) {
	wait := time.NewTimer(time.Hour)
	defer wait.Stop()
	for {
		var ids []string
		p.mu.Lock()
		for room := p.o.Workers - q.Len(); room > len(ids) && len(p.backlog) > 0; {
			id := p.backlog[0]
			p.backlog = p.backlog[1:]
			if e := p.entries[id]; e != nil && e.backlog {
				e.backlog, e.dueAt = false, time.Now()
				ids = append(ids, id)
			}
		}
		more := len(p.backlog) > 0
		if !more {
			p.backlog = nil // let the drained array go
		}
		p.mu.Unlock()
		for _, id := range ids {
			q.Add(id)
		}
		// With more waiting, look again shortly (the queue drains as publishes are acked); else wait for a resync.
		idle := time.Hour
		if more {
			idle = 5 * time.Millisecond
		}
		wait.Reset(idle)
		select {
		case <-ctx.Done():
			return
		case <-p.fed:
		case <-wait.C:
		}
	}
}

// Close closes the NATS connection (process shutdown). Every publish waited for its ack, so nothing is buffered.
func (p *Publisher) Close() {
	if nc := p.conn.Load(); nc != nil {
		nc.Close()
	}
}

// flush tries once more to publish every pending status, until ctx ends.
func (p *Publisher) flush(ctx context.Context) {
	p.mu.Lock()
	var ids []string
	for id, e := range p.entries {
		if e.pending != nil {
			ids = append(ids, id)
		}
	}
	p.mu.Unlock()
	for i, id := range ids {
		if ctx.Err() != nil {
			p.log.Warn("end of term: statuses left unpublished; the next leader republishes them", "count", len(ids)-i)
			return
		}
		_ = p.publishPending(ctx, id, true)
	}
}

func (p *Publisher) processNext(ctx context.Context, q workqueue.TypedRateLimitingInterface[string]) bool {
	id, shutdown := q.Get()
	if shutdown {
		return false
	}
	defer q.Done(id)
	switch p.publishPending(ctx, id, false) {
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

// publishPending publishes the instance's pending status and records the outcome; now skips the debounce (the
// end of a term).
func (p *Publisher) publishPending(ctx context.Context, id string, now bool) error {
	p.mu.Lock()
	e := p.entries[id]
	if e == nil || e.pending == nil {
		p.mu.Unlock()
		return errNothing
	}
	if wait := time.Until(e.dueAt); wait > 0 && !now {
		p.mu.Unlock()
		p.add(id, wait) // the debounce window has not ended yet
		return errNothing
	}
	s := *e.pending
	p.mu.Unlock()

	began := time.Now()
	err := p.publish(ctx, id, s)
	p.m.latency.Observe(time.Since(began).Seconds())
	if err != nil {
		p.m.failed.Inc()
		level := slog.LevelWarn
		if errors.Is(err, errNoStream) || errors.Is(err, errNotLeading) {
			// errNoStream is said once, loudly, by setStream (and the health check and a metric keep saying it);
			// errNotLeading ends with the term.
			level = slog.LevelDebug
		}
		p.log.Log(ctx, level, "status event not delivered; will retry", "id", id, "status", s.status, "error", err)
		return err
	}
	p.m.published.WithLabelValues(s.status).Inc()

	p.mu.Lock()
	e.acked, e.ackedGen, e.lastPublish = &s, p.gen, time.Now()
	superseded := e.pending != nil && *e.pending != s
	if !superseded {
		e.pending, e.dueAt = nil, time.Time{}
		if e.forget && p.entries[id] == e {
			delete(p.entries, id)
		}
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
func (p *Publisher) Event(id string, r status.Report) (cloudevents.Event, string, error) {
	st := r.Status
	subject := p.o.Naming.SubjectFor(p.o.ProviderName, id)
	ev := cloudevents.NewEvent(cloudevents.VersionV1)
	ev.SetID(uuid.NewString())
	ev.SetSource(expand(p.o.Naming.Source, p.o.ProviderName, id))
	ev.SetType(expand(p.o.Naming.Type, p.o.ProviderName, id))
	ev.SetSubject(subject)
	ev.SetTime(time.Now().UTC())
	wire := string(st)
	if st == status.Updating && p.o.UpdatingStatus != "" {
		wire = p.o.UpdatingStatus
	}
	d := Data{ID: id, Status: wire, Message: r.Message}
	if !r.Output.Empty() {
		d.OutputSpec = &r.Output
	}
	if err := ev.SetData(cloudevents.ApplicationJSON, d); err != nil {
		return ev, "", err
	}
	return ev, subject, ev.Validate()
}

// errNoStream: the server has JetStream but no stream captures the subject; the status is held and retried.
var errNoStream = errors.New("no JetStream stream captures the subject")

// errNotLeading: the replica's leadership is not certain any more (Fence); the next leader re-reports.
var errNotLeading = errors.New("not certainly leading: held for the next leader")

func (p *Publisher) publish(ctx context.Context, id string, s state) error {
	jsp := p.js.Load()
	if jsp == nil {
		return errors.New("NATS not connected yet")
	}
	if p.o.Fence != nil && !p.o.Fence() {
		return errNotLeading
	}
	ev, subject, err := p.Event(id, status.Report{Status: status.Status(s.status), Message: s.message, Output: s.out})
	if err != nil {
		return fmt.Errorf("building the CloudEvent: %w", err)
	}
	payload, err := json.Marshal(ev) // structured mode: the whole event is the message
	if err != nil {
		return err
	}
	actx, cancel := context.WithTimeout(ctx, p.o.Timeout)
	defer cancel()
	ack, err := (*jsp).Publish(actx, subject, payload)
	if err == nil {
		p.setStream(ack.Stream)
		return nil
	}
	// No responders: nothing stores the subject. A timeout: perhaps a core subscriber received the publish and
	// will never ack it. Either way, ask whether any stream captures the subject before retrying.
	if errors.Is(err, jetstream.ErrNoStreamResponse) || errors.Is(err, nats.ErrNoResponders) ||
		errors.Is(err, context.DeadlineExceeded) || errors.Is(err, nats.ErrTimeout) {
		pctx, pcancel := context.WithTimeout(ctx, p.o.Timeout)
		name, perr := p.probeStream(pctx)
		pcancel()
		if perr == nil && name == "" {
			if p.o.CreateStream {
				p.ensureStream(ctx)
			}
			return fmt.Errorf("%w %s", errNoStream, subject)
		}
	}
	return err
}

// StreamName is the stream the publisher creates with CreateStream: acm-cluster-sp-<providerName>.
func (p *Publisher) StreamName() string {
	return "acm-cluster-sp-" + strings.Map(func(r rune) rune {
		if r == '-' || r == '_' || (r >= 'a' && r <= 'z') || (r >= 'A' && r <= 'Z') || (r >= '0' && r <= '9') {
			return r
		}
		return '_'
	}, p.o.ProviderName)
}

// subjects is the subject filter covering every instance's events.
func (p *Publisher) subjects() string { return p.o.Naming.SubjectFor(p.o.ProviderName, "*") }

// probeStream asks JetStream which stream captures the subjects ("" when none) and records the answer.
func (p *Publisher) probeStream(ctx context.Context) (string, error) {
	jsp := p.js.Load()
	if jsp == nil {
		return "", errors.New("NATS not connected yet")
	}
	name, err := (*jsp).StreamNameBySubject(ctx, p.subjects())
	if errors.Is(err, jetstream.ErrStreamNotFound) {
		name, err = "", nil
	}
	if err != nil {
		return "", err
	}
	p.setStream(name)
	return name, nil
}

func (p *Publisher) setStream(name string) {
	p.mu.Lock()
	was := p.stream
	p.stream.known, p.stream.name, p.stream.checked = true, name, time.Now()
	p.mu.Unlock()
	switch {
	case name == "" && (!was.known || was.name != ""):
		p.log.Error("no JetStream stream captures the status subjects: statuses are held, not delivered, until one does (create one, or set statusCreateStream)",
			"subjects", p.subjects())
	case name != "" && was.known && was.name == "":
		p.log.Info("a JetStream stream captures the status subjects again; delivering what was held", "stream", name)
		go p.retryNow()
	}
}

// ensureStreamEvery bounds how often a missing stream is created again.
const ensureStreamEvery = 10 * time.Second

// ensureStream creates or updates the publisher's own stream for its subjects, unless another stream captures them.
func (p *Publisher) ensureStream(ctx context.Context) {
	jsp := p.js.Load()
	p.mu.Lock()
	if jsp == nil || time.Since(p.stream.ensured) < ensureStreamEvery {
		p.mu.Unlock()
		return
	}
	p.stream.ensured = time.Now()
	p.mu.Unlock()
	ctx, cancel := context.WithTimeout(ctx, p.o.Timeout)
	defer cancel()
	failed := func(err error) {
		msg := redact.Cause(err)
		p.mu.Lock()
		p.stream.err = msg
		p.mu.Unlock()
		p.log.Error("cannot create the status stream", "stream", p.StreamName(), "error", msg)
	}
	name, err := p.probeStream(ctx)
	if err != nil {
		failed(err)
		return
	}
	if name != "" && name != p.StreamName() {
		return // another stream (DCM's) stores them
	}
	_, err = (*jsp).CreateOrUpdateStream(ctx, jetstream.StreamConfig{
		Name:        p.StreamName(),
		Description: "Status events of acm-cluster-sp provider " + p.o.ProviderName + " (created by the SP: statusCreateStream)",
		Subjects:    []string{p.subjects()},
		Retention:   jetstream.LimitsPolicy,
		Discard:     jetstream.DiscardOld,
		MaxAge:      p.o.StreamMaxAge,
		Storage:     jetstream.FileStorage,
	})
	if err != nil {
		failed(err)
		return
	}
	p.mu.Lock()
	p.stream.err = ""
	p.mu.Unlock()
	if name == "" {
		p.log.Info("created the status stream", "stream", p.StreamName(), "subjects", p.subjects(), "maxAge", p.o.StreamMaxAge.String())
	}
	p.setStream(p.StreamName())
}

// StreamHealth is the `events` health check: whether a JetStream stream stores the status events. It asks the
// server when connected and otherwise reports what it last learned. It names subjects and streams, never a URL.
func (p *Publisher) StreamHealth(ctx context.Context) (bool, string) {
	if ok, _ := p.Connected(); ok {
		if _, err := p.probeStream(ctx); err != nil {
			return false, "cannot ask JetStream which stream stores the status events: " + redact.Cause(err)
		}
	}
	p.mu.Lock()
	st := p.stream
	p.mu.Unlock()
	suffix := ""
	if ok, _ := p.Connected(); !ok {
		if !st.known {
			return true, "not checked yet: NATS not connected (see the nats check)"
		}
		suffix = " (last known: NATS not connected)"
	}
	if st.name != "" {
		return true, fmt.Sprintf("stream %s stores %s%s", st.name, p.subjects(), suffix)
	}
	msg := fmt.Sprintf("no JetStream stream captures %s: %.0f status(es) held, not delivered%s; create a stream for it or set statusCreateStream",
		p.subjects(), p.pendingCount(), suffix)
	if st.err != "" {
		msg += "; creating stream " + p.StreamName() + " failed: " + st.err
	}
	return false, msg
}

func (p *Publisher) noStreamGauge() float64 {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.stream.known && p.stream.name == "" {
		return 1
	}
	return 0
}

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
