// Package registration registers the SP with the DCM registry — SPM, or an Environment Agent, which take the same
// body — and keeps the registration current (docs/dcm.md): POST {registrationURL}/providers through SPM's own Go
// client, snake_case, with the capabilities (platforms, provisioning types, Kubernetes versions) in metadata.
//
// It never gives up and never blocks the API: network errors and 5xx are retried with exponential backoff and
// jitter (1 s doubling to 5 min), 4xx answers are logged with the registry's problem detail and retried at the
// longest interval, so a misconfiguration is visible and fixed without a restart. It re-registers when the
// capability set changes and every refresh period (a registry that lost its state heals).
package registration

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"log/slog"
	"math/rand/v2"
	"net/http"
	"os"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/dcm-project/service-provider-manager/api/v1alpha1/provider"
	spmclient "github.com/dcm-project/service-provider-manager/pkg/client/provider"
	"github.com/prometheus/client_golang/prometheus"
	"k8s.io/client-go/transport"

	"github.com/dcm-sp/acm-cluster-sp/internal/sp/leaderloop"
	"github.com/dcm-sp/acm-cluster-sp/internal/sp/redact"
)

// Capabilities is what the SP can provision right now.
type Capabilities struct {
	Platforms          []string // kubevirt, baremetal
	KubernetesVersions []string // sorted minors, e.g. 1.30
}

func (c Capabilities) equal(o Capabilities) bool {
	return slices.Equal(c.Platforms, o.Platforms) && slices.Equal(c.KubernetesVersions, o.KubernetesVersions)
}

// Options configure the Registrar.
type Options struct {
	RegistryURL  string // SPM base URL ending in /api/v1alpha1
	Name         string
	DisplayName  string
	Endpoint     string // apiHost + /api/v1alpha1/clusters
	ProviderID   string // optional ?id=
	Capabilities func(context.Context) Capabilities
	MinBackoff   time.Duration // default 1s
	MaxBackoff   time.Duration // default 5m (also the 4xx retry interval)
	Refresh      time.Duration // re-register this often even without changes (default 10m)
	Check        time.Duration // recompute capabilities at least this often (default 5m)
	HTTPClient   *http.Client  // default: NewHTTPClient("", "")
	Registry     prometheus.Registerer
	Log          *slog.Logger
}

// Registrar keeps the SP registered.
type Registrar struct {
	o      Options
	client *spmclient.ClientWithResponses
	log    *slog.Logger
	// loop runs the leader's term: one key, looked at again when due, on Trigger and every Check.
	loop *leaderloop.Loop
	// failures counts the term's consecutive failed registrations (its one worker's).
	failures int
	m        *metrics

	mu         sync.Mutex
	registered bool
	running    bool
	last       Capabilities
	lastOK     time.Time
	lastErr    string
	providerID string
}

// New validates the options and prepares the client.
func New(o Options) (*Registrar, error) {
	if o.MinBackoff == 0 {
		o.MinBackoff = time.Second
	}
	if o.MaxBackoff == 0 {
		o.MaxBackoff = 5 * time.Minute
	}
	if o.Refresh == 0 {
		o.Refresh = 10 * time.Minute
	}
	if o.Check == 0 {
		o.Check = 5 * time.Minute
	}
	if o.HTTPClient == nil {
		var err error
		if o.HTTPClient, err = NewHTTPClient("", ""); err != nil {
			return nil, err
		}
	}
	if o.Log == nil {
		o.Log = slog.New(slog.DiscardHandler)
	}
	c, err := spmclient.NewClientWithResponses(o.RegistryURL, spmclient.WithHTTPClient(o.HTTPClient))
	if err != nil {
		return nil, fmt.Errorf("registry client: %w", err)
	}
	r := &Registrar{o: o, client: c, log: o.Log, m: newMetrics(o.Registry)}
	r.loop = leaderloop.New(leaderloop.Options{Name: "registration", Workers: 1, Handle: r.handle})
	return r, nil
}

