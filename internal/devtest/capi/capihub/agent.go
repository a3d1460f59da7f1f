package capihub

import (
	"embed"
	"io/fs"
	"path"
	"strings"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"sigs.k8s.io/yaml"
)

//go:embed testdata/agent
var agentFiles embed.FS

// AgentGroup is CAP-Agent's own API group: capi-private does not rename it, so its objects stay where they are
// when a hosted cluster migrates.
const AgentGroup = "capi-provider.agent-install.openshift.io"

// agentContractLabel is the Cluster API contract label HyperShift's install puts on CAP-Agent's CRDs
// (cmd/install/assets/crds/assets.go, capiResources): CAPI reads their objects at v1beta1.
var agentContractLabel = map[string]string{"cluster.x-k8s.io/v1beta1": "v1beta1"}

// AgentCRDs are CAP-Agent's CRDs (AgentCluster, AgentMachine, AgentMachineTemplate) recorded from HyperShift's
// install assets, labelled as HyperShift's install labels them.
func AgentCRDs() ([]*unstructured.Unstructured, error) {
	entries, err := fs.ReadDir(agentFiles, "testdata/agent")
	if err != nil {
		return nil, err
	}
	var out []*unstructured.Unstructured
	for _, e := range entries {
		data, err := agentFiles.ReadFile(path.Join("testdata/agent", e.Name()))
		if err != nil {
			return nil, err
		}
		// The recorded file starts with comments and a document separator.
		_, doc, _ := strings.Cut(string(data), "\n---\n")
		u := &unstructured.Unstructured{}
		if err := yaml.Unmarshal([]byte(doc), &u.Object); err != nil {
			return nil, err
		}
		labels := u.GetLabels()
		if labels == nil {
			labels = map[string]string{}
		}
		for k, v := range agentContractLabel {
			labels[k] = v
		}
		u.SetLabels(labels)
		out = append(out, u)
	}
	return out, nil
}
