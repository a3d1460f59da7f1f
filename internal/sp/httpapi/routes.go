package httpapi

import (
	"errors"
	"fmt"
	"mime"
	"net/http"
	"net/url"
	"runtime/debug"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/getkin/kin-openapi/openapi3filter"
	"github.com/go-chi/chi/v5"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/promhttp"

	"github.com/dcm-sp/acm-cluster-sp/internal/sp/httpapi/apigen"
	"github.com/dcm-sp/acm-cluster-sp/pkg/api"
)

// MaxBodyBytes is the largest request body accepted (1 MiB).
const MaxBodyBytes = 1 << 20

// Handler returns the whole HTTP surface, in one place:
//
//	/api/v1alpha1/clusters…  (OpenAPI, validated; authenticated and authorized)
//	/api/v1alpha1/health, /api/v1alpha1/clusters/health, /health, /livez, /readyz  (GET and HEAD open: probes and DCM's polls)
//	/metrics         (Prometheus, registry reg; authenticated, needs get on the non-resource URL /metrics)
//
// Authentication comes first (an anonymous caller learns nothing about routes or validation), then routing, then
// authorization of the operation. Unknown routes and methods, malformed query strings and parameters, wrong
// content types and oversized bodies all answer with problem+json.
func (s *Server) Handler(reg *prometheus.Registry) (http.Handler, error) {
	spec, err := api.GetSwagger()
	if err != nil {
		return nil, fmt.Errorf("loading the OpenAPI document: %w", err)
	}
	metrics := newHTTPMetrics(reg)

	r := chi.NewRouter()
	r.Use(wellFormedQuery, limitBody)
	r.NotFound(func(w http.ResponseWriter, r *http.Request) {
		writeProblem(w, r, http.StatusNotFound, fmt.Sprintf("no route for %s %s", r.Method, r.URL.Path), nil)
	})
	r.MethodNotAllowed(func(w http.ResponseWriter, r *http.Request) {
		writeProblem(w, r, http.StatusMethodNotAllowed, fmt.Sprintf("method %s is not allowed on %s", r.Method, r.URL.Path), nil)
	})
	r.Get("/livez", func(w http.ResponseWriter, _ *http.Request) {
		w.WriteHeader(http.StatusOK)
		_, _ = w.Write([]byte("ok\n"))
	})
	r.Get("/readyz", s.readyz)
	r.With(s.protectMetrics).Handle("/metrics", promhttp.HandlerFor(reg, promhttp.HandlerOpts{Registry: reg}))

	validate, err := newValidator(spec)
	if err != nil {
		return nil, err
	}
	strict := apigen.NewStrictHandlerWithOptions(s, nil, apigen.StrictHTTPServerOptions{
		RequestErrorHandlerFunc:  s.requestError,
		ResponseErrorHandlerFunc: s.writeError,
	})
	apigen.HandlerWithOptions(strict, apigen.ChiServerOptions{
		// Run after routing, in this order, composed once here rather than per request: authorize the operation,
		// validate its parameters, check the body's content type.
		BaseRouter: r.With(s.authorize, validate.middleware, requireJSON),
		ErrorHandlerFunc: func(w http.ResponseWriter, r *http.Request, err error) {
			writeProblem(w, r, http.StatusBadRequest, err.Error(), nil)
		},
	})
	// Before routing, in this order: problem type URIs for every problem, panics answered, the request's context
	// (scoped: chi's routing state in it, so the metrics see the route), the metrics, authentication.
	return s.problemTypes(s.recoverer(scoped(r, metrics.middleware(s.authenticate(r))))), nil
}

// requestError answers a body the strict server could not decode.
func (s *Server) requestError(w http.ResponseWriter, r *http.Request, err error) {
	var tooLarge *http.MaxBytesError
	if errors.As(err, &tooLarge) {
		writeProblem(w, r, http.StatusRequestEntityTooLarge, fmt.Sprintf("request body exceeds %d bytes", MaxBodyBytes), nil)
		return
	}
	msg := strings.TrimPrefix(err.Error(), "can't decode JSON body: ")
	writeProblem(w, r, http.StatusBadRequest, "request body is not valid JSON: "+msg, nil)
}

// validationMessage shortens kin-openapi's error to "parameter X in query: reason".
func validationMessage(err error) string {
	var re *openapi3filter.RequestError
	if errors.As(err, &re) {
		if re.Parameter != nil {
			reason := re.Reason
			if re.Err != nil {
				reason = re.Err.Error()
				if i := strings.Index(reason, "\nSchema:"); i > 0 {
					reason = reason[:i]
				}
			}
			return fmt.Sprintf("%s parameter %q: %s", re.Parameter.In, re.Parameter.Name, strings.TrimSpace(reason))
		}
		return re.Error()
	}
	return err.Error()
}

// wellFormedQuery refuses a query string that does not parse (e.g. a stray %): Go's r.URL.Query() would silently
// drop the broken pair, turning a mangled page_token into "first page".
func wellFormedQuery(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if _, err := url.ParseQuery(r.URL.RawQuery); err != nil {
			writeProblem(w, r, http.StatusBadRequest, "malformed query string: "+strings.TrimPrefix(err.Error(), "invalid URL escape "), nil)
			return
		}
		next.ServeHTTP(w, r)
	})
}

