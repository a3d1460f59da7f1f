package proxy

import (
	"fmt"
	"os"
	"path/filepath"
	"time"

	"github.com/dcm-sp/acm-cluster-sp/internal/capiprivate/pki"
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
	const year = 365 * 24 * time.Hour
	now := time.Now()
	ca, err := pki.NewCA("capi-private proxy loopback CA", now, year)
	if err != nil {
		return "", "", "", err
	}
	sc, err := ca.IssueLoopback("capi-private proxy", now, year)
	if err != nil {
		return "", "", "", err
	}
	caFile, certFile, keyFile = filepath.Join(dir, "ca.crt"), filepath.Join(dir, "tls.crt"), filepath.Join(dir, "tls.key")
	for _, f := range []struct {
		path string
		data []byte
		mode os.FileMode
	}{{caFile, ca.CertPEM(), 0o644}, {certFile, sc.CertPEM, 0o644}, {keyFile, sc.KeyPEM, 0o600}} {
		if err := os.WriteFile(f.path, f.data, f.mode); err != nil {
			return "", "", "", fmt.Errorf("writing %s: %w", f.path, err)
		}
	}
	return caFile, certFile, keyFile, nil
}
