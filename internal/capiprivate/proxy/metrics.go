package proxy

import (
	"github.com/prometheus/client_golang/prometheus"
)

// Metrics are the proxy's metrics (docs/capi-private.md, section "The proxy"), all named capi_private_proxy_*. Every
// label takes values from a small fixed set or from what kube-apiserver serves (see requestLabels), never from raw
// client input.
type Metrics struct {
	// Requests: capi_private_proxy_requests_total{verb,group,resource,code,path=fast|translated|rejected}.
	Requests *prometheus.CounterVec
	// Duration: capi_private_proxy_request_duration_seconds{verb,path}, watches excluded.
	Duration *prometheus.HistogramVec
	// TranslationDuration: capi_private_proxy_translation_duration_seconds{direction}, time spent translating one
	// request or response (fast-path units included; time blocked on either peer excluded).
	TranslationDuration *prometheus.HistogramVec
	// TranslationErrors: capi_private_proxy_translation_errors_total{direction,reason} (translate.Reason*).
	TranslationErrors *prometheus.CounterVec
	// ObjectsTranslated: capi_private_proxy_objects_translated_total{direction}, units that took the slow path.
	ObjectsTranslated *prometheus.CounterVec
	// ObjectsFiltered: capi_private_proxy_objects_filtered_total{kind=crd|discovery|watch_event}.
	ObjectsFiltered *prometheus.CounterVec
	// ForcedJSON: capi_private_proxy_forced_json_total{requested=protobuf|cbor}.
	ForcedJSON *prometheus.CounterVec
	// Rejected: capi_private_proxy_rejected_total{reason}, requests the proxy refused itself (see Reject*).
	Rejected *prometheus.CounterVec
	// WatchesActive: capi_private_proxy_watches_active.
	WatchesActive prometheus.Gauge
	// BufferedBytes: capi_private_proxy_request_bytes_buffered, bytes of request bodies reserved from the body
	// budget now (being read, translated or forwarded).
	BufferedBytes prometheus.Gauge
	// WatchEvents: capi_private_proxy_watch_events_total{type}, events sent to clients.
	WatchEvents *prometheus.CounterVec
	// UpstreamErrors: capi_private_proxy_upstream_errors_total{reason} (see Upstream*).
	UpstreamErrors *prometheus.CounterVec
	// Bytes: capi_private_proxy_bytes_total{side=client|upstream,direction=request|response}, body bytes.
	Bytes *prometheus.CounterVec

	bytes [2][2]prometheus.Counter // [side][direction], resolved once
}

// Values of the rejected_total reason label.
const (
	RejectNoBearerToken          = "no_bearer_token"          // passthrough: no bearer token (401)
	RejectOwnIdentityCredentials = "own_identity_credentials" // own-identity: Authorization or Impersonate-* sent (400)
	RejectNotLoopback            = "not_loopback"             // own-identity: a caller from beyond loopback (403)
	RejectHidden                 = "hidden"                   // a private or escaped group or CRD addressed directly (404)
	RejectRequestTooLarge        = "request_too_large"        // a request body above the cap (413)
	RejectUpgrade                = "upgrade"                  // an Upgrade on a path whose bodies are translated (400)
	RejectBodyTimeout            = "body_timeout"             // a request body that did not arrive within its deadline (408)
	RejectBufferFull             = "buffer_full"              // the budget of request bodies being read is spent (503)
	RejectBodyRead               = "body_read"                // a request body that could not be read (400)
	RejectAdmissionPath          = "admission_path"           // the admission side: a path outside the allowed webhook paths (404)
)

// Values of the upstream_errors_total reason label.
const (
	UpstreamDial    = "dial"    // no connection (refused, unreachable, DNS)
	UpstreamTLS     = "tls"     // TLS handshake or verification
	UpstreamTimeout = "timeout" // a timeout before the response head
	UpstreamStream  = "stream"  // the response body broke off
	UpstreamOther   = "other"
)

// Values of the path label.
const (
	pathFast       = "fast"
	pathTranslated = "translated"
	pathRejected   = "rejected"
)

