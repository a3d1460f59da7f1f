package proxy

import (
	"bytes"
	"context"
	"errors"
	"io"
	"mime"
	"net"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"time"

	"github.com/dcm-sp/acm-cluster-sp/internal/capiprivate/translate"
)

// serve proxies one non-upgrade request: authorize, translate the request, forward it, translate the response.
func (e *engine) serve(w http.ResponseWriter, r *http.Request) {
	x := e.begin(r)
	defer x.finish()
	path, ok := x.admit(w, r)
	if !ok {
		return
	}
	x.watch = isWatch(path, r.Method, r.URL.RawQuery)
	x.v2Protobuf = path.Kind == translate.PathOpenAPIV2 && wantsV2Protobuf(r.Header.Get("Accept"))
	query, err := e.t.RequestQuery(path, r.URL.RawQuery)
	if err != nil {
		x.requestError(w, err)
		return
	}
	x.translated = path.Changed || query != r.URL.RawQuery
	h, forced := upstreamHeaders(e.t, r.Header, path.Kind)
	if forced != translate.ForcedNone {
		e.m.ForcedJSON.WithLabelValues(string(forced)).Inc()
	}
	if translatedKind(path.Kind) && e.gzip {
		// Ask for gzip ourselves (instead of leaving it to Go's transport) so bytes_total counts wire bytes.
		h.Set("Accept-Encoding", "gzip")
	}

	body, contentLength, release, ok := e.requestBody(w, x, r, path, h)
	defer release()
	if !ok {
		return
	}

	ctx := r.Context()
	if x.watch {
		var cancel context.CancelFunc
		ctx, cancel = context.WithCancel(ctx)
		defer cancel()
		stop := context.AfterFunc(e.stopping, cancel)
		defer stop()
	}
	out, err := http.NewRequestWithContext(ctx, r.Method, e.target(r, path.Upstream, query), body)
	if err != nil {
		x.requestError(w, err)
		return
	}
	out.Header = h
	out.ContentLength = contentLength
	if contentLength == 0 {
		out.Body = http.NoBody
	}
	if e.base != nil { // a server-side request: say who is calling (kube-apiserver records sourceIPs)
		if ip, _, err := net.SplitHostPort(r.RemoteAddr); err == nil {
			if prior := h.Values("X-Forwarded-For"); len(prior) > 0 {
				ip = strings.Join(prior, ", ") + ", " + ip
			}
			h.Set("X-Forwarded-For", ip)
		}
	}
	resp, err := e.rt.RoundTrip(out)
	if err != nil {
		x.rejected = true
		x.code = http.StatusServiceUnavailable
		if r.Context().Err() != nil {
			x.code = 499 // the client went away
		}
		e.upstreamFailed(w, r, err)
		return
	}
	defer resp.Body.Close()
	e.respond(w, x, resp)
}

// requestBody is the body to forward and its length: on a resource path the client's body read whole under the
// body limits and translated, elsewhere the client's body streamed through. release frees the body's share of
// the buffer budget. false: the answer (a rejection) is written.
func (e *engine) requestBody(w http.ResponseWriter, x *exchange, r *http.Request, path translate.Path, h http.Header) (io.Reader, int64, func(), bool) {
	none := func() {}
	if r.Body == nil || r.Body == http.NoBody {
		return nil, 0, none, true
	}
	if path.Kind != translate.PathResource {
		// Untranslated paths (logs, proxy subresources, non-API paths): the body streams through.
		return &countingReader{r: r.Body, n: [2]countRef{{e.m, sideClient, dirRequest}, {e.m, sideUpstream, dirRequest}}}, r.ContentLength, none, true
	}
	raw, release, err := e.body.read(w, r)
	if err != nil {
		rej := bodyRejection(err, e.body.max)
		if rej.code == http.StatusServiceUnavailable {
			e.m.Rejected.WithLabelValues(rej.reason).Inc()
			x.rejected, x.code = true, rej.code
			writeStatusRetry(w, rej.code, statusReason(rej.code), rej.message, 1)
		} else {
			x.reject(w, rej)
		}
		return nil, 0, release, false
	}
	e.m.bytes[sideClient][dirRequest].Add(float64(len(raw)))
	if len(raw) == 0 {
		return nil, 0, release, true
	}
	t0 := time.Now()
	res, err := e.t.RequestBody(h.Get("Content-Type"), raw, path.Context())
	e.m.TranslationDuration.WithLabelValues("request").Observe(time.Since(t0).Seconds())
	if err != nil {
		x.requestError(w, err)
		return nil, 0, release, false
	}
	if res.Translated {
		e.m.ObjectsTranslated.WithLabelValues("request").Inc()
		x.translated = true
	}
	if res.ContentType != h.Get("Content-Type") {
		h.Set("Content-Type", res.ContentType)
	}
	e.m.bytes[sideUpstream][dirRequest].Add(float64(len(res.Body)))
	return bytes.NewReader(res.Body), int64(len(res.Body)), release, true
}

