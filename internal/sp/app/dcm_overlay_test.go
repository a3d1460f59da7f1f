package app

import (
	"context"
	"encoding/json"
	"net/http"
	"strings"
	"testing"
	"time"

	rbacv1 "k8s.io/api/rbac/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/dcm-sp/acm-cluster-sp/pkg/api"
)

// deploy/overlays/dcm as DCM's Service Provider Manager uses it: its configuration registers with the registry
// (the stand-in refuses what SPM refuses), and SPM — no credentials, plain HTTP — creates, reads, polls health and
// deletes. Anonymous callers may not change a cluster (day-2 needs its own grant) nor read its kubeconfig.
func TestDCMOverlayAnonymousLifecycle(t *testing.T) {
	objs := renderManifests(t, "deploy/overlays/dcm")
	applyAll(t, objs)
	t.Cleanup(func() {
		b := &rbacv1.RoleBinding{ObjectMeta: metav1.ObjectMeta{Name: "acm-cluster-sp-anonymous-dcm", Namespace: "clusters"}}
		_ = testHub.Client.Delete(context.Background(), b)
	})
	ensurePullSecret(t)
	d, ready := startDeployed(t, objs, "acm-cluster-sp", false)
	if !ready {
		t.Fatalf("not ready: %+v", d.App.Health.Report())
	}
	if !strings.HasPrefix(d.URL, "http://") || d.cfg.TLS() || !d.cfg.AuthAnonymous {
		t.Fatalf("the dcm overlay serves %s (TLS %v, anonymous %v): want plain HTTP with anonymous callers", d.URL, d.cfg.TLS(), d.cfg.AuthAnonymous)
	}
	waitFor(t, 60*time.Second, "registered with the registry", func() bool {
		p, ok := d.registry.Get(d.cfg.ProviderName)
		return ok && strings.HasSuffix(p.Endpoint, "/api/v1alpha1/clusters") && p.ServiceType == "cluster"
	})

	spm := caller{base: d.URL, http: &http.Client{Timeout: 30 * time.Second}}
	name := uniqueName("dcm-anon")
	id := "inst-" + name
	if code, _, raw := spm.do(t, http.MethodPost, "/api/v1alpha1/clusters?id="+id, kubevirtBody(name, 1)); code != http.StatusCreated {
		t.Fatalf("anonymous create: %d %s", code, raw)
	}
	waitFor(t, 90*time.Second, "READY", func() bool {
		code, _, raw := spm.do(t, http.MethodGet, "/api/v1alpha1/clusters/"+id, "")
		var c api.Cluster
		return code == http.StatusOK && json.Unmarshal(raw, &c) == nil && c.Status == "READY"
	})
	code, _, raw := spm.do(t, http.MethodGet, "/api/v1alpha1/clusters/"+id, "")
	var c api.Cluster
	if err := json.Unmarshal(raw, &c); err != nil || code != http.StatusOK || c.Kubeconfig != nil && *c.Kubeconfig != "" ||
		c.KubeconfigOmitted == nil || *c.KubeconfigOmitted != api.ClusterKubeconfigOmittedForbidden {
		t.Fatalf("anonymous GET of a READY cluster: %d %s (want no kubeconfig, omitted: forbidden)", code, raw)
	}
	code, h, body := spm.do(t, http.MethodPatch, "/api/v1alpha1/clusters/"+id, `{"spec":{"nodes":{"workers":{"count":1000}}}}`)
	assertProblem(t, code, h, body, http.StatusForbidden, "user system:anonymous may not patch clusters/"+id)
	if code, _, _ := spm.do(t, http.MethodGet, "/api/v1alpha1/clusters/health", ""); code != http.StatusOK {
		t.Fatalf("health: %d", code)
	}
	if code, _, raw := spm.do(t, http.MethodDelete, "/api/v1alpha1/clusters/"+id, ""); code != http.StatusNoContent {
		t.Fatalf("anonymous delete: %d %s", code, raw)
	}
	waitFor(t, 90*time.Second, "deleted", func() bool {
		code, _, _ := spm.do(t, http.MethodGet, "/api/v1alpha1/clusters/"+id, "")
		return code == http.StatusNotFound
	})
}
