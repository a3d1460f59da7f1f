package leaderloop

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/dcm-sp/acm-cluster-sp/internal/devtest/testjournal"
	"github.com/dcm-sp/acm-cluster-sp/internal/devtest/testwait"
)

const within = 10 * time.Second

// journal records what happened, in order, with when.
type journal = testjournal.Journal

// recordingQueue hands out the keys it holds and journals what the worker does with each.
type recordingQueue struct {
	Queue // unused methods
	j     *journal
	keys  []string
}

func (q *recordingQueue) Get() (string, bool) {
	if len(q.keys) == 0 {
		return "", true
	}
	k := q.keys[0]
	q.keys = q.keys[1:]
	return k, false
}
func (q *recordingQueue) Done(k string)           { q.j.Add("done %s", k) }
func (q *recordingQueue) Forget(k string)         { q.j.Add("forget %s", k) }
func (q *recordingQueue) AddRateLimited(k string) { q.j.Add("backoff %s", k) }
func (q *recordingQueue) AddAfter(k string, d time.Duration) {
	q.j.Add("after %s %v", k, d)
}

// What a worker does with the queue after one key, by the handler's outcome; every key is marked done; a
// shut-down queue ends the worker.
func TestProcessSchedulesByOutcome(t *testing.T) {
	for _, c := range []struct {
		name  string
		after time.Duration
		err   error
		want  []string
	}{
		{name: "error: retried with backoff, failure count kept", err: errors.New("no"), want: []string{"backoff a", "done a"}},
		{name: "wrapped nothing done: left alone", err: fmt.Errorf("debounce: %w", ErrNothingDone), want: []string{"done a"}},
		{name: "a deadline: forgotten, scheduled then", after: time.Minute, want: []string{"forget a", "after a 1m0s", "done a"}},
		{name: "done: forgotten", want: []string{"forget a", "done a"}},
	} {
		t.Run(c.name, func(t *testing.T) {
			j := &journal{}
			q := &recordingQueue{j: j, keys: []string{"a"}}
			h := func(_ context.Context, k string) (time.Duration, error) { j.Add("handle %s", k); return c.after, c.err }
			if !Process(context.Background(), q, h) {
				t.Fatal("the worker stopped with a key in the queue")
			}
			if got, want := j.All(), append([]string{"handle a"}, c.want...); !slices.Equal(got, want) {
				t.Fatalf("calls\n  %q\nwant\n  %q", got, want)
			}
			if Process(context.Background(), q, h) {
				t.Fatal("the worker went on after the queue shut down")
			}
		})
	}
}

// term runs one term of l in the background; the returned stop ends it and waits for Run to return.
func term(t *testing.T, l *Loop, tm Term) (stop func()) {
	t.Helper()
	return testwait.Background(t, within, func(ctx context.Context) error { l.Run(ctx, tm); return nil })
}

// A term's Begin adds its first work before any worker runs; keys added during the term are handled by the
// workers; when the term ends the workers stop and keys added after it are dropped; a new term starts with an
// empty queue.
func TestTermsStartAndStopClean(t *testing.T) {
	j := &journal{}
	l := New(Options{Name: "test", Workers: 3, Handle: func(_ context.Context, k string) (time.Duration, error) {
		j.Add("handle %s", k)
		return 0, nil
	}})
	l.Add("before") // between terms: dropped
	if l.Running() || l.Len() != 0 {
		t.Fatal("a loop that never ran holds a queue")
	}
	stop := term(t, l, Term{Begin: func(context.Context) {
		j.Add("begin")
		for _, k := range []string{"a", "b", "c"} {
			l.Add(k)
		}
		j.Add("begun")
	}})
	testwait.For(t, within, "a, b, c handled", func() bool { return len(j.All()) == 5 })
	if got := j.All(); got[0] != "begin" || got[1] != "begun" {
		t.Fatalf("a worker ran before Begin returned: %q", got)
	}
	if !l.Running() {
		t.Fatal("a running term says it is not running")
	}
	l.Add("d")
	l.AddAfter("e", 10*time.Millisecond)
	testwait.For(t, within, "d and e handled", func() bool { return j.Count("handle d") == 1 && j.Count("handle e") == 1 })
	stop()
	if l.Running() {
		t.Fatal("an ended term still takes keys")
	}
	l.Add("late")
	l.AddAfter("later", 0)
	l.Forget("late")

	// A second term: its Begin ran, and its workers see only what was added in it.
	stop = term(t, l, Term{Begin: func(context.Context) { j.Add("begin 2"); l.Add("f") }})
	testwait.For(t, within, "f handled", func() bool { return j.Count("handle f") == 1 })
	stop()
	if j.Count("handle before") != 0 || j.Count("handle late") != 0 || j.Count("handle later") != 0 {
		t.Fatalf("keys added between terms were handled: %q", j.All())
	}
	if j.Count("handle a") != 1 {
		t.Fatalf("a handled %d times, want once", j.Count("handle a"))
	}
}

