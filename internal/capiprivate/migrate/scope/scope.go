// Package scope decides which operator owns a HostedCluster during the move to the private CAPI types (reference
// capi-private.md §8.6): the predicates that keep the legacy and the private operator off each other's hosted
// clusters (and both off a locked one), and the classifier's decision for a HostedCluster neither has claimed
// yet. It is pure: callers supply the annotations and what they observed.
package scope

import "github.com/dcm-sp/acm-cluster-sp/internal/capiprivate/migrate/plan"

// Legacy is the legacy operator's predicate: scope legacy and not locked by a migration. Unannotated
// HostedClusters are not accepted (unlike HyperShift's PredicatesForHostedClusterAnnotationScoping): until the
// classifier assigns one, nobody reconciles it, which closes the startup race.
func Legacy(annotations map[string]string) bool {
	return annotations[plan.ScopeAnnotation] == plan.ScopeLegacy && !locked(annotations)
}

// Private is the private operator's predicate (and the one integrators must use): private-capi-types and not
// locked.
func Private(annotations map[string]string) bool {
	return annotations[plan.PrivateTypesAnnotation] == "true" && !locked(annotations)
}

func locked(annotations map[string]string) bool {
	return annotations[plan.InProgressAnnotation] == "true"
}

// Decision is what the classifier does to one HostedCluster.
type Decision string

const (
	// Keep: the HostedCluster is classified consistently (or locked: the migrator owns it).
	Keep Decision = "Keep"
	// MarkLegacy sets scope: legacy (its Cluster is in the standard groups).
	MarkLegacy Decision = "MarkLegacy"
	// MarkPrivate sets private-capi-types (its Cluster, if any, is private).
	MarkPrivate Decision = "MarkPrivate"
	// MarkInconsistent sets migration-failed: inconsistent-state (Clusters in both groups and no migration).
	MarkInconsistent Decision = "MarkInconsistent"
)

// Observed is what the classifier saw in the HostedCluster's control plane namespace.
type Observed struct {
	StandardCluster bool // a Cluster in the standard group
	PrivateCluster  bool // a Cluster in the private group
}

// Classify decides for one HostedCluster (reference §8.6):
//   - locked, or already failed: Keep (the migrator, or an SRE, owns it);
//   - Clusters in both groups: MarkInconsistent;
//   - a standard Cluster: MarkLegacy unless it already is legacy only;
//   - otherwise: MarkPrivate unless it already is private only.
//
// A HostedCluster with both scope annotations is repaired from where its Cluster is.
func Classify(annotations map[string]string, o Observed) Decision {
	if locked(annotations) || annotations[plan.FailedAnnotation] != "" {
		return Keep
	}
	legacy := annotations[plan.ScopeAnnotation] == plan.ScopeLegacy
	private := annotations[plan.PrivateTypesAnnotation] == "true"
	switch {
	case o.StandardCluster && o.PrivateCluster:
		return MarkInconsistent
	case o.StandardCluster:
		if legacy && !private {
			return Keep
		}
		return MarkLegacy
	default:
		if private && !legacy {
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

// State is the `state` label of capi_private_migration_hostedclusters for a HostedCluster's annotations.
func State(annotations map[string]string) string {
	switch {
	case locked(annotations):
		return "in_progress"
	case annotations[plan.FailedAnnotation] != "":
		return "failed"
	case annotations[plan.PrivateTypesAnnotation] == "true":
		return "migrated"
	case annotations[plan.ScopeAnnotation] == plan.ScopeLegacy:
		return "legacy"
	}
	return "unclassified"
}
