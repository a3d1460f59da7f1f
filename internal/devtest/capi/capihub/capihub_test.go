package capihub_test

import (
	"bufio"
	"context"
	"crypto/tls"
	"crypto/x509"
	"encoding/json"
	"net/http"
	"os"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/util/wait"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/dcm-sp/acm-cluster-sp/internal/capiprivate/crds"
	"github.com/dcm-sp/acm-cluster-sp/internal/devtest/capi/capihub"
)

var env *capihub.Env

func TestMain(m *testing.M) { os.Exit(capihub.Main(m, &env)) }

func getCRD(t *testing.T, name string) *apiextensionsv1.CustomResourceDefinition {
	t.Helper()
	var crd apiextensionsv1.CustomResourceDefinition
	if err := env.Client.Get(t.Context(), client.ObjectKey{Name: name}, &crd); err != nil {
		t.Fatal(err)
	}
	return &crd
}

func TestCRDSets(t *testing.T) {
	// Private CRDs: Established, converted by the in-process webhook.
	m := getCRD(t, "machines.cluster.hypershift.openshift.io")
	if !crds.Established(m) || m.Spec.Conversion.Webhook == nil || *m.Spec.Conversion.Webhook.ClientConfig.URL != env.WebhookURL {
		t.Errorf("private Machine CRD: established %v, conversion %+v", crds.Established(m), m.Spec.Conversion)
	}
	// Platform set: v1beta2 only, conversion None.
	p := getCRD(t, "machines.cluster.x-k8s.io")
	if len(p.Spec.Versions) != 1 || p.Spec.Versions[0].Name != "v1beta2" || p.Spec.Conversion.Strategy != apiextensionsv1.NoneConverter {
		t.Errorf("platform Machine CRD: versions %d, conversion %s", len(p.Spec.Versions), p.Spec.Conversion.Strategy)
	}
	// Contract labels of standard CAPK and HostedControlPlane.
	if got := getCRD(t, "kubevirtmachines.infrastructure.cluster.x-k8s.io").Labels["cluster.x-k8s.io/v1beta1"]; got != "v1alpha1" {
		t.Errorf("standard KubevirtMachine contract label %q", got)
	}
	if got := getCRD(t, "hostedcontrolplanes.hypershift.openshift.io").Labels["cluster.x-k8s.io/v1beta1"]; got != "v1beta1" {
		t.Errorf("HostedControlPlane contract label %q", got)
	}
	getCRD(t, "hostedclusters.hypershift.openshift.io")

	// The platform's Secret is owned by the platform Machine.
	var s corev1.Secret
	if err := env.Client.Get(t.Context(), client.ObjectKey{Namespace: capihub.PlatformNamespace, Name: capihub.PlatformSecret}, &s); err != nil {
		t.Fatal(err)
	}
	if len(s.OwnerReferences) != 1 || s.OwnerReferences[0].APIVersion != "cluster.x-k8s.io/v1beta2" {
		t.Errorf("platform Secret owners %+v", s.OwnerReferences)
	}
}

// The limited token authenticates but is authorized for nothing; the audit log names the caller.
func TestTokensAndAudit(t *testing.T) {
	limited, err := client.New(env.TokenConfig(env.LimitedToken), client.Options{Scheme: env.Client.Scheme()})
	if err != nil {
		t.Fatal(err)
	}
	err = limited.List(t.Context(), &corev1.SecretList{}, client.InNamespace(capihub.PlatformNamespace))
	if !apierrors.IsForbidden(err) {
		t.Fatalf("limited user listing Secrets: %v, want Forbidden", err)
	}
	admin, err := client.New(env.TokenConfig(env.AdminToken), client.Options{Scheme: env.Client.Scheme()})
	if err != nil {
		t.Fatal(err)
	}
	if err := admin.List(t.Context(), &corev1.SecretList{}, client.InNamespace(capihub.PlatformNamespace)); err != nil {
		t.Fatalf("admin token: %v", err)
	}
	// The audit backend writes in blocking mode: the entry is there once the answer is.
	f, err := os.Open(env.AuditLog)
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = f.Close() }()
	found := false
	sc := bufio.NewScanner(f)
	sc.Buffer(make([]byte, 1<<20), 1<<20)
	for sc.Scan() {
		var ev struct {
			User struct {
				Username string `json:"username"`
			} `json:"user"`
			Verb           string `json:"verb"`
			ResponseStatus struct {
				Code int `json:"code"`
			} `json:"responseStatus"`
			ObjectRef struct {
				Resource  string `json:"resource"`
				Namespace string `json:"namespace"`
			} `json:"objectRef"`
		}
		if json.Unmarshal(sc.Bytes(), &ev) == nil && ev.User.Username == capihub.LimitedUser && ev.Verb == "list" &&
			ev.ObjectRef.Resource == "secrets" && ev.ResponseStatus.Code == http.StatusForbidden {
			found = true
		}
	}
	if !found {
		t.Errorf("no audit entry for %s's forbidden list of secrets in %s", capihub.LimitedUser, env.AuditLog)
	}
}

