package controller_test

import (
	"slices"
	"strings"
	"testing"
	"time"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/types"

	"github.com/dcm-sp/acm-cluster-sp/internal/capiprivate/groups"
	"github.com/dcm-sp/acm-cluster-sp/internal/capiprivate/migrate/plan"
	"github.com/dcm-sp/acm-cluster-sp/internal/devtest/capi/capipods"
	"github.com/dcm-sp/acm-cluster-sp/internal/devtest/testwait"
)

// countsOn are the objects a hosted cluster of platform p with mds MachineDeployments of machines Machines holds,
// by kind (the platform's kinds only when they move).
func countsOn(r *rig, p capipods.Platform, mds, machines int) map[string]int {
	m := map[string]int{"Cluster": 1, "MachineDeployment": mds, "MachineSet": mds, "Machine": mds * machines, "MachineHealthCheck": mds}
	if _, renamed := groups.Default.ToPrivate(p.Group); renamed {
		m[p.Cluster], m[p.Machine], m[p.Template] = 1, mds*machines, mds
	}
	for k := range m {
		if !slices.Contains(r.graphKinds(), k) {
			delete(m, k)
		}
	}
	return m
}

// TestMigratePlatforms: a legacy hosted cluster of each platform HyperShift runs whose provider is vendored
// migrates end to end on the real hub with upstream CAPI: every object copied, owners and refs remapped, no
// instance created or deleted, nothing collected by the garbage collector. Agent's group is CAP-Agent's own and
// is not renamed: its AgentCluster, AgentMachineTemplates and AgentMachines stay where they are, the private
// Machines still name them, and their ownerReferences now name the private Machines and Cluster. KubeVirt, the
// rig's default platform, is TestMigrateEndToEnd's; Azure is refused (TestUnsupportedPlatformRefused).
func TestMigratePlatforms(t *testing.T) {
	t.Parallel()
	for _, p := range []capipods.Platform{capipods.AWS, capipods.Agent} {
		t.Run(p.Name, func(t *testing.T) {
			t.Parallel()
			const mds, machines = 1, 2
			r := newRigSpec(t, "plat-"+strings.ToLower(p.Name), mds, machines, map[string]string{plan.ScopeAnnotation: plan.ScopeLegacy}, false,
				func(s *capipods.HostedClusterSpec) { s.Platform = p })
			want := countsOn(r, p, mds, machines)
			if got := r.count(capipods.StandardGroups); !mapsEqual(got, want) {
				t.Fatalf("legacy objects %v, want %v", got, want)
			}
			_, renamed := groups.Default.ToPrivate(p.Group)
			var agentBefore map[string]int
			if !renamed {
				agentBefore = r.platformCounts(p)
			}
			r.start(nil)
			r.waitAnnotations("migrated", runWithin, migrated)
			r.checkMigrated(want, mds*machines)
			r.checkInfrastructureRefs(p, renamed)
			if !renamed {
				if got := r.platformCounts(p); !mapsEqual(got, agentBefore) {
					t.Errorf("%s objects after migration %v, before %v", p.Name, got, agentBefore)
				}
				r.checkUnrenamedOwners(p)
			}
		})
	}
}

// TestUnsupportedPlatformRefused: a legacy Azure hosted cluster, otherwise ready to move, is refused before the
// first write: HyperShift's NodePool controller would write its MachineTemplates and MachineDeployments from both
// operators. The only write is the report of the block on the HostedCluster (with an event), which `capi-private
// migrate status` prints; the migrator looks again and still writes nothing.
func TestUnsupportedPlatformRefused(t *testing.T) {
	t.Parallel()
	r := newRigSpec(t, "plat-azure", 1, 1, map[string]string{plan.ScopeAnnotation: plan.ScopeLegacy}, false,
		func(s *capipods.HostedClusterSpec) { s.Platform = capipods.Azure })
	writes, waits := r.startRefusing()
	a := r.waitAnnotations("blocked by the platform", runWithin, func(a map[string]string) bool {
		return a[plan.BlockedAnnotation] == "safety: unsupported-platform Azure"
	})
	checkEvents(t, r.key, "MigrationBlocked")
	testwait.For(t, runWithin, "the migrator to look at the refused cluster again (its chances to write)", func() bool {
		return waits.count(r.key, plan.PhaseNone, "unsupported-platform") >= 3
	})
	if w := writes.list(); len(w) != 0 || a[plan.ScopeAnnotation] != plan.ScopeLegacy || a[plan.InProgressAnnotation] != "" {
		t.Fatalf("refused cluster: writes %v, annotations %v", w, a)
	}
	for k, n := range r.count(capipods.PrivateGroups) {
		if n != 0 {
			t.Errorf("%d private %s of a refused cluster", n, k)
		}
	}
	if rep := plan.Report(plan.ReadState(a, false), time.Now()); !strings.Contains(rep, "unsupported-platform Azure") {
		t.Errorf("status report %q", rep)
	}
}

// platformCounts counts the platform's objects in their (unrenamed) group.
func (r *rig) platformCounts(p capipods.Platform) map[string]int {
	out := map[string]int{}
	for _, k := range p.Kinds() {
		out[k] = len(r.list(capipods.StandardGroups, k))
	}
	return out
}

// checkInfrastructureRefs: every private Machine names its infrastructure machine in the group it now lives in
// (private when renamed, CAP-Agent's own otherwise), and that object exists.
func (r *rig) checkInfrastructureRefs(p capipods.Platform, renamed bool) {
	r.t.Helper()
	g := capipods.StandardGroups
	wantGroup := p.Group
	if renamed {
		g, wantGroup = capipods.PrivateGroups, capipods.PrivateGroups.Group(p.Group)
	}
	infra := map[string]bool{}
	for _, o := range r.list(g, p.Machine) {
		infra[o.GetName()] = true
	}
	for _, m := range r.list(capipods.PrivateGroups, "Machine") {
		group, _, _ := unstructured.NestedString(m.Object, "spec", "infrastructureRef", "apiGroup")
		kind, _, _ := unstructured.NestedString(m.Object, "spec", "infrastructureRef", "kind")
		name, _, _ := unstructured.NestedString(m.Object, "spec", "infrastructureRef", "name")
		if group != wantGroup || kind != p.Machine || !infra[name] {
			r.t.Errorf("Machine %s: infrastructureRef %s %s %s, want an existing %s in %s", m.GetName(), group, kind, name, p.Machine, wantGroup)
		}
	}
}

// checkUnrenamedOwners: every ownerReference of the platform's objects to a Cluster API object names a private
// twin (group and uid): they were re-pointed like any dependent.
func (r *rig) checkUnrenamedOwners(p capipods.Platform) {
	r.t.Helper()
	twins := map[types.UID]bool{}
	for _, k := range r.graphKinds() {
		for _, o := range r.list(capipods.PrivateGroups, k) {
			twins[o.GetUID()] = true
		}
	}
	owned := 0
	for _, k := range p.Kinds() {
		for _, o := range r.list(capipods.StandardGroups, k) {
			for _, ref := range o.GetOwnerReferences() {
				gv, _, _ := strings.Cut(ref.APIVersion, "/")
				if gv == capipods.ClusterGroup || !twins[ref.UID] && gv == capipods.PrivateGroups.Group(capipods.ClusterGroup) {
					r.t.Errorf("%s %s: owner %s %s %s is not a private twin", k, o.GetName(), ref.APIVersion, ref.Kind, ref.UID)
				}
				if twins[ref.UID] {
					owned++
				}
			}
		}
	}
	if owned == 0 {
		r.t.Errorf("no %s object is owned by a private twin", p.Name)
	}
}
