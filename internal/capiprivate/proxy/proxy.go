// Package proxy is capi-private's group-renaming reverse proxy in front of kube-apiserver (docs/capi-private.md,
// section "The proxy"): it serves clients the standard Cluster API groups while kube-apiserver stores the private ones,
// translating paths, queries, headers and bodies in both directions with package translate, streaming lists and watches
// with bounded memory, hiding the platform's own standard-group objects and CRDs, and failing closed. It also serves
// the admission direction (AdmissionReviews for the private groups, translated for CAPI's own webhooks) and offers the
// same translation in-process (WrapTransport).
package proxy

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"net/http/httputil"
	"net/url"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"k8s.io/client-go/rest"

	"github.com/dcm-sp/acm-cluster-sp/internal/capiprivate/groups"
	"github.com/dcm-sp/acm-cluster-sp/internal/capiprivate/translate"
)

// MaxRequestBody caps a request body the proxy reads (3 MiB, kube-apiserver's own default limit): above it the
// proxy answers 413.
const MaxRequestBody = 3 << 20

// newRequestBodyLimits are the proxy's body limits; zero values take the defaults, and the budget holds at least
// one body of the cap. held reports the bytes reserved (nil: not reported).
func newRequestBodyLimits(maxBody int, timeout time.Duration, budget int64, held prometheus.Gauge) bodyLimits {
	if maxBody <= 0 {
		maxBody = MaxRequestBody
	}
	if budget <= 0 {
		budget = DefaultMaxBufferedBytes
	}
	return newBodyLimits(maxBody, timeout, max(budget, int64(maxBody)), held)
}

// bufferLimit: a response up to this size is read whole and translated as one unit (its fast path forwards the
// exact bytes with a Content-Length); a larger one is streamed item by item.
const bufferLimit = 256 << 10

// Options configure a Proxy.
type Options struct {
	// Upstream reaches kube-apiserver: host, verified TLS (CA, server name) and, in own-identity mode only, the
	// credentials. In passthrough mode its credentials are ignored. Insecure TLS is refused.
	Upstream *rest.Config
	// Auth is AuthPassthrough (default) or AuthOwnIdentity.
	Auth AuthMode
	// Mapping is the group table (default groups.Default).
	Mapping *groups.Mapping
	// Registerer receives the metrics (nil: not registered; Proxy.Metrics still counts).
	Registerer prometheus.Registerer
	// MaxObjectSize caps one translated unit: an object, a list item, a watch event (default translate.MaxObjectSize).
	MaxObjectSize int
	// MaxRequestBody caps a request body (default MaxRequestBody).
	MaxRequestBody int
	// BodyReadTimeout bounds reading one request body (default DefaultBodyReadTimeout; 408 past it). It applies
	// to bodies only, so watches are never cut by it.
	BodyReadTimeout time.Duration
	// MaxBufferedBytes bounds the request bodies being read at once, before kube-apiserver has authenticated
	// their callers (default DefaultMaxBufferedBytes, at least MaxRequestBody; 503 with Retry-After past it).
	MaxBufferedBytes int64
	// Logger logs upstream failures (default: discard).
	Logger *slog.Logger
	// WrapUpstream, if set, wraps the upstream transport (to observe what reaches kube-apiserver; tests record
	// traffic with it).
	WrapUpstream func(http.RoundTripper) http.RoundTripper
}

// Proxy is the http.Handler of the proxy. Build it with New; it is safe for concurrent use.
type Proxy struct {
	e       *engine
	upgrade *httputil.ReverseProxy
	probe   probe
}

// engine is the translation and forwarding core, shared by Proxy and WrapTransport.
type engine struct {
	t         *translate.Translator
	rt        http.RoundTripper
	base      *url.URL // upstream scheme://host[/prefix]; nil: the request's own URL (WrapTransport)
	auth      AuthMode
	m         *Metrics
	maxObject int
	body      bodyLimits
	log       *slog.Logger
	gzip      bool // ask kube-apiserver for gzip (not with Upstream.DisableCompression)
	// v2Protobuf keeps the protobuf encoding of the last translated OpenAPI v2 document.
	v2Protobuf v2Protobuf

	// stopping ends watches at shutdown (their clients re-watch elsewhere).
	stopping     context.Context
	stopWatching context.CancelFunc
}