// target is the upstream URL of a request.
func (e *engine) target(r *http.Request, path, query string) string {
	var u url.URL
	if e.base != nil {
		u = *e.base
		u.Path = e.base.Path + path
	} else {
		u = *r.URL
		u.Path = path
	}
	u.RawPath = ""
	u.RawQuery = query
	return u.String()
}

// respond writes kube-apiserver's answer to the client.
func (e *engine) respond(w http.ResponseWriter, x *exchange, resp *http.Response) {
	x.code = resp.StatusCode
	if translatedKind(x.path.Kind) && strings.EqualFold(resp.Header.Get("Content-Encoding"), "gzip") {
		if err := gunzip(resp, e.m); err != nil {
			e.upstreamBroke(w, x, err)
			return
		}
	}
	if e.copyHeaders(w.Header(), resp.Header, x.path.Kind) {
		x.translated = true
	}
	switch {
	case x.watch && resp.StatusCode == http.StatusOK:
		e.streamWatch(w, x, resp)
	case translatedKind(x.path.Kind):
		e.translateBody(w, x, resp)
	default:
		e.copyBody(w, x, resp)
	}
}

// copyHeaders copies response headers: hop-by-hop headers and Content-Length dropped, Warning texts and
// Location paths translated, document ETags suffixed with the mapping hash. It reports whether any changed.
func (e *engine) copyHeaders(dst, src http.Header, kind translate.PathKind) bool {
	changed := false
	for k, vs := range src {
		switch k {
		case "Content-Length", "Connection", "Proxy-Connection", "Keep-Alive", "Te", "Trailer", "Transfer-Encoding", "Upgrade":
			continue
		case "Warning":
			out := make([]string, len(vs))
			for i, v := range vs {
				out[i] = e.t.ResponseWarning(v)
				changed = changed || out[i] != v
			}
			dst[k] = out
		case "Location":
			out := make([]string, len(vs))
			for i, v := range vs {
				out[i] = e.responseLocation(v)
				changed = changed || out[i] != v
			}
			dst[k] = out
		case "Etag":
			if documentKind(kind) {
				out := make([]string, len(vs))
				for i, v := range vs {
					out[i] = e.t.ResponseETag(v)
				}
				dst[k] = out
				continue
			}
			dst[k] = vs
		default:
			dst[k] = vs
		}
	}
	return changed
}

func (e *engine) responseLocation(v string) string {
	u, err := url.Parse(v)
	if err != nil || u.Path == "" {
		return v
	}
	p := e.t.ResponsePath(u.Path)
	if p == u.Path {
		return v
	}
	u.Path, u.RawPath = p, ""
	return u.String()
}

func isJSON(contentType string) bool {
	mt, _, err := mime.ParseMediaType(contentType)
	if err != nil {
		return false
	}
	return mt == "application/json" || strings.HasSuffix(mt, "+json")
}

