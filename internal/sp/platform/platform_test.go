package platform

import (
	"slices"
	"testing"
	"time"

	hyperv1 "github.com/openshift/hypershift/api/hypershift/v1beta1"
	"k8s.io/apimachinery/pkg/api/resource"
)

func TestTable(t *testing.T) {
	cases := []struct {
		hs   hyperv1.PlatformType
		want Name
		ok   bool
	}{
		{hyperv1.KubevirtPlatform, KubeVirt, true},
		{hyperv1.AgentPlatform, BareMetal, true},
		// Types the SP does not serve are not read as one it does.
		{hyperv1.AWSPlatform, "", false},
		{hyperv1.NonePlatform, "", false},
		{"", "", false},
	}
	for _, c := range cases {
		p, ok := Of(c.hs)
		if p.Name != c.want || ok != c.ok {
			t.Errorf("Of(%q) = %q, %v; want %q, %v", c.hs, p.Name, ok, c.want, c.ok)
		}
		if back, _ := Lookup(p.Name); ok && back.HyperShift != c.hs {
			t.Errorf("Lookup(%s).HyperShift = %q, want %q (the table reads both ways)", p.Name, back.HyperShift, c.hs)
		}
	}
	if _, ok := Lookup("aws"); ok || Name("aws").Known() || Name("KubeVirt").Known() {
		t.Error("a name outside the table (or miscased) is known")
	}
	if got := Names(); got != "kubevirt, baremetal" {
		t.Errorf("Names() = %q", got)
	}
	all := All()
	all[0].Name = "changed"
	if All()[0].Name != KubeVirt {
		t.Error("All returns the table itself: a caller can change it")
	}
}

func TestTimeout(t *testing.T) {
	op := func(p Platform) time.Duration { return p.OperationTimeout }
	configured := map[Name]time.Duration{KubeVirt: time.Minute, BareMetal: 0}
	cases := []struct {
		n    Name
		want time.Duration
		ok   bool
	}{
		{KubeVirt, time.Minute, true},        // configured
		{BareMetal, 180 * time.Minute, true}, // unset (0): the table's default
		{"aws", 0, false},
	}
	for _, c := range cases {
		if d, ok := Timeout(c.n, configured, op); d != c.want || ok != c.ok {
			t.Errorf("Timeout(%s) = %s, %v; want %s, %v", c.n, d, ok, c.want, c.ok)
		}
	}
	if d, _ := Timeout(KubeVirt, nil, func(p Platform) time.Duration { return p.ProvisioningTimeout }); d != 45*time.Minute {
		t.Errorf("KubeVirt's default provisioning timeout %s, want 45m", d)
	}
}

// Every entry renders its own HyperShift type, on the HostedCluster and on the NodePool, with an upgrade type set.
func TestEntriesRenderTheirType(t *testing.T) {
	for _, p := range All() {
		if p.HostedCluster == nil || p.NodePool == nil {
			t.Fatalf("%s: a render hook is missing", p.Name)
		}
		c := Cluster{ID: "inst-1", Name: "c1"}
		if got := p.HostedCluster(c).Type; got != p.HyperShift {
			t.Errorf("%s: HostedCluster platform %q, want %q", p.Name, got, p.HyperShift)
		}
		var np hyperv1.NodePoolSpec
		p.NodePool(c, &np)
		if np.Platform.Type != p.HyperShift || np.Management.UpgradeType == "" {
			t.Errorf("%s: NodePool platform %q, upgrade type %q", p.Name, np.Platform.Type, np.Management.UpgradeType)
		}
	}
}