// New builds a Proxy.
func New(opts Options) (*Proxy, error) {
	if opts.Upstream == nil {
		return nil, errors.New("proxy: no upstream config")
	}
	if opts.Auth == "" {
		opts.Auth = AuthPassthrough
	}
	if opts.Auth != AuthPassthrough && opts.Auth != AuthOwnIdentity {
		return nil, fmt.Errorf("proxy: unknown auth mode %q (passthrough or own-identity)", opts.Auth)
	}
	if opts.Upstream.Insecure {
		return nil, errors.New("proxy: the upstream TLS must be verified (insecure-skip-tls-verify is refused)")
	}
	m, err := NewMetrics(opts.Registerer)
	if err != nil {
		return nil, err
	}
	rt, base, err := upstreamTransport(opts.Upstream, opts.Auth)
	if err != nil {
		return nil, err
	}
	if opts.WrapUpstream != nil {
		rt = opts.WrapUpstream(rt)
	}
	e := newEngine(opts.Mapping, rt, base, opts.Auth, m)
	e.gzip = !opts.Upstream.DisableCompression
	if opts.MaxObjectSize > 0 {
		e.maxObject = opts.MaxObjectSize
	}
	e.body = newRequestBodyLimits(opts.MaxRequestBody, opts.BodyReadTimeout, opts.MaxBufferedBytes, m.BufferedBytes)
	if opts.Logger != nil {
		e.log = opts.Logger
	}
	p := &Proxy{e: e}
	p.upgrade = &httputil.ReverseProxy{
		Rewrite:   func(pr *httputil.ProxyRequest) { pr.Out.Host = "" },
		Transport: rt,
		ErrorHandler: func(w http.ResponseWriter, r *http.Request, err error) {
			e.upstreamFailed(w, r, err)
		},
	}
	p.probe.e = e
	return p, nil
}

func newEngine(m *groups.Mapping, rt http.RoundTripper, base *url.URL, auth AuthMode, metrics *Metrics) *engine {
	if m == nil {
		m = groups.Default
	}
	stopping, stop := context.WithCancel(context.Background())
	return &engine{t: translate.New(m), rt: rt, base: base, auth: auth, m: metrics, maxObject: translate.MaxObjectSize,
		body: newRequestBodyLimits(0, 0, 0, metrics.BufferedBytes), log: slog.New(slog.DiscardHandler), gzip: true, stopping: stopping, stopWatching: stop}
}

// upstreamTransport is client-go's transport for cfg (HTTP/2 over verified TLS): without any credentials in
// passthrough mode, with cfg's own (a tokenFile is re-read by client-go) in own-identity mode.
func upstreamTransport(cfg *rest.Config, auth AuthMode) (http.RoundTripper, *url.URL, error) {
	c := rest.CopyConfig(cfg)
	if auth == AuthPassthrough {
		c = rest.AnonymousClientConfig(c)
	}
	c.UserAgent = "" // the client's User-Agent passes through
	c.WrapTransport, c.Transport = nil, nil
	rt, err := rest.TransportFor(c)
	if err != nil {
		return nil, nil, err
	}
	base, _, err := rest.DefaultServerUrlFor(c)
	if err != nil {
		return nil, nil, err
	}
	base.Path = strings.TrimSuffix(base.Path, "/")
	base.RawQuery, base.Fragment = "", ""
	return rt, base, nil
}

// Metrics returns the proxy's metrics.
func (p *Proxy) Metrics() *Metrics { return p.e.m }

// StopWatches ends every watch being streamed (each client sees the end of its stream and re-watches from its
// last resourceVersion). Call it when shutting down, before http.Server.Shutdown, which waits for open requests.
func (p *Proxy) StopWatches() { p.e.stopWatching() }

// ServeHTTP proxies one request.
func (p *Proxy) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	if r.Header.Get("Upgrade") != "" {
		p.serveUpgrade(w, r)
		return
	}
	p.e.serve(w, r)
}

