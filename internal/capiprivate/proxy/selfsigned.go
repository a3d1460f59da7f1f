package proxy

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"fmt"
	"math/big"
	"net"
	"os"
	"path/filepath"
	"time"
)

// SelfSignedLoopback writes into dir a throw-away CA certificate (ca.crt) and a serving key pair it signed for
// 127.0.0.1, ::1 and localhost (tls.crt, tls.key), valid for a year, and returns the three paths. The CA's key is
// never written: nothing else can be signed with it.
//
// It exists for the sidecar: client-go reads a kubeconfig's credentials only for a TLS server, so components that
// load a kubeconfig (kubectl, controller-runtime's GetConfig) would send no bearer token to http://127.0.0.1. With
// --tls-self-signed-dir on a volume shared with the pod's containers, their kubeconfigs name
// https://127.0.0.1:<port> with certificate-authority <dir>/ca.crt.
func SelfSignedLoopback(dir string) (caFile, certFile, keyFile string, err error) {
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return "", "", "", err
	}
	caKey, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return "", "", "", err
	}
	now := time.Now()
	serial := func() *big.Int { n, _ := rand.Int(rand.Reader, new(big.Int).Lsh(big.NewInt(1), 62)); return n }
	caTmpl := &x509.Certificate{SerialNumber: serial(), Subject: pkix.Name{CommonName: "capi-private proxy loopback CA"},
		NotBefore: now.Add(-time.Hour), NotAfter: now.Add(365 * 24 * time.Hour), IsCA: true, BasicConstraintsValid: true,
		MaxPathLenZero: true, KeyUsage: x509.KeyUsageCertSign}
	caDER, err := x509.CreateCertificate(rand.Reader, caTmpl, caTmpl, &caKey.PublicKey, caKey)
	if err != nil {
		return "", "", "", err
	}
	caCert, err := x509.ParseCertificate(caDER)
	if err != nil {
		return "", "", "", err
	}
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return "", "", "", err
	}
	tmpl := &x509.Certificate{SerialNumber: serial(), Subject: pkix.Name{CommonName: "capi-private proxy"},
		DNSNames: []string{"localhost"}, IPAddresses: []net.IP{net.IPv4(127, 0, 0, 1), net.IPv6loopback},
		NotBefore: now.Add(-time.Hour), NotAfter: now.Add(365 * 24 * time.Hour),
		KeyUsage: x509.KeyUsageDigitalSignature, ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth}}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, caCert, &key.PublicKey, caKey)
	if err != nil {
		return "", "", "", err
	}
	kd, err := x509.MarshalECPrivateKey(key)
	if err != nil {
		return "", "", "", err
	}
	caFile, certFile, keyFile = filepath.Join(dir, "ca.crt"), filepath.Join(dir, "tls.crt"), filepath.Join(dir, "tls.key")
	for _, f := range []struct {
		path string
		b    *pem.Block
		mode os.FileMode
	}{{caFile, &pem.Block{Type: "CERTIFICATE", Bytes: caDER}, 0o644}, {certFile, &pem.Block{Type: "CERTIFICATE", Bytes: der}, 0o644},
		{keyFile, &pem.Block{Type: "EC PRIVATE KEY", Bytes: kd}, 0o600}} {
		if err := os.WriteFile(f.path, pem.EncodeToMemory(f.b), f.mode); err != nil {
			return "", "", "", fmt.Errorf("writing %s: %w", f.path, err)
		}
	}
	return caFile, certFile, keyFile, nil
}
