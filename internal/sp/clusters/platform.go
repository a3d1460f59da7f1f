package clusters

import (
	hyperv1 "github.com/openshift/hypershift/api/hypershift/v1beta1"

	"github.com/dcm-sp/acm-cluster-sp/internal/sp/platform"
)

// Platform is the DCM name of a platform; the platforms themselves are the entries of package platform's table.
type Platform = platform.Name

// The platforms of the table, by their DCM names.
const (
	KubeVirt  = platform.KubeVirt
	BareMetal = platform.BareMetal
)

// PlatformOf returns the DCM platform of a HostedCluster platform type; false when the SP does not serve that type
// (the caller reports or refuses it, never reads it as another platform).
func PlatformOf(t hyperv1.PlatformType) (Platform, bool) {
	p, ok := platform.Of(t)
	return p.Name, ok
}