// serveUpgrade forwards an HTTP upgrade (exec, attach, port-forward over SPDY or WebSocket) untranslated, after
// the same authentication and path checks as any request. Upgrades on translated paths are refused.
func (p *Proxy) serveUpgrade(w http.ResponseWriter, r *http.Request) {
	e := p.e
	x := e.begin(r)
	defer x.finish()
	path, ok := x.admit(w, r)
	if !ok {
		return
	}
	if path.Kind != translate.PathStream && path.Kind != translate.PathOther {
		x.reject(w, &rejection{http.StatusBadRequest, RejectUpgrade, "capi-private proxy: upgrades are served on exec, attach, port-forward and proxy paths only"})
		return
	}
	out := r.Clone(r.Context())
	u := *e.base
	u.Path = e.base.Path + path.Upstream
	u.RawQuery = r.URL.RawQuery
	out.URL = &u
	out.Host = ""
	for k := range out.Header {
		if strings.HasPrefix(k, "X-Remote-") {
			delete(out.Header, k)
		}
	}
	x.code = http.StatusSwitchingProtocols
	x.watch = true // long-lived: not in the duration histogram
	p.upgrade.ServeHTTP(w, out)
}

var hiddenRejection = &rejection{http.StatusNotFound, RejectHidden, "the server could not find the requested resource"}

// exchange is the state of one request, for metrics.
type exchange struct {
	e          *engine
	start      time.Time
	method     string
	path       translate.Path
	watch      bool
	code       int
	translated bool
	rejected   bool
	v2Protobuf bool   // the client asked for the OpenAPI v2 document in protobuf
	errBody    []byte // the body of an error answer (labels)
}

func (e *engine) begin(r *http.Request) *exchange {
	return &exchange{e: e, start: time.Now(), method: r.Method, code: http.StatusOK}
}

// admit authenticates the request and resolves its path; false: the answer (a rejection) is written.
func (x *exchange) admit(w http.ResponseWriter, r *http.Request) (translate.Path, bool) {
	if rej := authorize(x.e.auth, r.Header, r.RemoteAddr); rej != nil {
		x.reject(w, rej)
		return translate.Path{}, false
	}
	path, err := x.e.t.RequestPath(r.URL.Path)
	if err != nil {
		x.requestError(w, err)
		return translate.Path{}, false
	}
	x.path = path
	if path.Hidden {
		x.reject(w, hiddenRejection)
		return translate.Path{}, false
	}
	return path, true
}

func (x *exchange) finish() {
	path := pathFast
	switch {
	case x.rejected:
		path = pathRejected
	case x.translated:
		path = pathTranslated
	}
	v := verb(x.path, x.method, x.watch)
	g, res := requestLabels(x.path, x.code, x.rejected, x.errBody)
	x.e.m.Requests.WithLabelValues(v, g, res, strconv.Itoa(x.code), path).Inc()
	if !x.watch {
		x.e.m.Duration.WithLabelValues(v, path).Observe(time.Since(x.start).Seconds())
	}
}

func (x *exchange) reject(w http.ResponseWriter, rej *rejection) {
	x.e.m.Rejected.WithLabelValues(rej.reason).Inc()
	x.rejected = true
	x.code = rej.code
	writeStatus(w, rej.code, statusReason(rej.code), rej.message)
}

// requestError answers a request that failed to translate: 400, 413 or 415.
func (x *exchange) requestError(w http.ResponseWriter, err error) {
	code := http.StatusBadRequest
	var te *translate.Error
	if errors.As(err, &te) {
		code = te.RequestStatus()
	}
	x.e.m.TranslationErrors.WithLabelValues("request", translate.ReasonOf(err)).Inc()
	x.rejected = true
	x.code = code
	writeStatus(w, code, statusReason(code), err.Error())
}

// responseError answers with 502 when an upstream answer failed to translate (nothing of it was sent).
func (x *exchange) responseError(w http.ResponseWriter, err error) {
	x.e.m.TranslationErrors.WithLabelValues("response", translate.ReasonOf(err)).Inc()
	x.rejected = true
	x.code = http.StatusBadGateway
	writeStatus(w, http.StatusBadGateway, "InternalError", "capi-private proxy: the kube-apiserver response could not be translated: "+err.Error())
}

