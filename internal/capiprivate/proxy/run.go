package proxy

import (
	"context"
	"crypto/sha256"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"net"
	"net/http"
	"net/url"
	"os"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
	"github.com/prometheus/client_golang/prometheus/promhttp"
	"sigs.k8s.io/controller-runtime/pkg/certwatcher"

	"github.com/dcm-sp/acm-cluster-sp/internal/loopback"
)

// RunOptions configure Run: the `capi-private proxy` command.
type RunOptions struct {
	// Options configure the proxy; Run serves its metrics from a registry of its own (Registerer is ignored).
	Options
	// Listen is the proxy's address (default 127.0.0.1:8080). A non-loopback address needs TLSCertFile and
	// TLSKeyFile; own-identity mode needs a loopback address.
	Listen string
	// MetricsListen is the plain HTTP address of /metrics, /healthz and /readyz (default 127.0.0.1:9441).
	MetricsListen string
	// MetricsAuth says who may read /metrics (default MetricsOpen).
	MetricsAuth MetricsAuth
	// TLSCertFile and TLSKeyFile, when set, serve the proxy over HTTPS (reloaded when the files change). Client
	// certificates are never requested (tls.NoClientCert): they cannot be passed upstream.
	TLSCertFile, TLSKeyFile string
	// Listener and MetricsListener, when set, are used instead of listening on Listen and MetricsListen (their
	// addresses are checked the same way).
	Listener, MetricsListener net.Listener
	// ShutdownTimeout bounds the wait for open requests when ctx ends (default 15 s). Watches end at once.
	ShutdownTimeout time.Duration
	// Admission, if set, also serves the webhook side (AdmissionReviews for CAPI's own webhooks) over HTTPS.
	Admission *AdmissionRunOptions
	// Ready, if set, is called with the listeners' addresses once they serve (admissionAddr nil without Admission).
	Ready func(proxyAddr, metricsAddr, admissionAddr net.Addr)
}

// AdmissionRunOptions serve the webhook side: kube-apiserver calls it (the private groups' webhook configurations
// point at it) and it calls CAPI's webhook server.
type AdmissionRunOptions struct {
	// Listen is its HTTPS address; Listener, when set, is used instead.
	Listen   string
	Listener net.Listener
	// CertFile and KeyFile are its serving key pair (required; reloaded when they change).
	CertFile, KeyFile string
	// Upstream is CAPI's webhook server, e.g. https://127.0.0.1:9443; UpstreamCAFile the CA that signed its
	// certificate (default: the system roots).
	Upstream       *url.URL
	UpstreamCAFile string
	// Paths are the webhook paths forwarded (default DefaultAdmissionPaths); others are 404.
	Paths []string
}

// Defaults of RunOptions.
const (
	DefaultListen        = "127.0.0.1:8080"
	DefaultMetricsListen = "127.0.0.1:9441"
)

// CheckListen validates a listen address against the auth mode and TLS: off loopback the proxy needs TLS, and
// own-identity serves loopback only.
func CheckListen(addr string, auth AuthMode, tlsConfigured bool) error {
	if _, _, err := net.SplitHostPort(addr); err != nil {
		return fmt.Errorf("listen address %q: %w", addr, err)
	}
	onLoopback := loopback.Is(addr)
	if !onLoopback && auth == AuthOwnIdentity {
		return fmt.Errorf("--auth own-identity serves loopback only; %q is not a loopback address", addr)
	}
	if !onLoopback && !tlsConfigured {
		return fmt.Errorf("listening on %q (not loopback) needs --tls-cert-file and --tls-private-key-file", addr)
	}
	return nil
}

