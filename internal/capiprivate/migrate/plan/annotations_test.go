package plan

import (
	"maps"
	"slices"
	"testing"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/types"
)

func TestControlPlaneNamespace(t *testing.T) {
	for _, c := range []struct{ ns, name, want string }{
		{"clusters", "demo", "clusters-demo"},
		{"clusters", "demo.example", "clusters-demo-example"}, // HyperShift makes the name's dots dashes
		{"team-a", "b", "team-a-b"},
	} {
		if got := ControlPlaneNamespace(c.ns, c.name); got != c.want {
			t.Errorf("ControlPlaneNamespace(%q, %q) = %q, want %q", c.ns, c.name, got, c.want)
		}
	}
}

func TestTwinned(t *testing.T) {
	obj := func(uid string) unstructured.Unstructured {
		u := unstructured.Unstructured{}
		u.SetUID(types.UID(uid))
		return u
	}
	old := []unstructured.Unstructured{obj("a"), obj("b"), obj("c")}
	got := Twinned(old, UIDMap{"a": {UID: "ta"}, "c": {UID: "tc"}, "gone": {UID: "tg"}})
	if len(got) != 2 || got[0].GetUID() != "a" || got[1].GetUID() != "c" {
		t.Fatalf("Twinned = %v, want a and c (b has no twin of this run: it is never deleted)", got)
	}
}

func TestTrusted(t *testing.T) {
	run := Record{InProgressAnnotation: "true", PhaseAnnotation: "Copying", IDAnnotation: "r1"}
	for _, c := range []struct {
		name       string
		hc         map[string]string
		rec        Record
		want       map[string]string // the trusted annotations (nil: not checked)
		refused    bool
		inRunAfter bool
	}{
		{name: "a legacy cluster never migrated", hc: map[string]string{ScopeAnnotation: ScopeLegacy},
			want: map[string]string{ScopeAnnotation: ScopeLegacy}},
		{name: "a forged run: no record", refused: true,
			hc:   map[string]string{ScopeAnnotation: ScopeMigrating, InProgressAnnotation: "true", PhaseAnnotation: "CleaningUp", IDAnnotation: "forged"},
			want: map[string]string{}},
		{name: "a forged lock scope alone", refused: true, hc: map[string]string{ScopeAnnotation: ScopeMigrating}, want: map[string]string{}},
		{name: "a forged phase on a cluster whose run ended", refused: true,
			hc:   map[string]string{PrivateTypesAnnotation: "true", PhaseAnnotation: "RollingBack"},
			rec:  Record{},
			want: map[string]string{PrivateTypesAnnotation: "true"}},
		{name: "a recorded run: the record wins over the mirror", inRunAfter: true,
			hc:   map[string]string{ScopeAnnotation: ScopeMigrating, InProgressAnnotation: "true", PhaseAnnotation: "CleaningUp", IDAnnotation: "forged"},
			rec:  run,
			want: map[string]string{ScopeAnnotation: ScopeMigrating, InProgressAnnotation: "true", PhaseAnnotation: "Copying", IDAnnotation: "r1"}},
		{name: "a recorded run whose mirror is not written yet", inRunAfter: true,
			hc: map[string]string{ScopeAnnotation: ScopeLegacy}, rec: run},
		{name: "the leftovers of a recorded rollback", rec: Record{LeftoversAnnotation: "r0"},
			hc:   map[string]string{ScopeAnnotation: ScopeLegacy, FailedAnnotation: ReasonRollbackIncomplete, LeftoversAnnotation: "r0"},
			want: map[string]string{ScopeAnnotation: ScopeLegacy, FailedAnnotation: ReasonRollbackIncomplete, LeftoversAnnotation: "r0"}},
		{name: "forged leftovers", refused: true, rec: Record{},
			hc: map[string]string{ScopeAnnotation: ScopeLegacy, LeftoversAnnotation: "victim-run"}},
	} {
		t.Run(c.name, func(t *testing.T) {
			got, why := Trusted(c.hc, c.rec)
			if (why != "") != c.refused {
				t.Fatalf("refusal %q, want refused %v", why, c.refused)
			}
			if c.want != nil && !maps.Equal(got, c.want) {
				t.Errorf("trusted %v, want %v", got, c.want)
			}
			if s := ReadState(got, false); s.InRun() != c.inRunAfter {
				t.Errorf("in run %v, want %v", s.InRun(), c.inRunAfter)
			}
		})
	}
}

func TestRecordWith(t *testing.T) {
	r := Record{}.With(Changes{Set: map[string]string{ScopeAnnotation: ScopeMigrating, InProgressAnnotation: "true", PhaseAnnotation: "Locked"}})
	if !maps.Equal(r, Record{InProgressAnnotation: "true", PhaseAnnotation: "Locked"}) || !r.InRun() {
		t.Fatalf("after the lock: %v (the scope is the HostedCluster's, not a run key)", r)
	}
	end := Changes{Set: map[string]string{FailedAnnotation: "x", ScopeAnnotation: ScopeLegacy, LeftoversAnnotation: "r1"},
		Remove: append(slices.Clone(migrationAnnotations), PrivateTypesAnnotation)}
	r = r.With(end)
	if !maps.Equal(r, Record{LeftoversAnnotation: "r1"}) || r.InRun() {
		t.Fatalf("after the run: %v", r)
	}
	if !end.Mirrored(map[string]string{FailedAnnotation: "x", ScopeAnnotation: ScopeLegacy, LeftoversAnnotation: "r1", "other": "y"}) ||
		end.Mirrored(map[string]string{FailedAnnotation: "x", ScopeAnnotation: ScopeLegacy, LeftoversAnnotation: "r1", PhaseAnnotation: "Copying"}) {
		t.Error("Mirrored: a removed key still present must not count as mirrored, other keys do not matter")
	}
}
