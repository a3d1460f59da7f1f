// Package leaderloop runs the SP's leader-only work: the Elector decides, through a fenced Lease, which replica
// leads and runs the leader's tasks during each term; a Loop is the one shape of those tasks' work loops — during
// each term a fresh rate-limited work queue (client-go's workqueue) and a fixed number of workers that hand each key
// to a handler and schedule it again as the handler's outcome says. Between terms a loop holds no queue: keys added
// then are dropped, because every term starts from a full resync of its own.
package leaderloop

import (
	"context"
	"errors"
	"sync"
	"sync/atomic"
	"time"

	"k8s.io/client-go/util/workqueue"
)

// Handler handles one key. Its outcome schedules the key again:
//   - an error: retried with exponential backoff (the key's failure count grows);
//   - ErrNothingDone: nothing more (the key's failure count is kept; the handler scheduled it itself if needed);
//   - after > 0: looked at again then (failure count reset);
//   - otherwise: done until the next Add (failure count reset).
type Handler func(ctx context.Context, key string) (after time.Duration, err error)

// ErrNothingDone is a Handler's answer when the key needed no work now: its backoff state is left as it is.
var ErrNothingDone = errors.New("nothing done")

// Queue is the part of client-go's rate-limiting work queue a worker uses.
type Queue = workqueue.TypedRateLimitingInterface[string]

// Options configure a Loop.
type Options struct {
	Name     string        // the queue's name (client-go's workqueue metrics and logs)
	Workers  int           // parallel handlers (default 1)
	RetryMin time.Duration // first retry delay after an error (default 100ms)
	RetryMax time.Duration // longest retry delay (default 30s)
	Handle   Handler
}

// Loop runs a handler over keys during leadership terms; see the package documentation.
type Loop struct {
	o     Options
	queue atomic.Pointer[Queue] // set while a term runs
	// terms orders terms: a Run begins only after the previous one returned (its workers stopped).
	terms sync.Mutex
}

// New prepares a loop; nothing runs until Run.
func New(o Options) *Loop {
	if o.Workers <= 0 {
		o.Workers = 1
	}
	if o.RetryMin == 0 {
		o.RetryMin = 100 * time.Millisecond
	}
	if o.RetryMax == 0 {
		o.RetryMax = 30 * time.Second
	}
	return &Loop{o: o}
}

// Term hooks the owner's work into a term; each may be nil.
type Term struct {
	// Begin runs once the term's queue takes keys and before any worker runs: what it adds is the term's first
	// work, in order.
	Begin func(ctx context.Context)
	// While runs beside the workers and returns once ctx has ended (periodic resyncs, a final flush); the queue
	// and the workers keep running until it has returned. Without it the term lasts until ctx ends.
	While func(ctx context.Context)
	// End runs after the workers stopped and before the next term can begin (dropping the term's memory).
	End func()
}

// Run runs one term until ctx ends: a fresh queue, Begin, the workers beside While; then the queue takes no more
// keys and is shut down, every worker finishes the key it held, and End runs. Workers get ctx: a
// handler that must finish after the term ended detaches from it itself. Terms never overlap: a Run waits for
// the previous one to have returned, and does nothing when ctx ended meanwhile.
func (l *Loop) Run(ctx context.Context, t Term) {
	l.terms.Lock()
	defer l.terms.Unlock()
	if ctx.Err() != nil {
		return
	}
	q := workqueue.NewTypedRateLimitingQueueWithConfig(
		workqueue.NewTypedItemExponentialFailureRateLimiter[string](l.o.RetryMin, l.o.RetryMax),
		workqueue.TypedRateLimitingQueueConfig[string]{Name: l.o.Name})
	l.queue.Store(&q)
	if t.Begin != nil {
		t.Begin(ctx)
	}
	var wg sync.WaitGroup
	for range l.o.Workers {
		wg.Go(func() {
			for Process(ctx, q, l.o.Handle) {
			}
		})
	}
	if t.While != nil {
		t.While(ctx)
	} else {
		<-ctx.Done()
	}
	l.queue.CompareAndSwap(&q, nil)
	q.ShutDown()
	wg.Wait()
	if t.End != nil {
		t.End()
	}
}

// Every is a Term.While that calls f every period until the term's ctx ends (periodic resyncs and checks); app
// runs its periodic work outside terms (the hub-observation follower, the unauthenticated warning) on it too.
func Every(period time.Duration, f func(ctx context.Context)) func(ctx context.Context) {
	return func(ctx context.Context) {
		t := time.NewTicker(period)
		defer t.Stop()
		for {
			select {
			case <-ctx.Done():
				return
			case <-t.C:
				f(ctx)
			}
		}
	}
}

// Process is one step of a worker: it takes the next key from q (false: q was shut down), hands it to h and
// schedules it as h's outcome says (see Handler).
func Process(ctx context.Context, q Queue, h Handler) bool {
	key, shutdown := q.Get()
	if shutdown {
		return false
	}
	defer q.Done(key)
	after, err := h(ctx, key)
	switch {
	case errors.Is(err, ErrNothingDone):
	case err != nil:
		q.AddRateLimited(key)
	case after > 0:
		q.Forget(key)
		q.AddAfter(key, after)
	default:
		q.Forget(key)
	}
	return true
}

// Running reports whether a term runs (its queue takes keys).
func (l *Loop) Running() bool { return l.queue.Load() != nil }

// Add queues key now (a no-op between terms).
func (l *Loop) Add(key string) {
	if q := l.queue.Load(); q != nil {
		(*q).Add(key)
	}
}

// AddAfter queues key once d has passed (a no-op between terms; d <= 0 is now).
func (l *Loop) AddAfter(key string, d time.Duration) {
	if q := l.queue.Load(); q != nil {
		if d > 0 {
			(*q).AddAfter(key, d)
		} else {
			(*q).Add(key)
		}
	}
}

// Forget resets key's failure count, so its next retry waits the shortest delay again.
func (l *Loop) Forget(key string) {
	if q := l.queue.Load(); q != nil {
		(*q).Forget(key)
	}
}

// Len is how many keys wait in the queue now (0 between terms), those only scheduled for later excluded.
func (l *Loop) Len() int {
	if q := l.queue.Load(); q != nil {
		return (*q).Len()
	}
	return 0
}
