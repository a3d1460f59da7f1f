// Package platform is the table of the platforms the SP serves: one entry per platform, holding what the other
// packages need to know of it (its DCM name, its HyperShift platform type, its default timeouts). A HostedCluster
// of a platform type not in the table is not one the SP knows how to read or change: it is reported, never read
// as a platform it happens to resemble. The package is pure.
package platform

import (
	"strings"
	"time"

	hyperv1 "github.com/openshift/hypershift/api/hypershift/v1beta1"
)

// Name is the DCM name of a platform, as requests, responses and the configuration spell it.
type Name string

// The platforms of the table.
const (
	KubeVirt  Name = "kubevirt"
	BareMetal Name = "baremetal"
)

// Platform is one entry of the table.
type Platform struct {
	Name Name
	// HyperShift is the HostedCluster and NodePool platform type the SP renders for it.
	HyperShift hyperv1.PlatformType
	// ProvisioningTimeout: a cluster not READY once after this is FAILED, unless the configuration says otherwise.
	ProvisioningTimeout time.Duration
	// OperationTimeout: a day-2 operation not finished after this is FAILED, unless the configuration says
	// otherwise. Bare metal's is longer: its InPlace rollouts drain and reboot one node at a time.
	OperationTimeout time.Duration
}

var table = []Platform{
	{Name: KubeVirt, HyperShift: hyperv1.KubevirtPlatform, ProvisioningTimeout: 45 * time.Minute, OperationTimeout: 90 * time.Minute},
	{Name: BareMetal, HyperShift: hyperv1.AgentPlatform, ProvisioningTimeout: 120 * time.Minute, OperationTimeout: 180 * time.Minute},
}

// All returns the table's entries in their fixed order.
func All() []Platform { return append([]Platform(nil), table...) }

// Lookup returns the entry of a DCM name; false when the SP does not serve it.
func Lookup(n Name) (Platform, bool) {
	for _, p := range table {
		if p.Name == n {
			return p, true
		}
	}
	return Platform{}, false
}

// Of returns the entry of a HyperShift platform type; false when the SP does not serve it.
func Of(t hyperv1.PlatformType) (Platform, bool) {
	for _, p := range table {
		if p.HyperShift == t {
			return p, true
		}
	}
	return Platform{}, false
}

// Known reports whether n is in the table.
func (n Name) Known() bool {
	_, ok := Lookup(n)
	return ok
}

// HyperShiftType returns the HostedCluster platform type of n ("" when n is not in the table).
func (n Name) HyperShiftType() hyperv1.PlatformType {
	p, _ := Lookup(n)
	return p.HyperShift
}

// Names lists the table's names for messages: "kubevirt, baremetal".
func Names() string {
	s := make([]string, len(table))
	for i, p := range table {
		s[i] = string(p.Name)
	}
	return strings.Join(s, ", ")
}

// Timeout returns the timeout of the platform named n: the configured one when set (> 0), else the table's
// default, which field picks from the entry. ok is false when n is not in the table.
func Timeout(n Name, configured map[Name]time.Duration, field func(Platform) time.Duration) (d time.Duration, ok bool) {
	p, ok := Lookup(n)
	if !ok {
		return 0, false
	}
	if d := configured[n]; d > 0 {
		return d, true
	}
	return field(p), true
}