const (
	sideClient, sideUpstream = 0, 1
	dirRequest, dirResponse  = 0, 1
)

// NewMetrics creates the proxy's metrics and registers them with reg (nil: not registered anywhere).
func NewMetrics(reg prometheus.Registerer) (*Metrics, error) {
	m := &Metrics{
		Requests: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "capi_private_proxy_requests_total",
			Help: "Requests by verb, API group and resource (as the client named them), HTTP code, and path: fast (nothing translated), translated, or rejected (answered by the proxy itself).",
		}, []string{"verb", "group", "resource", "code", "path"}),
		Duration: prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Name:    "capi_private_proxy_request_duration_seconds",
			Help:    "Time from receiving a request to the end of its response, watches excluded.",
			Buckets: prometheus.ExponentialBucketsRange(0.00025, 5, 16),
		}, []string{"verb", "path"}),
		TranslationDuration: prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Name:    "capi_private_proxy_translation_duration_seconds",
			Help:    "Time spent translating one request or one response (waiting on either peer excluded).",
			Buckets: prometheus.ExponentialBucketsRange(0.00001, 5, 16),
		}, []string{"direction"}),
		TranslationErrors: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "capi_private_proxy_translation_errors_total",
			Help: "Translation failures (the proxy fails closed: 400/413/415, 502 or a watch ERROR event), by direction and reason.",
		}, []string{"direction", "reason"}),
		ObjectsTranslated: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "capi_private_proxy_objects_translated_total",
			Help: "Units (bodies, list items, watch events) that held a group to rename and took the slow path, by direction.",
		}, []string{"direction"}),
		ObjectsFiltered: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "capi_private_proxy_objects_filtered_total",
			Help: "Things of the platform's standard groups hidden from clients: crd (platform CRDs in responses), discovery (platform discovery entries and OpenAPI documents), watch_event (events dropped).",
		}, []string{"kind"}),
		ForcedJSON: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "capi_private_proxy_forced_json_total",
			Help: "Requests whose Accept asked for a binary encoding and were answered as JSON, by the encoding asked for.",
		}, []string{"requested"}),
		Rejected: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "capi_private_proxy_rejected_total",
			Help: "Requests the proxy refused without forwarding, by reason.",
		}, []string{"reason"}),
		WatchesActive: prometheus.NewGauge(prometheus.GaugeOpts{
			Name: "capi_private_proxy_watches_active",
			Help: "Watches being streamed now.",
		}),
		BufferedBytes: prometheus.NewGauge(prometheus.GaugeOpts{
			Name: "capi_private_proxy_request_bytes_buffered",
			Help: "Bytes of request bodies reserved from the buffer budget now: each body's Content-Length (the cap when it has none) from before its first byte is read until it has been forwarded.",
		}),
		WatchEvents: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "capi_private_proxy_watch_events_total",
			Help: "Watch events sent to clients, by type.",
		}, []string{"type"}),
		UpstreamErrors: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "capi_private_proxy_upstream_errors_total",
			Help: "Failures reaching kube-apiserver or reading its answers, by reason.",
		}, []string{"reason"}),
		Bytes: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "capi_private_proxy_bytes_total",
			Help: "Body bytes, by side (client or upstream) and direction (request or response).",
		}, []string{"side", "direction"}),
	}
	for s, side := range []string{"client", "upstream"} {
		for d, dir := range []string{"request", "response"} {
			m.bytes[s][d] = m.Bytes.WithLabelValues(side, dir)
		}
	}
	if reg != nil {
		for _, c := range []prometheus.Collector{m.Requests, m.Duration, m.TranslationDuration, m.TranslationErrors,
			m.ObjectsTranslated, m.ObjectsFiltered, m.ForcedJSON, m.Rejected, m.WatchesActive, m.BufferedBytes, m.WatchEvents,
			m.UpstreamErrors, m.Bytes} {
			if err := reg.Register(c); err != nil {
				return nil, err
			}
		}
	}
	return m, nil
}