// Run serves the proxy and its metrics until ctx ends, then shuts down gracefully: watches are ended (clients
// re-watch), other requests get up to ShutdownTimeout to finish.
func Run(ctx context.Context, opts RunOptions) error {
	tlsOn, err := opts.complete()
	if err != nil {
		return err
	}
	reg := prometheus.NewRegistry()
	reg.MustRegister(collectors.NewGoCollector(), collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}))
	opts.Registerer = reg // served on /metrics
	p, err := New(opts.Options)
	if err != nil {
		return err
	}

	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	srv := &http.Server{Handler: p, ReadHeaderTimeout: 10 * time.Second, IdleTimeout: 2 * time.Minute}
	if tlsOn {
		if srv.TLSConfig, err = servingTLS(ctx, opts.TLSCertFile, opts.TLSKeyFile); err != nil {
			return err
		}
	}
	l, ml, err := opts.listeners()
	if err != nil {
		return err
	}
	msrv := &http.Server{Handler: metricsMux(reg, p, opts.MetricsAuth), ReadHeaderTimeout: 10 * time.Second}
	var asrv *http.Server
	var al net.Listener
	if a := opts.Admission; a != nil {
		if asrv, al, err = admissionServer(ctx, a, p.Metrics()); err != nil {
			_ = l.Close()
			_ = ml.Close()
			return err
		}
	}

	errs := make(chan error, 3)
	go func() {
		if tlsOn {
			errs <- srv.ServeTLS(l, "", "")
		} else {
			errs <- srv.Serve(l)
		}
	}()
	go func() { errs <- msrv.Serve(ml) }()
	var aaddr net.Addr
	if asrv != nil {
		aaddr = al.Addr()
		go func() { errs <- asrv.ServeTLS(al, "", "") }()
	}
	if opts.Ready != nil {
		opts.Ready(l.Addr(), ml.Addr(), aaddr)
	}

	var runErr error
	select {
	case <-ctx.Done():
	case runErr = <-errs:
	}
	p.StopWatches()
	sctx, scancel := context.WithTimeout(context.Background(), opts.ShutdownTimeout)
	defer scancel()
	err = errors.Join(srv.Shutdown(sctx), msrv.Shutdown(sctx))
	if asrv != nil {
		err = errors.Join(err, asrv.Shutdown(sctx))
	}
	if runErr != nil && !errors.Is(runErr, http.ErrServerClosed) {
		return runErr
	}
	return err
}

// complete fills in the defaults and refuses a combination that would serve unsafely; it reports whether the proxy
// serves TLS.
func (opts *RunOptions) complete() (tlsOn bool, err error) {
	if opts.Listen == "" {
		opts.Listen = DefaultListen
	}
	if opts.MetricsListen == "" {
		opts.MetricsListen = DefaultMetricsListen
	}
	if opts.ShutdownTimeout == 0 {
		opts.ShutdownTimeout = 15 * time.Second
	}
	if (opts.TLSCertFile == "") != (opts.TLSKeyFile == "") {
		return false, errors.New("--tls-cert-file and --tls-private-key-file go together")
	}
	tlsOn = opts.TLSCertFile != ""
	auth := opts.Auth
	if auth == "" {
		auth = AuthPassthrough
	}
	switch opts.MetricsAuth {
	case "":
		opts.MetricsAuth = MetricsOpen
	case MetricsOpen:
	case MetricsSelfReview:
		if auth != AuthPassthrough {
			return false, errors.New("--metrics-auth self-review needs --auth passthrough (the review must carry the scraper's token alone)")
		}
	default:
		return false, fmt.Errorf("--metrics-auth %q: none or self-review", opts.MetricsAuth)
	}
	listenAddr := opts.Listen
	if opts.Listener != nil {
		listenAddr = opts.Listener.Addr().String()
	}
	return tlsOn, CheckListen(listenAddr, auth, tlsOn)
}

// servingTLS serves the certificate files, reloaded when they change, until ctx ends.
func servingTLS(ctx context.Context, certFile, keyFile string) (*tls.Config, error) {
	cw, err := certwatcher.New(certFile, keyFile)
	if err != nil {
		return nil, fmt.Errorf("loading the serving certificate: %w", err)
	}
	go func() { _ = cw.Start(ctx) }()
	return &tls.Config{MinVersion: tls.VersionTLS12, ClientAuth: tls.NoClientCert,
		GetCertificate: cw.GetCertificate, NextProtos: []string{"h2", "http/1.1"}}, nil
}