func statusReason(code int) string {
	switch code {
	case http.StatusBadRequest:
		return "BadRequest"
	case http.StatusUnauthorized:
		return "Unauthorized"
	case http.StatusForbidden:
		return "Forbidden"
	case http.StatusNotFound:
		return "NotFound"
	case http.StatusRequestEntityTooLarge:
		return "RequestEntityTooLarge"
	case http.StatusUnsupportedMediaType:
		return "UnsupportedMediaType"
	case http.StatusServiceUnavailable:
		return "ServiceUnavailable"
	}
	return "InternalError"
}

// statusJSON is a metav1.Status body.
func statusJSON(code int, reason, message string, retryAfter int) []byte {
	var b bytes.Buffer
	b.WriteString(`{"kind":"Status","apiVersion":"v1","metadata":{},"status":"Failure","message":`)
	msg, _ := json.Marshal(message)
	b.Write(msg)
	b.WriteString(`,"reason":"` + reason + `"`)
	if retryAfter > 0 {
		b.WriteString(`,"details":{"retryAfterSeconds":` + strconv.Itoa(retryAfter) + `}`)
	}
	b.WriteString(`,"code":` + strconv.Itoa(code) + "}\n")
	return b.Bytes()
}

func writeStatus(w http.ResponseWriter, code int, reason, message string) {
	writeStatusRetry(w, code, reason, message, 0)
}

func writeStatusRetry(w http.ResponseWriter, code int, reason, message string, retryAfter int) {
	body := statusJSON(code, reason, message, retryAfter)
	h := w.Header()
	for k := range h {
		delete(h, k)
	}
	h.Set("Content-Type", "application/json")
	h.Set("Content-Length", strconv.Itoa(len(body)))
	h.Set("X-Content-Type-Options", "nosniff")
	if retryAfter > 0 {
		h.Set("Retry-After", strconv.Itoa(retryAfter))
	}
	w.WriteHeader(code)
	_, _ = w.Write(body)
}

// upstreamFailed answers 503 with Retry-After: 1 when kube-apiserver cannot be reached (client-go retries), and
// nothing when the client went away.
func (e *engine) upstreamFailed(w http.ResponseWriter, r *http.Request, err error) {
	if r.Context().Err() != nil {
		return
	}
	reason := upstreamReason(err)
	e.m.UpstreamErrors.WithLabelValues(reason).Inc()
	e.log.Warn("kube-apiserver unreachable", "reason", reason, "error", err)
	writeStatusRetry(w, http.StatusServiceUnavailable, "ServiceUnavailable",
		"capi-private proxy: kube-apiserver is unavailable: "+err.Error(), 1)
}

// upstreamReason classifies a transport error.
func upstreamReason(err error) string {
	var opErr *net.OpError
	var dnsErr *net.DNSError
	var ne net.Error
	switch {
	case errors.As(err, &dnsErr):
		return UpstreamDial
	case errors.As(err, &opErr) && opErr.Op == "dial":
		return UpstreamDial
	case strings.Contains(err.Error(), "tls:") || strings.Contains(err.Error(), "x509:"):
		return UpstreamTLS
	case errors.As(err, &ne) && ne.Timeout():
		return UpstreamTimeout
	}
	return UpstreamOther
}

// probe answers readiness: kube-apiserver answers HTTP (any status: in passthrough mode the proxy has no
// credentials to be authorized with). Results are cached for a second.
type probe struct {
	e   *engine
	mu  sync.Mutex
	at  time.Time
	err error
}

// Ready reports whether kube-apiserver answers.
func (p *Proxy) Ready(ctx context.Context) error {
	pr := &p.probe
	pr.mu.Lock()
	if time.Since(pr.at) < time.Second {
		err := pr.err
		pr.mu.Unlock()
		return err
	}
	pr.mu.Unlock()
	ctx, cancel := context.WithTimeout(ctx, 5*time.Second)
	defer cancel()
	u := *p.e.base
	u.Path += "/readyz"
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, u.String(), nil)
	if err == nil {
		var resp *http.Response
		if resp, err = p.e.rt.RoundTrip(req); err == nil {
			_, _ = io.Copy(io.Discard, io.LimitReader(resp.Body, 64<<10))
			_ = resp.Body.Close()
		}
	}
	pr.mu.Lock()
	pr.at, pr.err = time.Now(), err
	pr.mu.Unlock()
	return err
}
