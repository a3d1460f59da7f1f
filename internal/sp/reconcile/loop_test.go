package reconcile

import (
	"context"
	"errors"
	"log/slog"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"

	"github.com/dcm-sp/acm-cluster-sp/internal/devtest/testlog"
	"github.com/dcm-sp/acm-cluster-sp/internal/devtest/testwait"
)

const within = 10 * time.Second

// What one reconcile hands back to the term's loop (which schedules by it: leaderloop.Process): a failure is an
// error (retried with backoff), a deadline is when to look again, anything else is done; each is counted.
func TestHandleSchedulesTheNextLook(t *testing.T) {
	for _, c := range []struct {
		name    string
		pending bool // a is PENDING (a deadline), else READY
		fail    bool
		result  string
		after   time.Duration
		calls   []string
	}{
		{name: "error: retried with backoff", fail: true, result: "error", calls: []string{"report a READY", "converge c-a"}},
		{name: "deadline: looked at again then", pending: true, result: "ok", after: 44*time.Minute + 10*time.Millisecond,
			calls: []string{"report a PENDING", "converge c-a"}},
		{name: "nothing pending: done", result: "ok", calls: []string{"report a READY", "converge c-a"}},
	} {
		t.Run(c.name, func(t *testing.T) {
			v := view("a", ready("c-a"), readyPool("np"))
			if c.pending {
				v = view("a", pending("c-a"))
			}
			f := newFixture(t, true, v)
			if c.fail {
				f.prov.failing("Converge", errHub, 0)
			}
			after, err := f.r.handle(context.Background(), "a")
			if (err != nil) != c.fail || after != c.after {
				t.Fatalf("handle: after %v, error %v; want after %v, error %v", after, err, c.after, c.fail)
			}
			if got := f.j.All(); !slices.Equal(got, c.calls) {
				t.Fatalf("calls\n  %q\nwant\n  %q", got, c.calls)
			}
			if n := testutil.ToFloat64(f.r.results.WithLabelValues(c.result)); n != 1 {
				t.Fatalf("acm_sp_reconciles_total{result=%q} = %v, want 1", c.result, n)
			}
		})
	}
}

// run starts the reconciler's term in the background; stop ends it and waits for Start to return.
func run(t *testing.T, r *Reconciler) (stop func()) {
	t.Helper()
	return testwait.Background(t, within, r.Start)
}

