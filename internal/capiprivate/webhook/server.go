//lint:file-ignore SA1019 the deprecated v1beta1 (and ipam v1alpha1) API packages are what this webhook serves.

package webhook

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"net"
	"net/http"
	"sync"
	"sync/atomic"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
	"github.com/prometheus/client_golang/prometheus/promhttp"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/metadata"
	"k8s.io/client-go/rest"
	clusterv1beta1 "sigs.k8s.io/cluster-api/api/core/v1beta1"
	"sigs.k8s.io/controller-runtime/pkg/certwatcher"
	"sigs.k8s.io/controller-runtime/pkg/webhook/conversion"

	"github.com/dcm-sp/acm-cluster-sp/internal/capiprivate/crds"
)

// ConvertPath is where kube-apiserver sends ConversionReviews (the private CRDs' client config path).
const ConvertPath = crds.ConvertPath

// Webhook is the conversion webhook: the private scheme, controller-runtime's handler, the apiVersion getter
// and the metrics.
type Webhook struct {
	Scheme  *runtime.Scheme
	Getter  *APIVersionGetter
	Metrics *Metrics
	convert http.Handler
}

// New builds the webhook for the cluster cfg reaches (it reads CRDs: get, list, watch on
// customresourcedefinitions), registering its metrics with reg; limits cap request bodies and the getter's
// negative cache (zero fields: DefaultLimits).
//
// It installs its getter with clusterv1beta1.SetAPIVersionGetter. The getter is process-global: nothing else in
// the process may convert standard objects, and the last New wins.
func New(cfg *rest.Config, reg prometheus.Registerer, limits Limits) (*Webhook, error) {
	scheme, err := NewScheme()
	if err != nil {
		return nil, err
	}
	metrics, err := NewMetrics(reg)
	if err != nil {
		return nil, err
	}
	mc, err := metadata.NewForConfig(cfg)
	if err != nil {
		return nil, err
	}
	limits = limits.withDefaults()
	w := &Webhook{
		Scheme:  scheme,
		Metrics: metrics,
		Getter:  NewAPIVersionGetter(mc, func(result string) { metrics.Lookups.WithLabelValues(result).Inc() }),
	}
	w.Getter.NegativeTTL = limits.NegativeCacheTTL
	w.convert = metrics.instrument(conversion.NewWebhookHandler(scheme, conversion.NewRegistry()), newLabelSet(scheme), limits.MaxRequestBytes)
	setAPIVersionGetter(w.APIVersion)
	return w, nil
}

// currentGetter is the getter last installed. Upstream keeps its getter in an unsynchronized package variable, so
// it is set exactly once per process, to a function that reads currentGetter atomically: installing another
// getter (a second New, a test) never races with conversions in flight.
var (
	currentGetter atomic.Pointer[func(schema.GroupKind) (string, error)]
	installOnce   sync.Once
)

func setAPIVersionGetter(f func(schema.GroupKind) (string, error)) {
	currentGetter.Store(&f)
	installOnce.Do(func() {
		clusterv1beta1.SetAPIVersionGetter(func(gk schema.GroupKind) (string, error) { return (*currentGetter.Load())(gk) })
	})
}

// installedGetter is the getter in effect (tests that swap in another one restore it).
func installedGetter() func(schema.GroupKind) (string, error) {
	if f := currentGetter.Load(); f != nil {
		return *f
	}
	return nil
}

// Install makes w's getter the process's again (New installs it; the last New wins).
func (w *Webhook) Install() { setAPIVersionGetter(w.APIVersion) }

// APIVersion is the getter New installs (for tests that replace it and restore it).
func (w *Webhook) APIVersion(gk schema.GroupKind) (string, error) { return w.Getter.APIVersion(gk) }

// Start starts the CRD informer (until ctx ends); /readyz fails until it has synced.
func (w *Webhook) Start(ctx context.Context) { w.Getter.Start(ctx) }

// WaitReady waits until the CRD informer has synced or ctx ends.
func (w *Webhook) WaitReady(ctx context.Context) error {
	for !w.Getter.HasSynced() {
		select {
		case <-ctx.Done():
			return fmt.Errorf("waiting for the CRD informer: %w", ctx.Err())
		case <-time.After(50 * time.Millisecond):
		}
	}
	return nil
}

// Handler serves /convert, /healthz (the process answers) and /readyz (the CRD informer has synced).
func (w *Webhook) Handler() http.Handler {
	mux := http.NewServeMux()
	mux.Handle("POST "+ConvertPath, w.convert)
	w.health(mux)
	return mux
}

func (w *Webhook) health(mux *http.ServeMux) {
	mux.HandleFunc("GET /healthz", func(rw http.ResponseWriter, _ *http.Request) { _, _ = rw.Write([]byte("ok")) })
	mux.HandleFunc("GET /readyz", func(rw http.ResponseWriter, _ *http.Request) {
		if !w.Getter.HasSynced() {
			http.Error(rw, "CRD informer not synced", http.StatusServiceUnavailable)
			return
		}
		_, _ = rw.Write([]byte("ok"))
	})
}

// ServeTLS serves h over HTTPS on l until ctx ends, with the key pair in certFile and keyFile, reloaded when the
// files change (controller-runtime's certwatcher), and the timeouts of limits.
func ServeTLS(ctx context.Context, l net.Listener, certFile, keyFile string, h http.Handler, limits Limits) error {
	cw, err := certwatcher.New(certFile, keyFile)
	if err != nil {
		return fmt.Errorf("loading the serving certificate: %w", err)
	}
	watchErr := make(chan error, 1)
	go func() {
		if err := cw.Start(ctx); err != nil {
			watchErr <- err
		}
	}()
	srv := limits.server(h)
	// No client certificate is requested: kube-apiserver presents none to conversion webhooks.
	srv.TLSConfig = &tls.Config{MinVersion: tls.VersionTLS12, GetCertificate: cw.GetCertificate}
	return serve(ctx, srv, func() error { return srv.ServeTLS(l, "", "") }, watchErr)
}

