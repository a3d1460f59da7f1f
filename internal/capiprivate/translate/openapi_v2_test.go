package translate

import (
	"encoding/json"
	"strings"
	"testing"
)

// A Swagger 2.0 document (/openapi/v2) in kube-apiserver's shape, holding both the platform's standard-group
// Machine and the private one, plus a CRD group outside the table.
const openAPIV2Doc = `{"swagger":"2.0","info":{"title":"Kubernetes","version":"v1.34.10"},
"paths":{
 "/apis/cluster.x-k8s.io/v1beta2/namespaces/{namespace}/machines":{"get":{"operationId":"listClusterXK8sIoV1beta2NamespacedMachine","tags":["clusterXK8sIo_v1beta2"],"responses":{"200":{"schema":{"$ref":"#/definitions/io.x-k8s.cluster.v1beta2.MachineList"}}}}},
 "/apis/cluster.hypershift.openshift.io/v1beta2/namespaces/{namespace}/machines":{"get":{"operationId":"listClusterHypershiftOpenshiftIoV1beta2NamespacedMachine","tags":["clusterHypershiftOpenshiftIo_v1beta2"],"responses":{"200":{"schema":{"$ref":"#/definitions/io.openshift.hypershift.cluster.v1beta2.MachineList"}}}},"parameters":[{"$ref":"#/parameters/namespace-vgWSWtn3"}]},
 "/apis/cluster.hypershift.openshift.io/":{"get":{"operationId":"getClusterHypershiftOpenshiftIoAPIGroup"}},
 "/apis/capi-provider.agent-install.openshift.io/v1beta1/agentmachines":{"get":{"operationId":"listCapiProviderAgentInstallOpenshiftIoV1beta1AgentMachineForAllNamespaces"}},
 "/api/v1/pods":{"get":{"operationId":"listCoreV1PodForAllNamespaces"}}},
"definitions":{
 "io.x-k8s.cluster.v1beta2.Machine":{"type":"object","x-kubernetes-group-version-kind":[{"group":"cluster.x-k8s.io","kind":"Machine","version":"v1beta2"}]},
 "io.x-k8s.cluster.v1beta2.MachineList":{"type":"object","properties":{"items":{"items":{"$ref":"#/definitions/io.x-k8s.cluster.v1beta2.Machine"}}}},
 "io.openshift.hypershift.cluster.v1beta2.Machine":{"type":"object","description":"Machine of cluster.hypershift.openshift.io","x-kubernetes-group-version-kind":[{"group":"cluster.hypershift.openshift.io","kind":"Machine","version":"v1beta2"}],"properties":{"metadata":{"$ref":"#/definitions/io.k8s.apimachinery.pkg.apis.meta.v1.ObjectMeta"}}},
 "io.openshift.hypershift.cluster.v1beta2.MachineList":{"type":"object","properties":{"items":{"items":{"$ref":"#/definitions/io.openshift.hypershift.cluster.v1beta2.Machine"}}}},
 "io.openshift.hypershift.cluster.infrastructure.v1beta2.AWSMachine":{"type":"object","x-kubernetes-group-version-kind":[{"group":"infrastructure.cluster.hypershift.openshift.io","kind":"AWSMachine","version":"v1beta2"}]},
 "io.k8s.apimachinery.pkg.apis.meta.v1.ObjectMeta":{"type":"object"}},
"parameters":{"namespace-vgWSWtn3":{"name":"namespace","in":"path","required":true,"type":"string","uniqueItems":true}}}`

// /openapi/v2 is translated like v3: the private group's definitions, $refs, GVKs, paths, operationIds and tags
// take the standard names, the platform's own definitions and paths are dropped, other groups pass.
func TestOpenAPIV2(t *testing.T) {
	res, err := tr.ResponseOpenAPIDocument([]byte(openAPIV2Doc))
	if err != nil {
		t.Fatal(err)
	}
	body := string(res.Body)
	// Descriptions are free text and stay as they are; nothing else names a private group.
	const desc = `"description":"Machine of cluster.hypershift.openshift.io"`
	if !strings.Contains(body, desc) || strings.Contains(strings.Replace(body, desc, "", 1), "hypershift") {
		t.Errorf("private names or descriptions: %s", body)
	}
	if res.Dropped != 3 {
		t.Errorf("dropped %d, want 3 (the platform's path and two definitions)", res.Dropped)
	}
	var doc struct {
		Paths map[string]struct {
			Get struct {
				OperationID string
				Tags        []string
			} `json:"get"`
		} `json:"paths"`
		Definitions map[string]struct {
			GVK []struct{ Group, Kind, Version string } `json:"x-kubernetes-group-version-kind"`
		} `json:"definitions"`
		Parameters map[string]any `json:"parameters"`
	}
	if err := json.Unmarshal(res.Body, &doc); err != nil {
		t.Fatal(err)
	}
	wantPaths := map[string]string{
		"/apis/cluster.x-k8s.io/v1beta2/namespaces/{namespace}/machines": "listClusterXK8sIoV1beta2NamespacedMachine",
		"/apis/cluster.x-k8s.io/": "getClusterXK8sIoAPIGroup",
		"/apis/capi-provider.agent-install.openshift.io/v1beta1/agentmachines": "listCapiProviderAgentInstallOpenshiftIoV1beta1AgentMachineForAllNamespaces",
		"/api/v1/pods": "listCoreV1PodForAllNamespaces",
	}
	if len(doc.Paths) != len(wantPaths) {
		t.Errorf("paths %v", doc.Paths)
	}
	for p, op := range wantPaths {
		if got := doc.Paths[p].Get.OperationID; got != op {
			t.Errorf("%s: operationId %q, want %q", p, got, op)
		}
	}
	if tags := doc.Paths["/apis/cluster.x-k8s.io/v1beta2/namespaces/{namespace}/machines"].Get.Tags; len(tags) != 1 || tags[0] != "clusterXK8sIo_v1beta2" {
		t.Errorf("tags %v", tags)
	}
	for _, name := range []string{"io.x-k8s.cluster.v1beta2.Machine", "io.x-k8s.cluster.v1beta2.MachineList",
		"io.x-k8s.cluster.infrastructure.v1beta2.AWSMachine", "io.k8s.apimachinery.pkg.apis.meta.v1.ObjectMeta"} {
		if _, ok := doc.Definitions[name]; !ok {
			t.Errorf("definition %s missing", name)
		}
	}
	if len(doc.Definitions) != 4 {
		t.Errorf("%d definitions, want 4", len(doc.Definitions))
	}
	if g := doc.Definitions["io.x-k8s.cluster.v1beta2.Machine"].GVK; len(g) != 1 || g[0].Group != "cluster.x-k8s.io" {
		t.Errorf("Machine GVK %+v", g)
	}
	if !strings.Contains(body, `"$ref":"#/definitions/io.x-k8s.cluster.v1beta2.Machine"`) || !strings.Contains(body, `"$ref":"#/parameters/namespace-vgWSWtn3"`) {
		t.Errorf("$refs not as expected: %s", body)
	}
}
