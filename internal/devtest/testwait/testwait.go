// Package testwait is the one way tests wait for a condition: poll it on a ticker until it holds or a deadline
// passes, then fail naming what was awaited. Test-only.
package testwait

import (
	"testing"
	"time"
)

// Interval is how often conditions are polled.
const Interval = 20 * time.Millisecond

// For polls cond until it holds; past within it fails the test with what.
func For(t testing.TB, within time.Duration, what string, cond func() bool) {
	t.Helper()
	if !Poll(within, cond) {
		t.Fatalf("timed out after %v waiting for %s", within, what)
	}
}

// Poll polls cond until it holds (true) or within passes (false).
func Poll(within time.Duration, cond func() bool) bool {
	deadline := time.NewTimer(within)
	defer deadline.Stop()
	tick := time.NewTicker(Interval)
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
