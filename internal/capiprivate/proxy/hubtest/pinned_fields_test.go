package hubtest

import (
	"testing"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"

	"github.com/dcm-sp/acm-cluster-sp/internal/capiprivate/proxy"
	"github.com/dcm-sp/acm-cluster-sp/internal/devtest/capi/capihub"
)

// TestPinnedFieldsThroughProxy: objects that set fields only the versions HyperShift pins have (Cluster API
// v1.13's Machine taints and status.failureDomain, MachineHealthCheck v1beta1 unhealthyMachineConditions, CAPK
// v0.11's VM architecture and video device), written through the proxy in the standard groups at the version a
// controller uses, read back through the proxy unchanged — nothing pruned by the private CRDs, nothing lost by the
// conversion webhook — and stored in the private groups with those fields.
func TestPinnedFieldsThroughProxy(t *testing.T) {
	ps := startProxy(t, proxy.Options{})
	pc := ps.dynamic(t, env.AdminToken)
	dc := direct(t)
	ns := env.NewNamespace(t, "pinned-fields")
	taints := []any{map[string]any{"key": "example.com/dedicated", "value": "infra", "effect": "NoSchedule", "propagation": "Always"}}
	for _, tc := range []struct {
		group, version, resource, kind, name string
		spec, status                         map[string]any
		// stored is a path the private object must hold.
		stored []string
	}{
		{group: stdCore, version: "v1beta2", resource: "machines", kind: "Machine", name: "m-v1beta2",
			spec: map[string]any{"clusterName": "c1", "bootstrap": map[string]any{"dataSecretName": "b"},
				"infrastructureRef": map[string]any{"apiGroup": stdInfra, "kind": "KubevirtMachine", "name": "m"}, "taints": taints},
			status: map[string]any{"failureDomain": "zone-a"}, stored: []string{"status", "failureDomain"}},
		{group: stdCore, version: "v1beta1", resource: "machines", kind: "Machine", name: "m-v1beta1",
			spec: map[string]any{"clusterName": "c1", "bootstrap": map[string]any{"dataSecretName": "b"},
				"infrastructureRef": map[string]any{"apiVersion": stdInfra + "/v1alpha1", "kind": "KubevirtMachine", "name": "m", "namespace": ns}, "taints": taints},
			stored: []string{"spec", "taints"}},
		{group: stdCore, version: "v1beta1", resource: "machinehealthchecks", kind: "MachineHealthCheck", name: "mhc",
			spec: map[string]any{"clusterName": "c1", "selector": map[string]any{"matchLabels": map[string]any{"pool": "a"}},
				"unhealthyMachineConditions": []any{map[string]any{"type": "example.com/Degraded", "status": "False", "timeout": "10m0s"}}},
			stored: []string{"spec", "checks", "unhealthyMachineConditions"}},
		{group: stdInfra, version: "v1alpha1", resource: "kubevirtmachinetemplates", kind: "KubevirtMachineTemplate", name: "kvmt",
			spec: map[string]any{"template": map[string]any{"spec": map[string]any{"virtualMachineTemplate": map[string]any{"spec": map[string]any{
				"template": map[string]any{"spec": map[string]any{"architecture": "amd64",
					"domain": map[string]any{"devices": map[string]any{"video": map[string]any{"type": "virtio"}}}}}}}}}},
			stored: []string{"spec", "template", "spec", "virtualMachineTemplate", "spec", "template", "spec", "architecture"}},
	} {
		t.Run(tc.kind+"@"+tc.version, func(t *testing.T) {
			ctx := t.Context()
			obj := &unstructured.Unstructured{Object: map[string]any{"spec": tc.spec}}
			obj.SetAPIVersion(tc.group + "/" + tc.version)
			obj.SetKind(tc.kind)
			obj.SetNamespace(ns)
			obj.SetName(tc.name)
			res := pc.Resource(gvr(tc.group, tc.version, tc.resource)).Namespace(ns)
			created, err := res.Create(ctx, obj, metav1.CreateOptions{})
			if err != nil {
				t.Fatal(err)
			}
			if tc.status != nil {
				created.Object["status"] = tc.status
				if _, err := res.UpdateStatus(ctx, created, metav1.UpdateOptions{}); err != nil {
					t.Fatal(err)
				}
			}
			read, err := res.Get(ctx, tc.name, metav1.GetOptions{})
			if err != nil {
				t.Fatal(err)
			}
			for field, written := range map[string]map[string]any{"spec": tc.spec, "status": tc.status} {
				if written == nil {
					continue
				}
				if lost, err := capihub.LostFields(written, read.Object[field]); err != nil || len(lost) > 0 {
					t.Errorf("%s written and read through the proxy: %s lost or changed: %v %v", tc.kind, field, lost, err)
				}
			}
			privGroup := privCore
			if tc.group == stdInfra {
				privGroup = privInfra
			}
			storedVersion := tc.version
			if tc.group == stdCore {
				storedVersion = "v1beta2"
			}
			stored, err := dc.Resource(gvr(privGroup, storedVersion, tc.resource)).Namespace(ns).Get(ctx, tc.name, metav1.GetOptions{})
			if err != nil {
				t.Fatal(err)
			}
			if _, found, _ := unstructured.NestedFieldNoCopy(stored.Object, tc.stored...); !found {
				t.Errorf("stored %s/%s lacks %v", privGroup, tc.kind, tc.stored)
			}
		})
	}
}
