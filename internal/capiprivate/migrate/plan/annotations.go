// Package plan is the migrator's pure decision layer (docs/capi-private-migration.md): it reads a HostedCluster's
// persisted migration state from its annotations, decides from that state and an observation of the cluster the
// one next action (Step), and computes the object-graph work those actions need — owners-first order, private
// twins with remapped groups and UIDs, owner re-pointing, verification and preconditions. It performs no I/O;
// package controller executes what it decides.
package plan

import (
	"maps"
	"strings"
	"time"
)

// Annotations on the HostedCluster. Which operator reconciles a HostedCluster is decided by HyperShift's own scoping
// alone: an operator started with HOSTEDCLUSTERS_SCOPE_ANNOTATION=X (and ENABLE_HOSTEDCLUSTERS_ANNOTATION_SCOPING=true)
// reconciles only the HostedClusters whose ScopeAnnotation is X, one started without it only those with no
// ScopeAnnotation. The legacy operator runs with X=legacy, the private one without X; a migrating HostedCluster
// carries ScopeMigrating, which neither matches (the lock). PrivateTypesAnnotation, InProgressAnnotation and
// FailedAnnotation are markers for people and tools: nothing inside HyperShift needs to read them.
const (
	// ScopeAnnotation is HyperShift's scope annotation (support/k8sutil HostedClustersScopeAnnotation).
	ScopeAnnotation = "hypershift.openshift.io/scope"
	// ScopeLegacy: the legacy operator reconciles the HostedCluster (and it waits to be migrated).
	ScopeLegacy = "legacy"
	// ScopeMigrating is the lock: a scope no operator is started with, so neither reconciles the HostedCluster.
	ScopeMigrating = "capi-private-migrating"
	// PrivateTypesAnnotation "true" marks a HostedCluster on the private types (it has no scope: the private,
	// default operator reconciles it).
	PrivateTypesAnnotation = "hypershift.openshift.io/private-capi-types"
	// InProgressAnnotation "true" marks a migration run under way (set with the lock, removed when the run ends).
	InProgressAnnotation = "hypershift.openshift.io/migration-in-progress"
	// FailedAnnotation holds the reason of a rolled-back migration. An SRE removes it to allow a retry.
	FailedAnnotation = "hypershift.openshift.io/migration-failed"

	// PhaseAnnotation is the phase the migration is in (persisted when the phase starts).
	PhaseAnnotation = "hypershift.openshift.io/private-capi-migration-phase"
	// IDAnnotation is the run id; twins carry it too.
	IDAnnotation = "hypershift.openshift.io/private-capi-migration-id"
	// StartedAnnotation is when the run locked the HostedCluster (RFC 3339).
	StartedAnnotation = "hypershift.openshift.io/private-capi-migration-started"
	// PhaseStartedAnnotation is when the current phase started (RFC 3339): phase timeouts count from it.
	PhaseStartedAnnotation = "hypershift.openshift.io/private-capi-migration-phase-started"
	// RollbackAnnotation is the reason of a rollback in progress, and RollbackFromAnnotation the phase it began in.
	RollbackAnnotation     = "hypershift.openshift.io/private-capi-migration-rollback"
	RollbackFromAnnotation = "hypershift.openshift.io/private-capi-migration-rollback-from"
	// QuietAnnotation is "<fingerprint>@<RFC 3339 time>": the standard objects' fingerprint and since when it has
	// not changed (the quiet window of Quiescing). Verifying compares the old objects against it.
	QuietAnnotation = "hypershift.openshift.io/private-capi-migration-quiet"
	// GreenAnnotation is since when (RFC 3339) Resuming has seen the cluster continuously healthy.
	GreenAnnotation = "hypershift.openshift.io/private-capi-migration-green-since"
	// StalledAnnotation holds why a phase that cannot roll back (after Committed, or a rollback itself) is past
	// its deadline; the migrator keeps retrying with back-off.
	StalledAnnotation = "hypershift.openshift.io/private-capi-migration-stalled"
	// LeftoversAnnotation lists (comma-separated) the run ids whose rollback could not remove every twin: those
	// twins are removed first by the next run.
	LeftoversAnnotation = "hypershift.openshift.io/private-capi-migration-leftovers"

	// BlockedAnnotation holds why a legacy HostedCluster may not be locked yet (its blocking preconditions), and
	// BlockedSinceAnnotation since when (RFC 3339). Set before any lock; removed when the lock is taken.
	BlockedAnnotation      = "hypershift.openshift.io/private-capi-migration-blocked"
	BlockedSinceAnnotation = "hypershift.openshift.io/private-capi-migration-blocked-since"
	// OverrideAnnotation, set by an operator, lists (comma-separated) the waitable precondition classes to
	// disregard for this HostedCluster (e.g. "no-noderef,machinedeployment-unsettled"). Safety classes are never
	// disregarded.
	OverrideAnnotation = "hypershift.openshift.io/private-capi-migration-override"

	// MigratedFromUIDAnnotation on a twin is the UID of the standard object it copies; with IDAnnotation it
	// rebuilds the UID map after a crash.
	MigratedFromUIDAnnotation = "hypershift.openshift.io/private-capi-migrated-from-uid"
	// OriginalReplicasAnnotation on a quiesced Deployment records its replicas.
	OriginalReplicasAnnotation = "hypershift.openshift.io/private-capi-original-replicas"

	// DeleteForMoveAnnotation is clusterctl's hint set on an object before a move deletes it: providers' webhooks
	// and controllers let such a delete through without acting on the infrastructure.
	DeleteForMoveAnnotation = "clusterctl.cluster.x-k8s.io/delete-for-move"
	// FieldManager is the field manager of every write of the migrator. After a twin is written, its
	// managedFields are set back to the old object's, so the migrator owns no field on a twin that it did not own
	// on the old object.
	FieldManager = "capi-private-migrate"
)