// A term catches up with the API server, then re-publishes and re-evaluates every known instance and sweeps
// orphans before any worker runs; it then follows the index's changes (registered by the wiring, not by New);
// when it ends, everything it remembered is dropped and changes are no longer queued.
func TestTermResyncsFollowsChangesAndForgetsAtTheEnd(t *testing.T) {
	j := &journal{}
	ix := newIndex(view("a", ready("c-a"), readyPool("np")), view("b", pending("c-b")), view("c", nil, readyPool("np-c")))
	prov, rep := newProv(j), newReporter(j)
	reg := prometheus.NewRegistry()
	r := New(ix, prov, rep, Options{Registry: reg, CatchUp: func(context.Context) error { j.Add("catch-up"); return nil }})
	if ix.onChange != nil {
		t.Fatal("New registered a callback with the index; the wiring does that")
	}
	ix.OnChange(r.Enqueue)
	if n, err := testutil.GatherAndCount(reg, "acm_sp_reconciles_total"); err != nil || n != 2 {
		t.Fatalf("before any reconcile: %d series of acm_sp_reconciles_total (%v), want ok and error at 0", n, err)
	}
	r.Enqueue("a") // not leading yet: a no-op, the term's resync covers it
	stop := run(t, r)

	testwait.For(t, within, "a and b reported", func() bool { return j.Has("report a READY") && j.Has("report b PENDING") })
	if got := j.All()[:3]; !slices.Equal(got, []string{"catch-up", "resync", "sweep"}) {
		t.Fatalf("the term began with %q, want catch-up, re-publish, orphan sweep", got)
	}
	if j.Count("report a READY") != 1 {
		t.Fatalf("a reconciled %d times at start, want once (the Enqueue before Start queued nothing)", j.Count("report a READY"))
	}
	known, grace := prov.sweptWith()
	for id, want := range map[string]bool{"a": true, "b": true, "c": false, "unknown": false} {
		if known(id) != want {
			t.Errorf("the orphan sweep says %s known=%v, want %v (known: a HostedCluster is in the index)", id, known(id), want)
		}
	}
	if grace != 2*time.Minute || r.Resyncs() != 1 || r.ResyncPeriod() != 10*time.Minute {
		t.Fatalf("grace %v resyncs %d period %v", grace, r.Resyncs(), r.ResyncPeriod())
	}

	ix.set(view("d", pending("c-d")))
	testwait.For(t, within, "the new instance reconciled", func() bool { return j.Has("report d PENDING") })
	r.EnqueueAll()
	testwait.For(t, within, "every instance reconciled again", func() bool {
		return j.Count("report a READY") == 2 && j.Count("report b PENDING") == 2 && j.Count("report d PENDING") == 2
	})
	if r.Remembered() != 3 {
		t.Fatalf("remembered %d instances, want the 3 with a HostedCluster", r.Remembered())
	}

	stop()
	for _, id := range []string{"a", "b", "d"} {
		if !j.Has("prov-forget "+id) || !j.Has("reporter-forget "+id) {
			t.Errorf("%s not forgotten at the end of the term: %q", id, j.All())
		}
	}
	if r.Remembered() != 0 || j.Has("prov-forget c") {
		t.Fatalf("after the term: remembered %d, calls %q", r.Remembered(), j.All())
	}
	if r.loop.Running() {
		t.Fatal("the queue of an ended term still takes changes")
	}
	ix.set(view("e", pending("c-e")))
	if r.loop.Len() != 0 || j.Has("report e PENDING") {
		t.Fatalf("a change after the term was queued: %q", j.All())
	}
	// a, b and c at start, d on its change, all four again: c (no HostedCluster) is a successful no-op.
	if ok := testutil.ToFloat64(r.results.WithLabelValues("ok")); ok != 8 {
		t.Fatalf("%v successful reconciles counted, want 8", ok)
	}
}

// Nothing is reconciled or swept from caches that never synced.
func TestNoTermBeforeTheCachesSync(t *testing.T) {
	f := newFixture(t, true, view("a", ready("c-a"), readyPool("np")))
	f.r.opts.WaitForSync = func(context.Context) bool { return false }
	f.r.opts.CatchUp = func(context.Context) error { f.j.Add("catch-up"); return nil }
	if err := f.r.Start(context.Background()); err != nil {
		t.Fatal(err)
	}
	if calls := f.j.All(); len(calls) != 0 || f.r.Resyncs() != 0 {
		t.Fatalf("unsynced caches: calls %q, resyncs %d", calls, f.r.Resyncs())
	}
}

// A catch-up that fails leaves the term starting from the caches (with a warning); one that ends because the term
// did starts nothing.
func TestCatchUpFailure(t *testing.T) {
	t.Run("hub slow: start anyway, say so", func(t *testing.T) {
		f := newFixture(t, true, view("a", ready("c-a"), readyPool("np")))
		logs := &testlog.Buffer{}
		f.r.log = slog.New(slog.NewTextHandler(logs, nil))
		f.r.opts.CatchUp = func(context.Context) error { return errors.New("deadline exceeded") }
		run(t, f.r)
		testwait.For(t, within, "a reported", func() bool { return f.j.Has("report a READY") })
		if !strings.Contains(logs.String(), "caches that may lag") {
			t.Fatalf("no warning: %s", logs)
		}
	})
	t.Run("term over while catching up: nothing starts", func(t *testing.T) {
		f := newFixture(t, true, view("a", ready("c-a"), readyPool("np")))
		ctx, cancel := context.WithCancel(context.Background())
		f.r.opts.CatchUp = func(ctx context.Context) error { cancel(); return ctx.Err() }
		if err := f.r.Start(ctx); err != nil {
			t.Fatal(err)
		}
		if calls := f.j.All(); len(calls) != 0 || f.r.Resyncs() != 0 {
			t.Fatalf("calls %q, resyncs %d", calls, f.r.Resyncs())
		}
	})
}

