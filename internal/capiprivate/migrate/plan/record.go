package plan

import (
	"maps"
	"slices"
	"sort"
	"strings"
)

// RunKeys are the annotations of a run. The migrator decides from its own record of them (kept where only it
// writes, keyed by the HostedCluster's UID); the HostedCluster's copies are a mirror for people and tools, which
// anyone who may patch the HostedCluster can write and the migrator never reads back.
var RunKeys = append(slices.Clone(migrationAnnotations), LeftoversAnnotation)

// Record is the migrator's record of one HostedCluster's run: the values of the RunKeys it last wrote (a key it
// removed is absent).
type Record map[string]string

// With returns the record after c (a new map): c's changes to the RunKeys; its other keys are the HostedCluster's
// alone.
func (r Record) With(c Changes) Record {
	out := Record{}
	for k, v := range c.Apply(r) {
		if slices.Contains(RunKeys, k) {
			out[k] = v
		}
	}
	return out
}

// InRun reports whether the record holds a run under way (the in-progress marker or a phase).
func (r Record) InRun() bool { return r[InProgressAnnotation] == "true" || r[PhaseAnnotation] != "" }

// Trusted returns the annotations the migrator decides from: the HostedCluster's, with the RunKeys replaced by
// the record's. It also returns why the HostedCluster is refused ("" when it is not): outside a recorded run, its
// annotations claim one — a run key that differs from the record, or the lock scope (ScopeMigrating, which stops
// both operators). Such a HostedCluster starts, advances and blocks nothing until those annotations are removed;
// its lock scope is not trusted either.
func Trusted(annotations map[string]string, r Record) (map[string]string, string) {
	out := maps.Clone(annotations)
	if out == nil {
		out = map[string]string{}
	}
	for _, k := range RunKeys {
		delete(out, k)
		if v, ok := r[k]; ok {
			out[k] = v
		}
	}
	if r.InRun() {
		return out, ""
	}
	var claims []string
	for _, k := range RunKeys {
		if annotations[k] != r[k] {
			claims = append(claims, k)
		}
	}
	if annotations[ScopeAnnotation] == ScopeMigrating {
		claims = append(claims, ScopeAnnotation+"="+ScopeMigrating)
		delete(out, ScopeAnnotation)
	}
	if len(claims) == 0 {
		return out, ""
	}
	sort.Strings(claims)
	return out, "its annotations claim a migration run the migrator did not record (" + strings.Join(claims, ", ") +
		"): remove them"
}

// Mirrored reports whether annotations already show c (every key it sets has its value, every key it removes is
// absent).
func (c Changes) Mirrored(annotations map[string]string) bool {
	for k, v := range c.Set {
		if got, ok := annotations[k]; !ok || got != v {
			return false
		}
	}
	for _, k := range c.Remove {
		if _, ok := annotations[k]; ok {
			return false
		}
	}
	return true
}
