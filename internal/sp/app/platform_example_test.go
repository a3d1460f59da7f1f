package app

// A third platform, added to the SP in this one file: its table entry (registered before any SP of the package is
// built) and a test that runs create, get, list and delete of one of its clusters through the HTTP API against the
// real hub. Nothing else in the SP names it: rendering, validation, discovery, health, status and the HTTP answers
// read the entry. It renders HyperShift's "None" platform (workers the operator does not provision), which the hub's
// CRDs accept and the simulated operator progresses like any other.

import (
	"context"
	"net/http"
	"slices"
	"testing"
	"time"

	hyperv1 "github.com/openshift/hypershift/api/hypershift/v1beta1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/dcm-sp/acm-cluster-sp/internal/sp/platform"
)

const examplePlatform platform.Name = "example"

func init() {
	platform.Register(platform.Platform{
		Name: examplePlatform, HyperShift: hyperv1.NonePlatform,
		ProvisioningTimeout: 30 * time.Minute, OperationTimeout: 30 * time.Minute,
		Rules: func(r platform.Request) {
			if r.WorkerStorage != nil {
				r.Fail("nodes.workers.storage", "is not supported on the example platform")
			}
		},
		HostedCluster: func(platform.Cluster) hyperv1.PlatformSpec {
			return hyperv1.PlatformSpec{Type: hyperv1.NonePlatform}
		},
		NodePool: func(_ platform.Cluster, np *hyperv1.NodePoolSpec) {
			np.Arch = hyperv1.ArchitectureAMD64
			np.Management = hyperv1.NodePoolManagement{UpgradeType: hyperv1.UpgradeTypeReplace}
			np.Platform = hyperv1.NodePoolPlatform{Type: hyperv1.NonePlatform}
		},
	})
}

func TestThirdPlatformFromOneFile(t *testing.T) {
	t.Parallel()
	cfg := testConfig("clusters")
	cfg.ProviderName = "sp-example-platform"
	cfg.EnabledPlatforms = []string{string(examplePlatform)}
	cfg.DefaultPlatform = string(examplePlatform)
	sp := startSP(t, cfg, Options{})
	ctx := context.Background()

	if got := sp.App.Platforms.Available(); !slices.Equal(got, []string{string(examplePlatform)}) {
		t.Fatalf("available platforms %v, want only %s", got, examplePlatform)
	}
	// Its spec rules are the entry's.
	name := uniqueName("example")
	code, h, raw := do(t, http.MethodPost, sp.URL+"/api/v1alpha1/clusters", "application/json",
		[]byte(`{"spec":{"version":"1.30","metadata":{"name":"`+name+`"},"nodes":{"workers":{"count":2,"storage":"120GB"}},"provider_hints":{"acm":{"platform":"example"}}}}`))
	assertProblem(t, code, h, raw, http.StatusBadRequest, "not supported on the example platform")

	// Create, then READY, as any platform's cluster.
	code, c, raw := sp.create(t, "", `{"spec":{"version":"1.30","metadata":{"name":"`+name+`"},"nodes":{"workers":{"count":2}},"provider_hints":{"acm":{"platform":"example"}}}}`)
	if code != http.StatusCreated {
		t.Fatalf("POST: %d %s", code, raw)
	}
	if c.Platform != string(examplePlatform) {
		t.Fatalf("created with platform %q, want %s", c.Platform, examplePlatform)
	}
	var hc hyperv1.HostedCluster
	if err := testHub.Client.Get(ctx, client.ObjectKey{Namespace: "clusters", Name: name}, &hc); err != nil {
		t.Fatal(err)
	}
	if hc.Spec.Platform.Type != hyperv1.NonePlatform {
		t.Fatalf("HostedCluster platform %q, want the entry's %q", hc.Spec.Platform.Type, hyperv1.NonePlatform)
	}
	got, _ := sp.waitStatus(t, c.Id, "READY", 90*time.Second)
	if got.Platform != string(examplePlatform) {
		t.Fatalf("GET: platform %q, want %s", got.Platform, examplePlatform)
	}

	// LIST names it with its platform.
	list, err := sp.Client.ListClustersWithResponse(ctx, nil)
	if err != nil || list.JSON200 == nil {
		t.Fatalf("LIST: %v %s", err, list.Body)
	}
	found := false
	for _, l := range list.JSON200.Results {
		found = found || (l.Id == c.Id && l.Platform == string(examplePlatform))
	}
	if !found {
		t.Fatalf("LIST of %d clusters has no %s cluster %s", len(list.JSON200.Results), examplePlatform, c.Id)
	}

	// DELETE, then gone, nothing left behind.
	resp, err := sp.Client.DeleteClusterWithResponse(ctx, c.Id, nil)
	if err != nil || resp.StatusCode() != http.StatusNoContent {
		t.Fatalf("DELETE: %v %d %s", err, resp.StatusCode(), resp.Body)
	}
	sp.waitStatus(t, c.Id, "DELETED", 90*time.Second)
	waitFor(t, 60*time.Second, "no leftovers", func() bool { return len(leftovers(t, c.Id, name)) == 0 })
}
