package security

import (
	"context"
	"crypto/tls"
	"io"
	"net/http"
	"net/http/httptest"
	"strconv"
	"strings"
	"testing"
	"time"

	"k8s.io/client-go/rest"

	"github.com/dcm-sp/acm-cluster-sp/internal/devtest/testpki"
)

// With a client CA the server asks for a client certificate but never requires one (bearer tokens stay possible),
// and refuses TLS older than 1.2. The certificate presented reaches the request for the authenticator to verify.
func TestServingTLSAsksForClientCertificates(t *testing.T) {
	serverCA, clientCA := testpki.NewCA(t, "serving-ca"), testpki.NewCA(t, "client-ca")
	serving := serverCA.Serving(t, "sp")
	dir := t.TempDir()
	g, err := New(Options{Mode: ModeKubernetes, Hub: &rest.Config{Host: "https://hub.invalid"},
		ClientCAFile: testpki.WriteFile(t, dir, "ca.crt", clientCA.CertPEM)})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	cfg, err := g.ServingTLS(ctx, testpki.WriteFile(t, dir, "tls.crt", serving.CertPEM), testpki.WriteFile(t, dir, "tls.key", serving.KeyPEM))
	if err != nil {
		t.Fatal(err)
	}
	srv := httptest.NewUnstartedServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		u, err := g.Authenticate(r)
		name := ""
		if err == nil {
			name = u.GetName()
		}
		_, _ = io.WriteString(w, strconv.Itoa(len(r.TLS.PeerCertificates))+" "+name)
	}))
	srv.TLS = cfg
	srv.StartTLS()
	defer srv.Close()

	get := func(c *tls.Config) (string, error) {
		c.RootCAs = serverCA.Pool()
		client := &http.Client{Timeout: 10 * time.Second, Transport: &http.Transport{TLSClientConfig: c}}
		resp, err := client.Get(srv.URL)
		if err != nil {
			return "", err
		}
		defer resp.Body.Close()
		b, err := io.ReadAll(resp.Body)
		return string(b), err
	}
	if got, err := get(&tls.Config{MinVersion: tls.VersionTLS12}); err != nil || got != "0 " {
		t.Fatalf("without a client certificate: %q, %v; want served, no certificate", got, err)
	}
	if got, err := get(&tls.Config{MinVersion: tls.VersionTLS12, Certificates: []tls.Certificate{clientCA.Client(t, "cert-user").TLS(t)}}); err != nil || got != "1 cert-user" {
		t.Fatalf("with a client certificate: %q, %v; want it authenticated", got, err)
	}
	if _, err := get(&tls.Config{MinVersion: tls.VersionTLS10, MaxVersion: tls.VersionTLS11}); err == nil {
		t.Fatal("TLS 1.1 accepted")
	}
}

// TLS files that do not load are a configuration error naming the keys.
func TestServingTLSRefusesBadFiles(t *testing.T) {
	g, err := New(Options{Mode: ModeNone})
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	other := testpki.NewCA(t, "ca")
	a, b := other.Serving(t, "a"), other.Serving(t, "b")
	for name, files := range map[string][2]string{
		"missing":    {dir + "/none.crt", dir + "/none.key"},
		"mismatched": {testpki.WriteFile(t, dir, "a.crt", a.CertPEM), testpki.WriteFile(t, dir, "b.key", b.KeyPEM)},
	} {
		if _, err := g.ServingTLS(context.Background(), files[0], files[1]); err == nil || !strings.Contains(err.Error(), "tlsCertFile/tlsKeyFile") {
			t.Errorf("%s: %v", name, err)
		}
	}
}