// Failure reasons: the value of FailedAnnotation and the `reason` metric label (docs/capi-private-migration.md,
// section "Metrics and events", lists them).
const (
	ReasonPreconditionChanged  = "precondition-changed"
	ReasonQuiesceTimeout       = "quiesce-timeout"
	ReasonExternalWriter       = "external-writer"
	ReasonCreateFailed         = "create-failed"
	ReasonVerifyMismatch       = "verify-mismatch"
	ReasonSwitchTimeout        = "switch-timeout"
	ReasonHealthCheckTimeout   = "health-check-timeout"
	ReasonBornObjects          = "born-objects"
	ReasonWebhookUnavailable   = "webhook-unavailable"
	ReasonHostedClusterDeleted = "hostedcluster-deleted"
	ReasonInconsistentState    = "inconsistent-state"
	// A phase past its deadline (besides the ones above, which keep their historical names).
	ReasonLockTimeout    = "lock-timeout"
	ReasonCopyTimeout    = "copy-timeout"
	ReasonRepointTimeout = "repoint-timeout"
	ReasonVerifyTimeout  = "verify-timeout"
	// ReasonRollbackIncomplete: the rollback missed its deadline; the legacy controllers run again, and the twins
	// it could not remove stay paused for the next run to remove (LeftoversAnnotation).
	ReasonRollbackIncomplete = "rollback-incomplete"
)

// migrationAnnotations are every annotation a run writes on the HostedCluster besides the scope ones.
var migrationAnnotations = []string{
	InProgressAnnotation, PhaseAnnotation, IDAnnotation, StartedAnnotation, PhaseStartedAnnotation,
	RollbackAnnotation, RollbackFromAnnotation, QuietAnnotation, GreenAnnotation, StalledAnnotation,
}

// State is a HostedCluster's migration state as persisted in its annotations, plus whether it is being deleted.
type State struct {
	PrivateTypes bool   // private-capi-types: "true"
	Scope        string // HyperShift's scope annotation ("" when unset)
	Legacy       bool   // scope: legacy
	Locked       bool   // scope: ScopeMigrating, or the migration-in-progress marker
	Failed       string // migration-failed reason ("" when unset)
	Phase        Phase
	ID           string
	Started      time.Time
	PhaseStarted time.Time
	// Rollback is the reason of a rollback in progress; RollbackFrom the phase it began in.
	Rollback     string
	RollbackFrom Phase
	// QuietFingerprint and QuietSince: the Quiescing window (QuietAnnotation).
	QuietFingerprint string
	QuietSince       time.Time
	// GreenSince: Resuming's continuous health window (zero when not green).
	GreenSince time.Time
	// Stalled: why a phase that cannot roll back is past its deadline ("" when it is not).
	Stalled string
	// LeftoverRuns are runs whose rollback left twins behind (LeftoversAnnotation).
	LeftoverRuns []string
	// Blocked and BlockedSince: the blocking preconditions last reported, and since when.
	Blocked      string
	BlockedSince time.Time
	// Override: the waitable precondition classes an operator told the migrator to disregard.
	Override []string
	// Deleting: the HostedCluster has a deletionTimestamp.
	Deleting bool
}

