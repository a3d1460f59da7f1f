package capipods

import (
	"context"
	"fmt"
	"net/http"
	"strings"
	"testing"
	"time"

	hyperv1 "github.com/openshift/hypershift/api/hypershift/v1beta1"
	"github.com/prometheus/common/expfmt"
	"github.com/prometheus/common/model"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/wait"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/dcm-sp/acm-cluster-sp/internal/devtest/capi/capihub"
)

// eventually polls cond every 100 ms until it holds, failing the test after timeout with the last state.
func eventually(t *testing.T, timeout time.Duration, what string, cond func(ctx context.Context) (bool, string, error)) time.Duration {
	t.Helper()
	start := time.Now()
	var last string
	var lastErr error
	err := wait.PollUntilContextTimeout(t.Context(), 100*time.Millisecond, timeout, true, func(ctx context.Context) (bool, error) {
		ok, state, err := cond(ctx)
		last, lastErr = state, err
		return ok && err == nil, nil
	})
	if err != nil {
		t.Fatalf("%s: not within %s; last state: %s (error %v)", what, timeout, last, lastErr)
	}
	return time.Since(start)
}

// runningMachines waits until the hosted cluster has exactly n Machines in g, all Running with a ledger providerID
// and a nodeRef to its Node, and returns them with the time it took.
func runningMachines(t *testing.T, hc *HostedCluster, g Groups, n int, timeout time.Duration) ([]MachineState, time.Duration) {
	t.Helper()
	start := time.Now()
	ms, err := hc.WaitMachinesRunning(t.Context(), g, n, timeout)
	if err != nil {
		t.Fatal(err)
	}
	return ms, time.Since(start)
}

// platformVersions are the resourceVersions of the platform's standard objects.
func platformVersions(t *testing.T) map[string]string {
	t.Helper()
	out := map[string]string{}
	for _, kind := range []string{"Cluster", "Machine"} {
		name := capihub.PlatformCluster
		if kind == "Machine" {
			name = capihub.PlatformMachine
		}
		u := NewCAPIObject(StandardGroups, kind)
		if err := harness.Client.Get(t.Context(), client.ObjectKey{Namespace: capihub.PlatformNamespace, Name: name}, u); err != nil {
			t.Fatal(err)
		}
		out[kind] = u.GetResourceVersion()
	}
	s := &corev1.Secret{}
	if err := harness.Client.Get(t.Context(), client.ObjectKey{Namespace: capihub.PlatformNamespace, Name: capihub.PlatformSecret}, s); err != nil {
		t.Fatal(err)
	}
	out["Secret"] = s.ResourceVersion
	return out
}

// TestLegacyReconcileScaleDelete: in legacy mode (managers talking directly to kube-apiserver, objects in the
// platform's standard CRDs and standard CAPK) the upstream CAPI controllers, the ledger provider and the fake
// operators bring a HostedCluster's MachineDeployment of 2 to Running Machines with providerIDs and Nodes, scale it
// 2→3→1 with matching ledger creates and deletes, and delete the Cluster cleanly; the platform's objects are never
// written, although the legacy managers write the same CRDs.
func TestLegacyReconcileScaleDelete(t *testing.T) {
	t.Parallel()
	reconcileScaleDelete(t, Direct)
}

// TestPrivateReconcileScaleDelete is the same through the proxy: the hosted cluster is written in the private
// groups (as a private-mode operator would), every simulated pod and the fake operator run Proxied, and the user
// scales and deletes through the proxy in the standard groups. Everything is stored private (refs included),
// nothing lands in the standard CRDs, and the platform's objects stay untouched and invisible through the proxy.
func TestPrivateReconcileScaleDelete(t *testing.T) {
	t.Parallel()
	reconcileScaleDelete(t, Proxied)
}