// limitBody caps request bodies at MaxBodyBytes.
func limitBody(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Body == http.NoBody || r.Body == nil {
			next.ServeHTTP(w, r)
			return
		}
		if r.ContentLength > MaxBodyBytes {
			writeProblem(w, r, http.StatusRequestEntityTooLarge, fmt.Sprintf("request body exceeds %d bytes", MaxBodyBytes), nil)
			return
		}
		r.Body = http.MaxBytesReader(w, r.Body, MaxBodyBytes)
		next.ServeHTTP(w, r)
	})
}

// requireJSON refuses request bodies that are not application/json — application/merge-patch+json for PATCH,
// an RFC 7396 merge patch (415).
func requireJSON(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Method == http.MethodPost || r.Method == http.MethodPut || r.Method == http.MethodPatch {
			want := "application/json"
			if r.Method == http.MethodPatch {
				want = "application/merge-patch+json"
			}
			mt, _, err := mime.ParseMediaType(r.Header.Get("Content-Type"))
			if err != nil || mt != want {
				writeProblem(w, r, http.StatusUnsupportedMediaType, fmt.Sprintf("Content-Type must be %s, got %q", want, r.Header.Get("Content-Type")), nil)
				return
			}
		}
		next.ServeHTTP(w, r)
	})
}

// recoverer turns a panic into a 500 problem (and a log line with the stack), never a dropped connection.
func (s *Server) recoverer(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		defer func() {
			if v := recover(); v != nil {
				if v == http.ErrAbortHandler {
					panic(v)
				}
				s.log.Error("panic serving request", "method", r.Method, "path", r.URL.Path, "panic", fmt.Sprint(v), "stack", string(debug.Stack()))
				writeProblem(w, r, http.StatusInternalServerError, "internal error", nil)
			}
		}()
		next.ServeHTTP(w, r)
	})
}

func (s *Server) readyz(w http.ResponseWriter, r *http.Request) {
	rep := s.health.Report()
	code := http.StatusOK
	if !s.health.Ready() {
		code = http.StatusServiceUnavailable
	}
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(code)
	_ = jsonEncode(w, rep)
}

type httpMetrics struct {
	requests *prometheus.CounterVec
	duration *prometheus.HistogramVec
}

func newHTTPMetrics(reg *prometheus.Registry) *httpMetrics {
	m := &httpMetrics{
		requests: prometheus.NewCounterVec(prometheus.CounterOpts{Name: "acm_sp_http_requests_total", Help: "HTTP requests by route, method and status code."}, []string{"route", "method", "code"}),
		duration: prometheus.NewHistogramVec(prometheus.HistogramOpts{Name: "acm_sp_http_request_duration_seconds", Help: "HTTP request latency by route and method.",
			Buckets: []float64{.0005, .001, .0025, .005, .01, .025, .05, .1, .25, .5, 1, 2.5, 5, 10, 30}}, []string{"route", "method"}),
	}
	reg.MustRegister(m.requests, m.duration)
	return m
}

func (m *httpMetrics) middleware(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		start := time.Now()
		sw := statusWriters.Get().(*statusWriter)
		*sw = statusWriter{ResponseWriter: w}
		next.ServeHTTP(sw, r)
		code := sw.status()
		*sw = statusWriter{}
		statusWriters.Put(sw)
		route := chi.RouteContext(r.Context()).RoutePattern()
		if route == "" {
			route = "unmatched"
		}
		method := metricMethod(r.Method)
		m.requests.WithLabelValues(route, method, statusLabel(code)).Inc()
		m.duration.WithLabelValues(route, method).Observe(time.Since(start).Seconds())
	})
}

// statusWriter records the status code a handler answers. It is reused across requests (statusWriters): nothing
// keeps a request's writer once its handler has returned. Unwrap lets http.ResponseController reach the
// connection's writer (flushing, deadlines).
type statusWriter struct {
	http.ResponseWriter
	code int
}

var statusWriters = sync.Pool{New: func() any { return new(statusWriter) }}

// WriteHeader records the first final status (an informational 1xx other than 101 is not one).
func (w *statusWriter) WriteHeader(code int) {
	if w.code == 0 && (code >= 200 || code == http.StatusSwitchingProtocols) {
		w.code = code
	}
	w.ResponseWriter.WriteHeader(code)
}

func (w *statusWriter) Write(b []byte) (int, error) {
	if w.code == 0 {
		w.code = http.StatusOK
	}
	return w.ResponseWriter.Write(b)
}

func (w *statusWriter) Unwrap() http.ResponseWriter { return w.ResponseWriter }

// status is the code answered; a handler that wrote nothing answered 200, as net/http does for it.
func (w *statusWriter) status() int {
	if w.code == 0 {
		return http.StatusOK
	}
	return w.code
}

// statusLabel is the code label of a status, without formatting the common ones again on every request.
func statusLabel(code int) string {
	if code >= 100 && code < 600 {
		return statusLabels[code]
	}
	return strconv.Itoa(code)
}

var statusLabels = func() (l [600]string) {
	for i := 100; i < len(l); i++ {
		l[i] = strconv.Itoa(i)
	}
	return l
}()

// metricMethod bounds the method label to a fixed set: any other method (a client may send anything) is "other".
func metricMethod(m string) string {
	switch m {
	case http.MethodGet, http.MethodHead, http.MethodPost, http.MethodPut, http.MethodPatch, http.MethodDelete, http.MethodOptions:
		return m
	}
	return "other"
}
