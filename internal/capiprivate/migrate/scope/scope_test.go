package scope

import (
	"testing"

	"github.com/dcm-sp/acm-cluster-sp/internal/capiprivate/migrate/plan"
)

func TestPredicates(t *testing.T) {
	cases := []struct {
		name            string
		ann             map[string]string
		legacy, private bool
		state           string
	}{
		{"unannotated: nobody", nil, false, false, "unclassified"},
		{"legacy", map[string]string{plan.ScopeAnnotation: plan.ScopeLegacy}, true, false, "legacy"},
		{"private", map[string]string{plan.PrivateTypesAnnotation: "true"}, false, true, "migrated"},
		{"legacy locked", map[string]string{plan.ScopeAnnotation: plan.ScopeLegacy, plan.InProgressAnnotation: "true"}, false, false, "in_progress"},
		{"private locked (committed, cleaning up)", map[string]string{plan.PrivateTypesAnnotation: "true", plan.InProgressAnnotation: "true"}, false, false, "in_progress"},
		{"failed back to legacy", map[string]string{plan.ScopeAnnotation: plan.ScopeLegacy, plan.FailedAnnotation: "x"}, true, false, "failed"},
		{"other scope value", map[string]string{plan.ScopeAnnotation: "something"}, false, false, "unclassified"},
		{"private false", map[string]string{plan.PrivateTypesAnnotation: "false"}, false, false, "unclassified"},
	}
	for _, tc := range cases {
		if got := Legacy(tc.ann); got != tc.legacy {
			t.Errorf("%s: Legacy = %v", tc.name, got)
		}
		if got := Private(tc.ann); got != tc.private {
			t.Errorf("%s: Private = %v", tc.name, got)
		}
		if Legacy(tc.ann) && Private(tc.ann) {
			t.Errorf("%s: both operators accept it", tc.name)
		}
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
		{"Clusters in both groups while locked: the migrator's", map[string]string{plan.InProgressAnnotation: "true", plan.ScopeAnnotation: plan.ScopeLegacy}, both, Keep},
		{"failed", map[string]string{plan.FailedAnnotation: "x"}, both, Keep},
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
		if d == MarkLegacy && !Legacy(after) || d == MarkPrivate && !Private(after) {
			t.Errorf("%s: %s leaves %v", tc.name, d, after)
		}
		if d == MarkInconsistent && (Legacy(after) && Private(after) || after[plan.FailedAnnotation] != plan.ReasonInconsistentState) {
			t.Errorf("%s: %v", tc.name, after)
		}
	}
	if !Changes(Keep).Empty() {
		t.Error("Keep changes something")
	}
}
