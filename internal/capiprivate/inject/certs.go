package inject

import (
	"crypto/tls"
	"crypto/x509"
	"fmt"
	"time"

	"github.com/dcm-sp/acm-cluster-sp/internal/capiprivate/pki"
)

// CertPolicy is how long the loopback CA and the sidecar's serving certificate live. Each is replaced once less
// than a third of its life is left.
type CertPolicy struct {
	CAValidity, CertValidity time.Duration
}

// DefaultCertPolicy: a two-year CA, 30-day serving certificates.
var DefaultCertPolicy = CertPolicy{CAValidity: 2 * 365 * 24 * time.Hour, CertValidity: 30 * 24 * time.Hour}

// CertAction is what a namespace's LoopbackSecret needs.
type CertAction string

// Actions of PlanCerts.
const (
	CertsCurrent CertAction = "current"
	// CertsCreate: no usable CA; a new CA and serving certificate (also repairs a Secret someone broke).
	CertsCreate CertAction = "create"
	// CertsRotateCA: the CA nears its end: a successor becomes current, both stay in the bundle, and the serving
	// chain carries the successor cross-signed by the old CA, so clients that loaded only the old one still verify.
	CertsRotateCA CertAction = "rotate_ca"
	// CertsRenew: a new serving certificate from the current CA (intermediates kept while their CA lives).
	CertsRenew CertAction = "renew"
	// CertsPrune: the previous CA expired: it leaves the bundle and the cross-signed intermediate the chain.
	CertsPrune CertAction = "prune"
)

// CertPlan is PlanCerts' answer: the action, why, and when to look again.
type CertPlan struct {
	Action CertAction
	Reason string
	Next   time.Time
}

// loopback is LoopbackSecret's data, parsed.
type loopback struct {
	ca     *pki.CA
	bundle []*x509.Certificate // [0] is ca
	chain  []*x509.Certificate // [0] is the leaf
}

func parseLoopback(data map[string][]byte) (*loopback, string) {
	ca, err := pki.ParseCA(data[CABundleKey], data[CAKeyKey]) // the bundle's first certificate is the current CA
	if err != nil {
		return nil, "the CA: " + err.Error()
	}
	bundle, _ := pki.ParseCertificates(data[CABundleKey])
	chain, err := pki.ParseCertificates(data[CertKey])
	if err != nil {
		return nil, "the serving certificate: " + err.Error()
	}
	if _, err := tls.X509KeyPair(data[CertKey], data[KeyKey]); err != nil {
		return nil, "the serving key pair: " + err.Error()
	}
	return &loopback{ca: ca, bundle: bundle, chain: chain}, ""
}

// PlanCerts decides what LoopbackSecret's data needs at now. It is pure: it parses certificates, nothing else.
func PlanCerts(data map[string][]byte, now time.Time, p CertPolicy) CertPlan {
	lb, problem := parseLoopback(data)
	if lb == nil {
		return CertPlan{Action: CertsCreate, Reason: problem, Next: now}
	}
	caRenew := renewAt(lb.ca.Cert, p.CAValidity)
	leaf := lb.chain[0]
	leafRenew := renewAt(leaf, p.CertValidity)
	switch {
	case !now.Before(lb.ca.Cert.NotAfter):
		return CertPlan{Action: CertsCreate, Reason: "the CA expired", Next: now}
	case !now.Before(caRenew):
		return CertPlan{Action: CertsRotateCA, Reason: "the CA expires " + lb.ca.Cert.NotAfter.UTC().Format(time.RFC3339), Next: now}
	}
	if prev := previousCAs(lb); len(prev) > 0 && !now.Before(prev[0].NotAfter) {
		return CertPlan{Action: CertsPrune, Reason: "the previous CA expired", Next: now}
	}
	if err := leaf.CheckSignatureFrom(lb.ca.Cert); err != nil || !servesLoopback(leaf) {
		return CertPlan{Action: CertsRenew, Reason: "the serving certificate is not the current CA's for 127.0.0.1", Next: now}
	}
	if now.Before(leaf.NotBefore) {
		return CertPlan{Action: CertsRenew, Reason: "the serving certificate is not valid before " + leaf.NotBefore.UTC().Format(time.RFC3339), Next: now}
	}
	if !now.Before(leafRenew) {
		return CertPlan{Action: CertsRenew, Reason: "the serving certificate expires " + leaf.NotAfter.UTC().Format(time.RFC3339), Next: now}
	}
	next := earliest(caRenew, leafRenew)
	if prev := previousCAs(lb); len(prev) > 0 {
		next = earliest(next, prev[0].NotAfter)
	}
	return CertPlan{Action: CertsCurrent, Next: next}
}

