package httpapi

import (
	"context"
	"net/http"
	"sync"
	"sync/atomic"
	"time"

	"github.com/go-chi/chi/v5"
)

// requestContext is a request's context from the start of the handler chain: chi's routing state, and once
// authenticate has run, who sent the request and the deadline that bounds it. One allocation and one copy of the
// request carry all three, where chi's own routing context, a context.WithValue and a context.WithTimeout would take
// three copies and eight allocations (and a timer). scoped makes it; authenticate is the one place that completes it,
// before any handler reads it.
//
// The deadline's timer is armed only once something waits on the context — Done, or a context derived from it with
// a cancel — as a hub call does: a request answered from the caches never waits and never pays for a timer. Until
// armed, Err reports the parent's error, or DeadlineExceeded once the deadline has passed; once armed, every method
// answers as context.WithDeadline(parent, deadline) does. Without a deadline (an open path, a refused caller) it is
// its parent but for its values.
type requestContext struct {
	context.Context // the parent: the request's context as the server gave it
	route           *chi.Context
	caller          caller    // who sent it, once authenticated
	deadline        time.Time // zero until authenticated

	arming sync.Once
	armed  atomic.Bool        // timed and cancel are set
	timed  context.Context    // context.WithDeadline(parent, deadline), once armed
	cancel context.CancelFunc // timed's
}

type requestContextKey struct{}

// routeContexts are chi's routing contexts, reused across requests as chi's own router reuses them.
var routeContexts = sync.Pool{New: func() any { return chi.NewRouteContext() }}

// scoped gives each request its requestContext, holding chi's routing state for router (which then routes the
// request as it is instead of copying it), and ends it when the request is done.
func scoped(router chi.Routes, next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		rctx := routeContexts.Get().(*chi.Context)
		rctx.Reset()
		rctx.Routes = router
		c := &requestContext{Context: r.Context(), route: rctx}
		defer func() {
			c.release()
			c.route = nil
			rctx.Reset()
			routeContexts.Put(rctx)
		}()
		next.ServeHTTP(w, r.WithContext(c))
	})
}

// requestContextOf returns the requestContext of ctx (nil outside scoped).
func requestContextOf(ctx context.Context) *requestContext {
	c, _ := ctx.Value(requestContextKey{}).(*requestContext)
	return c
}

// authenticated records the caller and starts the deadline (authenticate only, before any handler runs).
func (c *requestContext) authenticated(who caller, timeout time.Duration) {
	c.caller, c.deadline = who, time.Now().Add(timeout)
}

// arm makes the deadline's context (once) and returns it.
func (c *requestContext) arm() context.Context {
	c.arming.Do(func() {
		c.timed, c.cancel = context.WithDeadline(c.Context, c.deadline)
		c.armed.Store(true)
	})
	return c.timed
}

// release cancels the armed context, if any: the request is done.
func (c *requestContext) release() {
	if c.armed.Load() {
		c.cancel()
	}
}

// Deadline is the earlier of the request's deadline and the parent's.
func (c *requestContext) Deadline() (time.Time, bool) {
	d, ok := c.Context.Deadline()
	if c.deadline.IsZero() || ok && d.Before(c.deadline) {
		return d, ok
	}
	return c.deadline, true
}

func (c *requestContext) Done() <-chan struct{} {
	if c.deadline.IsZero() {
		return c.Context.Done()
	}
	return c.arm().Done()
}

func (c *requestContext) Err() error {
	if c.armed.Load() {
		return c.timed.Err()
	}
	if err := c.Context.Err(); err != nil {
		return err
	}
	if !c.deadline.IsZero() && !time.Now().Before(c.deadline) {
		return context.DeadlineExceeded
	}
	return nil
}

// Value answers the routing state, the caller and the context itself, and everything else as the armed context (or
// the parent) does: the context package finds the armed context's cancellation through it, so contexts derived
// later are cancelled with it directly.
func (c *requestContext) Value(key any) any {
	switch key {
	case chi.RouteCtxKey:
		return c.route
	case callerKey{}:
		if c.deadline.IsZero() {
			return nil // not authenticated
		}
		return &c.caller
	case requestContextKey{}:
		return c
	}
	if c.armed.Load() {
		return c.timed.Value(key)
	}
	return c.Context.Value(key)
}
