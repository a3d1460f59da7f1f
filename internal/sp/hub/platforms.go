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
	"github.com/dcm-sp/acm-cluster-sp/internal/sp/platform"
	"github.com/dcm-sp/acm-cluster-sp/internal/sp/redact"
)

// Platforms decides which platforms of the table the SP can provision: enabled in the configuration and with the
// API their entry names discovered — on the infrastructure cluster for a platform that runs its workers there and
// has one configured, else on the hub; an Agents platform also needs the hub's agentNamespace. Availability is
// sticky for the life of the process: a later outage shows as an unhealthy check, not as a platform that
// disappears from registration (docs/dcm.md).
type Platforms struct {
	o     PlatformOptions
	hub   *Hub
	infra discovery.DiscoveryInterface // the external infrastructure cluster, nil when the hub is the infrastructure

	mu        sync.Mutex
	available map[clusters.Platform]bool
	served    map[clusters.Platform]served // as of the last Refresh
	onChange  []func()
}

// served is whether a platform's API is served where its workers need it, and how the health check says so.
type served struct {
	ok  bool
	msg string
}

// PlatformOptions are what the configuration says of the platforms.
type PlatformOptions struct {
	Enabled         []string     // enabledPlatforms
	DefaultInfraEnv string       // defaultInfraEnvName: an Agents platform's check reports it missing
	InfraCluster    *rest.Config // kubevirtInfraCluster: the external infrastructure cluster (nil: the hub)
}

func (o PlatformOptions) enabled(p clusters.Platform) bool {
	return slices.Contains(o.Enabled, string(p))
}

// NewPlatforms prepares the tracker of the platforms h offers (the Agent APIs in h's AgentNamespace).
func NewPlatforms(h *Hub, o PlatformOptions) (*Platforms, error) {
	p := &Platforms{o: o, hub: h, available: map[clusters.Platform]bool{}, served: map[clusters.Platform]served{}}
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
	now := map[clusters.Platform]served{}
	for _, e := range platform.All() {
		if p.o.enabled(e.Name) {
			now[e.Name] = p.serves(e, d)
		}
	}
	p.mu.Lock()
	p.served = now
	changed := false
	for name, s := range now {
		if s.ok && !p.available[name] {
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

// serves reads whether e's API is served where e's workers need it.
func (p *Platforms) serves(e platform.Platform, d Discovery) served {
	switch {
	case e.Agents && p.hub.AgentNamespace() == "":
		return served{false, "agentNamespace is not configured"}
	case e.API == "":
		return served{true, "needs no API"}
	case e.InfraCluster && p.infra != nil:
		if _, err := p.infra.ServerResourcesForGroupVersion(e.API); err != nil {
			return served{false, e.API + " not reachable on the infrastructure cluster: " + redact.Cause(err)}
		}
		return served{true, e.API + " served on the infrastructure cluster"}
	case d.Served[API(e.API)]:
		return served{true, e.API + " served on the hub"}
	}
	return served{false, e.API + " is not served on the hub"}
}

// State is the health check's view of the platform named n: not enabled (with why) until it is in
// enabledPlatforms and its API was discovered; then healthy while its API is still served (and, for an Agents
// platform, its caches are synced and the default InfraEnv exists).
func (p *Platforms) State(ctx context.Context, n clusters.Platform) (enabled, ok bool, message string) {
	if !p.o.enabled(n) {
		return false, true, "not in enabledPlatforms"
	}
	p.mu.Lock()
	available, s := p.available[n], p.served[n]
	p.mu.Unlock()
	switch {
	case !available && s.msg == "":
		return false, true, "not discovered yet"
	case !available:
		return false, true, s.msg
	case !s.ok:
		return true, false, s.msg
	}
	if e, _ := platform.Lookup(n); e.Agents {
		return p.agentsState(ctx)
	}
	return true, true, s.msg
}

// agentsState is what an available Agents platform's check adds: the Agent caches and the default InfraEnv.
func (p *Platforms) agentsState(ctx context.Context) (enabled, ok bool, message string) {
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
