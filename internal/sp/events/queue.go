package events

import (
	"context"
	"time"

	"github.com/dcm-sp/acm-cluster-sp/internal/sp/status"
)

// Per-instance state between reports and publishes: latest wins, the debounce window, the resync backlog.

type state struct {
	status, message string
	out             status.Output
}

type entry struct {
	pending     *state    // newest status not yet delivered
	acked       *state    // last status the bus acknowledged
	ackedGen    uint64    // resync generation of that ack
	lastPublish time.Time // end of the last successful publish (debounce window start)
	prevPublish time.Time // end of the successful publish before it
	lastNews    bool      // the last publish delivered a new status (windowEnd: its burst may follow early)
	since       time.Time // when the oldest change not yet delivered was reported (zero: none)
	dueAt       time.Time // when the pending status is scheduled
	forget      bool      // drop the entry once pending is delivered
	backlog     bool      // pending is an unchanged re-publish waiting in the backlog, not in the queue
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
	if e.pending == nil || e.backlog {
		e.since = now
	}
	e.backlog = false // a change: scheduled now (its place in the backlog, if any, is skipped)
	e.pending = &s
	due := e.due(now, s, p.o)
	// A publish already scheduled no later than due finds the new due when it runs and waits for it.
	scheduled := !e.dueAt.IsZero() && !e.dueAt.After(due)
	e.dueAt = due
	p.mu.Unlock()
	if !scheduled {
		p.add(id, max(due.Sub(now), 0))
	}
}

// settleFor is how long a change must stay unchanged before it is published: a new status (or a cluster's first)
// is news and waits for nothing but the debounce window, so a status that lasts only a moment (READY just before a
// DELETE) is not coalesced away by the settle time; a change of message within the status the bus last acknowledged
// (conditions written one after the other) settles.
func settleFor(acked *state, s state, settle time.Duration) time.Duration {
	if acked == nil || acked.status != s.status {
		return 0
	}
	return settle
}

// due is when the entry's pending change s, reported at now, is published.
func (e *entry) due(now time.Time, s state, o Options) time.Time {
	return publishAt(now, e.since, windowEnd(e.lastPublish, e.prevPublish, e.lastNews, o.Debounce), settleFor(e.acked, s, o.Settle), o.Debounce)
}

// publishAt is when a change reported at now is published: once the cluster's status has stayed unchanged for
// settle (the trailing edge: a burst of changes goes out as one event, its last), but no later than debounce after
// the oldest change not yet delivered (since: a cluster that keeps changing is still reported), and never sooner than
// notBefore (windowEnd). settle 0 publishes at once, debounce 0 never waits.
func publishAt(now, since, notBefore time.Time, settle, debounce time.Duration) time.Time {
	due := now.Add(settle)
	if limit := since.Add(debounce); due.After(limit) {
		due = limit
	}
	if due.Before(now) {
		due = now
	}
	if notBefore.After(due) {
		due = notBefore
	}
	return due
}

// windowEnd is the earliest moment a cluster's next event may go out, given its last two publishes: debounce after
// the last one (one event per cluster per window), except after a new status that itself came at least a window
// after the publish before it — the rest of the burst it began (its conditions' messages, written one after the
// other) follows as soon as it has settled instead of a window later. So a cluster sends at most two events in any
// window, the second only right after a new status. Zero: no publish yet.
func windowEnd(lastPublish, prevPublish time.Time, lastNews bool, debounce time.Duration) time.Time {
	if lastPublish.IsZero() {
		return time.Time{}
	}
	if lastNews && (prevPublish.IsZero() || !lastPublish.Before(prevPublish.Add(debounce))) {
		return lastPublish
	}
	return lastPublish.Add(debounce)
}

// add schedules an instance's publish (a no-op while not running: Start picks up everything pending).
func (p *Publisher) add(id string, after time.Duration) { p.loop.AddAfter(id, after) }

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
	for _, id := range ids {
		p.loop.Forget(id)
		p.add(id, 0)
	}
}

// feedBacklog moves re-publishes from the backlog to the queue while the queue holds fewer than Workers items,
// until ctx ends.
func (p *Publisher) feedBacklog(ctx context.Context) {
	wait := time.NewTimer(time.Hour)
	defer wait.Stop()
	for {
		var ids []string
		p.mu.Lock()
		for room := p.o.Workers - p.loop.Len(); room > len(ids) && len(p.backlog) > 0; {
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
			p.loop.Add(id)
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
