package devhub

import (
	"context"
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

	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
)

// Dev-mode identities for trying the secure path: both may create, read, list and delete clusters; only
// DevAdmin may change them (day-2) and read admin kubeconfigs. DevSPM has what DCM's Service Provider Manager needs,
// and no more.
const (
	DevAdmin = "dcm-admin"
	DevSPM   = "dcm-spm"
)

// SeedAuth creates, in namespace ns, the ServiceAccounts DevAdmin and DevSPM and the Roles that grant them
// the SP's permissions in API group apiGroup (the README's Security section shows the same RBAC).
func SeedAuth(ctx context.Context, cfg *rest.Config, ns, apiGroup string) error {
	cs, err := kubernetes.NewForConfig(cfg)
	if err != nil {
		return err
	}
	roles := []rbacv1.Role{
		{ObjectMeta: metav1.ObjectMeta{Name: "acm-cluster-sp-user", Namespace: ns},
			Rules: []rbacv1.PolicyRule{{APIGroups: []string{apiGroup}, Resources: []string{"clusters"}, Verbs: []string{"create", "get", "list", "delete"}}}},
		{ObjectMeta: metav1.ObjectMeta{Name: "acm-cluster-sp-day2", Namespace: ns},
			Rules: []rbacv1.PolicyRule{{APIGroups: []string{apiGroup}, Resources: []string{"clusters"}, Verbs: []string{"patch"}}}},
		{ObjectMeta: metav1.ObjectMeta{Name: "acm-cluster-sp-kubeconfig-reader", Namespace: ns},
			Rules: []rbacv1.PolicyRule{{APIGroups: []string{apiGroup}, Resources: []string{"clusters/kubeconfig"}, Verbs: []string{"get"}}}},
	}
	bindings := map[string][]string{DevAdmin: {"acm-cluster-sp-user", "acm-cluster-sp-day2", "acm-cluster-sp-kubeconfig-reader"}, DevSPM: {"acm-cluster-sp-user"}}
	for _, sa := range []string{DevAdmin, DevSPM} {
		if _, err := cs.CoreV1().ServiceAccounts(ns).Create(ctx, &corev1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{Name: sa}}, metav1.CreateOptions{}); err != nil && !apierrors.IsAlreadyExists(err) {
			return err
		}
	}
	for i := range roles {
		if _, err := cs.RbacV1().Roles(ns).Create(ctx, &roles[i], metav1.CreateOptions{}); err != nil && !apierrors.IsAlreadyExists(err) {
			return err
		}
	}
	for sa, rs := range bindings {
		for _, r := range rs {
			b := &rbacv1.RoleBinding{ObjectMeta: metav1.ObjectMeta{Name: r + "-" + sa, Namespace: ns},
				RoleRef:  rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "Role", Name: r},
				Subjects: []rbacv1.Subject{{Kind: "ServiceAccount", Name: sa, Namespace: ns}}}
			if _, err := cs.RbacV1().RoleBindings(ns).Create(ctx, b, metav1.CreateOptions{}); err != nil && !apierrors.IsAlreadyExists(err) {
				return err
			}
		}
	}
	return nil
}

// SelfSignedServing writes, into dir, a CA (ca.crt) and a serving certificate it signed for 127.0.0.1 and
// localhost (tls.crt, tls.key), valid for 30 days; it returns the three paths. For `dev --self-signed-tls` only.
func SelfSignedServing(dir string) (caFile, certFile, keyFile string, err error) {
	caKey, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return "", "", "", err
	}
	now := time.Now()
	caTmpl := &x509.Certificate{SerialNumber: big.NewInt(1), Subject: pkix.Name{CommonName: "acm-cluster-sp dev CA"},
		NotBefore: now.Add(-time.Hour), NotAfter: now.Add(30 * 24 * time.Hour), IsCA: true, BasicConstraintsValid: true,
		KeyUsage: x509.KeyUsageCertSign | x509.KeyUsageDigitalSignature}
	caDER, err := x509.CreateCertificate(rand.Reader, caTmpl, caTmpl, &caKey.PublicKey, caKey)
	if err != nil {
		return "", "", "", err
	}
	caCert, _ := x509.ParseCertificate(caDER)
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return "", "", "", err
	}
	tmpl := &x509.Certificate{SerialNumber: big.NewInt(2), Subject: pkix.Name{CommonName: "acm-cluster-sp"},
		DNSNames: []string{"localhost"}, IPAddresses: []net.IP{net.ParseIP("127.0.0.1"), net.IPv6loopback},
		NotBefore: now.Add(-time.Hour), NotAfter: now.Add(30 * 24 * time.Hour),
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
	for path, block := range map[string]*pem.Block{caFile: {Type: "CERTIFICATE", Bytes: caDER}, certFile: {Type: "CERTIFICATE", Bytes: der}, keyFile: {Type: "EC PRIVATE KEY", Bytes: kd}} {
		if err := os.WriteFile(path, pem.EncodeToMemory(block), 0o600); err != nil {
			return "", "", "", fmt.Errorf("writing %s: %w", path, err)
		}
	}
	return caFile, certFile, keyFile, nil
}