func reconcileScaleDelete(t *testing.T, mode Mode) {
	ctx := t.Context()
	platform := platformVersions(t)
	stored, user := StandardGroups, harness.Client // how objects are stored; the client a user scales and deletes with
	if mode == Proxied {
		stored, user = PrivateGroups, viaProxy
	}
	ns := env.NewNamespace(t, string(mode))
	operator := string(mode) + "-" + t.Name()
	// Kept to this test's namespace: the package's tests run in parallel.
	ho, err := harness.StartOperator(ctx, operator, mode, func(h *hyperv1.HostedCluster) bool { return h.Namespace == ns })
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = ho.Stop() }()

	spec := HostedClusterSpec{
		Namespace: ns, Name: "hc1", InfraID: "hc1-x7k2p", Groups: stored,
		MachineDeployments:  []MachineDeploymentSpec{{Name: "hc1-workers", Replicas: 2}},
		MachineHealthChecks: true, Deployments: true, DeploymentReplicas: 1, Proxied: mode == Proxied,
	}
	begin := time.Now()
	hc, err := harness.CreateHostedCluster(ctx, spec)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { deleteNamespace(hc.Namespace()) })
	if err := hc.WaitDeploymentsAvailable(ctx, 2*time.Minute); err != nil {
		t.Fatal(err)
	}
	for _, role := range ControlPlaneRoles {
		for _, p := range harness.Player.Pods(types.NamespacedName{Namespace: hc.Namespace(), Name: role}) {
			if p.Mode != mode {
				t.Errorf("pod %s runs %s, want %s", p.Name, p.Mode, mode)
			}
		}
	}
	t.Logf("simulated Deployments available after %s", time.Since(begin).Round(time.Millisecond))

	machines, took := runningMachines(t, hc, stored, 2, 3*time.Minute)
	t.Logf("2 Machines Running after %s (since create %s): %+v", took.Round(time.Millisecond), time.Since(begin).Round(time.Millisecond), machines)
	if s := harness.Ledger.StatsFor(hc.Namespace()); s.Creates != 2 || s.Deletes != 0 {
		t.Fatalf("ledger after 2 Machines: %s", s)
	}
	checkNodes(t, machines)
	checkClusterProvisioned(t, hc)
	checkStored(t, hc)
	// With the Nodes Ready and healthy, CAPI's Machine conditions turn Ready and the MachineDeployment available.
	eventually(t, time.Minute, "MachineDeployment available with Ready Machines", func(ctx context.Context) (bool, string, error) {
		md, err := hc.Get(ctx, harness.Client, stored, "MachineDeployment", "hc1-workers")
		if err != nil {
			return false, "", err
		}
		available, _, _ := unstructured.NestedInt64(md.Object, "status", "availableReplicas")
		ready, _, _ := unstructured.NestedInt64(md.Object, "status", "readyReplicas")
		return available == 2 && ready == 2, fmt.Sprint(md.Object["status"]), nil
	})

	if err := hc.ScaleMachineDeployment(ctx, user, StandardGroups, "hc1-workers", 3); err != nil {
		t.Fatal(err)
	}
	machines, took = runningMachines(t, hc, stored, 3, 2*time.Minute)
	t.Logf("scaled 2→3 in %s", took.Round(time.Millisecond))
	if s := harness.Ledger.StatsFor(hc.Namespace()); s.Creates != 3 || s.Deletes != 0 {
		t.Fatalf("ledger after 2→3: %s", s)
	}
	checkNodes(t, machines)

	if err := hc.ScaleMachineDeployment(ctx, user, StandardGroups, "hc1-workers", 1); err != nil {
		t.Fatal(err)
	}
	kept, took := runningMachines(t, hc, stored, 1, 2*time.Minute)
	took += eventually(t, time.Minute, "ledger deletes of the scale-down", func(context.Context) (bool, string, error) {
		s := harness.Ledger.StatsFor(hc.Namespace())
		return s.Creates == 3 && s.Deletes == 2 && s.Live == 1, s.String(), nil
	})
	t.Logf("scaled 3→1 in %s", took.Round(time.Millisecond))
	for _, m := range machines {
		if m.Name == kept[0].Name {
			continue
		}
		if _, ok := harness.Ledger.Lookup(m.ProviderID); ok {
			t.Errorf("instance %s of deleted Machine %s still live", m.ProviderID, m.Name)
		}
		eventually(t, 30*time.Second, "Node "+m.NodeName+" deleted", func(ctx context.Context) (bool, string, error) {
			err := harness.Client.Get(ctx, client.ObjectKey{Name: m.NodeName}, &corev1.Node{})
			return apierrors.IsNotFound(err), fmt.Sprint(err), client.IgnoreNotFound(err)
		})
	}

	// Delete the Cluster: CAPI deletes the MachineDeployment, its MachineSet and Machine (the provider releases the
	// instance), then the HostedControlPlane and the KubevirtCluster, and finally the Cluster.
	deleted := time.Now()
	cluster := NewCAPIObject(StandardGroups, "Cluster")
	cluster.SetNamespace(hc.Namespace())
	cluster.SetName(spec.ClusterName())
	if err := user.Delete(ctx, cluster); err != nil {
		t.Fatal(err)
	}
	eventually(t, 2*time.Minute, "every Cluster API object of the hosted cluster deleted", func(ctx context.Context) (bool, string, error) {
		var left []string
		for _, kind := range []string{"Cluster", "MachineDeployment", "MachineSet", "Machine", "KubevirtMachine", "KubevirtCluster"} {
			items, err := hc.List(ctx, harness.Client, stored, kind)
			if err != nil {
				return false, "", err
			}
			for _, i := range items {
				left = append(left, kind+"/"+i.GetName())
			}
		}
		return len(left) == 0, fmt.Sprint(left), nil
	})
	s := harness.Ledger.StatsFor(hc.Namespace())
	if s.Creates != 3 || s.Deletes != 3 || s.Live != 0 {
		t.Errorf("ledger after the Cluster's deletion: %s", s)
	}
	t.Logf("Cluster deleted in %s; ledger %s", time.Since(deleted).Round(time.Millisecond), s)

	// The platform's objects were never written.
	if got := platformVersions(t); fmt.Sprint(got) != fmt.Sprint(platform) {
		t.Errorf("platform objects changed: %v → %v", platform, got)
	}
	if n := harness.Reconciles.Count(operator, types.NamespacedName{Namespace: spec.Namespace, Name: spec.Name}); n == 0 {
		t.Errorf("the fake HyperShift operator never reconciled the HostedCluster")
	}
	if mode == Proxied {
		if n := proxyMetric(t, "capi_private_proxy_objects_translated_total", "direction", "response"); n == 0 {
			t.Error("the proxy translated no response object")
		}
	}
}

