package webhook

import (
	"bytes"
	"encoding/json"
	"io"
	"net/http"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"k8s.io/apimachinery/pkg/runtime/schema"
)

// Metrics of §11 for the webhook.
type Metrics struct {
	// Conversions counts converted objects: capi_private_webhook_conversions_total{kind,from,to,result}.
	Conversions *prometheus.CounterVec
	// Duration is the time per ConversionReview: capi_private_webhook_conversion_duration_seconds{kind}.
	Duration *prometheus.HistogramVec
	// Lookups counts apiVersion getter answers: capi_private_webhook_apiversion_lookups_total{result=cache|live|error}.
	Lookups *prometheus.CounterVec
}

// NewMetrics creates the webhook's metrics and registers them with reg.
func NewMetrics(reg prometheus.Registerer) (*Metrics, error) {
	m := &Metrics{
		Conversions: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "capi_private_webhook_conversions_total",
			Help: "Objects converted by the conversion webhook, by kind, source and target version, and result (success or failure).",
		}, []string{"kind", "from", "to", "result"}),
		Duration: prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Name:    "capi_private_webhook_conversion_duration_seconds",
			Help:    "Time to answer one ConversionReview, by kind.",
			Buckets: prometheus.ExponentialBuckets(0.0005, 2, 14), // 0.5 ms … ~4 s
		}, []string{"kind"}),
		Lookups: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "capi_private_webhook_apiversion_lookups_total",
			Help: "apiVersion lookups of the v1beta1 converters, by result: cache (CRD informer), live (GET on a miss) or error.",
		}, []string{"result"}),
	}
	for _, c := range []prometheus.Collector{m.Conversions, m.Duration, m.Lookups} {
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

// instrument wraps the conversion handler: it reads the request to learn the kind and versions, and the answer
// (buffered, then written through) to learn the result.
func (m *Metrics) instrument(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		start := time.Now()
		body, err := io.ReadAll(r.Body)
		if err != nil {
			http.Error(w, "reading the request: "+err.Error(), http.StatusBadRequest)
			return
		}
		var req reviewSummary
		_ = json.Unmarshal(body, &req) // a malformed review is the handler's to reject (400)
		r.Body = io.NopCloser(bytes.NewReader(body))

		rec := &recorder{ResponseWriter: w, status: http.StatusOK}
		next.ServeHTTP(rec, r)
		var resp reviewSummary
		result := "failure"
		if rec.status == http.StatusOK && json.Unmarshal(rec.body.Bytes(), &resp) == nil && resp.Response != nil &&
			resp.Response.Result.Status == "Success" {
			result = "success"
		}
		if rec.body.Len() > 0 {
			_, _ = w.Write(rec.body.Bytes())
		}

		kind := "unknown"
		if req.Request != nil {
			to := versionOf(req.Request.DesiredAPIVersion)
			for i, o := range req.Request.Objects {
				if i == 0 {
					kind = o.Kind
				}
				m.Conversions.WithLabelValues(o.Kind, versionOf(o.APIVersion), to, result).Inc()
			}
		}
		m.Duration.WithLabelValues(kind).Observe(time.Since(start).Seconds())
	})
}

func versionOf(apiVersion string) string {
	gv, err := schema.ParseGroupVersion(apiVersion)
	if err != nil {
		return "unknown"
	}
	return gv.Version
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
