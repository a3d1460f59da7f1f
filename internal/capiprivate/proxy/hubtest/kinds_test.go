package hubtest

import (
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
)

// kind is one mapped kind: its standard group, resource, served versions and a valid object per version. ref
// names a member holding a group reference (the path and the group it names in the client's view), so tests can
// check the reference is stored private and read back standard.
type kind struct {
	group, kind, resource string
	versions              []string
	scale                 bool
	status                string // a merge patch of /status ("" when the kind has no status subresource)
	obj                   func(version, ns, name string) map[string]any
	ref                   func(version string) (path []string, value string)
}

func (k kind) object(version, ns, name string) *unstructured.Unstructured {
	o := &unstructured.Unstructured{Object: k.obj(version, ns, name)}
	o.SetAPIVersion(k.group + "/" + version)
	o.SetKind(k.kind)
	o.SetName(name)
	o.SetNamespace(ns)
	o.SetLabels(map[string]string{"cluster.x-k8s.io/cluster-name": "c1", "hubtest": "crud"})
	o.SetAnnotations(map[string]string{"cluster.x-k8s.io/paused": "", "note": "cluster.x-k8s.io/v1beta2"})
	return o
}

func spec(s map[string]any) map[string]any { return map[string]any{"spec": s} }

// infraRef is a reference to a CAPK object in the version's shape.
func infraRef(v, kind, name string) map[string]any {
	if v == "v1beta1" {
		return map[string]any{"apiVersion": stdInfra + "/v1alpha1", "kind": kind, "name": name}
	}
	return map[string]any{"apiGroup": stdInfra, "kind": kind, "name": name}
}

func machineSpec(v string) map[string]any {
	return map[string]any{"clusterName": "c1", "bootstrap": map[string]any{"dataSecretName": "bootstrap"},
		"infrastructureRef": infraRef(v, "KubevirtMachineTemplate", "tmpl")}
}

func refPath(v string, v1beta1Path, v1beta2Path []string, v1beta1Value, v1beta2Value string) ([]string, string) {
	if v == "v1beta1" {
		return v1beta1Path, v1beta1Value
	}
	return v1beta2Path, v1beta2Value
}

var selector = map[string]any{"matchLabels": map[string]any{"cluster.x-k8s.io/deployment-name": "md"}}

var templateMeta = map[string]any{"labels": map[string]any{"cluster.x-k8s.io/deployment-name": "md"}}

var capiV = []string{"v1beta1", "v1beta2"}

