// Package testwait is the one way tests wait for a condition: poll it on a ticker until it holds or a deadline
// passes, then fail naming what was awaited. Test-only.
package testwait

import (
	"context"
	"testing"
	"time"
)

// Interval is how often conditions are polled: often enough that a wait ends soon after its condition holds,
// seldom enough that the many waits of parallel tests do not load the hub they poll.
const Interval = 100 * time.Millisecond

// For polls cond until it holds; past within it fails the test with what.
func For(t testing.TB, within time.Duration, what string, cond func() bool) {
	t.Helper()
	if !Poll(within, cond) {
		t.Fatalf("timed out after %v waiting for %s", within, what)
	}
}

// Poll polls cond until it holds (true) or within passes (false).
func Poll(within time.Duration, cond func() bool) bool {
	return PollEvery(Interval, within, cond)
}

// PollEvery is Poll with its own interval, for a condition that is costly to read (a quorum read from the hub
// that parallel tests repeat) and changes only every so often.
func PollEvery(every, within time.Duration, cond func() bool) bool {
	deadline := time.NewTimer(within)
	defer deadline.Stop()
	tick := time.NewTicker(every)
	defer tick.Stop()
	for !cond() {
		select {
		case <-deadline.C:
			return cond()
		case <-tick.C:
		}
	}
	return true
}

// Background runs f in the background under a context that the returned stop cancels; stop then waits (within)
// for f to return and fails the test on f's error or when it does not return. The test's cleanup stops it too.
func Background(t testing.TB, within time.Duration, f func(ctx context.Context) error) (stop func()) {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- f(ctx) }()
	stopped := false
	stop = func() {
		t.Helper()
		if stopped {
			return
		}
		stopped = true
		cancel()
		select {
		case err := <-done:
			if err != nil {
				t.Fatalf("returned: %v", err)
			}
		case <-time.After(within):
			t.Fatal("did not return after its context ended")
		}
	}
	t.Cleanup(stop)
	return stop
}