// NewHTTPClient returns the registry client's HTTP client: a 10 s timeout, the CA bundle of caFile (if any) on top
// of nothing else, the bearer token of tokenFile (if any; re-read when the file changes, as projected service
// account tokens rotate), and a redirect policy that never follows the registry to another host — the token is
// added to every request by the transport, so following a redirect elsewhere would hand it over.
func NewHTTPClient(tokenFile, caFile string) (*http.Client, error) {
	base := http.DefaultTransport.(*http.Transport).Clone()
	if caFile != "" {
		pem, err := os.ReadFile(caFile)
		if err != nil {
			return nil, fmt.Errorf("config: registrationCAFile: cannot read %s", caFile)
		}
		pool := x509.NewCertPool()
		if !pool.AppendCertsFromPEM(pem) {
			return nil, fmt.Errorf("config: registrationCAFile: %s holds no PEM certificate", caFile)
		}
		base.TLSClientConfig = &tls.Config{MinVersion: tls.VersionTLS12, RootCAs: pool}
	}
	var rt http.RoundTripper = base
	if tokenFile != "" {
		if _, err := os.Stat(tokenFile); err != nil {
			return nil, fmt.Errorf("config: registrationTokenFile: cannot read %s", tokenFile)
		}
		var err error
		if rt, err = transport.NewBearerAuthWithRefreshRoundTripper("", tokenFile, base); err != nil {
			return nil, fmt.Errorf("config: registrationTokenFile: %w", err)
		}
	}
	return &http.Client{Timeout: 10 * time.Second, Transport: rt, CheckRedirect: sameHostRedirects}, nil
}

// sameHostRedirects follows at most 5 redirects, and only to the same scheme and host.
func sameHostRedirects(req *http.Request, via []*http.Request) error {
	if len(via) >= 5 {
		return errors.New("stopped after 5 redirects")
	}
	first := via[0].URL
	if req.URL.Host != first.Host || req.URL.Scheme != first.Scheme {
		return fmt.Errorf("refusing to follow a redirect to another host (%s): the registry's credentials stay with the registry", redact.URL(req.URL.Scheme+"://"+req.URL.Host))
	}
	return nil
}

// Options are the options the registrar runs with (defaults applied).
func (r *Registrar) Options() Options { return r.o }

// Trigger asks for the capabilities to be compared again soon (ClusterImageSets or platforms changed).
func (r *Registrar) Trigger() { r.loop.Add(registrationKey) }

// registrationKey is the one key of the registrar's loop.
const registrationKey = "registration"

// Status reports the registration for the health check.
func (r *Registrar) Status() (bool, string) {
	r.mu.Lock()
	defer r.mu.Unlock()
	switch {
	case !r.running:
		return true, "registration runs on the leader replica"
	case r.registered:
		return true, fmt.Sprintf("registered as %s (id %s) at %s", r.o.Name, r.providerID, r.lastOK.UTC().Format(time.RFC3339))
	case r.lastErr != "":
		return false, "not registered: " + r.lastErr // a kind, never a URL (health answers unauthenticated callers)
	default:
		return false, "not registered yet"
	}
}

// Start registers and keeps the registration current until ctx ends (a leadership term).
func (r *Registrar) Start(ctx context.Context) error {
	r.loop.Run(ctx, leaderloop.Term{
		Begin: func(context.Context) {
			r.mu.Lock()
			r.running = true
			r.mu.Unlock()
			r.failures = 0
			r.log.Info("registering with DCM", "registry", redact.URL(r.o.RegistryURL), "name", r.o.Name, "endpoint", r.o.Endpoint)
			r.loop.Add(registrationKey)
		},
		While: leaderloop.Every(r.o.Check, func(context.Context) { r.loop.Add(registrationKey) }),
		End: func() {
			r.mu.Lock()
			r.running = false
			r.mu.Unlock()
		},
	})
	return nil
}

