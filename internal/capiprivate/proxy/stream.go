package proxy

import (
	"bytes"
	"compress/gzip"
	"errors"
	"io"
	"net/http"
	"strconv"
	"time"

	"github.com/dcm-sp/acm-cluster-sp/internal/capiprivate/translate"
)

// This file streams bodies: lists item by item, watches frame by frame, and the rest as they come.

// streamList translates a large response item by item. The status line goes out with the first bytes, so a
// failure before them is still a 502; after them the response is aborted (the client sees a broken stream,
// never untranslated bytes).
func (e *engine) streamList(w http.ResponseWriter, x *exchange, out *sink, prefix []byte, src *countingReader) {
	t0, readWait, writeWait := time.Now(), src.wait, out.wait
	stats, err := e.t.ResponseStream(out, io.MultiReader(bytes.NewReader(prefix), src), x.path.Context(), e.maxObject)
	e.m.TranslationDuration.WithLabelValues("response").Observe((time.Since(t0) - (src.wait - readWait) - (out.wait - writeWait)).Seconds())
	if stats.Translated > 0 {
		e.m.ObjectsTranslated.WithLabelValues("response").Add(float64(stats.Translated))
		x.translated = true
	}
	e.countFiltered(x, stats.Dropped)
	if err == nil && stats.Drop && !out.started {
		e.countFiltered(x, 1)
		x.code = http.StatusNotFound
		writeStatus(w, http.StatusNotFound, "NotFound", "the server could not find the requested resource")
		return
	}
	if err == nil {
		return
	}
	var te *translate.Error
	if !errors.As(err, &te) {
		if out.writeErr != nil {
			return // the client went away
		}
		e.upstreamBroke(w, x, err)
		if out.started {
			abort(w, err)
		}
		return
	}
	if !out.started {
		x.responseError(w, err)
		return
	}
	e.m.TranslationErrors.WithLabelValues("response", te.Reason).Inc()
	x.rejected = true
	abort(w, err)
}

// upstreamBroke handles a response body that broke off before anything was sent: 502.
func (e *engine) upstreamBroke(w http.ResponseWriter, x *exchange, err error) {
	e.m.UpstreamErrors.WithLabelValues(UpstreamStream).Inc()
	e.log.Warn("kube-apiserver response broke off", "error", err)
	x.rejected = true
	x.code = http.StatusBadGateway
	writeStatus(w, http.StatusBadGateway, "InternalError", "capi-private proxy: the kube-apiserver response broke off: "+err.Error())
}

// abort ends a response that cannot be completed: the client sees a broken stream, never a truncated body that
// parses.
func abort(w http.ResponseWriter, err error) {
	if a, ok := w.(interface{ abort(error) }); ok {
		a.abort(err)
		return
	}
	panic(http.ErrAbortHandler)
}

// streamWatch translates a watch event by event, flushing after each. A frame that fails to translate ends the
// stream with an ERROR event (the client relists); upstream ending or the client leaving ends it quietly.
func (e *engine) streamWatch(w http.ResponseWriter, x *exchange, resp *http.Response) {
	e.m.WatchesActive.Inc()
	defer e.m.WatchesActive.Dec()
	out := &sink{w: w, m: e.m, status: resp.StatusCode}
	out.start()
	out.flush()
	fr := translate.NewFrameReader(e.upstreamBody(resp), e.maxObject)
	ctx := x.path.Context()
	newline := []byte{'\n'}
	for {
		frame, err := fr.Next()
		if err != nil {
			var te *translate.Error
			switch {
			case err == io.EOF:
			case errors.As(err, &te):
				e.watchError(x, out, err)
			case resp.Request.Context().Err() == nil:
				e.m.UpstreamErrors.WithLabelValues(UpstreamStream).Inc()
			}
			return
		}
		t0 := time.Now()
		res, err := e.t.ResponseWatchEvent(frame, ctx)
		e.m.TranslationDuration.WithLabelValues("response").Observe(time.Since(t0).Seconds())
		if err != nil {
			e.watchError(x, out, err)
			return
		}
		if res.Translated {
			e.m.ObjectsTranslated.WithLabelValues("response").Inc()
			x.translated = true
		}
		if res.Drop {
			e.m.ObjectsFiltered.WithLabelValues("watch_event").Inc()
			continue
		}
		typ := eventType(res.Body)
		out.Write(res.Body)
		out.Write(newline)
		out.flush()
		if out.writeErr != nil {
			return
		}
		e.m.WatchEvents.WithLabelValues(typ).Inc()
	}
}

func (e *engine) watchError(x *exchange, out *sink, err error) {
	e.m.TranslationErrors.WithLabelValues("response", translate.ReasonOf(err)).Inc()
	x.rejected = true
	out.Write(translate.ErrorEvent(err))
	out.flush()
	e.m.WatchEvents.WithLabelValues("ERROR").Inc()
}

