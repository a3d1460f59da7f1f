package events

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/dcm-sp/acm-cluster-sp/internal/sp/leaderloop"
	"github.com/dcm-sp/acm-cluster-sp/internal/sp/status"
)

// Publishing one instance's pending status and recording its acknowledgement; failures are retried by the
// term's loop with backoff.

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

// handle is the term's handler (leaderloop.Handler): it publishes the instance's pending status. A publish in
// flight finishes after the term's ctx ended, bounded by its own timeout; a failure is retried with backoff.
func (p *Publisher) handle(ctx context.Context, id string) (time.Duration, error) {
	err := p.publishPending(context.WithoutCancel(ctx), id, false)
	if err != nil && !errors.Is(err, errNothing) {
		p.m.retried.Inc()
	}
	return 0, err
}

// errNothing: nothing to publish now (delivered already, or its debounce window has not ended: scheduled then).
// The instance's backoff is kept.
var errNothing = fmt.Errorf("nothing pending: %w", leaderloop.ErrNothingDone)

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
	at := time.Now()
	e.lastNews = e.acked == nil || e.acked.status != s.status
	e.acked, e.ackedGen, e.prevPublish, e.lastPublish = &s, p.gen, e.lastPublish, at
	superseded := e.pending != nil && *e.pending != s
	var wait time.Duration
	if !superseded {
		e.pending, e.dueAt, e.since = nil, time.Time{}, time.Time{}
		if e.forget && p.entries[id] == e {
			delete(p.entries, id)
		}
	} else {
		e.since = at // reported while this publish was under way
		e.dueAt = e.due(at, *e.pending, p.o)
		wait = e.dueAt.Sub(at)
	}
	listeners := p.delivered
	p.mu.Unlock()
	if superseded {
		p.add(id, wait)
	}
	for _, f := range listeners {
		f(id, status.Status(s.status))
	}
	return nil
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