var kinds = []kind{
	{group: stdCore, kind: "Cluster", resource: "clusters", versions: capiV, status: observed,
		obj: func(v, _, _ string) map[string]any {
			return spec(map[string]any{"infrastructureRef": infraRef(v, "KubevirtCluster", "c1"), "paused": true})
		},
		ref: func(v string) ([]string, string) {
			return refPath(v, []string{"spec", "infrastructureRef", "apiVersion"}, []string{"spec", "infrastructureRef", "apiGroup"}, stdInfra+"/v1alpha1", stdInfra)
		}},
	{group: stdCore, kind: "ClusterClass", resource: "clusterclasses", versions: capiV, status: observed,
		obj: func(v, _, _ string) map[string]any {
			if v == "v1beta1" {
				return spec(map[string]any{
					"infrastructure": map[string]any{"ref": map[string]any{"apiVersion": stdInfra + "/v1alpha1", "kind": "KubevirtClusterTemplate", "name": "t"}},
					"controlPlane":   map[string]any{"ref": map[string]any{"apiVersion": "hypershift.openshift.io/v1beta1", "kind": "HostedControlPlaneTemplate", "name": "t"}},
				})
			}
			return spec(map[string]any{
				"infrastructure": map[string]any{"templateRef": map[string]any{"apiVersion": stdInfra + "/v1alpha1", "kind": "KubevirtClusterTemplate", "name": "t"}},
				"controlPlane":   map[string]any{"templateRef": map[string]any{"apiVersion": "hypershift.openshift.io/v1beta1", "kind": "HostedControlPlaneTemplate", "name": "t"}},
			})
		},
		ref: func(v string) ([]string, string) {
			return refPath(v, []string{"spec", "infrastructure", "ref", "apiVersion"}, []string{"spec", "infrastructure", "templateRef", "apiVersion"}, stdInfra+"/v1alpha1", stdInfra+"/v1alpha1")
		}},
	{group: stdCore, kind: "Machine", resource: "machines", versions: capiV, status: observed,
		obj: func(v, _, _ string) map[string]any {
			s := machineSpec(v)
			s["infrastructureRef"] = infraRef(v, "KubevirtMachine", "m")
			return spec(s)
		},
		ref: func(v string) ([]string, string) {
			return refPath(v, []string{"spec", "infrastructureRef", "apiVersion"}, []string{"spec", "infrastructureRef", "apiGroup"}, stdInfra+"/v1alpha1", stdInfra)
		}},
	{group: stdCore, kind: "MachineSet", resource: "machinesets", versions: capiV, scale: true, status: observed,
		obj: func(v, _, _ string) map[string]any {
			return spec(map[string]any{"clusterName": "c1", "replicas": int64(0), "selector": selector,
				"template": map[string]any{"metadata": templateMeta, "spec": machineSpec(v)}})
		},
		ref: func(v string) ([]string, string) {
			return refPath(v, []string{"spec", "template", "spec", "infrastructureRef", "apiVersion"}, []string{"spec", "template", "spec", "infrastructureRef", "apiGroup"}, stdInfra+"/v1alpha1", stdInfra)
		}},
	{group: stdCore, kind: "MachineDeployment", resource: "machinedeployments", versions: capiV, scale: true, status: observed,
		obj: func(v, _, _ string) map[string]any {
			return spec(map[string]any{"clusterName": "c1", "replicas": int64(0), "selector": selector,
				"template": map[string]any{"metadata": templateMeta, "spec": machineSpec(v)}})
		},
		ref: func(v string) ([]string, string) {
			return refPath(v, []string{"spec", "template", "spec", "infrastructureRef", "apiVersion"}, []string{"spec", "template", "spec", "infrastructureRef", "apiGroup"}, stdInfra+"/v1alpha1", stdInfra)
		}},
	{group: stdCore, kind: "MachineHealthCheck", resource: "machinehealthchecks", versions: capiV, status: observed,
		obj: func(v, _, _ string) map[string]any {
			if v == "v1beta1" {
				return spec(map[string]any{"clusterName": "c1", "selector": selector,
					"remediationTemplate": map[string]any{"apiVersion": stdInfra + "/v1alpha1", "kind": "KubevirtRemediationTemplate", "name": "r"}})
			}
			return spec(map[string]any{"clusterName": "c1", "selector": selector,
				"remediation": map[string]any{"templateRef": map[string]any{"apiVersion": stdInfra + "/v1alpha1", "kind": "KubevirtRemediationTemplate", "name": "r"}}})
		},
		ref: func(v string) ([]string, string) {
			return refPath(v, []string{"spec", "remediationTemplate", "apiVersion"}, []string{"spec", "remediation", "templateRef", "apiVersion"}, stdInfra+"/v1alpha1", stdInfra+"/v1alpha1")
		}},
	{group: stdCore, kind: "MachinePool", resource: "machinepools", versions: capiV, scale: true, status: observed,
		obj: func(v, _, _ string) map[string]any {
			s := machineSpec(v)
			s["infrastructureRef"] = infraRef(v, "KubevirtMachineTemplate", "mp")
			return spec(map[string]any{"clusterName": "c1", "replicas": int64(0), "template": map[string]any{"spec": s}})
		},
		ref: func(v string) ([]string, string) {
			return refPath(v, []string{"spec", "template", "spec", "infrastructureRef", "apiVersion"}, []string{"spec", "template", "spec", "infrastructureRef", "apiGroup"}, stdInfra+"/v1alpha1", stdInfra)
		}},
	{group: stdCore, kind: "MachineDrainRule", resource: "machinedrainrules", versions: capiV,
		obj: func(string, string, string) map[string]any {
			return spec(map[string]any{"drain": map[string]any{"behavior": "Skip"}})
		}},
	{group: stdAddons, kind: "ClusterResourceSet", resource: "clusterresourcesets", versions: capiV, status: observed,
		obj: func(string, string, string) map[string]any {
			return spec(map[string]any{"clusterSelector": map[string]any{"matchLabels": map[string]any{"cluster.x-k8s.io/cluster-name": "c1"}},
				"resources": []any{map[string]any{"kind": "ConfigMap", "name": "cm"}}})
		}},
	{group: stdAddons, kind: "ClusterResourceSetBinding", resource: "clusterresourcesetbindings", versions: capiV,
		obj: func(string, string, string) map[string]any {
			return spec(map[string]any{"clusterName": "c1"})
		}},
	{group: stdIPAM, kind: "IPAddressClaim", resource: "ipaddressclaims", versions: capiV, status: `{"status":{"addressRef":{"name":"a"}}}`,
		obj: func(string, string, string) map[string]any {
			return spec(map[string]any{"poolRef": map[string]any{"apiGroup": stdIPAM, "kind": "InClusterIPPool", "name": "pool"}})
		},
		ref: func(string) ([]string, string) { return []string{"spec", "poolRef", "apiGroup"}, stdIPAM }},
	{group: stdIPAM, kind: "IPAddress", resource: "ipaddresses", versions: capiV,
		obj: func(string, string, string) map[string]any {
			return spec(map[string]any{"address": "10.0.0.1", "prefix": int64(24), "claimRef": map[string]any{"name": "claim"},
				"poolRef": map[string]any{"apiGroup": stdIPAM, "kind": "InClusterIPPool", "name": "pool"}})
		},
		ref: func(string) ([]string, string) { return []string{"spec", "poolRef", "apiGroup"}, stdIPAM }},
	{group: stdInfra, kind: "KubevirtCluster", resource: "kubevirtclusters", versions: []string{"v1alpha1"}, status: `{"status":{"ready":true}}`,
		obj: func(string, string, string) map[string]any { return spec(map[string]any{}) }},
	{group: stdInfra, kind: "KubevirtClusterTemplate", resource: "kubevirtclustertemplates", versions: []string{"v1alpha1"},
		obj: func(string, string, string) map[string]any {
			return spec(map[string]any{"template": map[string]any{"spec": map[string]any{}}})
		}},
	{group: stdInfra, kind: "KubevirtMachine", resource: "kubevirtmachines", versions: []string{"v1alpha1"}, status: `{"status":{"ready":true}}`,
		obj: func(string, string, string) map[string]any { return spec(map[string]any{}) }},
	{group: stdInfra, kind: "KubevirtMachineTemplate", resource: "kubevirtmachinetemplates", versions: []string{"v1alpha1"},
		obj: func(string, string, string) map[string]any {
			return spec(map[string]any{"template": map[string]any{"spec": map[string]any{}}})
		}},
}

const observed = `{"status":{"observedGeneration":1}}`
