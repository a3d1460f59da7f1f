package security

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"encoding/pem"
	"fmt"
	"log/slog"
	"sync/atomic"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"k8s.io/apiserver/pkg/server/dynamiccertificates"
)

// ServingTLS returns the HTTPS configuration for certFile/keyFile, kept current until ctx ends: when either file
// changes (a cert-manager renewal, the OpenShift service-CA rotating its mounted Secret) the next handshake gets
// the new certificate. With a client CA (clientCAFile) clients are asked for a certificate (never required: bearer
// tokens stay possible) and the accepted CAs are hinted; the certificate itself is verified by the authenticator.
// TLS 1.2 is the minimum, as kube-apiserver's own default.
//
// This is k8s.io/apiserver's own recipe (SecureServingInfo.tlsConfig): DynamicCertKeyPairContent watches the
// files, DynamicServingCertificateController builds the per-connection configuration. Files that no longer load
// leave the last good certificate served; the Guard counts those failures and exports the served certificate's
// expiry (reloads).
func (g *Guard) ServingTLS(ctx context.Context, certFile, keyFile string) (*tls.Config, error) {
	cert, err := dynamiccertificates.NewDynamicServingContentFromFiles("serving-cert", certFile, keyFile)
	if err != nil {
		return nil, fmt.Errorf("config: tlsCertFile/tlsKeyFile: %w", err)
	}
	clientCA := g.ClientCA()
	base := &tls.Config{MinVersion: tls.VersionTLS12, NextProtos: []string{"h2", "http/1.1"}}
	if clientCA != nil {
		base.ClientAuth = tls.RequestClientCert
	}
	ctrl := dynamiccertificates.NewDynamicServingCertificateController(base, clientCA, cert, nil, nil)
	cert.AddListener(ctrl)
	if ca, ok := clientCA.(interface {
		AddListener(dynamiccertificates.Listener)
	}); ok {
		ca.AddListener(ctrl)
	}
	if err := cert.RunOnce(ctx); err != nil {
		return nil, fmt.Errorf("config: tlsCertFile/tlsKeyFile: %w", err)
	}
	if err := ctrl.RunOnce(); err != nil {
		return nil, fmt.Errorf("config: serving certificate: %w", err)
	}
	g.serving.Store(cert)
	go cert.Run(ctx, 1)
	go ctrl.Run(1, ctx.Done())
	go g.watch(ctx, "serving", cert.RunOnce)
	return &tls.Config{MinVersion: tls.VersionTLS12, GetConfigForClient: ctrl.GetConfigForClient}, nil
}

// reloadCheckEvery is how often the TLS files are loaded again to learn whether they still load: the library
// reloads them when they change and keeps the last good content when they do not, but says so only in its log.
var reloadCheckEvery = 30 * time.Second

// reloads are the TLS reload metrics: acm_sp_tls_reload_failures_total{file} counts loads of the serving
// certificate and key ("serving") or of clientCAFile ("client-ca") that failed, and
// acm_sp_tls_certificate_expiry_timestamp_seconds is the expiry of the serving certificate in use (absent without
// TLS).
type reloads struct {
	reloadFailures *prometheus.CounterVec
	reloadChecks   atomic.Int64 // checks done (tests)
	serving        atomic.Pointer[dynamiccertificates.DynamicCertKeyPairContent]
	log            *slog.Logger
}

var expiryDesc = prometheus.NewDesc("acm_sp_tls_certificate_expiry_timestamp_seconds",
	"Expiry (Unix time) of the serving certificate in use.", nil, nil)

func newReloads(reg prometheus.Registerer, log *slog.Logger) *reloads {
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	r := &reloads{log: log, reloadFailures: prometheus.NewCounterVec(prometheus.CounterOpts{Name: "acm_sp_tls_reload_failures_total",
		Help: "Loads of the TLS files that failed (the last good content stays in use), by file: serving, client-ca."}, []string{"file"})}
	r.reloadFailures.WithLabelValues("serving")
	r.reloadFailures.WithLabelValues("client-ca")
	if reg != nil {
		reg.MustRegister(r.reloadFailures, expiryCollector{r})
	}
	return r
}

// watch loads a TLS file again every reloadCheckEvery until ctx ends, counting failures and logging when the
// state changes.
func (r *reloads) watch(ctx context.Context, file string, load func(context.Context) error) {
	t := time.NewTicker(reloadCheckEvery)
	defer t.Stop()
	failing := false
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
		err := load(ctx)
		switch {
		case err != nil && !failing:
			r.log.Warn("a TLS file no longer loads; the last good content stays in use", "file", file, "error", err)
		case err == nil && failing:
			r.log.Info("the TLS files load again", "file", file)
		}
		if err != nil {
			r.reloadFailures.WithLabelValues(file).Inc()
		}
		failing = err != nil
		r.reloadChecks.Add(1)
	}
}

type expiryCollector struct{ r *reloads }

func (e expiryCollector) Describe(ch chan<- *prometheus.Desc) { ch <- expiryDesc }

func (e expiryCollector) Collect(ch chan<- prometheus.Metric) {
	cert := e.r.serving.Load()
	if cert == nil {
		return
	}
	pemBytes, _ := cert.CurrentCertKeyContent()
	block, _ := pem.Decode(pemBytes)
	if block == nil {
		return
	}
	leaf, err := x509.ParseCertificate(block.Bytes)
	if err != nil {
		return
	}
	ch <- prometheus.MustNewConstMetric(expiryDesc, prometheus.GaugeValue, float64(leaf.NotAfter.Unix()))
}
