package app

import (
	"context"
	"encoding/json"
	"net/http"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/dcm-sp/acm-cluster-sp/internal/devtest/sp/sphub"
)

func advertised(p sphub.Provider, key string) string {
	list, _ := p.Metadata[key].([]any)
	parts := make([]string, len(list))
	for i, v := range list {
		parts[i], _ = v.(string)
	}
	return strings.Join(parts, ",")
}

// The SP registers with the registry what the hub offers, and re-registers when a ClusterImageSet for a new minor
// appears (here OpenShift 4.21 → Kubernetes 1.34, from the built-in matrix: no override file).
// Not parallel: it changes what the whole hub offers (a ClusterImageSet, the supported-versions ConfigMap).
func TestRegistrationFollowsTheHub(t *testing.T) {
	spm, err := sphub.StartRegistry("127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer spm.Close()
	cfg := testConfig("restricted")
	cfg.ProviderName = "sp-registered"
	cfg.RegistrationURL = spm.URL
	cfg.APIHost = "https://acm-sp.example.test:8443"
	sp := startSP(t, cfg, Options{RegistrationBackoff: 50 * time.Millisecond, RegistrationMaxBackoff: time.Second})

	// The registrar may register before the hub's catalog is read (no versions yet) and registers again when it
	// is: wait for the registration of the capabilities the hub offers.
	waitFor(t, 60*time.Second, "registered with the hub's platforms and Kubernetes versions", func() bool {
		p, ok := spm.Get("sp-registered")
		return ok && advertised(p, "kubernetesSupportedVersions") != "" && advertised(p, "supportedPlatforms") != ""
	})
	p, _ := spm.Get("sp-registered")
	if p.Endpoint != "https://acm-sp.example.test:8443/api/v1alpha1/clusters" || p.ServiceType != "cluster" || p.SchemaVersion != "v1alpha1" ||
		advertised(p, "supportedPlatforms") != "baremetal,kubevirt" || advertised(p, "supportedProvisioningTypes") != "hypershift" ||
		advertised(p, "kubernetesSupportedVersions") != "1.27,1.28,1.29,1.30,1.31,1.32,1.33" {
		t.Fatalf("registered %+v", p)
	}
	waitFor(t, 60*time.Second, "health reports the registration", func() bool {
		for _, c := range sp.App.Health.Report().Checks {
			if c.Name == "registration" && c.Status == "healthy" && strings.Contains(c.Message, "registered as sp-registered") {
				return true
			}
		}
		return false
	})

	// The operator starts supporting 4.21 and ACM syncs a 4.21 ClusterImageSet.
	ctx := context.Background()
	var cm corev1.ConfigMap
	if err := testHub.Client.Get(ctx, client.ObjectKey{Namespace: "hypershift", Name: "supported-versions"}, &cm); err != nil {
		t.Fatal(err)
	}
	var sv struct {
		Versions []string `json:"versions"`
	}
	before := cm.Data["supported-versions"]
	_ = json.Unmarshal([]byte(before), &sv)
	sv.Versions = append([]string{"4.21"}, sv.Versions...)
	data, _ := json.Marshal(sv)
	cm.Data["supported-versions"] = string(data)
	if err := testHub.Client.Update(ctx, &cm); err != nil {
		t.Fatal(err)
	}
	set := sphub.ClusterImageSet("4.21.3", "multi", true)
	if err := testHub.Client.Create(ctx, set); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { // the hub is shared: other tests expect 4.21 to have release candidates only
		_ = testHub.Client.Delete(ctx, set)
		var cm corev1.ConfigMap
		if testHub.Client.Get(ctx, client.ObjectKey{Namespace: "hypershift", Name: "supported-versions"}, &cm) == nil {
			cm.Data["supported-versions"] = before
			_ = testHub.Client.Update(ctx, &cm)
		}
	})
	waitFor(t, 60*time.Second, "re-registered with Kubernetes 1.34", func() bool {
		p, _ := spm.Get("sp-registered")
		return advertised(p, "kubernetesSupportedVersions") == "1.27,1.28,1.29,1.30,1.31,1.32,1.33,1.34"
	})
	if p2, _ := spm.Get("sp-registered"); p2.ID != p.ID {
		t.Fatalf("re-registration changed the provider id: %s → %s", p.ID, p2.ID)
	}
}

// A registry that is down never blocks serving: the API answers, the SP is ready, and the registration check says
// why it is not registered (informational: the SP stays healthy).
func TestRegistryDownNeverBlocksTheAPI(t *testing.T) {
	t.Parallel()
	const dead = "127.0.0.1:1" // a privileged port nothing here listens on: connections are refused
	cfg := testConfig("restricted")
	cfg.ProviderName = "sp-unregistered"
	cfg.RegistrationURL = "http://" + dead + "/api/v1alpha1"
	cfg.APIHost = "http://127.0.0.1:1"
	sp := startSP(t, cfg, Options{RegistrationBackoff: 50 * time.Millisecond, RegistrationMaxBackoff: 200 * time.Millisecond})
	if code, _, _ := do(t, http.MethodGet, sp.URL+"/api/v1alpha1/clusters", "", nil); code != http.StatusOK {
		t.Fatalf("LIST with the registry down: %d", code)
	}
	waitFor(t, 60*time.Second, "registration check reports the failure", func() bool {
		h := sp.App.Health.Report()
		for _, c := range h.Checks {
			if c.Name == "registration" {
				return c.Status == "unhealthy" && strings.Contains(c.Message, "not registered") && h.Status == "healthy"
			}
		}
		return false
	})
}