// handle compares the capabilities with those last registered, registers when they changed, when not registered
// yet or when the refresh period has passed, and returns when to look again (leaderloop.Handler).
func (r *Registrar) handle(ctx context.Context, _ string) (time.Duration, error) {
	caps := r.o.Capabilities(ctx)
	r.mu.Lock()
	due := !r.registered || !caps.equal(r.last) || time.Since(r.lastOK) >= r.o.Refresh
	next := time.Until(r.lastOK.Add(r.o.Refresh))
	r.mu.Unlock()
	if !due {
		return max(next, time.Millisecond), nil
	}
	err := r.register(ctx, caps)
	switch {
	case err == nil:
		r.failures = 0
		return r.o.Refresh, nil
	case ctx.Err() != nil:
		return 0, leaderloop.ErrNothingDone // the term ended
	default:
		r.failures++
		return r.backoff(r.failures, err), nil
	}
}

// clientError is a 4xx answer from the registry: retrying sooner will not help.
type clientError struct {
	code   int
	detail string
	cause  string // what the answer means, when it is recognised (shown on health)
}

// serviceTypeTaken recognises the answer of an Environment Agent that already has a provider for our service
// type: it serves one provider per service type and refuses a second with 409, "service type 'cluster' is already
// served by provider 'x'". SPM never answers it (its 409s are name/id conflicts).
func serviceTypeTaken(code int, detail string) bool {
	d := strings.ToLower(detail)
	return code == http.StatusConflict && strings.Contains(d, "service type") && strings.Contains(d, "already served")
}

func (e *clientError) Error() string {
	return fmt.Sprintf("registry answered %d: %s", e.code, e.detail)
}

func (r *Registrar) backoff(failures int, err error) time.Duration {
	var ce *clientError
	if errors.As(err, &ce) {
		return r.o.MaxBackoff
	}
	d := r.o.MinBackoff << min(failures-1, 30)
	if d <= 0 || d > r.o.MaxBackoff {
		d = r.o.MaxBackoff
	}
	// ±20 % jitter so replicas of many SPs do not retry in lockstep.
	return time.Duration(float64(d) * (0.8 + 0.4*rand.Float64()))
}

func (r *Registrar) register(ctx context.Context, caps Capabilities) error {
	meta := &provider.ProviderMetadata{}
	meta.Set("supportedPlatforms", nonNil(caps.Platforms))
	meta.Set("supportedProvisioningTypes", []string{"hypershift"})
	meta.Set("kubernetesSupportedVersions", nonNil(caps.KubernetesVersions))
	ops := []string{"CREATE", "DELETE", "READ", "UPDATE"} // UPDATE: PATCH /clusters/{id} (day-2)
	display := r.o.DisplayName
	body := provider.Provider{
		Name: r.o.Name, ServiceType: "cluster", SchemaVersion: "v1alpha1", Endpoint: r.o.Endpoint,
		DisplayName: &display, Operations: &ops, Metadata: meta,
	}
	var params *provider.CreateProviderParams
	if r.o.ProviderID != "" {
		id := r.o.ProviderID
		params = &provider.CreateProviderParams{Id: &id}
	}
	rctx, cancel := context.WithTimeout(ctx, r.o.HTTPClient.Timeout+time.Second)
	defer cancel()
	resp, err := r.client.CreateProviderWithResponse(rctx, params, body)
	if err != nil {
		return r.failed(err, "network")
	}
	var got *provider.Provider
	switch {
	case resp.JSON201 != nil:
		got = resp.JSON201
	case resp.JSON200 != nil:
		got = resp.JSON200
	}
	if got != nil {
		id := ""
		if got.Id != nil {
			id = *got.Id
		}
		r.mu.Lock()
		first := !r.registered
		r.registered, r.last, r.lastOK, r.lastErr, r.providerID = true, caps, time.Now(), "", id
		r.mu.Unlock()
		r.m.attempts.WithLabelValues("success").Inc()
		r.m.state.Set(1)
		r.m.lastSuccess.SetToCurrentTime()
		r.log.Info("registered with DCM", "status", resp.StatusCode(), "id", id, "first", first,
			"platforms", caps.Platforms, "kubernetesVersions", caps.KubernetesVersions)
		return nil
	}
	code := resp.StatusCode()
	detail := problemDetail(resp)
	if code >= 400 && code < 500 {
		err := &clientError{code: code, detail: detail}
		if serviceTypeTaken(code, detail) {
			err.cause = "service type cluster is taken by another provider"
			r.log.Error("DCM refused the registration: service type cluster is taken by another provider (an Environment Agent serves one provider per service type; unregister the other one) — retrying every "+r.o.MaxBackoff.String(),
				"status", code, "detail", detail, "registry", redact.URL(r.o.RegistryURL))
			return r.failed(err, "rejected")
		}
		r.log.Error("DCM registry refused the registration; fix the configuration (registrationURL, providerName, providerID, registrationTokenFile) — retrying every "+r.o.MaxBackoff.String(),
			"status", code, "detail", detail, "registry", redact.URL(r.o.RegistryURL))
		return r.failed(err, "rejected")
	}
	return r.failed(fmt.Errorf("registry answered %d: %s", code, detail), "server-error")
}