// proxyMetric is the sum of a metric's samples whose label has value, from the proxy's /metrics.
func proxyMetric(t *testing.T, name, label, value string) float64 {
	t.Helper()
	resp, err := http.Get(proxyServer.MetricsURL)
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = resp.Body.Close() }()
	p := expfmt.NewTextParser(model.UTF8Validation)
	families, err := p.TextToMetricFamilies(resp.Body)
	if err != nil {
		t.Fatal(err)
	}
	sum := 0.0
	for _, m := range families[name].GetMetric() {
		for _, l := range m.GetLabel() {
			if l.GetName() == label && l.GetValue() == value {
				sum += m.GetCounter().GetValue()
			}
		}
	}
	return sum
}

// checkStored: in private mode, every Cluster API object of the hosted cluster is stored in the private groups with
// private refs (owners, infrastructureRef), nothing is stored in the standard CRDs, the proxy shows the same objects
// in the standard groups, and the platform's objects are invisible through it.
func checkStored(t *testing.T, hc *HostedCluster) {
	t.Helper()
	if hc.Spec.Groups != PrivateGroups {
		return
	}
	ctx := t.Context()
	for _, kind := range []string{"Cluster", "MachineDeployment", "MachineSet", "Machine", "KubevirtMachine", "KubevirtCluster", "MachineHealthCheck"} {
		if items, err := hc.List(ctx, harness.Client, StandardGroups, kind); err != nil || len(items) != 0 {
			t.Errorf("standard %s stored in %s: %d (err %v)", kind, hc.Namespace(), len(items), err)
		}
		items, err := hc.List(ctx, harness.Client, PrivateGroups, kind)
		if err != nil || len(items) == 0 {
			t.Fatalf("private %s: %d (err %v)", kind, len(items), err)
		}
		viewed, err := hc.List(ctx, viaProxy, StandardGroups, kind)
		if err != nil || len(viewed) != len(items) {
			t.Errorf("%s through the proxy: %d of %d (err %v)", kind, len(viewed), len(items), err)
		}
		groups := map[string]bool{}
		for _, i := range items {
			refGroups(i.Object, groups)
			for _, ref := range i.GetOwnerReferences() {
				groups[ref.APIVersion] = true
			}
		}
		for g := range groups {
			if strings.Contains(g, "x-k8s.io") {
				t.Errorf("stored private %s holds the standard group %s", kind, g)
			}
		}
	}
	// The platform's Cluster API objects: none through the proxy, not even by name.
	for _, kind := range []string{"Cluster", "Machine"} {
		items, err := ListCAPI(ctx, viaProxy, StandardGroups, kind, "")
		if err != nil {
			t.Fatal(err)
		}
		for _, i := range items {
			if i.GetNamespace() == capihub.PlatformNamespace {
				t.Errorf("platform %s %s visible through the proxy", kind, i.GetName())
			}
		}
	}
	u := NewCAPIObject(StandardGroups, "Machine")
	if err := viaProxy.Get(ctx, client.ObjectKey{Namespace: capihub.PlatformNamespace, Name: capihub.PlatformMachine}, u); !apierrors.IsNotFound(err) {
		t.Errorf("platform Machine through the proxy: %v, want NotFound", err)
	}
}

