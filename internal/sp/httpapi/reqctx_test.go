package httpapi

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/go-chi/chi/v5"
)

type otherKey struct{}

// A request context answers its caller and its parent's values, and arms no timer for that, for its deadline or
// for Err.
func TestRequestContextUnarmed(t *testing.T) {
	parent := context.WithValue(context.Background(), otherKey{}, "v")
	c := authenticatedContext(parent, caller{remote: "127.0.0.1:1"}, time.Minute)
	defer c.release()
	if got := remoteFrom(c); got != "127.0.0.1:1" {
		t.Errorf("remote %q", got)
	}
	if got := c.Value(otherKey{}); got != "v" {
		t.Errorf("parent's value %v", got)
	}
	if d, ok := c.Deadline(); !ok || time.Until(d) < 50*time.Second {
		t.Errorf("deadline %v %v", d, ok)
	}
	if err := c.Err(); err != nil {
		t.Errorf("err %v", err)
	}
	if c.armed.Load() {
		t.Error("armed without a wait")
	}
}

// The earlier deadline wins, the parent's or the request's.
func TestRequestContextDeadline(t *testing.T) {
	soon := time.Now().Add(time.Second)
	parent, cancel := context.WithDeadline(context.Background(), soon)
	defer cancel()
	c := authenticatedContext(parent, caller{}, time.Minute)
	if d, _ := c.Deadline(); !d.Equal(soon) {
		t.Errorf("deadline %v, want the parent's %v", d, soon)
	}
	c = authenticatedContext(context.Background(), caller{}, time.Second)
	if d, _ := c.Deadline(); time.Until(d) > time.Second {
		t.Errorf("deadline %v, want within a second", d)
	}
}

// Waited on, it behaves as context.WithDeadline: Done closes at the deadline, Err says why, contexts derived from it
// end with it, and its values are still the caller and the parent's.
func TestRequestContextArmed(t *testing.T) {
	for _, tc := range []struct {
		name    string
		timeout time.Duration
		end     func(parent context.CancelFunc, c *requestContext)
		want    error
	}{
		{"deadline passes", 20 * time.Millisecond, func(context.CancelFunc, *requestContext) {}, context.DeadlineExceeded},
		{"parent cancelled", time.Minute, func(cancel context.CancelFunc, _ *requestContext) { cancel() }, context.Canceled},
		{"released", time.Minute, func(_ context.CancelFunc, c *requestContext) { c.release() }, context.Canceled},
	} {
		t.Run(tc.name, func(t *testing.T) {
			parent, cancel := context.WithCancel(context.WithValue(context.Background(), otherKey{}, "v"))
			defer cancel()
			c := authenticatedContext(parent, caller{remote: "r"}, tc.timeout)
			defer c.release()
			child, childCancel := context.WithCancel(c)
			defer childCancel()
			if !c.armed.Load() {
				t.Fatal("a derived context did not arm it")
			}
			if c.Err() != nil {
				t.Fatalf("err before the end: %v", c.Err())
			}
			tc.end(cancel, c)
			for _, ctx := range []context.Context{c, child} {
				select {
				case <-ctx.Done():
				case <-time.After(10 * time.Second):
					t.Fatal("not done within 10 s")
				}
				if !errors.Is(ctx.Err(), tc.want) {
					t.Errorf("err %v, want %v", ctx.Err(), tc.want)
				}
			}
			if remoteFrom(c) != "r" || c.Value(otherKey{}) != "v" || remoteFrom(child) != "r" {
				t.Error("values lost once armed")
			}
		})
	}
}

// Past its deadline, an unarmed context's Err already says so, and arming it then closes Done at once.
func TestRequestContextErrPastDeadline(t *testing.T) {
	c := authenticatedContext(context.Background(), caller{}, -time.Second)
	if !errors.Is(c.Err(), context.DeadlineExceeded) || c.armed.Load() {
		t.Fatalf("err %v (armed %v)", c.Err(), c.armed.Load())
	}
	select {
	case <-c.Done():
	default:
		t.Fatal("Done open past the deadline")
	}
	c.release()
}

// authenticatedContext is the context of a request authenticate let through: caller c, bounded by timeout.
func authenticatedContext(parent context.Context, c caller, timeout time.Duration) *requestContext {
	rc := &requestContext{Context: parent, route: chi.NewRouteContext()}
	rc.authenticated(c, timeout)
	return rc
}

// Before authentication it is its parent but for its values: no caller, the parent's deadline and cancellation.
func TestRequestContextUnauthenticated(t *testing.T) {
	parent, cancel := context.WithTimeout(context.Background(), time.Minute)
	c := &requestContext{Context: parent, route: chi.NewRouteContext()}
	if userFrom(c) != nil || chi.RouteContext(c) != c.route || requestContextOf(c) != c {
		t.Error("values")
	}
	if d, ok := c.Deadline(); !ok || time.Until(d) > time.Minute {
		t.Errorf("deadline %v %v, want the parent's", d, ok)
	}
	if c.Done() != parent.Done() {
		t.Error("Done is not the parent's")
	}
	cancel()
	if !errors.Is(c.Err(), context.Canceled) {
		t.Errorf("err %v", c.Err())
	}
	c.release()
}
