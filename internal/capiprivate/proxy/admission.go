package proxy

import (
	"bytes"
	"errors"
	"fmt"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"time"

	"github.com/dcm-sp/acm-cluster-sp/internal/capiprivate/groups"
	"github.com/dcm-sp/acm-cluster-sp/internal/capiprivate/translate"
)

// MaxAdmissionReview caps an AdmissionReview (object and oldObject, each at most etcd's 1.5 MiB, plus envelope).
const MaxAdmissionReview = 8 << 20

// DefaultAdmissionPaths are the webhook paths of CAPI's own webhook server (v1.13.4, config/webhook) for the
// renamed groups: the only paths the admission side forwards unless configured otherwise. ExtensionConfig
// (runtime.cluster.x-k8s.io) keeps its standard group, so its webhook is registered directly, not through here.
var DefaultAdmissionPaths = []string{
	"/mutate-addons-cluster-x-k8s-io-v1beta2-clusterresourceset",
	"/mutate-cluster-x-k8s-io-v1beta2-cluster",
	"/mutate-cluster-x-k8s-io-v1beta2-machine",
	"/mutate-cluster-x-k8s-io-v1beta2-machinedeployment",
	"/mutate-cluster-x-k8s-io-v1beta2-machinehealthcheck",
	"/mutate-cluster-x-k8s-io-v1beta2-machinepool",
	"/mutate-cluster-x-k8s-io-v1beta2-machineset",
	"/validate-addons-cluster-x-k8s-io-v1beta2-clusterresourceset",
	"/validate-addons-cluster-x-k8s-io-v1beta2-clusterresourcesetbinding",
	"/validate-cluster-x-k8s-io-v1beta2-cluster",
	"/validate-cluster-x-k8s-io-v1beta2-clusterclass",
	"/validate-cluster-x-k8s-io-v1beta2-machine",
	"/validate-cluster-x-k8s-io-v1beta2-machinedeployment",
	"/validate-cluster-x-k8s-io-v1beta2-machinedrainrule",
	"/validate-cluster-x-k8s-io-v1beta2-machinehealthcheck",
	"/validate-cluster-x-k8s-io-v1beta2-machinepool",
	"/validate-cluster-x-k8s-io-v1beta2-machineset",
	"/validate-ipam-cluster-x-k8s-io-v1beta2-ipaddress",
	"/validate-ipam-cluster-x-k8s-io-v1beta2-ipaddressclaim",
}

// AdmissionOptions configure the proxy's webhook side: AdmissionReviews about private objects, translated for CAPI's
// own webhooks, and their answers translated back.
type AdmissionOptions struct {
	// Upstream is the base URL of CAPI's webhook server, e.g. https://127.0.0.1:9443. A review that arrives on
	// path P (the CAPI webhook's own path, e.g. /mutate-cluster-x-k8s-io-v1beta2-machinedeployment) goes to
	// Upstream + P.
	Upstream *url.URL
	// Transport reaches Upstream; it must verify the webhook's certificate (default: http.DefaultTransport).
	Transport http.RoundTripper
	// Mapping is the group table (default groups.Default).
	Mapping *groups.Mapping
	// Metrics receive translation errors and counts (default: a fresh unregistered set). Pass Proxy.Metrics() to
	// share the proxy's.
	Metrics *Metrics
	// Paths are the only request paths forwarded (exact matches; default DefaultAdmissionPaths): anything else
	// is 404 before its body is read. Add a provider's webhook paths here when its webhooks guard private CRDs.
	Paths []string
	// BodyReadTimeout bounds reading one AdmissionReview (default DefaultBodyReadTimeout); MaxBufferedBytes
	// bounds the reviews being read at once (default DefaultAdmissionBufferBytes).
	BodyReadTimeout  time.Duration
	MaxBufferedBytes int64
}

// Admission is the proxy's webhook side: an http.Handler for the AdmissionReviews kube-apiserver sends about the
// private groups. Each review is translated private → standard (kind, resource, requestKind, requestResource,
// object, oldObject), sent to CAPI's own webhook server, and its answer translated back (the JSONPatch of a
// defaulting webhook included), so the upstream webhooks guard the private CRDs unchanged. It fails closed: a
// review or answer that does not translate is an error answer, which kube-apiserver handles per the webhook's
// failurePolicy.
type Admission struct {
	t        *translate.Translator
	upstream *url.URL
	rt       http.RoundTripper
	m        *Metrics
	paths    map[string]bool
	body     bodyLimits
}