// checkNodes: each Machine's Node exists, is Ready and carries the Machine's providerID.
func checkNodes(t *testing.T, machines []MachineState) {
	t.Helper()
	for _, m := range machines {
		n := &corev1.Node{}
		if err := harness.Client.Get(t.Context(), client.ObjectKey{Name: m.NodeName}, n); err != nil {
			t.Fatalf("Node of Machine %s: %v", m.Name, err)
		}
		if n.Spec.ProviderID != m.ProviderID || !nodeReady(n) {
			t.Errorf("Node %s: providerID %q (Machine has %q), ready %v", n.Name, n.Spec.ProviderID, m.ProviderID, nodeReady(n))
		}
	}
}

// checkClusterProvisioned: the Cluster's infrastructure is provisioned, its control plane initialized, and its
// controlPlaneRef owns the HostedControlPlane (CAPI's ensureOwnerRefAndLabel, which the migration must re-point).
func checkClusterProvisioned(t *testing.T, hc *HostedCluster) {
	t.Helper()
	cluster, err := hc.Get(t.Context(), harness.Client, hc.Spec.Groups, "Cluster", hc.Spec.ClusterName())
	if err != nil {
		t.Fatal(err)
	}
	infra, _, _ := unstructured.NestedBool(cluster.Object, "status", "initialization", "infrastructureProvisioned")
	cp, _, _ := unstructured.NestedBool(cluster.Object, "status", "initialization", "controlPlaneInitialized")
	phase, _, _ := unstructured.NestedString(cluster.Object, "status", "phase")
	if !infra || !cp || phase != "Provisioned" {
		t.Errorf("Cluster: infrastructureProvisioned %v, controlPlaneInitialized %v, phase %q", infra, cp, phase)
	}
	hcp := &metav1.PartialObjectMetadata{}
	hcp.SetGroupVersionKind(hcpGVK)
	if err := harness.Client.Get(t.Context(), client.ObjectKey{Namespace: hc.Namespace(), Name: hc.Spec.Name}, hcp); err != nil {
		t.Fatal(err)
	}
	owned := false
	for _, ref := range hcp.OwnerReferences {
		owned = owned || (ref.Kind == "Cluster" && ref.UID == cluster.GetUID() && ref.APIVersion == hc.Spec.Groups.APIVersion(ClusterGroup, "v1beta2"))
	}
	if !owned {
		t.Errorf("HostedControlPlane owners %+v, want the Cluster %s", hcp.OwnerReferences, cluster.GetUID())
	}
}

func deleteNamespace(name string) { env.DeleteNamespace(name) }

var hcpGVK = hyperv1.GroupVersion.WithKind("HostedControlPlane")