func (r *Registrar) failed(err error, kind string) error {
	var ce *clientError
	shown := redact.Cause(err)
	if errors.As(err, &ce) {
		shown = fmt.Sprintf("registry answered %d %s", ce.code, http.StatusText(ce.code))
		if ce.cause != "" {
			shown += ": " + ce.cause
		}
	} else if kind == "server-error" {
		shown = "registry answered with a server error"
	}
	r.mu.Lock()
	r.lastErr = shown
	registered := r.registered
	r.mu.Unlock()
	r.m.attempts.WithLabelValues(kind).Inc()
	if !registered {
		r.m.state.Set(0)
	}
	if !errors.As(err, &ce) {
		r.log.Warn("registration with DCM failed; retrying", "error", err, "registry", redact.URL(r.o.RegistryURL))
	}
	return err
}

// problemDetail extracts the registry's explanation: problem+json detail, or SPM's text/plain 400 body.
func problemDetail(resp *spmclient.CreateProviderResponse) string {
	for _, p := range []*provider.Error{resp.ApplicationproblemJSON400, resp.ApplicationproblemJSON409, resp.ApplicationproblemJSON422, resp.ApplicationproblemJSONDefault} {
		if p != nil {
			if p.Detail != nil && *p.Detail != "" {
				return p.Title + ": " + *p.Detail
			}
			return p.Title
		}
	}
	body := strings.TrimSpace(string(resp.Body))
	if len(body) > 300 {
		body = body[:300] + "…"
	}
	if body == "" {
		return http.StatusText(resp.StatusCode())
	}
	return body
}

func nonNil(s []string) []string {
	if s == nil {
		return []string{}
	}
	return s
}

type metrics struct {
	state       prometheus.Gauge
	attempts    *prometheus.CounterVec
	lastSuccess prometheus.Gauge
}

func newMetrics(reg prometheus.Registerer) *metrics {
	m := &metrics{
		state:       prometheus.NewGauge(prometheus.GaugeOpts{Name: "acm_sp_registration_registered", Help: "1 while the SP is registered with DCM."}),
		attempts:    prometheus.NewCounterVec(prometheus.CounterOpts{Name: "acm_sp_registration_attempts_total", Help: "Registration attempts by result (success, network, server-error, rejected)."}, []string{"result"}),
		lastSuccess: prometheus.NewGauge(prometheus.GaugeOpts{Name: "acm_sp_registration_last_success_timestamp_seconds", Help: "Time of the last successful registration."}),
	}
	if reg != nil {
		reg.MustRegister(m.state, m.attempts, m.lastSuccess)
	}
	return m
}
