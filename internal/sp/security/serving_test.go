package security

import (
	"context"
	"crypto/x509"
	"encoding/pem"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"

	"github.com/dcm-sp/acm-cluster-sp/internal/devtest/testpki"
	"github.com/dcm-sp/acm-cluster-sp/internal/devtest/testwait"
)

func notAfter(t *testing.T, certPEM []byte) float64 {
	t.Helper()
	block, _ := pem.Decode(certPEM)
	c, err := x509.ParseCertificate(block.Bytes)
	if err != nil {
		t.Fatal(err)
	}
	return float64(c.NotAfter.Unix())
}

// A serving certificate that no longer loads (a half-written rotation, a wrong key) keeps the last good one served
// and is counted, so an alert can say so before that one expires; the certificate served is exported with its
// expiry. A good file again is served at once.
func TestServingCertificateReloadFailuresAreCounted(t *testing.T) {
	ca := testpki.NewCA(t, "reload-ca")
	first, second := ca.Serving(t, "first"), ca.Serving(t, "second")
	dir := t.TempDir()
	certFile := testpki.WriteFile(t, dir, "tls.crt", first.CertPEM)
	keyFile := testpki.WriteFile(t, dir, "tls.key", first.KeyPEM)
	reg := prometheus.NewRegistry()
	g, err := New(Options{Mode: ModeNone, Registry: reg})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	if _, err := g.ServingTLS(ctx, certFile, keyFile); err != nil {
		t.Fatal(err)
	}
	expiry := func() float64 {
		n, _ := testutil.GatherAndCount(reg, "acm_sp_tls_certificate_expiry_timestamp_seconds")
		if n != 1 {
			return 0
		}
		mfs, _ := reg.Gather()
		for _, mf := range mfs {
			if mf.GetName() == "acm_sp_tls_certificate_expiry_timestamp_seconds" {
				return mf.GetMetric()[0].GetGauge().GetValue()
			}
		}
		return 0
	}
	failures := func() float64 { return testutil.ToFloat64(g.reloadFailures.WithLabelValues("serving")) }
	if expiry() != notAfter(t, first.CertPEM) || failures() != 0 {
		t.Fatalf("at start: expiry %v failures %v", expiry(), failures())
	}

	testpki.ReplaceFile(t, dir, "tls.crt", []byte("-----BEGIN CERTIFICATE-----\nnot a certificate\n-----END CERTIFICATE-----\n"))
	testwait.For(t, 10*time.Second, "the failed reload counted", func() bool { return failures() >= 1 })
	if expiry() != notAfter(t, first.CertPEM) {
		t.Fatalf("after a broken file the served certificate changed: expiry %v", expiry())
	}

	testpki.ReplaceFile(t, dir, "tls.key", second.KeyPEM)
	testpki.ReplaceFile(t, dir, "tls.crt", second.CertPEM)
	testwait.For(t, 10*time.Second, "the new certificate served", func() bool { return expiry() == notAfter(t, second.CertPEM) })
	// A check in flight now may have read the files before they were good (the new key beside the broken
	// certificate): it ends first, and only the checks after it count.
	inFlight := g.reloadChecks.Load()
	testwait.For(t, 10*time.Second, "the reload check in flight ended", func() bool { return g.reloadChecks.Load() >= inFlight+1 })
	after, checks := failures(), g.reloadChecks.Load()
	testwait.For(t, 10*time.Second, "two more reload checks", func() bool { return g.reloadChecks.Load() >= checks+2 })
	if failures() != after {
		t.Fatalf("failures still counted with good files: %v → %v", after, failures())
	}
}
