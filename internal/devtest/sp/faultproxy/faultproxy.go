// Package faultproxy is a loopback HTTP proxy in front of kube-apiserver that injects faults into what one client
// sends it: chosen writes answered with an error status (a 500 or a 429 from the API server), every request cut
// (as the hub sees a process that died), watch streams dropped, the client's informer caches frozen. The client talks
// plain HTTP to the proxy; the proxy talks to the real API server with the credentials it was given. Test-only
// machinery.
package faultproxy

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/http"
	"net/http/httputil"
	"net/url"
	"strings"
	"sync"
	"sync/atomic"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/rest"
)

// Verdict is what the proxy does with one request.
type Verdict int

// Verdicts.
const (
	Pass        Verdict = iota // forward it
	Fail500                    // answer 500 InternalError (a Status body), do not forward
	Fail429                    // answer 429 TooManyRequests with Retry-After: 1, do not forward
	Refuse403                  // answer 403 Forbidden (as RBAC or an admission webhook refuses), do not forward
	Abort                      // drop the connection, do not forward
	PassThenCut                // forward it, then abort the response (the write happened, the caller never knows)
	Hang                       // never answer: hold the request until the caller gives up (a hub that hangs)
	Hold                       // hold the request until Release, then forward it (an API server slow to answer)
)

// Request describes a request to a rule.
type Request struct {
	Method, Path string
	Query        url.Values
	Write        bool // POST, PUT, PATCH or DELETE
	Watch        bool
	Writes       int // writes passed so far, this one excluded
}

// Rule decides a request's fate.
type Rule func(Request) Verdict

// Proxy is a running fault proxy.
type Proxy struct {
	// URL is the proxy's base URL (http://127.0.0.1:port).
	URL string

	l       net.Listener
	srv     *http.Server
	rp      *httputil.ReverseProxy
	mu      sync.Mutex
	rule    Rule
	writes  atomic.Int64
	faults  atomic.Int64
	watches sync.Map // *watchStream → cancel
	held    atomic.Int64
	release chan struct{} // closed by Release
	once    sync.Once
}

type watchStream struct{ cancel context.CancelFunc }

// Start serves a proxy to the API server of upstream on a loopback listener it keeps until Close.
func Start(upstream *rest.Config) (*Proxy, error) {
	target, err := url.Parse(upstream.Host)
	if err != nil {
		return nil, err
	}
	rt, err := rest.TransportFor(upstream)
	if err != nil {
		return nil, err
	}
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return nil, err
	}
	p := &Proxy{URL: "http://" + l.Addr().String(), l: l, rule: func(Request) Verdict { return Pass }, release: make(chan struct{})}
	p.rp = &httputil.ReverseProxy{
		Rewrite: func(r *httputil.ProxyRequest) {
			r.SetURL(target)
			r.Out.Host = target.Host
		},
		Transport:     rt,
		FlushInterval: -1, // watches stream
		ErrorHandler: func(w http.ResponseWriter, r *http.Request, err error) {
			if !errors.Is(err, context.Canceled) {
				w.WriteHeader(http.StatusBadGateway)
			}
		},
	}
	p.srv = &http.Server{Handler: http.HandlerFunc(p.serve), ReadHeaderTimeout: 0}
	go func() { _ = p.srv.Serve(l) }()
	return p, nil
}

// Config is a client configuration that goes through the proxy (which holds the upstream credentials).
func (p *Proxy) Config() *rest.Config {
	return &rest.Config{Host: p.URL, QPS: 200, Burst: 400}
}

// SetRule replaces the rule (nil: pass everything).
func (p *Proxy) SetRule(r Rule) {
	if r == nil {
		r = func(Request) Verdict { return Pass }
	}
	p.mu.Lock()
	p.rule = r
	p.mu.Unlock()
}

// Writes is the number of writes forwarded so far; Faults the number of requests the proxy failed or cut.
func (p *Proxy) Writes() int { return int(p.writes.Load()) }

// Faults is the number of requests failed, aborted or cut.
func (p *Proxy) Faults() int { return int(p.faults.Load()) }

// Held is the number of requests a Hold verdict holds now.
func (p *Proxy) Held() int { return int(p.held.Load()) }

// Release forwards every request held and every later one a Hold verdict meets.
func (p *Proxy) Release() { p.once.Do(func() { close(p.release) }) }

// DropWatches ends every watch stream in flight (the client sees the stream end and re-watches).
func (p *Proxy) DropWatches() int {
	n := 0
	p.watches.Range(func(k, v any) bool {
		v.(context.CancelFunc)()
		p.watches.Delete(k)
		n++
		return true
	})
	return n
}

