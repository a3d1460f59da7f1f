// Package plan is the migrator's pure decision layer (reference capi-private.md §8): it reads a HostedCluster's
// persisted migration state from its annotations, decides from that state and an observation of the cluster the
// one next action (Step), and computes the object-graph work those actions need — owners-first order, private
// twins with remapped groups and UIDs, owner re-pointing, verification and preconditions. It performs no I/O;
// package controller executes what it decides.
package plan

import (
	"maps"
	"time"
)

// Annotations on the HostedCluster (reference §8.1). The first four are the enhancement's; the rest are ours.
const (
	// PrivateTypesAnnotation "true": the private operator reconciles the HostedCluster.
	PrivateTypesAnnotation = "hypershift.openshift.io/private-capi-types"
	// ScopeAnnotation "legacy": the legacy operator reconciles it (and it waits to be migrated).
	ScopeAnnotation = "hypershift.openshift.io/scope"
	// ScopeLegacy is ScopeAnnotation's value.
	ScopeLegacy = "legacy"
	// InProgressAnnotation "true" is the lock: neither operator reconciles the HostedCluster.
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

	// MigratedFromUIDAnnotation on a twin is the UID of the standard object it copies; with IDAnnotation it
	// rebuilds the UID map after a crash.
	MigratedFromUIDAnnotation = "hypershift.openshift.io/private-capi-migrated-from-uid"
	// OriginalReplicasAnnotation on a quiesced Deployment records its replicas.
	OriginalReplicasAnnotation = "hypershift.openshift.io/private-capi-original-replicas"
	// ProxyAnnotation on a pod template means the proxy sidecar is injected; ProxyInjected is its value.
	ProxyAnnotation = "hypershift.openshift.io/private-capi-proxy"
	ProxyInjected   = "injected"
)

// Failure reasons (reference §8.1), the value of FailedAnnotation and the `reason` metric label.
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
)

// migrationAnnotations are every annotation a run writes on the HostedCluster besides the scope ones.
var migrationAnnotations = []string{
	InProgressAnnotation, PhaseAnnotation, IDAnnotation, StartedAnnotation, PhaseStartedAnnotation,
	RollbackAnnotation, RollbackFromAnnotation, QuietAnnotation, GreenAnnotation,
}

// State is a HostedCluster's migration state as persisted in its annotations, plus whether it is being deleted.
type State struct {
	PrivateTypes bool   // private-capi-types: "true"
	Legacy       bool   // scope: legacy
	Locked       bool   // migration-in-progress: "true"
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
	// Deleting: the HostedCluster has a deletionTimestamp.
	Deleting bool
}

// ReadState parses a HostedCluster's annotations. Unparsable times read as zero, which restarts the window or
// timeout they measure rather than failing.
func ReadState(annotations map[string]string, deleting bool) State {
	s := State{
		PrivateTypes: annotations[PrivateTypesAnnotation] == "true",
		Legacy:       annotations[ScopeAnnotation] == ScopeLegacy,
		Locked:       annotations[InProgressAnnotation] == "true",
		Failed:       annotations[FailedAnnotation],
		Phase:        Phase(annotations[PhaseAnnotation]),
		ID:           annotations[IDAnnotation],
		Started:      parseTime(annotations[StartedAnnotation]),
		PhaseStarted: parseTime(annotations[PhaseStartedAnnotation]),
		Rollback:     annotations[RollbackAnnotation],
		RollbackFrom: Phase(annotations[RollbackFromAnnotation]),
		GreenSince:   parseTime(annotations[GreenAnnotation]),
		Deleting:     deleting,
	}
	s.QuietFingerprint, s.QuietSince = parseQuiet(annotations[QuietAnnotation])
	return s
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