// The workers stop when the term ends: a worker busy with a key finishes it (its context ended), and Run returns
// only then; While runs beside the workers and the queue still takes keys until it returns; End runs last.
func TestEndOfTermStopsTheWorkers(t *testing.T) {
	j := &journal{}
	busy, final := make(chan struct{}), make(chan struct{})
	l := New(Options{Workers: 2, Handle: func(ctx context.Context, k string) (time.Duration, error) {
		if k == "final" {
			close(final)
		}
		if k == "slow" {
			close(busy)
			<-ctx.Done()
			j.Add("slow ended")
			return 0, nil
		}
		j.Add("handle %s", k)
		return 0, nil
	}})
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() {
		l.Run(ctx, Term{Begin: func(context.Context) { l.Add("slow") }, While: func(ctx context.Context) {
			<-ctx.Done()
			l.Add("final") // the end of the term: the other worker still takes it
			select {
			case <-final:
				j.Add("while returned")
			case <-time.After(within):
				j.Add("final never handled")
			}
		}, End: func() { j.Add("end") }})
		close(done)
	}()
	<-busy
	cancel()
	select {
	case <-done:
	case <-time.After(within):
		t.Fatal("Run did not return after its context ended")
	}
	got := j.All()
	if !slices.Contains(got, "slow ended") || !slices.Contains(got, "while returned") || got[len(got)-1] != "end" {
		t.Fatalf("Run returned before its workers and While, or End ran before them: %q", got)
	}
}

// Terms never overlap: a second Run waits for the first to return (its End included), and the first's end does
// not take the second's queue away; a Run whose context ended while it waited does nothing.
func TestTermsDoNotOverlap(t *testing.T) {
	j := &journal{}
	l := New(Options{Handle: func(_ context.Context, k string) (time.Duration, error) { j.Add("handle %s", k); return 0, nil }})
	stop1 := term(t, l, Term{Begin: func(context.Context) { j.Add("begin 1") }, End: func() { j.Add("end 1") }})
	testwait.For(t, within, "term 1 begun", func() bool { return j.Count("begin 1") == 1 })
	stop2 := term(t, l, Term{Begin: func(context.Context) { j.Add("begin 2") }})
	cancelled, cancel := context.WithCancel(context.Background())
	cancel()
	lateDone := make(chan struct{})
	go func() {
		l.Run(cancelled, Term{Begin: func(context.Context) { j.Add("begin cancelled") }})
		close(lateDone)
	}()
	if j.Count("begin 2") != 0 {
		t.Fatal("a second term began beside the first")
	}
	stop1()
	testwait.For(t, within, "term 2 begun", func() bool { return j.Count("begin 2") == 1 })
	if got := j.All(); slices.Index(got, "end 1") > slices.Index(got, "begin 2") {
		t.Fatalf("term 2 began before term 1's End: %q", got)
	}
	l.Add("x")
	testwait.For(t, within, "x handled in term 2", func() bool { return j.Count("handle x") == 1 })
	stop2()
	select {
	case <-lateDone:
	case <-time.After(within):
		t.Fatal("a Run whose context had ended did not return")
	}
	if j.Count("begin cancelled") != 0 {
		t.Fatalf("a term whose context had ended ran: %q", j.All())
	}
}

