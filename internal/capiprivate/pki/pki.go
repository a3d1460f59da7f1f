// Package pki is capi-private's one source of X.509 material it makes itself: self-signed CAs and the loopback
// serving certificates they sign (the proxy sidecar's 127.0.0.1 listener, the test hub's webhooks), and the
// cross-signed certificate that lets clients holding an old CA trust certificates of its successor. It holds no
// state and does no I/O besides reading crypto/rand.
package pki

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"errors"
	"fmt"
	"math/big"
	"net"
	"time"
)

// Backdate is how far before "now" certificates start: clocks of the pods that verify them may lag.
const Backdate = time.Hour

// LoopbackIPs and LoopbackDNSNames are the names a loopback serving certificate is issued for.
var (
	LoopbackIPs      = []net.IP{net.IPv4(127, 0, 0, 1), net.IPv6loopback}
	LoopbackDNSNames = []string{"localhost"}
)

// CA is a certificate authority: its certificate and its private key.
type CA struct {
	Cert *x509.Certificate
	Key  *ecdsa.PrivateKey
}

// NewCA creates a self-signed CA named cn, valid from now-Backdate until now+validity. Below it a chain holds at
// most one intermediate: the certificate CrossSign makes for its successor.
func NewCA(cn string, now time.Time, validity time.Duration) (*CA, error) {
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return nil, err
	}
	tmpl, err := caTemplate(cn, now, now.Add(validity), 1)
	if err != nil {
		return nil, err
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	if err != nil {
		return nil, err
	}
	cert, err := x509.ParseCertificate(der)
	if err != nil {
		return nil, err
	}
	return &CA{Cert: cert, Key: key}, nil
}

func caTemplate(cn string, now, notAfter time.Time, maxPathLen int) (*x509.Certificate, error) {
	serial, err := newSerial()
	if err != nil {
		return nil, err
	}
	return &x509.Certificate{
		SerialNumber: serial, Subject: pkix.Name{CommonName: cn},
		NotBefore: now.Add(-Backdate), NotAfter: notAfter,
		IsCA: true, BasicConstraintsValid: true, MaxPathLen: maxPathLen, MaxPathLenZero: maxPathLen == 0,
		KeyUsage: x509.KeyUsageCertSign | x509.KeyUsageDigitalSignature,
	}, nil
}

// ParseCA reads a CA from its PEM certificate and PEM EC private key (as CertPEM and KeyPEM write them).
func ParseCA(certPEM, keyPEM []byte) (*CA, error) {
	certs, err := ParseCertificates(certPEM)
	if err != nil {
		return nil, err
	}
	block, _ := pem.Decode(keyPEM)
	if block == nil || block.Type != "EC PRIVATE KEY" {
		return nil, errors.New("no EC PRIVATE KEY block")
	}
	key, err := x509.ParseECPrivateKey(block.Bytes)
	if err != nil {
		return nil, err
	}
	ca := &CA{Cert: certs[0], Key: key}
	if !ca.Cert.IsCA || !key.PublicKey.Equal(ca.Cert.PublicKey) {
		return nil, errors.New("the certificate is not a CA or does not match the key")
	}
	return ca, nil
}

// CertPEM is the CA's certificate, PEM-encoded.
func (ca *CA) CertPEM() []byte { return EncodeCert(ca.Cert.Raw) }

// KeyPEM is the CA's private key, PEM-encoded.
func (ca *CA) KeyPEM() ([]byte, error) { return encodeKey(ca.Key) }

// Pool is a cert pool holding the CA.
func (ca *CA) Pool() *x509.CertPool {
	p := x509.NewCertPool()
	p.AddCert(ca.Cert)
	return p
}

// ServingCert is a serving certificate and its key, both PEM-encoded.
type ServingCert struct {
	CertPEM, KeyPEM []byte
}

// IssueServing issues a server certificate named cn for ips and dnsNames, valid from now-Backdate until
// now+validity but never past the CA itself.
func (ca *CA) IssueServing(cn string, ips []net.IP, dnsNames []string, now time.Time, validity time.Duration) (ServingCert, error) {
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return ServingCert{}, err
	}
	serial, err := newSerial()
	if err != nil {
		return ServingCert{}, err
	}
	notAfter := now.Add(validity)
	if notAfter.After(ca.Cert.NotAfter) {
		notAfter = ca.Cert.NotAfter
	}
	tmpl := &x509.Certificate{
		SerialNumber: serial, Subject: pkix.Name{CommonName: cn}, IPAddresses: ips, DNSNames: dnsNames,
		NotBefore: now.Add(-Backdate), NotAfter: notAfter,
		KeyUsage: x509.KeyUsageDigitalSignature, ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth},
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, ca.Cert, &key.PublicKey, ca.Key)
	if err != nil {
		return ServingCert{}, err
	}
	kp, err := encodeKey(key)
	if err != nil {
		return ServingCert{}, err
	}
	return ServingCert{CertPEM: EncodeCert(der), KeyPEM: kp}, nil
}

// IssueLoopback issues a serving certificate for LoopbackIPs and LoopbackDNSNames.
func (ca *CA) IssueLoopback(cn string, now time.Time, validity time.Duration) (ServingCert, error) {
	return ca.IssueServing(cn, LoopbackIPs, LoopbackDNSNames, now, validity)
}

// CrossSign certifies successor's subject and key with ca, valid until ca expires: a client that trusts only ca
// verifies a certificate signed by successor when the server sends this certificate as an intermediate.
func (ca *CA) CrossSign(successor *CA, now time.Time) ([]byte, error) {
	tmpl, err := caTemplate(successor.Cert.Subject.CommonName, now, ca.Cert.NotAfter, 0)
	if err != nil {
		return nil, err
	}
	tmpl.Subject = successor.Cert.Subject
	tmpl.SubjectKeyId = successor.Cert.SubjectKeyId
	der, err := x509.CreateCertificate(rand.Reader, tmpl, ca.Cert, &successor.Key.PublicKey, ca.Key)
	if err != nil {
		return nil, err
	}
	return EncodeCert(der), nil
}

// ParseCertificates reads every CERTIFICATE block of a PEM bundle (at least one).
func ParseCertificates(bundle []byte) ([]*x509.Certificate, error) {
	var out []*x509.Certificate
	for rest := bundle; ; {
		var block *pem.Block
		block, rest = pem.Decode(rest)
		if block == nil {
			break
		}
		if block.Type != "CERTIFICATE" {
			continue
		}
		c, err := x509.ParseCertificate(block.Bytes)
		if err != nil {
			return nil, err
		}
		out = append(out, c)
	}
	if len(out) == 0 {
		return nil, errors.New("no certificate in the PEM data")
	}
	return out, nil
}

// EncodeCert PEM-encodes a DER certificate.
func EncodeCert(der []byte) []byte {
	return pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der})
}

func encodeKey(key *ecdsa.PrivateKey) ([]byte, error) {
	der, err := x509.MarshalECPrivateKey(key)
	if err != nil {
		return nil, err
	}
	return pem.EncodeToMemory(&pem.Block{Type: "EC PRIVATE KEY", Bytes: der}), nil
}

func newSerial() (*big.Int, error) {
	n, err := rand.Int(rand.Reader, new(big.Int).Lsh(big.NewInt(1), 126))
	if err != nil {
		return nil, fmt.Errorf("serial number: %w", err)
	}
	return n.Add(n, big.NewInt(1)), nil
}
