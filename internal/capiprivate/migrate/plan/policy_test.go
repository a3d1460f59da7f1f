package plan

import (
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/dcm-sp/acm-cluster-sp/internal/capiprivate/groups"
)

// TestBlockedPolicy: a legacy HostedCluster with blocking preconditions is never locked; the blocks are reported
// once per change (and once more when overdue); an override drops only waitable classes.
func TestBlockedPolicy(t *testing.T) {
	c := DefaultConfig()
	noNode := Block{Class: ClassNoNodeRef, Object: "Machine/m1", Detail: "node never joined"}
	unsettled := Block{Class: ClassMachineDeploymentUnsettled, Object: "MachineDeployment/np1"}
	noPID := Block{Class: ClassNoProviderID, Object: "Machine/m2"}
	crd := Block{Class: ClassMissingPrivateCRD, Object: "AWSMachine.infrastructure.cluster.x-k8s.io"}
	stray := Block{Class: ClassStrayPrivateObject, Object: "MachineSet/np1-abc"}
	base := map[string]string{ScopeAnnotation: ScopeLegacy}
	with := func(kv ...string) map[string]string {
		a := map[string]string{ScopeAnnotation: ScopeLegacy}
		for i := 0; i+1 < len(kv); i += 2 {
			a[kv[i]] = kv[i+1]
		}
		return a
	}
	cases := []struct {
		name     string
		ann      map[string]string
		now      time.Time
		blocks   []Block
		kind     Kind
		summary  string // BlockedAnnotation after the action ("" = unchanged)
		whyParts []string
	}{
		{"first report", base, t0, []Block{noNode, crd}, Persist,
			"safety: missing-private-crd AWSMachine.infrastructure.cluster.x-k8s.io; waitable: no-noderef Machine/m1", []string{"node never joined"}},
		{"unchanged: wait", with(BlockedAnnotation, "waitable: no-noderef Machine/m1", BlockedSinceAnnotation, formatTime(t0)), t0.Add(time.Minute),
			[]Block{noNode}, Wait, "", []string{"no-noderef"}},
		{"details alone do not rewrite", with(BlockedAnnotation, "waitable: no-noderef Machine/m1", BlockedSinceAnnotation, formatTime(t0)), t0.Add(time.Minute),
			[]Block{{Class: ClassNoNodeRef, Object: "Machine/m1", Detail: "other"}}, Wait, "", nil},
		{"overdue", with(BlockedAnnotation, "waitable: no-noderef Machine/m1", BlockedSinceAnnotation, formatTime(t0)), t0.Add(c.BlockedTimeout + time.Second),
			[]Block{noNode}, Persist, OverduePrefix + "waitable: no-noderef Machine/m1", nil},
		{"override drops the waitable ones", with(OverrideAnnotation, "no-noderef, machinedeployment-unsettled"), t0, []Block{noNode, unsettled}, Persist, "", []string{"lock"}},
		{"override cannot drop safety", with(OverrideAnnotation, "no-noderef,no-provider-id,missing-private-crd,stray-private-object"), t0,
			[]Block{noNode, noPID, crd, stray}, Persist,
			"safety: missing-private-crd AWSMachine.infrastructure.cluster.x-k8s.io, no-provider-id Machine/m2, stray-private-object MachineSet/np1-abc",
			[]string{"override of no-provider-id, missing-private-crd, stray-private-object ignored"}},
		{"unblocked: the lock clears the report", with(BlockedAnnotation, "x", BlockedSinceAnnotation, formatTime(t0)), t0, nil, Persist, "", []string{"lock"}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			o := Observation{Now: tc.now, NewID: "run1", WebhookHealthy: true, Blocks: tc.blocks}
			a := Step(ReadState(tc.ann, false), o, c)
			if a.Kind != tc.kind {
				t.Fatalf("Step = %v, want %s", a, tc.kind)
			}
			after := a.Changes.Apply(tc.ann)
			if tc.summary != "" && after[BlockedAnnotation] != tc.summary {
				t.Errorf("blocked %q, want %q", after[BlockedAnnotation], tc.summary)
			}
			for _, w := range tc.whyParts {
				if !strings.Contains(a.Why, w) {
					t.Errorf("Why %q lacks %q", a.Why, w)
				}
			}
			locked := after[ScopeAnnotation] == ScopeMigrating
			if locked != (a.Why == "lock") {
				t.Errorf("lock %v after %v", locked, a)
			}
			if locked && (after[BlockedAnnotation] != "" || after[BlockedSinceAnnotation] != "" || after[InProgressAnnotation] != "true") {
				t.Errorf("after the lock: %v", after)
			}
			if !locked && after[BlockedSinceAnnotation] == "" {
				t.Errorf("blocked without a since: %v", after)
			}
		})
	}
	for _, cl := range []Class{ClassMissingPrivateCRD, ClassNoProviderID, ClassDeleting, ClassBlockMove, ClassPausedByOther,
		ClassNotProvisioned, ClassClusterCount, ClassStrayPrivateObject, ClassProxiedWhileLegacy, "a-future-class"} {
		if cl.Waitable() {
			t.Errorf("%s is waitable: an override could bypass it", cl)
		}
	}
}

