package scope

import (
	"testing"

	"github.com/dcm-sp/acm-cluster-sp/internal/capiprivate/migrate/plan"
)

func TestState(t *testing.T) {
	cases := []struct {
		name  string
		ann   map[string]string
		state string
	}{
		{"unannotated", nil, "unclassified"},
		{"legacy", map[string]string{plan.ScopeAnnotation: plan.ScopeLegacy}, "legacy"},
		{"private", map[string]string{plan.PrivateTypesAnnotation: "true"}, "migrated"},
		{"locked", map[string]string{plan.ScopeAnnotation: plan.ScopeMigrating, plan.InProgressAnnotation: "true"}, "in_progress"},
		{"lock without the marker", map[string]string{plan.ScopeAnnotation: plan.ScopeMigrating}, "in_progress"},
		{"committed, cleaning up", map[string]string{plan.PrivateTypesAnnotation: "true", plan.InProgressAnnotation: "true"}, "in_progress"},
		{"failed back to legacy", map[string]string{plan.ScopeAnnotation: plan.ScopeLegacy, plan.FailedAnnotation: "x"}, "failed"},
		{"another operator's scope", map[string]string{plan.ScopeAnnotation: "team-a"}, "other_scope"},
		{"private marker under another scope", map[string]string{plan.ScopeAnnotation: "team-a", plan.PrivateTypesAnnotation: "true"}, "other_scope"},
	}
	for _, tc := range cases {
		if got := State(tc.ann); got != tc.state {
			t.Errorf("%s: State = %q, want %q", tc.name, got, tc.state)
		}
	}
}

func TestClassify(t *testing.T) {
	std, prv, both, none := Observed{StandardCluster: true}, Observed{PrivateCluster: true}, Observed{true, true}, Observed{}
	legacy := map[string]string{plan.ScopeAnnotation: plan.ScopeLegacy}
	private := map[string]string{plan.PrivateTypesAnnotation: "true"}
	twoAnn := map[string]string{plan.ScopeAnnotation: plan.ScopeLegacy, plan.PrivateTypesAnnotation: "true"}
	cases := []struct {
		name string
		ann  map[string]string
		obs  Observed
		want Decision
	}{
		{"new, standard Cluster", nil, std, MarkLegacy},
		{"new, private Cluster", nil, prv, MarkPrivate},
		{"new, no Cluster yet", nil, none, MarkPrivate},
		{"legacy", legacy, std, Keep},
		{"private", private, prv, Keep},
		{"private without Cluster", private, none, Keep},
		{"both annotations, standard Cluster", twoAnn, std, MarkLegacy},
		{"both annotations, private Cluster", twoAnn, prv, MarkPrivate},
		{"legacy label but private Cluster", legacy, prv, MarkPrivate},
		{"Clusters in both groups", legacy, both, MarkInconsistent},
		{"Clusters in both groups while locked: the migrator's", map[string]string{plan.ScopeAnnotation: plan.ScopeMigrating, plan.InProgressAnnotation: "true"}, both, Keep},
		{"failed", map[string]string{plan.FailedAnnotation: "x"}, both, Keep},
		{"another operator's scope, standard Cluster: not ours", map[string]string{plan.ScopeAnnotation: "team-a"}, std, Keep},
		{"another operator's scope, no Cluster: not ours", map[string]string{plan.ScopeAnnotation: "team-a"}, none, Keep},
	}
	for _, tc := range cases {
		d := Classify(tc.ann, tc.obs)
		if d != tc.want {
			t.Errorf("%s: Classify = %s, want %s", tc.name, d, tc.want)
			continue
		}
		after := Changes(d).Apply(tc.ann)
		if d != Keep && d != MarkInconsistent && Classify(after, tc.obs) != Keep {
			t.Errorf("%s: not stable after %s: %v", tc.name, d, after)
		}
		// What HyperShift's scoping makes of the result: legacy → the legacy operator (scope legacy), private →
		// the default operator (no scope).
		if d == MarkLegacy && after[plan.ScopeAnnotation] != plan.ScopeLegacy || d == MarkPrivate && after[plan.ScopeAnnotation] != "" {
			t.Errorf("%s: %s leaves %v", tc.name, d, after)
		}
		if d == MarkInconsistent && after[plan.FailedAnnotation] != plan.ReasonInconsistentState {
			t.Errorf("%s: %v", tc.name, after)
		}
	}
	if !Changes(Keep).Empty() {
		t.Error("Keep changes something")
	}
}