func TestWebhookHealth(t *testing.T) {
	pool := x509.NewCertPool()
	pool.AppendCertsFromPEM(env.WebhookCA)
	hc := &http.Client{Transport: &http.Transport{TLSClientConfig: &tls.Config{RootCAs: pool, MinVersion: tls.VersionTLS12}}}
	for _, path := range []string{"/healthz", "/readyz"} {
		resp, err := hc.Get(strings.TrimSuffix(env.WebhookURL, "/convert") + path)
		if err != nil {
			t.Fatal(err)
		}
		_ = resp.Body.Close()
		if resp.StatusCode != http.StatusOK {
			t.Errorf("%s: %d", path, resp.StatusCode)
		}
	}
}

func privateMachine(ns, name string) *unstructured.Unstructured {
	return &unstructured.Unstructured{Object: map[string]any{
		"apiVersion": "cluster.hypershift.openshift.io/v1beta2", "kind": "Machine",
		"metadata": map[string]any{"name": name, "namespace": ns},
		"spec": map[string]any{
			"clusterName": "c1",
			"bootstrap":   map[string]any{"dataSecretName": name},
			"infrastructureRef": map[string]any{
				"apiGroup": "infrastructure.cluster.hypershift.openshift.io", "kind": "KubevirtMachine", "name": name,
			},
		},
	}}
}

func ownedConfigMap(ns, name, ownerAPIVersion string, owner client.Object) *corev1.ConfigMap {
	return &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{
		Name: name, Namespace: ns,
		OwnerReferences: []metav1.OwnerReference{{APIVersion: ownerAPIVersion, Kind: "Machine", Name: owner.GetName(), UID: owner.GetUID()}},
	}}
}

// waitGone waits until obj is not found and returns how long that took.
func waitGone(t *testing.T, obj client.Object, timeout time.Duration) time.Duration {
	t.Helper()
	start := time.Now()
	err := wait.PollUntilContextTimeout(t.Context(), 50*time.Millisecond, timeout, true, func(ctx context.Context) (bool, error) {
		err := env.Client.Get(ctx, client.ObjectKeyFromObject(obj), obj)
		return apierrors.IsNotFound(err), nil
	})
	if err != nil {
		t.Fatalf("%s %s still exists after %s", obj.GetObjectKind().GroupVersionKind().Kind, obj.GetName(), timeout)
	}
	return time.Since(start)
}

// The real garbage collector, which never goes through the proxy (so refs are stored private), follows refs to private
// owners; a ref written in the standard group points at the platform CRD, where the owner does not exist, so the
// dependent is collected although its "owner" exists (the negative control).
func TestGarbageCollectorWithPrivateRefs(t *testing.T) {
	ns := env.NewNamespace(t, "gc")
	m := privateMachine(ns, "m1")
	if err := env.Client.Create(t.Context(), m); err != nil {
		t.Fatal(err)
	}
	private := ownedConfigMap(ns, "owned-private", "cluster.hypershift.openshift.io/v1beta2", m)
	standard := ownedConfigMap(ns, "owned-standard", "cluster.x-k8s.io/v1beta2", m)
	for _, cm := range []*corev1.ConfigMap{private, standard} {
		if err := env.Client.Create(t.Context(), cm); err != nil {
			t.Fatal(err)
		}
	}

	negative := waitGone(t, standard, 2*time.Minute)
	t.Logf("negative control: dependent with a standard-group ref to an existing private Machine collected after %s", negative.Round(time.Millisecond))
	// Both ConfigMaps were created together, so the collector has seen the private one too: it must still be there.
	if err := env.Client.Get(t.Context(), client.ObjectKeyFromObject(private), private); err != nil {
		t.Fatalf("the dependent of an existing private Machine was collected: %v", err)
	}

	deleted := time.Now()
	if err := env.Client.Delete(t.Context(), m); err != nil {
		t.Fatal(err)
	}
	waitGone(t, m, 30*time.Second)
	waitGone(t, private, time.Minute)
	t.Logf("dependent of a deleted private Machine collected %s after the DELETE", time.Since(deleted).Round(time.Millisecond))
}
