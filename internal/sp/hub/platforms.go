package hub

import (
	"context"
	"fmt"
	"slices"
	"sort"
	"sync"
	"time"

	"k8s.io/client-go/discovery"
	"k8s.io/client-go/rest"

	"github.com/dcm-sp/acm-cluster-sp/internal/sp/clusters"
	"github.com/dcm-sp/acm-cluster-sp/internal/sp/redact"
)

// Platforms decides which platforms the SP can provision: enabled in the configuration and with their APIs
// discovered (KubeVirt on the infrastructure cluster; Agent/InfraEnv on the hub with agentNamespace set).
// Availability is sticky for the life of the process: a later outage shows as an unhealthy check, not as a
// platform that disappears from registration (docs/dcm.md).
type Platforms struct {
	o     PlatformOptions
	hub   *Hub
	infra discovery.DiscoveryInterface // external KubeVirt cluster, nil when the hub is the infrastructure

	mu        sync.Mutex
	available map[clusters.Platform]bool
	infraOK   bool
	infraMsg  string
	onChange  []func()
}

// PlatformOptions are what the configuration says of the platforms.
type PlatformOptions struct {
	Enabled         []string     // enabledPlatforms
	DefaultInfraEnv string       // defaultInfraEnvName: the baremetal check reports it missing
	InfraCluster    *rest.Config // kubevirtInfraCluster: the external KubeVirt cluster (nil: the hub)
}

func (o PlatformOptions) enabled(p clusters.Platform) bool {
	return slices.Contains(o.Enabled, string(p))
}

// NewPlatforms prepares the tracker of the platforms h offers (the Agent APIs in h's AgentNamespace).
func NewPlatforms(h *Hub, o PlatformOptions) (*Platforms, error) {
	p := &Platforms{o: o, hub: h, available: map[clusters.Platform]bool{}}
	if o.InfraCluster != nil {
		c := rest.CopyConfig(o.InfraCluster)
		c.Timeout = 1500 * time.Millisecond // inside the health check timeout
		dc, err := discovery.NewDiscoveryClientForConfig(c)
		if err != nil {
			return nil, fmt.Errorf("kubevirtInfraCluster: %w", err)
		}
		p.infra = dc
	}
	return p, nil
}

// OnChange registers f to be called when a platform becomes available (re-registration).
func (p *Platforms) OnChange(f func()) {
	p.mu.Lock()
	p.onChange = append(p.onChange, f)
	p.mu.Unlock()
}

// Available lists the platforms that can be provisioned now, sorted.
func (p *Platforms) Available() []string {
	p.mu.Lock()
	defer p.mu.Unlock()
	out := make([]string, 0, len(p.available))
	for name, ok := range p.available {
		if ok {
			out = append(out, string(name))
		}
	}
	sort.Strings(out)
	return out
}

// Refresh re-reads discovery (the hub's, and the external infrastructure cluster's when configured) and marks newly
// discovered platforms available. It runs after every hub discovery.
func (p *Platforms) Refresh() {
	d := p.hub.LastDiscovery()
	kubevirtServed := d.Served[APIKubeVirt]
	infraMsg := "kubevirt.io/v1 served on the hub"
	if p.infra != nil {
		kubevirtServed, infraMsg = false, ""
		if _, err := p.infra.ServerResourcesForGroupVersion(string(APIKubeVirt)); err != nil {
			infraMsg = "kubevirt.io/v1 not reachable on the infrastructure cluster: " + redact.Cause(err)
		} else {
			kubevirtServed, infraMsg = true, "kubevirt.io/v1 served on the infrastructure cluster"
		}
	} else if !kubevirtServed {
		infraMsg = "kubevirt.io/v1 is not served on the hub"
	}
	bmServed := p.hub.AgentNamespace() != "" && d.Served[APIAgents]
	p.mu.Lock()
	p.infraOK, p.infraMsg = kubevirtServed, infraMsg
	changed := false
	for name, served := range map[clusters.Platform]bool{clusters.KubeVirt: kubevirtServed, clusters.BareMetal: bmServed} {
		if served && p.o.enabled(name) && !p.available[name] {
			p.available[name] = true
			changed = true
		}
	}
	listeners := p.onChange
	p.mu.Unlock()
	if changed {
		for _, f := range listeners {
			f()
		}
	}
}

// KubeVirtState is the kubevirt health check's view.
func (p *Platforms) KubeVirtState(context.Context) (enabled, ok bool, message string) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if !p.o.enabled(clusters.KubeVirt) {
		return false, true, "not in enabledPlatforms"
	}
	if !p.available[clusters.KubeVirt] {
		return false, true, p.infraMsg
	}
	return true, p.infraOK, p.infraMsg
}

// BareMetalState is the baremetal health check's view.
func (p *Platforms) BareMetalState(ctx context.Context) (enabled, ok bool, message string) {
	switch {
	case !p.o.enabled(clusters.BareMetal):
		return false, true, "not in enabledPlatforms"
	case p.hub.AgentNamespace() == "":
		return false, true, "agentNamespace is not configured"
	}
	p.mu.Lock()
	available := p.available[clusters.BareMetal]
	p.mu.Unlock()
	served := p.hub.LastDiscovery().Served[APIAgents]
	if !available {
		return false, true, "Agent/InfraEnv APIs (agent-install.openshift.io/v1beta1) not served on the hub"
	}
	if !served {
		return true, false, "Agent/InfraEnv APIs (agent-install.openshift.io/v1beta1) no longer served"
	}
	if !p.hub.Watching("agents") || !p.hub.Watching("infraenvs") {
		return true, false, "Agent/InfraEnv caches not synced"
	}
	infraEnvs, _ := p.hub.InfraEnvNames(ctx)
	agents, _ := p.hub.Agents(ctx)
	msg := fmt.Sprintf("%d InfraEnvs, %d Agents in %s", len(infraEnvs), len(agents), p.hub.AgentNamespace())
	if p.o.DefaultInfraEnv != "" && !slices.Contains(infraEnvs, p.o.DefaultInfraEnv) {
		return true, false, msg + "; default InfraEnv " + p.o.DefaultInfraEnv + " not found"
	}
	return true, true, msg
}