// translateBody translates a response on an API path: small bodies whole (the fast path forwards their exact
// bytes), large ones item by item; discovery and OpenAPI documents whole.
func (e *engine) translateBody(w http.ResponseWriter, x *exchange, resp *http.Response) {
	kind := x.path.Kind
	limit := bufferLimit
	if documentKind(kind) {
		limit = 4 * e.maxObject
	}
	src := e.upstreamBody(resp)
	buf, eof, err := readPrefix(src, limit)
	if err != nil {
		e.upstreamBroke(w, x, err)
		return
	}
	if !eof && documentKind(kind) {
		x.responseError(w, &translate.Error{Reason: translate.ReasonTooLarge, Offset: -1,
			Err: errors.New("a discovery or OpenAPI document above " + strconv.Itoa(limit) + " bytes")})
		return
	}
	out := &sink{w: w, m: e.m, status: resp.StatusCode}
	// Documents are parsed as JSON whatever their Content-Type (kube-apiserver serves the OpenAPI v3 index as
	// text/plain); other non-JSON answers are forwarded only if they hold nothing to rename.
	if len(buf) == 0 || !documentKind(kind) && !isJSON(resp.Header.Get("Content-Type")) {
		if !eof || e.t.NeedsResponse(buf) {
			x.responseError(w, &translate.Error{Reason: translate.ReasonUnsupportedMediaType, Offset: -1,
				Err: errors.New("a " + strconv.Quote(resp.Header.Get("Content-Type")) + " response that names a mapped group")})
			return
		}
		x.errBody = buf
		out.whole(buf)
		return
	}
	if !eof {
		e.streamList(w, x, out, buf, src)
		return
	}

	t0 := time.Now()
	var res translate.Result
	switch kind {
	case translate.PathResource:
		if !e.t.NeedsResponse(buf) {
			res = translate.Result{Body: buf}
			break
		}
		if !bytes.Contains(buf, []byte(`"items":[`)) && !bytes.Contains(buf, []byte(`"rows":[`)) {
			res, err = e.t.ResponseObject(buf, x.path.Context()) // one object: no framing
			if err == nil && res.Translated {
				e.m.ObjectsTranslated.WithLabelValues("response").Inc()
			}
			break
		}
		// A list or Table: item by item into a buffer, so that items are counted like streamed ones.
		var b bytes.Buffer
		b.Grow(len(buf) + len(buf)/8)
		stats, serr := e.t.ResponseStream(&b, bytes.NewReader(buf), x.path.Context(), e.maxObject)
		err = serr
		res = translate.Result{Body: b.Bytes(), Translated: stats.Translated > 0, Changed: true, Drop: stats.Drop, Dropped: stats.Dropped}
		if err == nil && stats.Translated > 0 {
			e.m.ObjectsTranslated.WithLabelValues("response").Add(float64(stats.Translated))
		}
	default:
		res, err = e.translateDocument(w, x, resp, buf)
	}
	e.m.TranslationDuration.WithLabelValues("response").Observe(time.Since(t0).Seconds())
	if err != nil {
		x.responseError(w, err)
		return
	}
	x.translated = x.translated || res.Translated
	e.countFiltered(x, res.Dropped)
	if res.Drop {
		e.countFiltered(x, 1)
		x.code = http.StatusNotFound
		writeStatus(w, http.StatusNotFound, "NotFound", "the server could not find the requested resource")
		return
	}
	if x.code >= 400 {
		x.errBody = res.Body
	}
	out.whole(res.Body)
}

// translateDocument translates a discovery or OpenAPI document; an OpenAPI v2 document goes back in protobuf to
// a client that asked for that.
func (e *engine) translateDocument(w http.ResponseWriter, x *exchange, resp *http.Response, buf []byte) (translate.Result, error) {
	var res translate.Result
	var err error
	switch x.path.Kind {
	case translate.PathDiscoveryRoot, translate.PathDiscoveryGroup, translate.PathDiscoveryVersion:
		res, err = e.t.ResponseDiscovery(buf)
	case translate.PathOpenAPIIndex:
		res, err = e.t.ResponseOpenAPIIndex(buf)
	case translate.PathOpenAPIDocument, translate.PathOpenAPIV2:
		res, err = e.t.ResponseOpenAPIDocument(buf)
	}
	e.countDocument(res, err)
	if err == nil && x.v2Protobuf && resp.StatusCode == http.StatusOK {
		res.Body, err = e.v2Protobuf.encode(resp.Header.Get("Etag"), res.Body)
		w.Header().Set("Content-Type", translate.OpenAPIV2Protobuf)
		w.Header().Del("Etag") // the ETag names the JSON document
	}
	return res, err
}

func (e *engine) countDocument(res translate.Result, err error) {
	if err == nil && res.Translated {
		e.m.ObjectsTranslated.WithLabelValues("response").Inc()
	}
}

func (e *engine) countFiltered(x *exchange, n int) {
	if n == 0 {
		return
	}
	kind := "discovery"
	if x.path.Kind == translate.PathResource {
		kind = "crd"
	}
	e.m.ObjectsFiltered.WithLabelValues(kind).Add(float64(n))
}
