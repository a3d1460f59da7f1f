package pki

import (
	"crypto/x509"
	"testing"
	"time"
)

func verify(t *testing.T, leafPEM []byte, roots *x509.CertPool, intermediates [][]byte, at time.Time) error {
	t.Helper()
	leaf, err := ParseCertificates(leafPEM)
	if err != nil {
		t.Fatal(err)
	}
	inter := x509.NewCertPool()
	for _, p := range intermediates {
		cs, err := ParseCertificates(p)
		if err != nil {
			t.Fatal(err)
		}
		inter.AddCert(cs[0])
	}
	_, err = leaf[0].Verify(x509.VerifyOptions{Roots: roots, Intermediates: inter, CurrentTime: at, DNSName: "127.0.0.1",
		KeyUsages: []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth}})
	return err
}

func TestLoopbackServingVerifies(t *testing.T) {
	now := time.Now()
	ca, err := NewCA("test CA", now, 24*time.Hour)
	if err != nil {
		t.Fatal(err)
	}
	sc, err := ca.IssueLoopback("proxy", now, time.Hour)
	if err != nil {
		t.Fatal(err)
	}
	if err := verify(t, sc.CertPEM, ca.Pool(), nil, now); err != nil {
		t.Fatalf("loopback certificate does not verify against its CA: %v", err)
	}
	if err := verify(t, sc.CertPEM, ca.Pool(), nil, now.Add(2*time.Hour)); err == nil {
		t.Fatal("an expired serving certificate verified")
	}
	other, _ := NewCA("other", now, time.Hour)
	if err := verify(t, sc.CertPEM, other.Pool(), nil, now); err == nil {
		t.Fatal("verified against a foreign CA")
	}
}

func TestServingNeverOutlivesCA(t *testing.T) {
	now := time.Now()
	ca, _ := NewCA("short", now, time.Hour)
	sc, err := ca.IssueLoopback("proxy", now, 24*time.Hour)
	if err != nil {
		t.Fatal(err)
	}
	leaf, _ := ParseCertificates(sc.CertPEM)
	if leaf[0].NotAfter.After(ca.Cert.NotAfter) {
		t.Fatalf("serving certificate ends %v, after its CA (%v)", leaf[0].NotAfter, ca.Cert.NotAfter)
	}
}

// A client that loaded only the old CA keeps verifying certificates of the successor through the cross-signed
// intermediate; a client that loaded only the successor verifies them directly, with or without it.
func TestCrossSignedSuccessor(t *testing.T) {
	now := time.Now()
	old, _ := NewCA("loopback CA 1", now, 48*time.Hour)
	next, _ := NewCA("loopback CA 2", now, 96*time.Hour)
	cross, err := old.CrossSign(next, now)
	if err != nil {
		t.Fatal(err)
	}
	sc, _ := next.IssueLoopback("proxy", now, time.Hour)
	if err := verify(t, sc.CertPEM, old.Pool(), nil, now); err == nil {
		t.Fatal("the old CA verified the successor's certificate without the cross-signed intermediate")
	}
	if err := verify(t, sc.CertPEM, old.Pool(), [][]byte{cross}, now); err != nil {
		t.Fatalf("old CA with the cross-signed intermediate: %v", err)
	}
	for _, inter := range [][][]byte{nil, {cross}} {
		if err := verify(t, sc.CertPEM, next.Pool(), inter, now); err != nil {
			t.Fatalf("successor CA (intermediates %d): %v", len(inter), err)
		}
	}
}

func TestParseCARoundTrip(t *testing.T) {
	ca, _ := NewCA("round trip", time.Now(), time.Hour)
	kp, err := ca.KeyPEM()
	if err != nil {
		t.Fatal(err)
	}
	back, err := ParseCA(ca.CertPEM(), kp)
	if err != nil {
		t.Fatal(err)
	}
	if !back.Cert.Equal(ca.Cert) || !back.Key.Equal(ca.Key) {
		t.Fatal("ParseCA did not return the same CA")
	}
	other, _ := NewCA("other", time.Now(), time.Hour)
	okp, _ := other.KeyPEM()
	if _, err := ParseCA(ca.CertPEM(), okp); err == nil {
		t.Fatal("ParseCA accepted a key of another CA")
	}
	if _, err := ParseCertificates([]byte("not pem")); err == nil {
		t.Fatal("ParseCertificates accepted no certificate")
	}
}