// A failing reconcile is retried with exponential backoff (100 ms, doubling) without holding up the others, and
// is counted as an error each time.
func TestFailuresAreRetriedWithBackoff(t *testing.T) {
	f := newFixture(t, true, view("a", ready("c-a"), readyPool("np")), view("b", ready("c-b"), readyPool("np")))
	f.prov.failing("Converge", errHub, 3) // the three first converges fail, whichever cluster they are for
	f.r.opts.Workers = 1
	run(t, f.r)
	testwait.For(t, within, "both converged after the failures", func() bool {
		return testutil.ToFloat64(f.r.results.WithLabelValues("ok")) == 2
	})
	if errs := testutil.ToFloat64(f.r.results.WithLabelValues("error")); errs != 3 {
		t.Fatalf("%v failed reconciles counted, want 3", errs)
	}
	var tries []time.Time
	for _, e := range []string{"converge c-a", "converge c-b"} {
		tries = append(tries, f.j.Times(e)...)
	}
	slices.SortFunc(tries, func(a, b time.Time) int { return a.Compare(b) })
	if len(tries) != 5 {
		t.Fatalf("%d converges, want 5 (3 failed, 2 succeeded): %q", len(tries), f.j.All())
	}
	// Whichever failed, the tries of one id are at least 100 ms, then 200 ms apart.
	for _, id := range []string{"a", "b"} {
		at := f.j.Times("converge c-" + id)
		for i := 1; i < len(at); i++ {
			if gap, least := at[i].Sub(at[i-1]), 100*time.Millisecond<<(i-1); gap < least {
				t.Errorf("retry %d of %s after %v, want at least %v", i, id, gap, least)
			}
		}
	}
}

// Every resync period the reporter re-publishes, every instance is reconciled again, and what is remembered about
// instances that left the index without an event (a deletion finished while another replica led) is dropped.
func TestPeriodicResync(t *testing.T) {
	f := newFixture(t, true, view("a", ready("c-a"), readyPool("np")), view("b", ready("c-b"), readyPool("np")))
	f.r.opts.ResyncPeriod = 50 * time.Millisecond
	run(t, f.r)
	testwait.For(t, within, "three resyncs", func() bool { return f.r.Resyncs() >= 3 && f.j.Count("report a READY") >= 3 })
	if f.j.Count("resync") < 3 || f.j.Count("sweep") < 3 {
		t.Fatalf("resyncs without re-publish or sweep: %q", f.j.All())
	}
	f.ix.hide("b")
	testwait.For(t, within, "b forgotten by a resync", func() bool { return f.j.Has("prov-forget b") && f.r.Remembered() == 1 })
	if !f.j.Has("reporter-forget b") || f.j.Has("prov-forget a") {
		t.Fatalf("calls %q", f.j.All())
	}
}

// A new leadership term starts over: it re-publishes and re-evaluates everything again.
func TestNewTermStartsOver(t *testing.T) {
	f := newFixture(t, true, view("a", ready("c-a"), readyPool("np")))
	stop := run(t, f.r)
	testwait.For(t, within, "first term reported a", func() bool { return f.j.Count("report a READY") == 1 })
	stop()
	if f.r.Remembered() != 0 {
		t.Fatal("the first term's memory survived it")
	}
	run(t, f.r)
	testwait.For(t, within, "second term reported a", func() bool { return f.j.Count("report a READY") == 2 })
	if f.r.Resyncs() != 2 || f.j.Count("resync") != 2 || f.r.Remembered() != 1 {
		t.Fatalf("resyncs %d, re-publishes %d, remembered %d", f.r.Resyncs(), f.j.Count("resync"), f.r.Remembered())
	}
}

// The status finalizer stays until the bus acknowledged DELETED; the acknowledgement (the publisher enqueues the
// instance) lets the HostedCluster go.
func TestFinalizerWaitsForTheAcknowledgement(t *testing.T) {
	f := newFixture(t, true, view("a", released("c-a")))
	run(t, f.r)
	testwait.For(t, within, "the first reconcile done", func() bool { return testutil.ToFloat64(f.r.results.WithLabelValues("ok")) == 1 })
	if !f.j.Has("report a DELETED") || f.j.Has("remove-finalizer c-a") {
		t.Fatalf("before the acknowledgement: %q", f.j.All())
	}
	f.rep.deliver("a")
	f.r.Enqueue("a")
	testwait.For(t, within, "the finalizer removed", func() bool { return f.j.Has("remove-finalizer c-a") })
}
