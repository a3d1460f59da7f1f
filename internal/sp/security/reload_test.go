package security

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"encoding/pem"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"os"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"
	utilerrors "k8s.io/apimachinery/pkg/util/errors"
	"k8s.io/client-go/rest"

	"github.com/dcm-sp/acm-cluster-sp/internal/devtest/testlog"
	"github.com/dcm-sp/acm-cluster-sp/internal/devtest/testpki"
	"github.com/dcm-sp/acm-cluster-sp/internal/devtest/testwait"
)

// TestMain checks the TLS files often, once for every test (the watchers read the period when they start).
func TestMain(m *testing.M) {
	reloadCheckEvery = 50 * time.Millisecond
	os.Exit(m.Run())
}

// A failed TokenReview call is an outage; a rejected credential (as the library words it, alone or among the
// errors of several authenticators) is not.
func TestIsUnavailable(t *testing.T) {
	for _, c := range []struct {
		err         error
		unavailable bool
	}{
		{errors.New("invalid bearer token"), false},
		{utilerrors.NewAggregate([]error{errors.New("invalid bearer token"), errors.New("invalid bearer token")}), false},
		{errors.New(`verifying certificate SN=2, SKID=, AKID= failed: x509: certificate signed by unknown authority`), false},
		{errors.New("x509: certificate has expired or is not yet valid"), false},
		{errors.New(`tokenreviews.authentication.k8s.io is forbidden: User "system:serviceaccount:sp:sp" cannot create resource "tokenreviews"`), true},
		{errors.New(`Post "https://hub:6443/apis/authentication.k8s.io/v1/tokenreviews": dial tcp: connection refused`), true},
		{errors.New("the token issuer's keys could not be fetched"), true},
	} {
		if got := isUnavailable(c.err); got != c.unavailable {
			t.Errorf("isUnavailable(%q) = %v, want %v", c.err, got, c.unavailable)
		}
	}
}

// The TLS-file watcher counts every check that fails and logs only the changes of state: the first failure of a
// run of them (a warning) and the first success after it.
func TestReloadWatchCountsFailuresAndLogsChanges(t *testing.T) {
	logs := &testlog.Buffer{}
	r := newReloads(prometheus.NewRegistry(), slog.New(slog.NewTextHandler(logs, nil)))
	outcomes := []bool{true, false, false, true, true, false, true} // then true for ever
	var n atomic.Int64
	load := func(context.Context) error {
		i := int(n.Add(1)) - 1
		if i < len(outcomes) && !outcomes[i] {
			return fmt.Errorf("check %d: no PEM data", i)
		}
		return nil
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { r.watch(ctx, "client-ca", load); close(done) }()
	testwait.For(t, 10*time.Second, "every outcome checked", func() bool { return r.reloadChecks.Load() >= int64(len(outcomes)+1) })
	cancel()
	select {
	case <-done:
	case <-time.After(10 * time.Second):
		t.Fatal("the watcher did not stop with its context")
	}
	if f := testutil.ToFloat64(r.reloadFailures.WithLabelValues("client-ca")); f != 3 {
		t.Fatalf("%v failures counted, want 3", f)
	}
	if f := testutil.ToFloat64(r.reloadFailures.WithLabelValues("serving")); f != 0 {
		t.Fatalf("%v serving failures counted for client-ca checks", f)
	}
	out := logs.String()
	if warn, info := strings.Count(out, "no longer loads"), strings.Count(out, "load again"); warn != 2 || info != 2 {
		t.Fatalf("%d warnings and %d recoveries logged, want 2 and 2:\n%s", warn, info, out)
	}
	if !strings.Contains(out, "check 1: no PEM data") || !strings.Contains(out, "file=client-ca") {
		t.Fatalf("the warning does not say which file and why:\n%s", out)
	}
}

// The client CA is kept current while Run runs: a rotated clientCAFile authenticates certificates of the new CA
// and no longer those of the old one; a file that no longer loads keeps the last good CA and is counted.
func TestClientCARotation(t *testing.T) {
	hub := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		t.Errorf("the hub was asked %s %s for a client certificate", r.Method, r.URL.Path)
		http.Error(w, "no", http.StatusForbidden)
	}))
	defer hub.Close()
	oldCA, newCA := testpki.NewCA(t, "old-ca"), testpki.NewCA(t, "new-ca")
	dir := t.TempDir()
	caFile := testpki.WriteFile(t, dir, "ca.crt", oldCA.CertPEM)
	g, err := New(Options{Mode: ModeKubernetes, Hub: &rest.Config{Host: hub.URL}, ClientCAFile: caFile, Registry: prometheus.NewRegistry()})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	go g.Run(ctx)
	accepts := func(ca *testpki.CA) bool {
		u, err := g.Authenticate(withCert(t, ca.Client(t, "cert-user").CertPEM))
		return err == nil && u.GetName() == "cert-user"
	}
	if !accepts(oldCA) || accepts(newCA) {
		t.Fatal("at start: want the old CA's certificates only")
	}

	testpki.ReplaceFile(t, dir, "ca.crt", newCA.CertPEM)
	testwait.For(t, 10*time.Second, "the new CA's certificates accepted", func() bool { return accepts(newCA) })
	if accepts(oldCA) {
		t.Fatal("the old CA's certificates are still accepted after the rotation")
	}

	testpki.ReplaceFile(t, dir, "ca.crt", []byte("not a certificate"))
	failures := func() float64 { return testutil.ToFloat64(g.reloadFailures.WithLabelValues("client-ca")) }
	testwait.For(t, 10*time.Second, "the broken file counted", func() bool { return failures() >= 1 })
	if !accepts(newCA) {
		t.Fatal("a broken clientCAFile replaced the last good CA")
	}
}

// Without TLS no certificate expiry is exported (an absent series, not a zero that would alert).
func TestNoExpiryWithoutTLS(t *testing.T) {
	reg := prometheus.NewRegistry()
	if _, err := New(Options{Mode: ModeNone, Registry: reg}); err != nil {
		t.Fatal(err)
	}
	if n, err := testutil.GatherAndCount(reg, "acm_sp_tls_certificate_expiry_timestamp_seconds"); err != nil || n != 0 {
		t.Fatalf("%d expiry series (%v), want none", n, err)
	}
	if n, err := testutil.GatherAndCount(reg, "acm_sp_tls_reload_failures_total"); err != nil || n != 2 {
		t.Fatalf("%d reload failure series (%v), want serving and client-ca at 0", n, err)
	}
}

// withCert is a request over a TLS connection whose client presented certPEM.
func withCert(t *testing.T, certPEM []byte) *http.Request {
	t.Helper()
	block, _ := pem.Decode(certPEM)
	c, err := x509.ParseCertificate(block.Bytes)
	if err != nil {
		t.Fatal(err)
	}
	r := httptest.NewRequest(http.MethodGet, "/api/v1alpha1/clusters", nil)
	r.TLS = &tls.ConnectionState{HandshakeComplete: true, PeerCertificates: []*x509.Certificate{c}}
	return r
}
