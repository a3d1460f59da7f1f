package proxy

import (
	"context"
	"errors"
	"io"
	"net/http"
	"strconv"
	"sync"

	"github.com/dcm-sp/acm-cluster-sp/internal/capiprivate/groups"
	"github.com/dcm-sp/acm-cluster-sp/internal/capiprivate/translate"
)

// WrapTransport offers the proxy's translation in-process, for rest.Config.WrapTransport: a client built with it
// talks the standard groups to a kube-apiserver that stores the private ones, exactly as through the proxy, with
// no listener in between. The client's own transport adds its credentials (client-go applies WrapTransport
// inside its authentication wrappers), so no auth mode applies. Upgrades (exec, port-forward) pass untouched.
// Metrics are not registered anywhere.
func WrapTransport(m *groups.Mapping) func(http.RoundTripper) http.RoundTripper {
	metrics, _ := NewMetrics(nil)
	return func(rt http.RoundTripper) http.RoundTripper {
		return &roundTripper{e: newEngine(m, rt, nil, authInProcess, metrics)}
	}
}

type roundTripper struct{ e *engine }

// RoundTrip runs the proxy's handler against the wrapped transport, with the response written into a pipe: the
// head is returned as soon as the handler decides it, the body streams (watches event by event).
func (t *roundTripper) RoundTrip(req *http.Request) (*http.Response, error) {
	if req.Header.Get("Upgrade") != "" {
		path, err := t.e.t.RequestPath(req.URL.Path)
		if err != nil || path.Hidden || (path.Kind != translate.PathStream && path.Kind != translate.PathOther) {
			return nil, errors.New("capi-private: upgrades are passed on exec, attach, port-forward and proxy paths only")
		}
		return t.e.rt.RoundTrip(req)
	}
	ctx, cancel := context.WithCancel(req.Context())
	pr, pw := io.Pipe()
	rw := &pipeWriter{header: http.Header{}, pw: pw, head: make(chan struct{})}
	go func() {
		defer func() {
			if v := recover(); v != nil {
				rw.abort(errors.New("capi-private: response aborted"))
				if v != http.ErrAbortHandler {
					panic(v)
				}
			}
		}()
		t.e.serve(rw, req.WithContext(ctx))
		rw.WriteHeader(http.StatusOK) // no-op if written
		_ = pw.Close()
	}()
	<-rw.head // serve always writes a head, also when the request is canceled
	if err := req.Context().Err(); err != nil {
		cancel()
		return nil, err
	}
	resp := &http.Response{
		Status:        strconv.Itoa(rw.status) + " " + http.StatusText(rw.status),
		StatusCode:    rw.status,
		Proto:         "HTTP/1.1",
		ProtoMajor:    1,
		ProtoMinor:    1,
		Header:        rw.sent,
		Body:          &pipeBody{PipeReader: pr, cancel: cancel},
		ContentLength: -1,
		Request:       req,
	}
	if cl, err := strconv.ParseInt(rw.sent.Get("Content-Length"), 10, 64); err == nil {
		resp.ContentLength = cl
	}
	return resp, nil
}

// pipeWriter is the http.ResponseWriter of an in-process exchange.
type pipeWriter struct {
	header http.Header
	sent   http.Header
	status int
	once   sync.Once
	head   chan struct{}
	pw     *io.PipeWriter
}

func (w *pipeWriter) Header() http.Header { return w.header }

func (w *pipeWriter) WriteHeader(code int) {
	w.once.Do(func() {
		w.status, w.sent = code, w.header.Clone()
		close(w.head)
	})
}

func (w *pipeWriter) Write(b []byte) (int, error) {
	w.WriteHeader(http.StatusOK)
	return w.pw.Write(b)
}

// Flush: a pipe write returns once the reader has the bytes.
func (w *pipeWriter) Flush() {}

func (w *pipeWriter) abort(err error) {
	w.WriteHeader(http.StatusBadGateway)
	_ = w.pw.CloseWithError(err)
}

// pipeBody ends the exchange (and its upstream request) when the client closes the body.
type pipeBody struct {
	*io.PipeReader
	cancel context.CancelFunc
}

func (b *pipeBody) Close() error {
	b.cancel()
	return b.PipeReader.Close()
}