// listeners are the proxy's and the metrics' listeners: the ones given, else opened on their addresses.
func (opts *RunOptions) listeners() (l, ml net.Listener, err error) {
	l, ml = opts.Listener, opts.MetricsListener
	if l == nil {
		if l, err = net.Listen("tcp", opts.Listen); err != nil {
			return nil, nil, err
		}
	}
	if ml == nil {
		if ml, err = net.Listen("tcp", opts.MetricsListen); err != nil {
			_ = l.Close()
			return nil, nil, err
		}
	}
	return l, ml, nil
}

// metricsMux serves /metrics (to whom auth allows), /healthz and /readyz (kube-apiserver reachable through the
// proxy's transport).
func metricsMux(reg *prometheus.Registry, p *Proxy, auth MetricsAuth) *http.ServeMux {
	mux := http.NewServeMux()
	var metrics http.Handler = promhttp.HandlerFor(reg, promhttp.HandlerOpts{})
	if auth == MetricsSelfReview {
		metrics = (&selfReviewer{e: p.e, now: time.Now, cache: map[[sha256.Size]byte]review{}}).wrap(metrics)
	}
	mux.Handle("GET /metrics", metrics)
	mux.HandleFunc("GET /healthz", func(w http.ResponseWriter, _ *http.Request) { _, _ = w.Write([]byte("ok")) })
	mux.HandleFunc("GET /readyz", func(w http.ResponseWriter, r *http.Request) {
		if err := p.Ready(r.Context()); err != nil {
			http.Error(w, "kube-apiserver unreachable: "+err.Error(), http.StatusServiceUnavailable)
			return
		}
		_, _ = w.Write([]byte("ok"))
	})
	return mux
}

// admissionServer builds the webhook side's HTTPS server and listener.
func admissionServer(ctx context.Context, a *AdmissionRunOptions, m *Metrics) (*http.Server, net.Listener, error) {
	if a.CertFile == "" || a.KeyFile == "" {
		return nil, nil, errors.New("the admission side needs a serving certificate and key")
	}
	rootCAs, err := x509.SystemCertPool()
	if err != nil {
		return nil, nil, err
	}
	if a.UpstreamCAFile != "" {
		pem, err := os.ReadFile(a.UpstreamCAFile)
		if err != nil {
			return nil, nil, err
		}
		rootCAs = x509.NewCertPool()
		if !rootCAs.AppendCertsFromPEM(pem) {
			return nil, nil, fmt.Errorf("no certificate in %s", a.UpstreamCAFile)
		}
	}
	tr := http.DefaultTransport.(*http.Transport).Clone()
	tr.TLSClientConfig = &tls.Config{MinVersion: tls.VersionTLS12, RootCAs: rootCAs}
	h, err := NewAdmission(AdmissionOptions{Upstream: a.Upstream, Transport: tr, Metrics: m, Paths: a.Paths})
	if err != nil {
		return nil, nil, err
	}
	cw, err := certwatcher.New(a.CertFile, a.KeyFile)
	if err != nil {
		return nil, nil, fmt.Errorf("loading the admission serving certificate: %w", err)
	}
	go func() { _ = cw.Start(ctx) }()
	l := a.Listener
	if l == nil {
		if l, err = net.Listen("tcp", a.Listen); err != nil {
			return nil, nil, err
		}
	}
	// Reviews are short requests: the whole exchange is bounded (kube-apiserver waits at most 30 s for a webhook).
	srv := &http.Server{Handler: h, ReadHeaderTimeout: 10 * time.Second, ReadTimeout: DefaultBodyReadTimeout,
		WriteTimeout: 60 * time.Second, IdleTimeout: 90 * time.Second,
		TLSConfig: &tls.Config{MinVersion: tls.VersionTLS12, GetCertificate: cw.GetCertificate}}
	return srv, l, nil
}