// Close stops the proxy and closes its listener.
func (p *Proxy) Close() error {
	p.DropWatches()
	return p.srv.Close()
}

func isWrite(m string) bool {
	return m == http.MethodPost || m == http.MethodPut || m == http.MethodPatch || m == http.MethodDelete
}

// describe is what a rule is told of a request.
func describe(r *http.Request, writes int) Request {
	q := r.URL.Query()
	return Request{Method: r.Method, Path: r.URL.Path, Query: q, Write: isWrite(r.Method),
		Watch: q.Get("watch") == "true" || q.Get("watch") == "1" || strings.Contains(r.URL.Path, "/watch/"), Writes: writes}
}

func (p *Proxy) serve(w http.ResponseWriter, r *http.Request) {
	req := describe(r, int(p.writes.Load()))
	verdict, r, done := p.decide(req, r)
	defer done()
	switch verdict {
	case Fail500:
		p.faults.Add(1)
		writeStatus(w, http.StatusInternalServerError, metav1.StatusReasonInternalError, "injected fault: internal error")
		return
	case Refuse403:
		p.faults.Add(1)
		writeStatus(w, http.StatusForbidden, metav1.StatusReasonForbidden, "injected fault: forbidden")
		return
	case Fail429:
		p.faults.Add(1)
		w.Header().Set("Retry-After", "1")
		writeStatus(w, http.StatusTooManyRequests, metav1.StatusReasonTooManyRequests, "injected fault: too many requests")
		return
	case Abort:
		p.faults.Add(1)
		panic(http.ErrAbortHandler)
	case Hang:
		p.faults.Add(1)
		<-r.Context().Done()
		return
	case Hold:
		p.held.Add(1)
		select {
		case <-p.release:
		case <-r.Context().Done():
		}
		p.held.Add(-1)
		if r.Context().Err() != nil {
			return // the caller gave up first
		}
	}
	if req.Write {
		p.writes.Add(1)
	}
	if verdict == PassThenCut {
		p.faults.Add(1)
		rec := &discard{header: http.Header{}}
		p.rp.ServeHTTP(rec, r)
		panic(http.ErrAbortHandler)
	}
	p.rp.ServeHTTP(w, r)
}

// decide applies the rule. A watch it passes is registered for DropWatches under the rule's lock, so that a watch
// let through by a rule that SetRule then replaced is already known to the DropWatches that follows. done ends the
// registration.
func (p *Proxy) decide(req Request, r *http.Request) (Verdict, *http.Request, func()) {
	p.mu.Lock()
	defer p.mu.Unlock()
	verdict := p.rule(req)
	if !req.Watch || verdict != Pass {
		return verdict, r, func() {}
	}
	ctx, cancel := context.WithCancel(r.Context())
	key := &watchStream{cancel: cancel}
	p.watches.Store(key, cancel)
	return verdict, r.WithContext(ctx), func() { p.watches.Delete(key); cancel() }
}

func writeStatus(w http.ResponseWriter, code int, reason metav1.StatusReason, msg string) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(code)
	fmt.Fprintf(w, `{"kind":"Status","apiVersion":"v1","metadata":{},"status":"Failure","message":%q,"reason":%q,"code":%d}`, msg, reason, code)
}

// discard is a ResponseWriter that keeps nothing (the response of a PassThenCut write).
type discard struct{ header http.Header }

func (d *discard) Header() http.Header         { return d.header }
func (d *discard) Write(b []byte) (int, error) { return len(b), nil }
func (d *discard) WriteHeader(int)             {}

// Informer tells whether a request is one an informer sends to fill or refresh its cache: a watch (a watch-list
// too), or a list from a resourceVersion (a reflector names one on every list and relist; a client's own reads
// name none). The continuation pages of a list follow a first page that named one.
func Informer(r Request) bool {
	return r.Method == http.MethodGet && (r.Watch || r.Query.Has("resourceVersion"))
}

// FreezeCaches is a rule: abort every request of an informer, pass the rest — the client's caches stay as they are
// (after DropWatches has cut the streams in flight) while its own reads and writes reach the API server.
func FreezeCaches(r Request) Verdict {
	if Informer(r) {
		return Abort
	}
	return Pass
}

// CutAfterWrites is a rule: pass everything until n writes have passed (optionally only those match accepts), then
// abort every request — as the hub sees a client process that died after its n-th write.
func CutAfterWrites(n int, match func(Request) bool) Rule {
	passed, cut := 0, false // rules run one at a time (under the proxy's lock)
	return func(r Request) Verdict {
		if cut {
			return Abort
		}
		if r.Write && (match == nil || match(r)) {
			if passed >= n {
				cut = true
				return Abort
			}
			passed++
		}
		return Pass
	}
}