// renewAt is when less than a third of validity (or of the certificate's own life, if shorter) is left.
func renewAt(c *x509.Certificate, validity time.Duration) time.Time {
	life := c.NotAfter.Sub(c.NotBefore)
	if validity > 0 && validity < life {
		life = validity
	}
	return c.NotAfter.Add(-life / 3)
}

func earliest(a, b time.Time) time.Time {
	if b.Before(a) {
		return b
	}
	return a
}

func previousCAs(lb *loopback) []*x509.Certificate { return lb.bundle[1:] }

func servesLoopback(c *x509.Certificate) bool {
	for _, ip := range c.IPAddresses {
		if ip.Equal(pki.LoopbackIPs[0]) {
			return true
		}
	}
	return false
}

// ExecuteCerts carries out plan on LoopbackSecret's data and returns the new data (data itself for
// CertsCurrent). namespace names the CA.
func ExecuteCerts(data map[string][]byte, plan CertPlan, namespace string, now time.Time, p CertPolicy) (map[string][]byte, error) {
	if plan.Action == CertsCurrent {
		return data, nil
	}
	if plan.Action == CertsCreate {
		ca, err := pki.NewCA(caName(namespace, now), now, p.CAValidity)
		if err != nil {
			return nil, err
		}
		return encode(ca, []*x509.Certificate{ca.Cert}, nil, now, p)
	}
	lb, problem := parseLoopback(data)
	if lb == nil {
		return nil, fmt.Errorf("cannot %s: %s", plan.Action, problem)
	}
	switch plan.Action {
	case CertsRotateCA:
		next, err := pki.NewCA(caName(namespace, now), now, p.CAValidity)
		if err != nil {
			return nil, err
		}
		cross, err := lb.ca.CrossSign(next, now)
		if err != nil {
			return nil, err
		}
		return encode(next, []*x509.Certificate{next.Cert, lb.ca.Cert}, cross, now, p)
	case CertsPrune:
		return encode(lb.ca, []*x509.Certificate{lb.ca.Cert}, nil, now, p)
	case CertsRenew:
		var inter []byte
		for _, c := range lb.chain[1:] {
			if now.Before(c.NotAfter) {
				inter = append(inter, pki.EncodeCert(c.Raw)...)
			}
		}
		return encode(lb.ca, lb.bundle, inter, now, p)
	}
	return nil, fmt.Errorf("unknown action %q", plan.Action)
}

func caName(namespace string, now time.Time) string {
	return fmt.Sprintf("capi-private loopback CA %s %d", namespace, now.Unix())
}

// encode issues a serving certificate from ca and writes the four keys; intermediates follow the leaf.
func encode(ca *pki.CA, bundle []*x509.Certificate, intermediates []byte, now time.Time, p CertPolicy) (map[string][]byte, error) {
	sc, err := ca.IssueLoopback("capi-private proxy", now, p.CertValidity)
	if err != nil {
		return nil, err
	}
	key, err := ca.KeyPEM()
	if err != nil {
		return nil, err
	}
	var b []byte
	for _, c := range bundle {
		b = append(b, pki.EncodeCert(c.Raw)...)
	}
	return map[string][]byte{
		CABundleKey: b, CAKeyKey: key,
		CertKey: append(sc.CertPEM, intermediates...), KeyKey: sc.KeyPEM,
	}, nil
}