// NewAdmission builds the webhook side.
func NewAdmission(opts AdmissionOptions) (*Admission, error) {
	if opts.Upstream == nil || opts.Upstream.Host == "" {
		return nil, errors.New("admission: no upstream webhook server")
	}
	if opts.Mapping == nil {
		opts.Mapping = groups.Default
	}
	if opts.Transport == nil {
		opts.Transport = http.DefaultTransport
	}
	if opts.Metrics == nil {
		m, err := NewMetrics(nil)
		if err != nil {
			return nil, err
		}
		opts.Metrics = m
	}
	if opts.Paths == nil {
		opts.Paths = DefaultAdmissionPaths
	}
	if opts.MaxBufferedBytes <= 0 {
		opts.MaxBufferedBytes = DefaultAdmissionBufferBytes
	}
	a := &Admission{t: translate.New(opts.Mapping), upstream: opts.Upstream, rt: opts.Transport, m: opts.Metrics,
		paths: map[string]bool{}, body: newBodyLimits(MaxAdmissionReview, opts.BodyReadTimeout, max(opts.MaxBufferedBytes, MaxAdmissionReview), opts.Metrics.BufferedBytes)}
	for _, p := range opts.Paths {
		if !strings.HasPrefix(p, "/") {
			return nil, fmt.Errorf("admission: webhook path %q is not absolute", p)
		}
		a.paths[p] = true
	}
	return a, nil
}

// The direction labels of the admission side are translation directions: a review from kube-apiserver is
// translated like an API response (private → standard), the webhook's answer like an API request.
const (
	admissionIn  = "response"
	admissionOut = "request"
)

// readReview checks a review's path, method and type, then reads its body under the body limits. false: the
// answer is written. release frees the body's share of the buffer budget.
func (a *Admission) readReview(w http.ResponseWriter, r *http.Request) ([]byte, func(), bool) {
	none := func() {}
	if !a.paths[r.URL.Path] {
		a.m.Rejected.WithLabelValues(RejectAdmissionPath).Inc()
		http.NotFound(w, r)
		return nil, none, false
	}
	if r.Method != http.MethodPost {
		http.Error(w, "AdmissionReviews are POSTed", http.StatusMethodNotAllowed)
		return nil, none, false
	}
	if !isJSON(r.Header.Get("Content-Type")) {
		http.Error(w, "AdmissionReviews are JSON", http.StatusUnsupportedMediaType)
		return nil, none, false
	}
	raw, release, err := a.body.read(w, r)
	if err != nil {
		rej := bodyRejection(err, MaxAdmissionReview)
		a.m.Rejected.WithLabelValues(rej.reason).Inc()
		if rej.code == http.StatusServiceUnavailable {
			w.Header().Set("Retry-After", "1")
		}
		http.Error(w, rej.message, rej.code)
		return nil, release, false
	}
	return raw, release, true
}

// ServeHTTP handles one AdmissionReview.
func (a *Admission) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	raw, release, ok := a.readReview(w, r)
	defer release()
	if !ok {
		return
	}
	t0 := time.Now()
	in, err := a.t.AdmissionRequest(raw)
	a.m.TranslationDuration.WithLabelValues(admissionIn).Observe(time.Since(t0).Seconds())
	if err != nil {
		a.m.TranslationErrors.WithLabelValues(admissionIn, translate.ReasonOf(err)).Inc()
		http.Error(w, "capi-private: the AdmissionReview could not be translated: "+err.Error(), http.StatusBadRequest)
		return
	}
	if in.Translated {
		a.m.ObjectsTranslated.WithLabelValues(admissionIn).Inc()
	}

	u := *a.upstream
	u.Path = a.upstream.Path + r.URL.Path
	u.RawPath = ""
	u.RawQuery = r.URL.RawQuery
	out, err := http.NewRequestWithContext(r.Context(), http.MethodPost, u.String(), bytes.NewReader(in.Body))
	if err != nil {
		http.Error(w, err.Error(), http.StatusInternalServerError)
		return
	}
	out.Header.Set("Content-Type", "application/json")
	out.Header.Set("Accept", "application/json")
	resp, err := a.rt.RoundTrip(out)
	if err != nil {
		if r.Context().Err() == nil {
			a.m.UpstreamErrors.WithLabelValues(upstreamReason(err)).Inc()
			http.Error(w, "capi-private: CAPI's webhook server is unavailable: "+err.Error(), http.StatusServiceUnavailable)
		}
		return
	}
	defer resp.Body.Close()
	body, err := readBounded(resp.Body, MaxAdmissionReview)
	if err != nil {
		a.m.UpstreamErrors.WithLabelValues(UpstreamStream).Inc()
		http.Error(w, "capi-private: reading the webhook's answer: "+err.Error(), http.StatusBadGateway)
		return
	}
	if resp.StatusCode != http.StatusOK {
		// Not a review: kube-apiserver fails the call (failurePolicy). Nothing of it is an object to translate.
		http.Error(w, "capi-private: CAPI's webhook server answered "+resp.Status, http.StatusBadGateway)
		return
	}
	t0 = time.Now()
	back, err := a.t.AdmissionResponse(body)
	a.m.TranslationDuration.WithLabelValues(admissionOut).Observe(time.Since(t0).Seconds())
	if err != nil {
		a.m.TranslationErrors.WithLabelValues(admissionOut, translate.ReasonOf(err)).Inc()
		http.Error(w, "capi-private: the webhook's answer could not be translated: "+err.Error(), http.StatusBadGateway)
		return
	}
	if back.Changed {
		a.m.ObjectsTranslated.WithLabelValues(admissionOut).Inc()
	}
	w.Header().Set("Content-Type", "application/json")
	w.Header().Set("Content-Length", strconv.Itoa(len(back.Body)))
	_, _ = w.Write(back.Body)
}