// A failing key is retried with exponential backoff from RetryMin, doubling, without holding up other keys;
// success resets its failure count.
func TestFailuresAreRetriedWithBackoff(t *testing.T) {
	j := &journal{}
	var mu sync.Mutex
	fails := map[string]int{"a": 3}
	l := New(Options{Workers: 1, RetryMin: 20 * time.Millisecond, RetryMax: time.Second, Handle: func(_ context.Context, k string) (time.Duration, error) {
		j.Add("try %s", k)
		mu.Lock()
		defer mu.Unlock()
		if fails[k] > 0 {
			fails[k]--
			return 0, errors.New("not yet")
		}
		j.Add("ok %s", k)
		return 0, nil
	}})
	term(t, l, Term{Begin: func(context.Context) { l.Add("a"); l.Add("b") }})
	testwait.For(t, within, "a succeeded", func() bool { return j.Count("ok a") == 1 })
	if at, b := j.Times("try a"), j.Times("ok b"); len(b) != 1 || !b[0].Before(at[1]) {
		t.Fatalf("b waited behind a's retries: %q", j.All())
	}
	at := j.Times("try a")
	if len(at) != 4 {
		t.Fatalf("a tried %d times, want 4 (3 failures, 1 success)", len(at))
	}
	for i := 1; i < len(at); i++ {
		if gap, least := at[i].Sub(at[i-1]), 20*time.Millisecond<<(i-1); gap < least {
			t.Errorf("retry %d after %v, want at least %v", i, gap, least)
		}
	}
	// Its failure count was reset by the success: a new failure waits the shortest delay again.
	mu.Lock()
	fails["a"] = 1
	mu.Unlock()
	l.Add("a")
	testwait.For(t, within, "a succeeded again", func() bool { return j.Count("ok a") == 2 })
	at = j.Times("try a")
	if gap := at[5].Sub(at[4]); gap > 500*time.Millisecond {
		t.Errorf("after a success the next retry waited %v, want the first delay again (20ms)", gap)
	}
}

// Every calls its function each period while the term runs, and returns once the term's context ended.
func TestEvery(t *testing.T) {
	j := &journal{}
	l := New(Options{Handle: func(context.Context, string) (time.Duration, error) { return 0, nil }})
	stop := term(t, l, Term{While: Every(10*time.Millisecond, func(context.Context) { j.Add("tick") })})
	testwait.For(t, within, "three ticks", func() bool { return j.Count("tick") >= 3 })
	stop()
	n := j.Count("tick")
	l.Run(context.Background(), Term{Begin: func(context.Context) { j.Add("next term") }, While: func(context.Context) {}})
	if got := j.All(); got[len(got)-1] != "next term" || j.Count("tick") != n {
		t.Fatalf("ticks after the term ended: %q", got)
	}
}

// Len counts the keys waiting for a worker (what acm_sp_queued_instances exports): not the one a worker holds,
// and none once the workers caught up.
func TestLenIsTheBacklog(t *testing.T) {
	held, release := make(chan string, 1), make(chan struct{})
	l := New(Options{Name: "test", Workers: 1, Handle: func(_ context.Context, k string) (time.Duration, error) {
		if k == "a" {
			held <- k
			<-release
		}
		return 0, nil
	}})
	stop := term(t, l, Term{})
	defer stop()
	testwait.For(t, within, "the term to run", l.Running)
	l.Add("a")
	<-held
	l.Add("b")
	l.Add("c")
	if n := l.Len(); n != 2 {
		t.Fatalf("Len %d while the only worker holds a and b, c wait; want 2", n)
	}
	close(release)
	testwait.For(t, within, "the backlog to drain", func() bool { return l.Len() == 0 })
}