// Each platform's spec rules: KubeVirt's smallest root volume; bare metal's base domain and InfraEnv (defaulted
// from the configuration).
func TestRules(t *testing.T) {
	small, ok := resource.MustParse("10Gi"), resource.MustParse("16Gi")
	cases := []struct {
		name      Name
		r         Request
		fails     []string
		wantInfra string
	}{
		{KubeVirt, Request{WorkerStorage: &small}, []string{"nodes.workers.storage"}, ""},
		{KubeVirt, Request{WorkerStorage: &ok}, nil, ""},
		{KubeVirt, Request{}, nil, ""},
		{BareMetal, Request{BaseDomain: "example.com", DefaultInfraEnv: "prod"}, nil, "prod"},
		{BareMetal, Request{}, []string{"provider_hints.acm.base_domain", "provider_hints.acm.infra_env"}, ""},
	}
	for i, c := range cases {
		var fails []string
		infra := ""
		c.r.InfraEnv = &infra
		c.r.Fail = func(field, _ string, _ ...any) { fails = append(fails, field) }
		p, _ := Lookup(c.name)
		p.Rules(c.r)
		if !slices.Equal(fails, c.fails) || infra != c.wantInfra {
			t.Errorf("case %d (%s): refused %v, InfraEnv %q; want %v, %q", i, c.name, fails, infra, c.fails, c.wantInfra)
		}
	}
}

// Register adds an entry every lookup sees, refuses one that reuses a name or a type, and its remove undoes it.
func TestRegister(t *testing.T) {
	extra := Platform{Name: "example", HyperShift: hyperv1.NonePlatform,
		HostedCluster: func(Cluster) hyperv1.PlatformSpec { return hyperv1.PlatformSpec{Type: hyperv1.NonePlatform} },
		NodePool:      func(_ Cluster, np *hyperv1.NodePoolSpec) { np.Platform.Type = hyperv1.NonePlatform }}
	remove := Register(extra)
	if p, ok := Of(hyperv1.NonePlatform); !ok || p.Name != "example" || !Name("example").Known() || Names() != "kubevirt, baremetal, example" {
		t.Fatalf("after Register: Of(None) = %q, %v; Names() = %q", p.Name, ok, Names())
	}
	for _, dup := range []Platform{
		{Name: "example", HyperShift: hyperv1.AWSPlatform, HostedCluster: extra.HostedCluster, NodePool: extra.NodePool},
		{Name: "other", HyperShift: hyperv1.KubevirtPlatform, HostedCluster: extra.HostedCluster, NodePool: extra.NodePool},
		{Name: "hookless", HyperShift: hyperv1.AWSPlatform},
	} {
		func() {
			defer func() {
				if recover() == nil {
					t.Errorf("Register(%s, %s) did not panic", dup.Name, dup.HyperShift)
				}
			}()
			Register(dup)
		}()
	}
	remove()
	if _, ok := Of(hyperv1.NonePlatform); ok || Names() != "kubevirt, baremetal" {
		t.Fatalf("after remove: None still served, Names() = %q", Names())
	}
}

// KubeVirt's resize: a NodePool is in spec once it has the rendered sizes, and Resize puts them there without
// touching the rest of its platform.
func TestKubeVirtResize(t *testing.T) {
	p, _ := Lookup(KubeVirt)
	render := func(cores uint32, memory, root string) hyperv1.NodePoolPlatform {
		var np hyperv1.NodePoolSpec
		m, r := resource.MustParse(memory), resource.MustParse(root)
		p.NodePool(Cluster{WorkerCores: &cores, WorkerMemory: &m, WorkerStorage: &r}, &np)
		return np.Platform
	}
	have, want := render(2, "8Gi", "32Gi"), render(4, "16Gi", "64Gi")
	if !p.Resized(have, have) || p.Resized(have, want) {
		t.Fatal("Resized: equal sizes not in spec, or different ones in spec")
	}
	if !p.Resized(hyperv1.NodePoolPlatform{Type: hyperv1.AgentPlatform}, want) {
		t.Error("a NodePool without KubeVirt sizes has nothing to resize")
	}
	next := *have.DeepCopy()
	next.Kubevirt.AttachDefaultNetwork = nil // a field Resize must leave alone
	p.Resize(&next, want)
	if !p.Resized(next, want) || next.Kubevirt.AttachDefaultNetwork != nil {
		t.Fatalf("after Resize: %+v", next.Kubevirt)
	}
	if bm, _ := Lookup(BareMetal); bm.Resized != nil || bm.Resize != nil || !bm.Agents {
		t.Error("bare metal's sizes are Agent minimums: no resize hooks")
	}
}
