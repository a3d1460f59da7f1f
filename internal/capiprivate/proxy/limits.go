package proxy

import (
	"errors"
	"io"
	"net"
	"net/http"
	"strconv"
	"sync/atomic"
	"time"

	"github.com/prometheus/client_golang/prometheus"
)

// Request bodies are read whole before they are forwarded: the proxy translates them, and the admission side
// translates AdmissionReviews. Until kube-apiserver (or CAPI's webhook server) has seen the request, nobody has
// authenticated the caller, so what one caller can make the proxy hold is bounded three ways: each body is capped
// (413, refused from its Content-Length before any read when that already says too much), each body must arrive
// within a read deadline (408), and the bodies buffered at once share a byte budget (503 with Retry-After when it
// is spent). The deadline applies to the body only: watches and other long-lived requests carry no body and are
// never cut by it.

// Defaults of the body limits.
const (
	DefaultBodyReadTimeout      = 30 * time.Second
	DefaultMaxBufferedBytes     = 32 << 20 // about ten bodies of the 3 MiB cap
	DefaultAdmissionBufferBytes = 64 << 20 // eight AdmissionReviews of the 8 MiB cap
)

var (
	errTooLarge    = errors.New("body too large")
	errBudgetSpent = errors.New("too many request bodies being read")
)

// bodyLimits bound reading request bodies.
type bodyLimits struct {
	max     int           // per body
	timeout time.Duration // to read one body whole
	budget  *byteBudget   // bytes of all bodies being buffered
}

// newBodyLimits: held reports the bytes reserved from the budget (nil: not reported).
func newBodyLimits(maxBody int, timeout time.Duration, budget int64, held prometheus.Gauge) bodyLimits {
	if timeout <= 0 {
		timeout = DefaultBodyReadTimeout
	}
	return bodyLimits{max: maxBody, timeout: timeout, budget: &byteBudget{limit: budget, held: held}}
}

// read reads r's body whole (at most l.max bytes). It reserves the body's size (its Content-Length, else the cap) from the budget
// first; release returns it and must be called once the bytes are no longer needed (also after an error). The
// read deadline is set on the connection for the body only and cleared afterwards.
func (l bodyLimits) read(w http.ResponseWriter, r *http.Request) (body []byte, release func(), err error) {
	release = func() {}
	if r.ContentLength > int64(l.max) {
		return nil, release, errTooLarge
	}
	reserve := int64(l.max)
	if r.ContentLength >= 0 {
		reserve = r.ContentLength
	}
	if !l.budget.acquire(reserve) {
		return nil, release, errBudgetSpent
	}
	release = func() { l.budget.release(reserve) }
	rc := http.NewResponseController(w)
	deadline := rc.SetReadDeadline(time.Now().Add(l.timeout)) == nil // not every writer supports it (in-process)
	body, err = readBounded(r.Body, l.max)
	if deadline && err == nil {
		// Cleared only after a complete body: after a failed one the deadline stays, so the HTTP/1 server does not
		// wait for the rest of the body before answering, and closes the connection.
		_ = rc.SetReadDeadline(time.Time{})
	}
	return body, release, err
}

// bodyRejection is the answer to a body read error: 413, 503, 408 or 400.
func bodyRejection(err error, maxBody int) *rejection {
	var ne net.Error
	switch {
	case errors.Is(err, errTooLarge):
		return &rejection{http.StatusRequestEntityTooLarge, RejectRequestTooLarge,
			"capi-private proxy: request body larger than " + strconv.Itoa(maxBody) + " bytes"}
	case errors.Is(err, errBudgetSpent):
		return &rejection{http.StatusServiceUnavailable, RejectBufferFull,
			"capi-private proxy: too many request bodies in flight; retry"}
	case errors.As(err, &ne) && ne.Timeout():
		return &rejection{http.StatusRequestTimeout, RejectBodyTimeout,
			"capi-private proxy: the request body did not arrive in time"}
	}
	return &rejection{http.StatusBadRequest, RejectBodyRead, "capi-private proxy: reading the request body: " + err.Error()}
}

// byteBudget is a non-blocking counter of bytes in use, up to limit (no limit when limit <= 0), reported on held.
type byteBudget struct {
	limit int64
	used  atomic.Int64
	held  prometheus.Gauge
}

func (b *byteBudget) acquire(n int64) bool {
	if b.limit <= 0 {
		return true
	}
	for {
		used := b.used.Load()
		if used+n > b.limit {
			return false
		}
		if b.used.CompareAndSwap(used, used+n) {
			if b.held != nil {
				b.held.Add(float64(n))
			}
			return true
		}
	}
}

func (b *byteBudget) release(n int64) {
	if b.limit > 0 {
		b.used.Add(-n)
		if b.held != nil {
			b.held.Sub(float64(n))
		}
	}
}

// readBounded reads r whole, failing with errTooLarge past max bytes.
func readBounded(r io.Reader, maxBody int) ([]byte, error) {
	b, err := io.ReadAll(io.LimitReader(r, int64(maxBody)+1))
	if err != nil {
		return nil, err
	}
	if len(b) > maxBody {
		return nil, errTooLarge
	}
	return b, nil
}