// serve runs srv until ctx ends (then shuts it down gracefully) or it fails.
func serve(ctx context.Context, srv *http.Server, run func() error, other <-chan error) error {
	done := make(chan error, 1)
	go func() { done <- run() }()
	select {
	case err := <-done:
		return err
	case err := <-other:
		_ = srv.Close()
		return err
	case <-ctx.Done():
		shutdownCtx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		err := srv.Shutdown(shutdownCtx)
		if rerr := <-done; !errors.Is(rerr, http.ErrServerClosed) && rerr != nil {
			return rerr
		}
		return err
	}
}

// Options of Run: the `capi-private webhook` command.
type Options struct {
	// Listen is the HTTPS address of /convert, /healthz and /readyz.
	Listen string
	// CertFile and KeyFile are the serving key pair (reloaded on change).
	CertFile, KeyFile string
	// MetricsListen is the plain HTTP address of /metrics, /healthz and /readyz.
	MetricsListen string
	// Config reaches kube-apiserver (CRD reads).
	Config *rest.Config
	// Listener and MetricsListener, when set, are used instead of listening on Listen and MetricsListen.
	Listener, MetricsListener net.Listener
	// Limits bound requests (zero fields take their defaults).
	Limits Limits
}

// Limits bound what one caller can make the webhook hold. Zero fields take the defaults of DefaultLimits.
type Limits struct {
	// MaxRequestBytes caps a ConversionReview (413 above it). kube-apiserver sends the objects of one list page
	// in one review, so the cap bounds the page a v1beta1 client may list unpaginated.
	MaxRequestBytes int64
	// ReadHeaderTimeout and ReadTimeout bound reading a request's headers and the whole request; WriteTimeout
	// bounds the answer; IdleTimeout closes idle keep-alive connections.
	ReadHeaderTimeout, ReadTimeout, WriteTimeout, IdleTimeout time.Duration
	// NegativeCacheTTL is how long the apiVersion getter remembers a CRD as missing.
	NegativeCacheTTL time.Duration
}

// DefaultLimits: kube-apiserver gives a conversion call 30 s, so a request that takes longer to arrive is of no
// use; 64 MiB holds an unpaginated v1beta1 list of several thousand Machines.
func DefaultLimits() Limits {
	return Limits{
		MaxRequestBytes:   64 << 20,
		ReadHeaderTimeout: 10 * time.Second,
		ReadTimeout:       30 * time.Second,
		WriteTimeout:      60 * time.Second,
		IdleTimeout:       90 * time.Second,
		NegativeCacheTTL:  30 * time.Second,
	}
}

// withDefaults fills zero fields from DefaultLimits.
func (l Limits) withDefaults() Limits {
	d := DefaultLimits()
	if l.MaxRequestBytes <= 0 {
		l.MaxRequestBytes = d.MaxRequestBytes
	}
	for _, f := range []struct{ v, def *time.Duration }{
		{&l.ReadHeaderTimeout, &d.ReadHeaderTimeout}, {&l.ReadTimeout, &d.ReadTimeout},
		{&l.WriteTimeout, &d.WriteTimeout}, {&l.IdleTimeout, &d.IdleTimeout}, {&l.NegativeCacheTTL, &d.NegativeCacheTTL},
	} {
		if *f.v <= 0 {
			*f.v = *f.def
		}
	}
	return l
}

// server is an http.Server for h with l's timeouts.
func (l Limits) server(h http.Handler) *http.Server {
	l = l.withDefaults()
	return &http.Server{Handler: h, ReadHeaderTimeout: l.ReadHeaderTimeout, ReadTimeout: l.ReadTimeout,
		WriteTimeout: l.WriteTimeout, IdleTimeout: l.IdleTimeout}
}

// Run runs the webhook until ctx ends.
func Run(ctx context.Context, opts Options) error {
	if opts.CertFile == "" || opts.KeyFile == "" {
		return errors.New("--tls-cert-file and --tls-private-key-file are required")
	}
	reg := prometheus.NewRegistry()
	reg.MustRegister(collectors.NewGoCollector(), collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}))
	w, err := New(opts.Config, reg, opts.Limits)
	if err != nil {
		return err
	}
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	w.Start(ctx)
	l, ml := opts.Listener, opts.MetricsListener
	if l == nil {
		if l, err = net.Listen("tcp", opts.Listen); err != nil {
			return err
		}
	}
	if ml == nil {
		if ml, err = net.Listen("tcp", opts.MetricsListen); err != nil {
			_ = l.Close()
			return err
		}
	}
	mux := http.NewServeMux()
	mux.Handle("GET /metrics", promhttp.HandlerFor(reg, promhttp.HandlerOpts{}))
	w.health(mux)
	msrv := opts.Limits.server(mux)
	metricsErr := make(chan error, 1)
	go func() { metricsErr <- serve(ctx, msrv, func() error { return msrv.Serve(ml) }, nil) }()

	err = ServeTLS(ctx, l, opts.CertFile, opts.KeyFile, w.Handler(), opts.Limits)
	cancel()
	if merr := <-metricsErr; err == nil {
		err = merr
	}
	return err
}
