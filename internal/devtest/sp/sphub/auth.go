package sphub

import (
	"context"
	"encoding/pem"
	"errors"
	"fmt"
	"net"
	"os"
	"path/filepath"

	certutil "k8s.io/client-go/util/cert"

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
// localhost (tls.crt, tls.key), valid for a year; it returns the three paths. For `dev --self-signed-tls` only.
func SelfSignedServing(dir string) (caFile, certFile, keyFile string, err error) {
	// client-go's helper, as kube-apiserver uses for its own self-signed serving certificate: certPEM holds the
	// serving certificate, then the CA that signed it.
	certPEM, keyPEM, err := certutil.GenerateSelfSignedCertKey("localhost", []net.IP{net.ParseIP("127.0.0.1"), net.IPv6loopback}, nil)
	if err != nil {
		return "", "", "", err
	}
	serving, rest := pem.Decode(certPEM)
	ca, _ := pem.Decode(rest)
	if serving == nil || ca == nil {
		return "", "", "", errors.New("self-signed certificate: expected a serving certificate and its CA")
	}
	caFile, certFile, keyFile = filepath.Join(dir, "ca.crt"), filepath.Join(dir, "tls.crt"), filepath.Join(dir, "tls.key")
	for path, data := range map[string][]byte{caFile: pem.EncodeToMemory(ca), certFile: certPEM, keyFile: keyPEM} {
		if err := os.WriteFile(path, data, 0o600); err != nil {
			return "", "", "", fmt.Errorf("writing %s: %w", path, err)
		}
	}
	return caFile, certFile, keyFile, nil
}