func TestReport(t *testing.T) {
	now := t0.Add(45 * time.Minute)
	for _, tc := range []struct {
		ann  map[string]string
		want string
	}{
		{map[string]string{ScopeAnnotation: ScopeLegacy}, "-"},
		{map[string]string{ScopeAnnotation: ScopeLegacy, BlockedAnnotation: "safety: no-provider-id Machine/m", BlockedSinceAnnotation: formatTime(t0)},
			"blocked 45m0s: safety: no-provider-id Machine/m"},
		{map[string]string{ScopeAnnotation: ScopeLegacy, BlockedAnnotation: OverduePrefix + "waitable: no-noderef Machine/m", BlockedSinceAnnotation: formatTime(t0),
			OverrideAnnotation: "no-provider-id"}, "blocked 45m0s (overdue): waitable: no-noderef Machine/m; override: no-provider-id"},
		{map[string]string{ScopeAnnotation: ScopeMigrating, PhaseAnnotation: "RollingBack", RollbackAnnotation: ReasonQuiesceTimeout}, "rolling back: quiesce-timeout"},
		{map[string]string{ScopeAnnotation: ScopeLegacy, FailedAnnotation: ReasonRollbackIncomplete, LeftoversAnnotation: "ab12"},
			"rollback-incomplete; twins of run(s) ab12 left for the next run"},
		{map[string]string{PhaseAnnotation: "CleaningUp", InProgressAnnotation: "true", StalledAnnotation: "CleaningUp past its 15m0s deadline: 3 standard objects left"},
			"stalled: CleaningUp past its 15m0s deadline: 3 standard objects left"},
	} {
		if got := Report(ReadState(tc.ann, false), now); got != tc.want {
			t.Errorf("Report(%v) = %q, want %q", tc.ann, got, tc.want)
		}
	}
}

func TestCatalog(t *testing.T) {
	std := func(plural, group, kind string, served ...string) CRD {
		return CRD{Name: plural + "." + group, Group: group, Kind: kind, Plural: plural, Namespaced: true, Served: served, Established: true}
	}
	prv := func(plural, group, kind string, served ...string) CRD {
		c := std(plural, group, kind, served...)
		c.Private = true
		return c
	}
	unlabelled := std("gcpmachines", "infrastructure.cluster.hypershift.openshift.io", "GCPMachine", "v1beta1")
	notReady := prv("ibmpowervsmachines", "infrastructure.cluster.hypershift.openshift.io", "IBMPowerVSMachine", "v1beta2")
	notReady.Established = false
	clusterScoped := std("clusterthings", "cluster.x-k8s.io", "ClusterThing", "v1beta2")
	clusterScoped.Namespaced = false
	crds := []CRD{
		std("machines", "cluster.x-k8s.io", "Machine", "v1beta1", "v1beta2"),
		prv("machines", "cluster.hypershift.openshift.io", "Machine", "v1beta1", "v1beta2"),
		std("kubevirtmachines", "infrastructure.cluster.x-k8s.io", "KubevirtMachine", "v1alpha1"),
		prv("kubevirtmachines", "infrastructure.cluster.hypershift.openshift.io", "KubevirtMachine", "v1alpha1"),
		std("awsmachines", "infrastructure.cluster.x-k8s.io", "AWSMachine", "v1beta1", "v1beta2"),
		std("azuremachines", "infrastructure.cluster.x-k8s.io", "AzureMachine", "v1beta1"),
		prv("azuremachines", "infrastructure.cluster.hypershift.openshift.io", "AzureMachine", "v1beta2"),
		std("gcpmachines", "infrastructure.cluster.x-k8s.io", "GCPMachine", "v1beta1"),
		unlabelled,
		std("ibmpowervsmachines", "infrastructure.cluster.x-k8s.io", "IBMPowerVSMachine", "v1beta2"),
		notReady,
		clusterScoped,
		std("agentmachines", "capi-provider.agent-install.openshift.io", "AgentMachine", "v1beta1"), // not renamed
		std("widgets", "example.com", "Widget", "v1"),
	}
	cat := NewCatalog(crds, groups.Default)
	var moved []string
	for _, k := range cat.Moved {
		moved = append(moved, k.Standard.String()+" → "+k.Private.String())
	}
	want := []string{
		"cluster.x-k8s.io/v1beta2, Kind=Machine → cluster.hypershift.openshift.io/v1beta2, Kind=Machine",
		"infrastructure.cluster.x-k8s.io/v1alpha1, Kind=KubevirtMachine → infrastructure.cluster.hypershift.openshift.io/v1alpha1, Kind=KubevirtMachine",
	}
	if !slices.Equal(moved, want) {
		t.Errorf("moved %q, want %q", moved, want)
	}
	why := map[string]string{}
	for _, u := range cat.Unmovable {
		why[u.Standard.Kind] = u.Why
	}
	for kind, w := range map[string]string{"AWSMachine": "no private CRD", "AzureMachine": "serves none of v1beta1", "GCPMachine": "not labelled",
		"IBMPowerVSMachine": "not Established"} {
		if !strings.Contains(why[kind], w) {
			t.Errorf("%s: %q, want %q", kind, why[kind], w)
		}
	}
	if len(cat.Unmovable) != 4 {
		t.Errorf("unmovable %v", cat.Unmovable)
	}
	blocks := cat.UnmovableBlocks(map[string]int{"infrastructure.cluster.x-k8s.io/AWSMachine": 2, "infrastructure.cluster.x-k8s.io/KubevirtMachine": 3})
	if len(blocks) != 1 || blocks[0].Class != ClassMissingPrivateCRD || blocks[0].Object != "AWSMachine.infrastructure.cluster.x-k8s.io" ||
		!strings.Contains(blocks[0].Detail, "2 objects") {
		t.Errorf("blocks %v", blocks)
	}
}
