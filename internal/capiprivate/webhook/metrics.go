package webhook

import (
	"bytes"
	"encoding/json"
	"errors"
	"io"
	"net"
	"net/http"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
)

// Metrics are the webhook's metrics (every name starts with capi_private_webhook_).
type Metrics struct {
	// Conversions counts converted objects: capi_private_webhook_conversions_total{kind,from,to,result}.
	Conversions *prometheus.CounterVec
	// Duration is the time per ConversionReview: capi_private_webhook_conversion_duration_seconds{kind}.
	Duration *prometheus.HistogramVec
	// Lookups counts apiVersion getter answers:
	// capi_private_webhook_apiversion_lookups_total{result=cache|live|negative|error}.
	Lookups *prometheus.CounterVec
	// Rejected counts requests refused before conversion:
	// capi_private_webhook_requests_rejected_total{reason=too_large|timeout|read_error}.
	Rejected *prometheus.CounterVec
}

// NewMetrics creates the webhook's metrics and registers them with reg.
func NewMetrics(reg prometheus.Registerer) (*Metrics, error) {
	m := &Metrics{
		Conversions: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "capi_private_webhook_conversions_total",
			Help: "Objects converted by the conversion webhook, by kind, source and target version (\"other\" when the private scheme does not know them), and result (success or failure).",
		}, []string{"kind", "from", "to", "result"}),
		Duration: prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Name:    "capi_private_webhook_conversion_duration_seconds",
			Help:    "Time to answer one ConversionReview, by kind.",
			Buckets: prometheus.ExponentialBuckets(0.0005, 2, 14), // 0.5 ms … ~4 s
		}, []string{"kind"}),
		Lookups: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "capi_private_webhook_apiversion_lookups_total",
			Help: "apiVersion lookups of the v1beta1 converters, by result: cache (CRD informer), live (GET on a miss), negative (a CRD remembered as missing) or error.",
		}, []string{"result"}),
	}
	m.Rejected = prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "capi_private_webhook_requests_rejected_total",
		Help: "ConversionReviews refused before conversion, by reason: too_large (above the request cap, 413), timeout (the body did not arrive in time, 408) or read_error (400).",
	}, []string{"reason"})
	for _, c := range []prometheus.Collector{m.Conversions, m.Duration, m.Lookups, m.Rejected} {
		if err := reg.Register(c); err != nil {
			return nil, err
		}
	}
	return m, nil
}

// reviewSummary is what the metrics need of a ConversionReview; decoding into it skips the objects' bodies.
type reviewSummary struct {
	Request *struct {
		DesiredAPIVersion string `json:"desiredAPIVersion"`
		Objects           []struct {
			APIVersion string `json:"apiVersion"`
			Kind       string `json:"kind"`
		} `json:"objects"`
	} `json:"request"`
	Response *struct {
		Result struct {
			Status string `json:"status"`
		} `json:"result"`
	} `json:"response"`
}

// Labels of requests the metrics cannot attribute to a known kind, version or reason.
const labelOther = "other"

// labelSet bounds metric labels to the private scheme: a kind and version are labels only when the scheme
// knows them, so a caller cannot create series at will.
type labelSet struct {
	gvks map[schema.GroupVersionKind]bool
	gvs  map[schema.GroupVersion]bool
}

func newLabelSet(s *runtime.Scheme) *labelSet {
	l := &labelSet{gvks: map[schema.GroupVersionKind]bool{}, gvs: map[schema.GroupVersion]bool{}}
	for gvk := range s.AllKnownTypes() {
		l.gvks[gvk] = true
		l.gvs[gvk.GroupVersion()] = true
	}
	return l
}

// object is the kind and version labels of an object with apiVersion and kind.
func (l *labelSet) object(apiVersion, kind string) (string, string) {
	gv, err := schema.ParseGroupVersion(apiVersion)
	if err != nil || !l.gvks[gv.WithKind(kind)] {
		return labelOther, labelOther
	}
	return kind, gv.Version
}

// version is the version label of a desired apiVersion.
func (l *labelSet) version(apiVersion string) string {
	gv, err := schema.ParseGroupVersion(apiVersion)
	if err != nil || !l.gvs[gv] {
		return labelOther
	}
	return gv.Version
}

// readFailure maps an error reading a request body to the answer and the rejected_total reason.
func readFailure(err error) (int, string) {
	var tooLarge *http.MaxBytesError
	var ne net.Error
	switch {
	case errors.As(err, &tooLarge):
		return http.StatusRequestEntityTooLarge, "too_large"
	case errors.As(err, &ne) && ne.Timeout():
		return http.StatusRequestTimeout, "timeout"
	}
	return http.StatusBadRequest, "read_error"
}

// readLimited reads r's body, at most maxBytes, and puts it back for the next handler. When it cannot, it answers
// (413 above maxBytes, 408 on a read timeout, 400 otherwise, naming what) and returns the reason and false.
func readLimited(w http.ResponseWriter, r *http.Request, maxBytes int64, what string) ([]byte, string, bool) {
	body, err := io.ReadAll(http.MaxBytesReader(w, r.Body, maxBytes))
	if err != nil {
		code, reason := readFailure(err)
		http.Error(w, "reading the "+what+": "+err.Error(), code)
		return nil, reason, false
	}
	r.Body = io.NopCloser(bytes.NewReader(body))
	return body, "", true
}

// LimitBody serves next only requests whose body is at most maxBytes (what readLimited answers otherwise): an
// admission webhook's handler would read any size.
func LimitBody(next http.Handler, maxBytes int64, what string) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if _, _, ok := readLimited(w, r, maxBytes, what); ok {
			next.ServeHTTP(w, r)
		}
	})
}

// instrument wraps the conversion handler: it reads the request (at most maxBytes) to learn the kind and
// versions, and the answer (buffered, then written through) to learn the result. Labels are bounded by labels.
func (m *Metrics) instrument(next http.Handler, labels *labelSet, maxBytes int64) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		start := time.Now()
		body, reason, ok := readLimited(w, r, maxBytes, "ConversionReview")
		if !ok {
			m.Rejected.WithLabelValues(reason).Inc()
			return
		}
		var req reviewSummary
		_ = json.Unmarshal(body, &req) // a malformed review is the handler's to reject (400)

		rec := &recorder{ResponseWriter: w, status: http.StatusOK}
		next.ServeHTTP(rec, r)
		var resp reviewSummary
		result := "failure"
		if rec.status == http.StatusOK && json.Unmarshal(rec.body.Bytes(), &resp) == nil && resp.Response != nil &&
			resp.Response.Result.Status == "Success" {
			result = "success"
		}
		kind := labelOther
		if req.Request != nil {
			to := labels.version(req.Request.DesiredAPIVersion)
			for i, o := range req.Request.Objects {
				k, from := labels.object(o.APIVersion, o.Kind)
				if i == 0 {
					kind = k
				}
				m.Conversions.WithLabelValues(k, from, to, result).Inc()
			}
		}
		m.Duration.WithLabelValues(kind).Observe(time.Since(start).Seconds())
		// Counted before the body goes out: a caller that has the answer also finds it in the metrics.
		if rec.body.Len() > 0 {
			_, _ = w.Write(rec.body.Bytes())
		}
	})
}

// recorder buffers the handler's answer; the status code goes out at once, the body after inspection.
type recorder struct {
	http.ResponseWriter
	status int
	body   bytes.Buffer
}

func (r *recorder) WriteHeader(code int) {
	r.status = code
	r.ResponseWriter.WriteHeader(code)
}

func (r *recorder) Write(b []byte) (int, error) { return r.body.Write(b) }
