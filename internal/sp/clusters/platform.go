package clusters

import (
	hyperv1 "github.com/openshift/hypershift/api/hypershift/v1beta1"
	"k8s.io/apimachinery/pkg/api/resource"
)

// Platform is the DCM name of a platform.
type Platform string

// The two v1 platforms.
const (
	KubeVirt  Platform = "kubevirt"
	BareMetal Platform = "baremetal"
)

// Known reports whether p names one of the platforms (kubevirt, baremetal).
func (p Platform) Known() bool { return p == KubeVirt || p == BareMetal }

// HyperShiftType returns the HostedCluster platform type of a DCM platform.
func (p Platform) HyperShiftType() hyperv1.PlatformType {
	if p == BareMetal {
		return hyperv1.AgentPlatform
	}
	return hyperv1.KubevirtPlatform
}

// PlatformOf returns the DCM platform of a HostedCluster platform type.
func PlatformOf(t hyperv1.PlatformType) Platform {
	if t == hyperv1.AgentPlatform {
		return BareMetal
	}
	return KubeVirt
}

// MinKubeVirtRootVolume is the smallest root volume the hcp CLI accepts; the SP refuses smaller ones.
var MinKubeVirtRootVolume = resource.MustParse("16Gi")
