package platform

import (
	"time"

	hyperv1 "github.com/openshift/hypershift/api/hypershift/v1beta1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/dcm-sp/acm-cluster-sp/internal/sp/meta"
)

// bareMetal: workers are Agents (discovered hosts) the SP reserves for the cluster by labelling them with its
// instance id, which the NodePool selects. Its rollouts are InPlace: they drain and reboot one node at a time, so
// its operations get longer.
var bareMetal = Platform{
	Name: BareMetal, HyperShift: hyperv1.AgentPlatform,
	ProvisioningTimeout: 120 * time.Minute, OperationTimeout: 180 * time.Minute,
	API: "agent-install.openshift.io/v1beta1", APIResources: []string{"agents", "infraenvs"},
	Agents: true,
	Rules: func(r Request) {
		if r.BaseDomain == "" {
			r.Fail("provider_hints.acm.base_domain", "is required for baremetal (no default baseDomain is configured)")
		}
		if *r.InfraEnv == "" {
			*r.InfraEnv = r.DefaultInfraEnv
		}
		if *r.InfraEnv == "" {
			r.Fail("provider_hints.acm.infra_env", "is required for baremetal (no defaultInfraEnvName is configured)")
		}
	},
	HostedCluster: func(c Cluster) hyperv1.PlatformSpec {
		return hyperv1.PlatformSpec{Type: hyperv1.AgentPlatform, Agent: &hyperv1.AgentPlatformSpec{AgentNamespace: c.AgentNamespace}}
	},
	NodePool: func(c Cluster, np *hyperv1.NodePoolSpec) {
		np.Management = hyperv1.NodePoolManagement{UpgradeType: hyperv1.UpgradeTypeInPlace, AutoRepair: false}
		np.Platform = hyperv1.NodePoolPlatform{Type: hyperv1.AgentPlatform, Agent: &hyperv1.AgentNodePoolPlatform{
			AgentLabelSelector: &metav1.LabelSelector{MatchLabels: map[string]string{meta.LabelInstanceID: c.ID}},
		}}
	},
}