// copyBody forwards an untranslated body (logs, proxy subresources, non-API paths), flushing as it arrives when
// its length is unknown (a streaming response).
func (e *engine) copyBody(w http.ResponseWriter, x *exchange, resp *http.Response) {
	out := &sink{w: w, m: e.m, status: resp.StatusCode}
	if resp.ContentLength >= 0 {
		w.Header().Set("Content-Length", strconv.FormatInt(resp.ContentLength, 10))
	}
	out.start()
	streaming := resp.ContentLength < 0
	if streaming {
		out.flush()
	}
	buf := make([]byte, 32<<10)
	for {
		n, err := resp.Body.Read(buf)
		if n > 0 {
			e.m.bytes[sideUpstream][dirResponse].Add(float64(n))
			out.Write(buf[:n])
			if streaming {
				out.flush()
			}
			if out.writeErr != nil {
				return
			}
		}
		if err == io.EOF {
			return
		}
		if err != nil {
			if resp.Request.Context().Err() == nil {
				e.m.UpstreamErrors.WithLabelValues(UpstreamStream).Inc()
				abort(w, err)
			}
			return
		}
	}
}

// upstreamBody reads a response body, counting its bytes unless gunzip already counts the compressed ones.
func (e *engine) upstreamBody(resp *http.Response) *countingReader {
	if _, ok := resp.Body.(*gzipBody); ok {
		return &countingReader{r: resp.Body}
	}
	return &countingReader{r: resp.Body, n: [2]countRef{{e.m, sideUpstream, dirResponse}}}
}

// gunzip replaces a gzip response body by its decompressed stream, counting the compressed bytes.
func gunzip(resp *http.Response, m *Metrics) error {
	zr, err := gzip.NewReader(&countingReader{r: resp.Body, n: [2]countRef{{m, sideUpstream, dirResponse}}})
	if err != nil {
		return err
	}
	resp.Body = &gzipBody{Reader: zr, raw: resp.Body}
	resp.Header.Del("Content-Encoding")
	resp.Header.Del("Content-Length")
	resp.ContentLength = -1
	resp.Uncompressed = true
	return nil
}

type gzipBody struct {
	*gzip.Reader
	raw io.ReadCloser
}

func (g *gzipBody) Close() error { return g.raw.Close() }

// readPrefix reads up to limit bytes; eof reports that the body ended within them.
func readPrefix(r io.Reader, limit int) (buf []byte, eof bool, err error) {
	buf = make([]byte, 0, 8<<10)
	for {
		if len(buf) == cap(buf) {
			if len(buf) >= limit {
				return buf, false, nil
			}
			nb := make([]byte, len(buf), min(2*cap(buf), limit))
			copy(nb, buf)
			buf = nb
		}
		n, err := r.Read(buf[len(buf):cap(buf)])
		buf = buf[:len(buf)+n]
		if err == io.EOF {
			return buf, true, nil
		}
		if err != nil {
			return buf, false, err
		}
	}
}

// sink writes a response body: the status line goes out with the first byte (so a failure before it can still
// change the status), writes are counted and timed, and a write error (the client went away) is sticky.
type sink struct {
	w        http.ResponseWriter
	m        *Metrics
	status   int
	started  bool
	writeErr error
	wait     time.Duration
}

func (s *sink) start() {
	if !s.started {
		s.started = true
		s.w.WriteHeader(s.status)
	}
}

func (s *sink) Write(b []byte) (int, error) {
	if s.writeErr != nil {
		return 0, s.writeErr
	}
	s.start()
	t0 := time.Now()
	n, err := s.w.Write(b)
	s.wait += time.Since(t0)
	s.m.bytes[sideClient][dirResponse].Add(float64(n))
	if err != nil {
		s.writeErr = err
	}
	return n, err
}

// whole writes a complete body with its Content-Length.
func (s *sink) whole(b []byte) {
	s.w.Header().Set("Content-Length", strconv.Itoa(len(b)))
	s.start()
	if len(b) > 0 {
		_, _ = s.Write(b)
	}
}

func (s *sink) flush() {
	if s.writeErr != nil {
		return
	}
	if f, ok := s.w.(http.Flusher); ok {
		f.Flush()
	}
}

// countRef is one bytes_total counter.
type countRef struct {
	m          *Metrics
	side, dirn int
}

// countingReader counts the bytes it reads (into up to two counters) and the time spent waiting for them.
type countingReader struct {
	r    io.Reader
	n    [2]countRef
	wait time.Duration
}

func (c *countingReader) Read(p []byte) (int, error) {
	t0 := time.Now()
	n, err := c.r.Read(p)
	c.wait += time.Since(t0)
	if n > 0 {
		for _, ref := range c.n {
			if ref.m != nil {
				ref.m.bytes[ref.side][ref.dirn].Add(float64(n))
			}
		}
	}
	return n, err
}