// ReadState parses a HostedCluster's annotations. Unparsable times read as zero, which restarts the window or
// timeout they measure rather than failing.
func ReadState(annotations map[string]string, deleting bool) State {
	s := State{
		PrivateTypes: annotations[PrivateTypesAnnotation] == "true",
		Scope:        annotations[ScopeAnnotation],
		Legacy:       annotations[ScopeAnnotation] == ScopeLegacy,
		Locked:       annotations[ScopeAnnotation] == ScopeMigrating || annotations[InProgressAnnotation] == "true",
		Failed:       annotations[FailedAnnotation],
		Phase:        Phase(annotations[PhaseAnnotation]),
		ID:           annotations[IDAnnotation],
		Started:      parseTime(annotations[StartedAnnotation]),
		PhaseStarted: parseTime(annotations[PhaseStartedAnnotation]),
		Rollback:     annotations[RollbackAnnotation],
		RollbackFrom: Phase(annotations[RollbackFromAnnotation]),
		GreenSince:   parseTime(annotations[GreenAnnotation]),
		Stalled:      annotations[StalledAnnotation],
		LeftoverRuns: splitList(annotations[LeftoversAnnotation]),
		Blocked:      annotations[BlockedAnnotation],
		BlockedSince: parseTime(annotations[BlockedSinceAnnotation]),
		Override:     splitList(annotations[OverrideAnnotation]),
		Deleting:     deleting,
	}
	s.QuietFingerprint, s.QuietSince = parseQuiet(annotations[QuietAnnotation])
	return s
}

// splitList reads a comma-separated annotation value (spaces ignored, empty items dropped).
func splitList(v string) []string {
	var out []string
	for _, f := range strings.Split(v, ",") {
		if f = strings.TrimSpace(f); f != "" {
			out = append(out, f)
		}
	}
	return out
}

func parseTime(v string) time.Time {
	t, err := time.Parse(time.RFC3339, v)
	if err != nil {
		return time.Time{}
	}
	return t
}

func formatTime(t time.Time) string { return t.UTC().Format(time.RFC3339) }

func parseQuiet(v string) (string, time.Time) {
	for i := len(v) - 1; i >= 0; i-- {
		if v[i] == '@' {
			return v[:i], parseTime(v[i+1:])
		}
	}
	return "", time.Time{}
}

// FormatQuiet is QuietAnnotation's value.
func FormatQuiet(fingerprint string, since time.Time) string {
	return fingerprint + "@" + formatTime(since)
}

// Changes is an annotation patch: keys to set (Set) and keys to remove (a key in Remove). Apply it with a JSON merge
// patch on metadata.annotations (null removes).
type Changes struct {
	Set    map[string]string
	Remove []string
}

// Empty reports whether the patch changes nothing.
func (c Changes) Empty() bool { return len(c.Set) == 0 && len(c.Remove) == 0 }

// Apply returns annotations with c applied (a new map; annotations is not modified).
func (c Changes) Apply(annotations map[string]string) map[string]string {
	out := maps.Clone(annotations)
	if out == nil {
		out = map[string]string{}
	}
	for _, k := range c.Remove {
		delete(out, k)
	}
	maps.Copy(out, c.Set)
	return out
}

// MergePatch is c as the value of metadata.annotations in a JSON merge patch.
func (c Changes) MergePatch() map[string]any {
	out := map[string]any{}
	for _, k := range c.Remove {
		out[k] = nil
	}
	for k, v := range c.Set {
		out[k] = v
	}
	return out
}

// ControlPlaneNamespace is HyperShift's hosted control plane namespace of the HostedCluster namespace/name: the
// two joined by a dash, the name's dots made dashes (hypershift-operator/controllers/manifests/manifests.go,
// HostedControlPlaneNamespace).
func ControlPlaneNamespace(namespace, name string) string {
	return namespace + "-" + strings.ReplaceAll(name, ".", "-")
}

// HyperShift's marks of a hosted control plane (hypershift-operator/controllers/hostedcluster/
// hostedcluster_controller.go): HostedControlPlaneLabel=true on the namespace, set when the operator creates it,
// before any component; HostedClusterAnnotation on the HostedControlPlane in it, naming its HostedCluster as
// <namespace>/<name>. Only HyperShift writes them, so they prove whose control plane a namespace is.
const (
	HostedControlPlaneLabel = "hypershift.openshift.io/hosted-control-plane"
	HostedClusterAnnotation = "hypershift.openshift.io/cluster"
)

// Designates reports whether a HostedControlPlane with these annotations belongs to the HostedCluster
// namespace/name.
func Designates(hcpAnnotations map[string]string, namespace, name string) bool {
	return hcpAnnotations[HostedClusterAnnotation] == namespace+"/"+name
}
