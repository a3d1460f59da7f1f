package capipods

import (
	"context"
	"fmt"
	"testing"
	"time"

	hyperv1 "github.com/openshift/hypershift/api/hypershift/v1beta1"
	"k8s.io/apimachinery/pkg/api/meta"
	"sigs.k8s.io/controller-runtime/pkg/client"
)

// TestLegacyHostedClusters builds what the migration starts from: two legacy hosted clusters of
// 2 MachineDeployments × 2 Machines each, run by their own simulated pods in legacy mode, with Nodes, the
// HostedCluster Available through the fake operator, and the HostedControlPlane owned by the Cluster.
func TestLegacyHostedClusters(t *testing.T) {
	t.Parallel()
	ctx := t.Context()
	ns := env.NewNamespace(t, "clusters")
	ho, err := harness.StartOperator(ctx, "legacy-"+t.Name(), Direct, func(hc *hyperv1.HostedCluster) bool { return hc.Namespace == ns })
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = ho.Stop() }()
	begin := time.Now()
	var hcs []*HostedCluster
	for _, name := range []string{"alpha", "beta"} {
		hc, err := harness.CreateHostedCluster(ctx, LegacyHostedCluster(ns, name, 2, 2))
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { deleteNamespace(hc.Namespace()) })
		hcs = append(hcs, hc)
	}
	for _, hc := range hcs {
		machines, _ := runningMachines(t, hc, StandardGroups, 4, 3*time.Minute)
		checkNodes(t, machines)
		checkClusterProvisioned(t, hc)
		if s := harness.Ledger.StatsFor(hc.Namespace()); s.Creates != 4 || s.Deletes != 0 {
			t.Errorf("%s: ledger %s", hc.Namespace(), s)
		}
		mds, err := hc.List(ctx, harness.Client, StandardGroups, "MachineDeployment")
		if err != nil || len(mds) != 2 {
			t.Fatalf("MachineDeployments %d (err %v)", len(mds), err)
		}
		eventually(t, time.Minute, "HostedCluster Available", func(ctx context.Context) (bool, string, error) {
			h := &hyperv1.HostedCluster{}
			if err := harness.Client.Get(ctx, client.ObjectKey{Namespace: ns, Name: hc.Spec.Name}, h); err != nil {
				return false, "", err
			}
			return meta.IsStatusConditionTrue(h.Status.Conditions, string(hyperv1.HostedClusterAvailable)) && h.Status.ControlPlaneEndpoint.Port != 0,
				fmt.Sprintf("%+v", h.Status), nil
		})
	}
	t.Logf("2 legacy hosted clusters of 2×2 Machines Running after %s", time.Since(begin).Round(time.Millisecond))
}
