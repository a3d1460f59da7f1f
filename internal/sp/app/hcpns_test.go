package app

import (
	"context"
	"log/slog"
	"net/http"
	"strings"
	"testing"
	"time"

	hyperv1 "github.com/openshift/hypershift/api/hypershift/v1beta1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/dcm-sp/acm-cluster-sp/internal/devtest/sp/sphub"
	"github.com/dcm-sp/acm-cluster-sp/internal/devtest/testlog"
	"github.com/dcm-sp/acm-cluster-sp/internal/sp/provision"
	"github.com/dcm-sp/acm-cluster-sp/internal/sp/render"
)

// otherTeamsHostedCluster creates, in a namespace of its own, a HostedCluster nobody here manages (another team's).
func otherTeamsHostedCluster(t *testing.T, namespace, name string) {
	t.Helper()
	ctx := context.Background()
	if err := sphub.EnsureNamespace(ctx, testHub.Client, namespace); err != nil {
		t.Fatal(err)
	}
	in := render.Examples()["kubevirt-full"]
	in.Namespace, in.Name, in.Finalizers = namespace, name, nil
	hc := render.Render(in).HostedCluster
	hc.Labels = map[string]string{"team": "other"}
	if err := testHub.Client.Create(ctx, hc); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		_ = testHub.Client.Delete(ctx, hc)
		_ = testHub.Client.Delete(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: namespace}})
	})
}

// HyperShift puts a cluster's control plane in "<namespace>-<name>": x-bar in clusters and another team's bar in
// clusters-x share clusters-x-bar, and deleting one takes the other's control plane down. A name whose control plane
// namespace is not the cluster's own is refused (409) at create, on day-2 changes and by the reconciler.
func TestControlPlaneNamespaceCollisions(t *testing.T) {
	t.Parallel()
	sp := shared(t)
	ctx := context.Background()

	t.Run("create: the namespace exists already", func(t *testing.T) {
		name := uniqueName("cpn")
		cpNamespace := "clusters-" + name
		if err := sphub.EnsureNamespace(ctx, testHub.Client, cpNamespace); err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() {
			_ = testHub.Client.Delete(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: cpNamespace}})
		})
		code, h, body := do(t, http.MethodPost, sp.URL+"/api/v1alpha1/clusters", "application/json", []byte(kubevirtBody(name, 1)))
		assertProblem(t, code, h, body, http.StatusConflict, "namespace "+cpNamespace+" already exists")
	})

	t.Run("create: another team's HostedCluster maps there", func(t *testing.T) {
		suffix := uniqueName("bar")
		otherTeamsHostedCluster(t, "clusters-cpx", suffix) // its control plane namespace: clusters-cpx-<suffix>
		code, h, body := do(t, http.MethodPost, sp.URL+"/api/v1alpha1/clusters", "application/json", []byte(kubevirtBody("cpx-"+suffix, 1)))
		assertProblem(t, code, h, body, http.StatusConflict, "also that of HostedCluster clusters-cpx/"+suffix)
	})
}

// The same rule after the cluster exists: another team's HostedCluster appears whose control plane namespace is
// ours. Day-2 changes are refused, the reconciler recreates nothing, and a deletion keeps the shared namespace.
func TestControlPlaneNamespaceTakenLater(t *testing.T) {
	t.Parallel()
	logs := &testlog.Buffer{}
	cfg := testConfig("restricted")
	cfg.ProviderName = "sp-cpns-later"
	sp := startSP(t, cfg, Options{Log: slog.New(slog.NewTextHandler(logs, nil))})
	ctx := context.Background()
	suffix := uniqueName("bar")
	name := "cpy-" + suffix
	cpNamespace := provision.ControlPlaneNamespace("restricted", name)
	code, c, raw := sp.create(t, "", kubevirtBody(name, 1))
	if code != http.StatusCreated {
		t.Fatalf("create: %d %s", code, raw)
	}
	sp.waitStatus(t, c.Id, "READY", 60*time.Second)
	var ns corev1.Namespace
	if err := testHub.Client.Get(ctx, client.ObjectKey{Name: cpNamespace}, &ns); err != nil {
		t.Fatalf("the operator made no control plane namespace %s: %v", cpNamespace, err)
	}
	if code, _, _, raw := sp.patch(t, c.Id, `{"spec":{"nodes":{"workers":{"count":2}}}}`, ""); code != http.StatusOK {
		t.Fatalf("a day-2 change while the namespace is ours: %d %s", code, raw)
	}
	sp.waitStatus(t, c.Id, "READY", 60*time.Second)

	otherTeamsHostedCluster(t, "restricted-cpy", suffix)

	code, h, body := do(t, http.MethodPatch, sp.URL+"/api/v1alpha1/clusters/"+c.Id, "application/merge-patch+json", []byte(`{"spec":{"nodes":{"workers":{"count":1}}}}`))
	assertProblem(t, code, h, body, http.StatusConflict, "also that of HostedCluster restricted-cpy/"+suffix)

	// The NodePool deleted by hand is not recreated while the namespace is shared: the reconciler tried (its log
	// says why it stopped) and nothing came back.
	np := &hyperv1.NodePool{ObjectMeta: metav1.ObjectMeta{Namespace: "restricted", Name: name}}
	if err := testHub.Client.Delete(ctx, np); err != nil {
		t.Fatal(err)
	}
	waitFor(t, 60*time.Second, "the reconciler to refuse recreating the NodePool", func() bool {
		return strings.Contains(logs.String(), "also that of HostedCluster restricted-cpy/"+suffix) &&
			apierrors.IsNotFound(testHub.Client.Get(ctx, client.ObjectKeyFromObject(np), &hyperv1.NodePool{}))
	})
	if err := testHub.Client.Get(ctx, client.ObjectKeyFromObject(np), &hyperv1.NodePool{}); !apierrors.IsNotFound(err) {
		t.Fatalf("the NodePool was recreated in a shared control plane namespace: %v", err)
	}

	// Deleting ours tells HyperShift to keep the namespace: the other cluster's control plane lives there too.
	if code, _, raw := do(t, http.MethodDelete, sp.URL+"/api/v1alpha1/clusters/"+c.Id, "", nil); code != http.StatusNoContent {
		t.Fatalf("delete: %d %s", code, raw)
	}
	sp.waitStatus(t, c.Id, "DELETED", 60*time.Second)
	if err := testHub.Client.Get(ctx, client.ObjectKey{Name: cpNamespace}, &ns); err != nil || ns.DeletionTimestamp != nil {
		t.Fatalf("the shared control plane namespace %s was deleted with our cluster: %v", cpNamespace, err)
	}
	_ = testHub.Client.Delete(ctx, &ns)
}

// The operator's control plane namespace of a cluster is gone once the cluster is (HyperShift waits for it).
func controlPlaneNamespaceLeft(t testing.TB, namespace, name string) []string {
	t.Helper()
	var ns corev1.Namespace
	err := testHub.Client.Get(context.Background(), client.ObjectKey{Name: provision.ControlPlaneNamespace(namespace, name)}, &ns)
	switch {
	case apierrors.IsNotFound(err):
		return nil
	case err != nil:
		t.Fatal(err)
	}
	return []string{"Namespace/" + ns.Name}
}
