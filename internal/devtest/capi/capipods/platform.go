package capipods

import (
	"embed"
	"fmt"
	"path"

	hyperv1 "github.com/openshift/hypershift/api/hypershift/v1beta1"

	"k8s.io/apimachinery/pkg/runtime/schema"
	"sigs.k8s.io/yaml"
)

// Platform is one HyperShift platform's infrastructure kinds: the cluster kind HyperShift writes per hosted
// cluster, the machine template kind it writes per NodePool and the machine kind CAPI clones from it, in the
// provider's standard group at the version the harness writes and reads them. The ledger provider provisions the
// machines of every platform alike (spec.providerID, status.ready and addresses: CAPI's v1beta1 contract, which
// these providers follow).
type Platform struct {
	Name                       string
	Group, Version             string
	Cluster, Machine, Template string
	// MachineFinalizer is the provider's finalizer on its machines (never renamed).
	MachineFinalizer string
	// ExternallyManaged: HyperShift's operator marks the cluster provisioned (managed-by), not the provider.
	ExternallyManaged bool
	// fixture is testdata/platforms/<fixture>.yaml: the recorded shapes (cluster spec, template spec, and the status
	// fields the provider sets besides ready), or "" for shapes written in code.
	fixture string
}

// spec is the platform of the HostedCluster and HostedControlPlane: HyperShift's platform type is the name.
func (p Platform) spec() hyperv1.PlatformSpec {
	s := hyperv1.PlatformSpec{Type: hyperv1.PlatformType(p.Name)}
	if s.Type == hyperv1.KubevirtPlatform {
		s.Kubevirt = &hyperv1.KubevirtPlatformSpec{}
	}
	return s
}

// The platforms the harness can build hosted clusters of.
var (
	KubeVirt = Platform{Name: "KubeVirt", Group: InfrastructureGroup, Version: CAPKVersion,
		Cluster: "KubevirtCluster", Machine: "KubevirtMachine", Template: "KubevirtMachineTemplate",
		MachineFinalizer: MachineFinalizer, ExternallyManaged: true}
	AWS = Platform{Name: "AWS", Group: InfrastructureGroup, Version: "v1beta2",
		Cluster: "AWSCluster", Machine: "AWSMachine", Template: "AWSMachineTemplate",
		MachineFinalizer: "awsmachine.infrastructure.cluster.x-k8s.io", ExternallyManaged: true, fixture: "aws"}
	Azure = Platform{Name: "Azure", Group: InfrastructureGroup, Version: "v1beta1",
		Cluster: "AzureCluster", Machine: "AzureMachine", Template: "AzureMachineTemplate",
		MachineFinalizer: "azuremachine.infrastructure.cluster.x-k8s.io", ExternallyManaged: true, fixture: "azure"}
	// Agent's group is CAP-Agent's own: capi-private never renames it. Its cluster is provisioned by the provider.
	Agent = Platform{Name: "Agent", Group: "capi-provider.agent-install.openshift.io", Version: "v1beta1",
		Cluster: "AgentCluster", Machine: "AgentMachine", Template: "AgentMachineTemplate",
		MachineFinalizer: "agentmachine.agent-install.openshift.io/deprovision", fixture: "agent"}

	Platforms = []Platform{KubeVirt, AWS, Azure, Agent}
)

// ClusterGVK, MachineGVK and TemplateGVK are the platform's kinds in its standard group.
func (p Platform) ClusterGVK() schema.GroupVersionKind  { return p.gvk(p.Cluster) }
func (p Platform) MachineGVK() schema.GroupVersionKind  { return p.gvk(p.Machine) }
func (p Platform) TemplateGVK() schema.GroupVersionKind { return p.gvk(p.Template) }

func (p Platform) gvk(kind string) schema.GroupVersionKind {
	return schema.GroupVersionKind{Group: p.Group, Version: p.Version, Kind: kind}
}

// Kinds are the platform's three kinds.
func (p Platform) Kinds() []string { return []string{p.Cluster, p.Machine, p.Template} }

// platformOf is the platform a kind belongs to.
func platformOf(kind string) (Platform, bool) {
	for _, p := range Platforms {
		for _, k := range p.Kinds() {
			if k == kind {
				return p, true
			}
		}
	}
	return Platform{}, false
}

//go:embed testdata/platforms
var platformFiles embed.FS

// shapes are a platform's recorded shapes.
type shapes struct {
	Cluster       map[string]any `json:"cluster"`
	Template      map[string]any `json:"template"`
	ClusterStatus map[string]any `json:"clusterStatus"`
}

// shapes reads the platform's fixture (a fresh copy each time: callers modify it).
func (p Platform) shapes() shapes {
	if p.fixture == "" {
		return shapes{}
	}
	data, err := platformFiles.ReadFile(path.Join("testdata/platforms", p.fixture+".yaml"))
	if err != nil {
		panic(fmt.Sprintf("capipods: platform fixture %s: %v", p.fixture, err)) // embedded: only a build mistake
	}
	var s shapes
	if err := yaml.Unmarshal(data, &s); err != nil {
		panic(fmt.Sprintf("capipods: platform fixture %s: %v", p.fixture, err))
	}
	return s
}
