// Package scope decides which operator a HostedCluster belongs to while capi-private moves hosted clusters to the
// private CAPI types: the classifier's decision for each HostedCluster, and the state label of the migration
// metrics. It is pure: callers supply the annotations and what they observed.
//
// Which operator reconciles a HostedCluster is HyperShift's own scoping, unchanged: an operator started with
// HOSTEDCLUSTERS_SCOPE_ANNOTATION=X reconciles only HostedClusters whose hypershift.openshift.io/scope is X, one
// started without it only those without the annotation. The legacy operator runs with X=legacy, the private one
// without X; a migration's lock is a scope value neither is started with. Nothing here is, or needs to be, read
// by HyperShift.
package scope

import "github.com/dcm-sp/acm-cluster-sp/internal/capiprivate/migrate/plan"

// Decision is what the classifier does to one HostedCluster.
type Decision string

const (
	// Keep: the HostedCluster is classified consistently (or locked: the migrator owns it; or another operator's
	// scope: not ours).
	Keep Decision = "Keep"
	// MarkLegacy sets scope: legacy (its Cluster is in the standard groups): the legacy operator's.
	MarkLegacy Decision = "MarkLegacy"
	// MarkPrivate removes the scope (the private, default operator's) and sets the private-capi-types marker.
	MarkPrivate Decision = "MarkPrivate"
	// MarkInconsistent sets migration-failed: inconsistent-state (Clusters in both groups and no migration).
	MarkInconsistent Decision = "MarkInconsistent"
)

// Observed is what the classifier saw in the HostedCluster's control plane namespace.
type Observed struct {
	// StandardCluster: a Cluster in the standard group.
	StandardCluster bool
	// PrivateCluster: a Cluster in the private group that is not a copy of the standard one (a copy — a
	// migration's twin, or a rolled-back run's leftover — carries the standard Cluster's UID as its
	// migrated-from-uid, and does not make the state inconsistent).
	PrivateCluster bool
}

// ours reports whether the HostedCluster's scope is one capi-private manages: none, legacy, or the lock.
func ours(annotations map[string]string) bool {
	switch annotations[plan.ScopeAnnotation] {
	case "", plan.ScopeLegacy, plan.ScopeMigrating:
		return true
	}
	return false
}

// Classify decides for one HostedCluster:
//   - another operator's scope (a value other than legacy and the lock): Keep, it is not ours;
//   - locked, or already failed: Keep (the migrator, or an SRE, owns it);
//   - Clusters in both groups: MarkInconsistent;
//   - a standard Cluster: MarkLegacy unless it already is legacy only;
//   - otherwise: MarkPrivate unless it already is private only.
//
// Run before the private operator starts, it marks every HostedCluster with a standard Cluster legacy, so the
// private (default) operator never sees a legacy HostedCluster without a scope. A HostedCluster with both scope
// annotations is repaired from where its Cluster is.
func Classify(annotations map[string]string, o Observed) Decision {
	s := plan.ReadState(annotations, false)
	if !ours(annotations) || s.Locked || s.Failed != "" {
		return Keep
	}
	switch {
	case o.StandardCluster && o.PrivateCluster:
		return MarkInconsistent
	case o.StandardCluster:
		if s.Legacy && !s.PrivateTypes {
			return Keep
		}
		return MarkLegacy
	default:
		if s.PrivateTypes && s.Scope == "" {
			return Keep
		}
		return MarkPrivate
	}
}

// Changes is the annotation patch that applies d.
func Changes(d Decision) plan.Changes {
	switch d {
	case MarkLegacy:
		return plan.Changes{Set: map[string]string{plan.ScopeAnnotation: plan.ScopeLegacy}, Remove: []string{plan.PrivateTypesAnnotation}}
	case MarkPrivate:
		return plan.Changes{Set: map[string]string{plan.PrivateTypesAnnotation: "true"}, Remove: []string{plan.ScopeAnnotation}}
	case MarkInconsistent:
		return plan.Changes{Set: map[string]string{plan.FailedAnnotation: plan.ReasonInconsistentState}}
	}
	return plan.Changes{}
}

// States are the values of State.
var States = []string{"legacy", "in_progress", "migrated", "failed", "unclassified", "other_scope"}

// State is the `state` label of capi_private_migration_hostedclusters for a HostedCluster's annotations.
func State(annotations map[string]string) string {
	s := plan.ReadState(annotations, false)
	switch {
	case !ours(annotations):
		return "other_scope"
	case s.Locked:
		return "in_progress"
	case s.Failed != "":
		return "failed"
	case s.PrivateTypes && s.Scope == "":
		return "migrated"
	case s.Legacy:
		return "legacy"
	}
	return "unclassified"
}
