package capihub

import (
	"time"

	"github.com/dcm-sp/acm-cluster-sp/internal/capiprivate/pki"
)

// servingCert is a self-signed CA and a serving certificate it signed for 127.0.0.1, all PEM.
type servingCert struct {
	CA, Cert, Key []byte
}

// newServingCert makes a CA and a serving certificate for 127.0.0.1, ::1 and localhost, valid for a day.
func newServingCert() (*servingCert, error) {
	now := time.Now()
	ca, err := pki.NewCA("capi-private-testenv-ca", now, 24*time.Hour)
	if err != nil {
		return nil, err
	}
	sc, err := ca.IssueLoopback("capi-private-webhook", now, 24*time.Hour)
	if err != nil {
		return nil, err
	}
	return &servingCert{CA: ca.CertPEM(), Cert: sc.CertPEM, Key: sc.KeyPEM}, nil
}
