// Package platform is the table of the platforms the SP serves: one entry per platform (one file each:
// kubevirt.go, baremetal.go), holding what the other packages need to know of it — its DCM name, its HyperShift
// platform type, its default timeouts, the hub API its workers need, whether its workers are reserved Agents, its
// spec rules, how its HostedCluster and NodePool platform specs are rendered and how a resize changes a NodePool.
// A HostedCluster of a platform type not in the table is not one the SP knows how to read or change: it is
// reported, never read as a platform it happens to resemble. The package is pure.
package platform

import (
	"fmt"
	"slices"
	"strings"
	"sync/atomic"
	"time"

	hyperv1 "github.com/openshift/hypershift/api/hypershift/v1beta1"
	"k8s.io/apimachinery/pkg/api/resource"
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
	// otherwise.
	OperationTimeout time.Duration
	// InfraCluster: the platform runs its workers on an infrastructure cluster, which may be another cluster than
	// the hub (configuration kubevirtInfraCluster): its kubeconfig is then rendered as a Secret of the cluster.
	InfraCluster bool
	// API is the group/version the platform's workers need, served on the hub (or on the infrastructure cluster,
	// for an InfraCluster platform with one configured), and APIResources the resources it must serve; "": none,
	// the platform is available once enabled.
	API          string
	APIResources []string
	// Agents: the workers are Agents (discovered hosts) the SP reserves for the cluster, one per worker (an
	// autoscaled pool's maximum), in the hub's agentNamespace; the request's worker sizes are minimums the Agents
	// must meet, stored with the spec and not rendered.
	Agents bool
	// Rules checks what a request asks of this platform (and fills in the defaults the configuration gives it).
	Rules func(r Request)
	// HostedCluster renders the HostedCluster's spec.platform.
	HostedCluster func(c Cluster) hyperv1.PlatformSpec
	// NodePool renders the NodePool's platform, its management (upgrade type) and architecture.
	NodePool func(c Cluster, np *hyperv1.NodePoolSpec)
	// Resized reports whether a NodePool's platform (have) already has the worker sizes of want (the rendered
	// NodePool's), and Resize sets them on next: a resize's comparison and patch. Both nil: a resize changes
	// nothing on the NodePool (bare metal's sizes are Agent minimums, stored only).
	Resized func(have, want hyperv1.NodePoolPlatform) bool
	Resize  func(next *hyperv1.NodePoolPlatform, want hyperv1.NodePoolPlatform)
}

// Request is what a platform's spec rules see of a cluster request, and how they refuse it.
type Request struct {
	BaseDomain      string             // the effective base domain ("" when neither the request nor the configuration set one)
	InfraEnv        *string            // the request's InfraEnv, which the rules may default
	DefaultInfraEnv string             // configuration defaultInfraEnvName
	WorkerStorage   *resource.Quantity // nil when the request set none
	// Fail refuses the request: field is the request's JSON path (provider_hints.acm.base_domain).
	Fail func(field, format string, args ...any)
}

// Cluster is what a platform's render hooks know of one cluster.
type Cluster struct {
	ID, Name       string
	BaseDomain     string // "" when the request set none
	AgentNamespace string // the namespace of the InfraEnvs and Agents
	// InfraCredentials names the Secret holding the infrastructure cluster's kubeconfig ("": the hub), and
	// InfraNamespace the namespace the workers run in there.
	InfraCredentials, InfraNamespace string
	WorkerCores                      *uint32            // nil: the platform's default
	WorkerMemory, WorkerStorage      *resource.Quantity // nil: the platform's default
}

// table holds the entries; Register (tests only) replaces it whole, so readers never lock.
var table atomic.Pointer[[]Platform]

func init() { table.Store(&[]Platform{kubevirt, bareMetal}) }

func entries() []Platform { return *table.Load() }

// All returns the table's entries in their fixed order.
func All() []Platform { return slices.Clone(entries()) }

// Lookup returns the entry of a DCM name; false when the SP does not serve it.
func Lookup(n Name) (Platform, bool) {
	for _, p := range entries() {
		if p.Name == n {
			return p, true
		}
	}
	return Platform{}, false
}

// Of returns the entry of a HyperShift platform type; false when the SP does not serve it.
func Of(t hyperv1.PlatformType) (Platform, bool) {
	for _, p := range entries() {
		if p.HyperShift == t {
			return p, true
		}
	}
	return Platform{}, false
}

// Register adds an entry to the table and returns what removes it again. It is how a test adds a platform in one
// file of its own (the product's platforms are the table's literal entries); it panics on an entry that reuses a
// name or a HyperShift type, or lacks a render hook. Register before the SP is built: what the table says is read
// at construction (health checks, discovery) as well as per request.
func Register(p Platform) (remove func()) {
	if p.Name == "" || p.HyperShift == "" || p.HostedCluster == nil || p.NodePool == nil {
		panic(fmt.Sprintf("platform.Register(%q): an entry needs a name, a HyperShift type and both render hooks", p.Name))
	}
	for {
		old := table.Load()
		if slices.ContainsFunc(*old, func(e Platform) bool { return e.Name == p.Name || e.HyperShift == p.HyperShift }) {
			panic(fmt.Sprintf("platform.Register(%q): its name or type %q is in the table already", p.Name, p.HyperShift))
		}
		next := append(slices.Clone(*old), p)
		if table.CompareAndSwap(old, &next) {
			break
		}
	}
	return func() {
		for {
			old := table.Load()
			next := slices.DeleteFunc(slices.Clone(*old), func(e Platform) bool { return e.Name == p.Name })
			if table.CompareAndSwap(old, &next) {
				return
			}
		}
	}
}

// Known reports whether n is in the table.
func (n Name) Known() bool {
	_, ok := Lookup(n)
	return ok
}

// Names lists the table's names for messages: "kubevirt, baremetal".
func Names() string {
	all := entries()
	s := make([]string, len(all))
	for i, p := range all {
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
