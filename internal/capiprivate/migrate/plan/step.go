package plan

import (
	"fmt"
	"slices"
	"strings"
	"time"
)

// Phase is a migration phase, persisted in PhaseAnnotation when it starts.
type Phase string

// The phases in order. Done is never persisted: Finish removes every migration annotation. RollingBack is entered
// from any phase before Committed.
const (
	PhaseNone        Phase = ""
	PhaseLocked      Phase = "Locked"
	PhaseQuiescing   Phase = "Quiescing"
	PhaseCopying     Phase = "Copying"
	PhaseRepointing  Phase = "Repointing"
	PhaseVerifying   Phase = "Verifying"
	PhaseSwitching   Phase = "Switching"
	PhaseResuming    Phase = "Resuming"
	PhaseCommitted   Phase = "Committed"
	PhaseCleaningUp  Phase = "CleaningUp"
	PhaseDone        Phase = "Done"
	PhaseRollingBack Phase = "RollingBack"
)

// Phases lists every phase a run can persist, in order (for the phase gauge).
var Phases = []Phase{PhaseLocked, PhaseQuiescing, PhaseCopying, PhaseRepointing, PhaseVerifying, PhaseSwitching,
	PhaseResuming, PhaseCommitted, PhaseCleaningUp, PhaseRollingBack}

// index is p's position in the forward order (-1 for none and RollingBack).
func (p Phase) index() int { return slices.Index(Phases[:9], p) }

// BeforeCommit reports whether a failure in p still rolls back (phases 1–7 and the lock itself).
func (p Phase) BeforeCommit() bool { i := p.index(); return i >= 0 && i < PhaseCommitted.index() }

// Observation is what the controller saw of one hosted cluster just before asking Step. Counts are over the
// hosted control plane namespace.
type Observation struct {
	Now time.Time
	// NewID is the run id Lock would use (the controller makes one up; Step stays deterministic).
	NewID string

	// Blocks are the preconditions that do not hold, overridable or not (Preconditions, Catalog.UnmovableBlocks,
	// strays, workloads); Step applies the HostedCluster's override.
	Blocks []Block
	// WebhookHealthy: the conversion probe passes.
	WebhookHealthy bool
	// OtherLocked names another HostedCluster that holds the lock ("" when none).
	OtherLocked string
	// DiscoveryIncomplete says which API groups discovery failed to list ("" when it listed every one). Objects in
	// those groups could name an old UID unseen, so nothing that re-points owners may proceed.
	DiscoveryIncomplete string

	// LegacyClusterPaused: the standard Cluster exists and carries spec.paused (or none exists).
	LegacyClusterPaused bool
	// LegacyScaledDown: every quiesced Deployment has recorded its replicas and is at 0 (or is proxied).
	LegacyScaledDown bool
	// LegacyPods are pods of quiesced Deployments running without the proxy.
	LegacyPods int
	// Fingerprint summarises the standard objects and the quiesced Deployments (uid and resourceVersion of each):
	// it changes on any write, so a quiet window restarts whenever something undoes the quiesce.
	Fingerprint string

	// MissingTwins are standard objects without a complete private twin of this run (no twin, or its status or
	// managedFields not written yet).
	MissingTwins int
	// PendingRepoints are ownerReferences of other objects that still name an old UID.
	PendingRepoints int
	// VerifyProblems are what Verify found wrong.
	VerifyProblems []string
	// Leftovers are twins of earlier runs still present and not being deleted, LeftoversDeleting those already
	// deleted, and LeftoverDependents the other objects whose ownerReferences name a leftover that has an original.
	Leftovers, LeftoversDeleting, LeftoverDependents int

	// Switched: the hosted control plane namespace is marked for injection, every quiesced Deployment has its
	// replicas back, and every Pod of a CAPI-dependent component not already being deleted carries the sidecar.
	Switched bool
	// WorkloadsAvailable: the quiesced Deployments are Available with all replicas updated.
	WorkloadsAvailable bool
	// UninjectedPods are Pods of CAPI-dependent components without the sidecar (they see the standard groups),
	// terminating ones included; StalePods are those of them not being deleted yet.
	UninjectedPods, StalePods int
	// ProxyProblem says what failed when the migrator read the cluster's objects (get, list, watch) through the
	// proxy's translation, as the sidecars do ("" when every read worked). Switching observes it.
	ProxyProblem string

	// PrivateClusterExists and PrivateClusterPaused describe the private twin of the Cluster.
	PrivateClusterExists bool
	PrivateClusterPaused bool
	// Unhealthy says why Resuming's health check is not green ("" when green).
	Unhealthy string
	// BornObjects are private objects that are no twin: created by a controller after Resuming began.
	BornObjects []string

	// OldObjects are the standard objects this run copied (with a twin) still present and not yet being deleted
	// (CleaningUp removes them); OldDeleting those already deleted and waiting for the garbage collector's orphan
	// finalizer.
	OldObjects, OldDeleting int

	// ProxiedReplicas is the desired replicas of Deployments with the proxy injected, ProxiedPods their pods.
	ProxiedReplicas int
	ProxiedPods     int
	// TwinDependents are objects other than twins whose ownerReferences name a twin of this run.
	TwinDependents int
	// Twins are the twins of this run still present and not yet being deleted; TwinsDeleting those already
	// deleted and waiting for the garbage collector (or, in the enhancement's order, for controllers).
	Twins, TwinsDeleting int
	// LegacyRestored: no Deployment has the proxy injected, every recorded replica count is restored and the
	// standard Cluster is unpaused.
	LegacyRestored bool
}

// Kind is what an Action does.
type Kind string

// Action kinds. Pure annotation changes carry only Changes; the others name I/O the controller performs after
// persisting Changes (if any).
const (
	// Idle: nothing to do for this HostedCluster until it changes.
	Idle Kind = "Idle"
	// Wait: nothing to do now; look again after RequeueAfter.
	Wait Kind = "Wait"
	// Persist: only the annotation Changes (lock, phase start, windows, commit, finish, rollback start, failure).
	Persist Kind = "Persist"

	PauseLegacyCluster   Kind = "PauseLegacyCluster"   // set spec.paused on the standard Cluster
	ScaleDownLegacy      Kind = "ScaleDownLegacy"      // record replicas and scale the quiesced Deployments to 0
	RepointFromLeftovers Kind = "RepointFromLeftovers" // ownerReferences to an earlier run's twins → the old objects
	RemoveLeftovers      Kind = "RemoveLeftovers"      // remove an earlier run's twins without triggering deletes
	CopyTwins            Kind = "CopyTwins"            // create the missing twins, owners first
	RepointToTwins       Kind = "RepointToTwins"       // ownerReferences to old UIDs → the twins
	Switch               Kind = "Switch"               // mark for injection, restart uninjected pods, restore replicas
	UnpausePrivate       Kind = "UnpausePrivate"       // clear spec.paused on the private Cluster
	DeleteOld            Kind = "DeleteOld"            // remove the standard objects without triggering deletes

	StopProxied   Kind = "StopProxied"   // rollback 2: scale the proxied Deployments to 0
	PausePrivate  Kind = "PausePrivate"  // rollback 3: set spec.paused on the private Cluster
	RepointToOld  Kind = "RepointToOld"  // rollback 4: ownerReferences to twins → the old objects
	DeleteTwins   Kind = "DeleteTwins"   // rollback 5: remove the twins without triggering deletes
	RestoreLegacy Kind = "RestoreLegacy" // rollback 6: unmark, restart injected pods, restore replicas, unpause
)

// Action is Step's decision.
type Action struct {
	Kind Kind
	// Changes are persisted on the HostedCluster before Kind's I/O runs (a phase is persisted when it starts).
	Changes Changes
	// RequeueAfter: when to look again after a Wait (0 otherwise).
	RequeueAfter time.Duration
	// Why explains the decision (logs, events, `migrate status`).
	Why string
}

func (a Action) String() string {
	if a.Why == "" {
		return string(a.Kind)
	}
	return string(a.Kind) + ": " + a.Why
}

// Step decides the next action for a HostedCluster in state s, given o. It is pure and total: every state has an
// answer, so a controller killed anywhere resumes from what it persisted and observes.
//
// Every phase has a deadline (Config.Deadline) counted from its persisted start, which no action resets. It is
// checked before anything else, so an actor undoing the migrator's work cannot keep a phase going: before Committed
// a missed deadline rolls back; a rollback that misses its own gives up safely (giveUp); after Committed the phase
// keeps retrying with back-off and reports itself stalled.
func Step(s State, o Observation, c Config) Action {
	if s.Phase == PhaseNone && !s.Locked {
		return idle(s, o, c)
	}
	if s.Phase == PhaseRollingBack {
		return rollback(s, o, c)
	}
	phase := s.Phase
	if phase == PhaseNone { // locked without a phase: only a hand edit does this; treat it as just locked
		phase = PhaseLocked
	}
	switch {
	case phase.BeforeCommit():
		return forward(s, o, c, phase)
	case phase == PhaseCommitted || phase == PhaseCleaningUp:
		return cleanup(s, o, c, phase)
	}
	// An unknown phase (a hand edit or a newer version): wait rather than guess.
	return wait(c.Poll, fmt.Sprintf("unknown phase %q", s.Phase))
}

// forward drives phases Locked to Resuming.
func forward(s State, o Observation, c Config, phase Phase) Action {
	switch {
	case s.Deleting:
		return beginRollback(s, o, ReasonHostedClusterDeleted)
	case phase == PhaseLocked:
		return enter(PhaseQuiescing, o)
	case s.PhaseStarted.IsZero():
		return restartDeadline(o)
	case Overdue(s, o.Now, c) > 0:
		a := beginRollback(s, o, timeoutReason(phase))
		if phase == PhaseResuming && o.Unhealthy != "" {
			a.Why += " (" + o.Unhealthy + ")"
		}
		return a
	case !o.WebhookHealthy:
		if o.Now.Sub(s.PhaseStarted) > c.WebhookGrace {
			return beginRollback(s, o, ReasonWebhookUnavailable)
		}
		return wait(c.Poll, "the conversion webhook or the private CRDs are not healthy")
	}
	switch phase {
	case PhaseQuiescing:
		return quiesce(s, o, c)
	case PhaseCopying:
		return copying(s, o, c)
	case PhaseRepointing:
		switch {
		case o.DiscoveryIncomplete != "":
			return wait(c.Poll, "discovery incomplete ("+o.DiscoveryIncomplete+"): cannot see every owner reference")
		case o.PendingRepoints > 0:
			return Action{Kind: RepointToTwins, Why: fmt.Sprintf("%d ownerReferences name old UIDs", o.PendingRepoints)}
		}
		return enter(PhaseVerifying, o)
	case PhaseVerifying:
		switch {
		case o.Fingerprint != s.QuietFingerprint:
			return beginRollback(s, o, ReasonExternalWriter)
		case o.DiscoveryIncomplete != "":
			return wait(c.Poll, "discovery incomplete ("+o.DiscoveryIncomplete+"): cannot see every owner reference")
		case o.MissingTwins > 0 || o.PendingRepoints > 0 || len(o.VerifyProblems) > 0:
			return beginRollback(s, o, ReasonVerifyMismatch)
		}
		return enter(PhaseSwitching, o)
	case PhaseSwitching:
		switch {
		case !o.Switched:
			return Action{Kind: Switch, Why: fmt.Sprintf("mark the namespace for injection, restart %d pods without the proxy, restore replicas", o.StalePods)}
		case !o.WorkloadsAvailable:
			return wait(c.Poll, "proxied workloads not Available yet")
		case o.ProxyProblem != "":
			return wait(c.Poll, "reading through the proxy failed: "+o.ProxyProblem)
		}
		return enter(PhaseResuming, o)
	}
	return resume(s, o, c)
}

// idle decides for a HostedCluster no run holds: wait, report what blocks it, or lock it.
func idle(s State, o Observation, c Config) Action {
	switch {
	case s.Failed != "":
		return Action{Kind: Idle, Why: fmt.Sprintf("migration failed (%s): remove %s to retry", s.Failed, FailedAnnotation)}
	case s.PrivateTypes:
		return Action{Kind: Idle, Why: "uses the private types"}
	case !s.Legacy:
		return Action{Kind: Idle, Why: "not a legacy HostedCluster (unclassified, or another operator's scope)"}
	case s.Deleting:
		return Action{Kind: Idle, Why: "being deleted"}
	case o.OtherLocked != "":
		return wait(c.Poll, "migration of "+o.OtherLocked+" in progress")
	case !o.WebhookHealthy:
		return wait(c.Poll, "the conversion webhook or the private CRDs are not healthy")
	case o.DiscoveryIncomplete != "":
		return wait(c.Poll, "discovery incomplete ("+o.DiscoveryIncomplete+"): the migration could not see every object")
	}
	if blocks := Blocking(o.Blocks, s.Override); len(blocks) > 0 {
		return blocked(s, o, c, blocks)
	}
	return Action{Kind: Persist, Why: "lock", Changes: Changes{
		Set: map[string]string{
			ScopeAnnotation: ScopeMigrating, InProgressAnnotation: "true", PhaseAnnotation: string(PhaseLocked),
			IDAnnotation: o.NewID, StartedAnnotation: formatTime(o.Now), PhaseStartedAnnotation: formatTime(o.Now),
		},
		Remove: []string{BlockedAnnotation, BlockedSinceAnnotation},
	}}
}

// OverduePrefix starts BlockedAnnotation's value once a HostedCluster has been blocked longer than
// Config.BlockedTimeout.
const OverduePrefix = "overdue; "

// blocked reports blocks on the HostedCluster (BlockedAnnotation, rewritten only when the set of blocks changes
// or the block becomes overdue) and waits.
func blocked(s State, o Observation, c Config, blocks []Block) Action {
	since := s.BlockedSince
	if s.Blocked == "" || since.IsZero() {
		since = o.Now
	}
	summary := Summary(blocks)
	if o.Now.Sub(since) > c.BlockedTimeout {
		summary = OverduePrefix + summary
	}
	details := make([]string, len(blocks))
	for i, b := range blocks {
		details[i] = b.String()
	}
	why := "blocked: " + strings.Join(details, "; ")
	if ignored := IgnoredOverrides(s.Override); len(ignored) > 0 {
		why += fmt.Sprintf(" (override of %s ignored: not waitable)", strings.Join(ignored, ", "))
	}
	if summary != s.Blocked || !since.Equal(s.BlockedSince) {
		return Action{Kind: Persist, Why: why, Changes: Changes{Set: map[string]string{
			BlockedAnnotation: summary, BlockedSinceAnnotation: formatTime(since)}}}
	}
	return wait(c.Poll, why)
}

func quiesce(s State, o Observation, c Config) Action {
	switch {
	case !o.LegacyClusterPaused:
		return Action{Kind: PauseLegacyCluster, Why: "pause the standard Cluster"}
	case !o.LegacyScaledDown:
		return Action{Kind: ScaleDownLegacy, Why: "scale the legacy controllers to 0"}
	case o.LegacyPods > 0:
		return wait(c.Poll, fmt.Sprintf("%d legacy pods still running", o.LegacyPods))
	case o.Fingerprint != s.QuietFingerprint || s.QuietSince.IsZero():
		return Action{Kind: Persist, Why: "start the quiet window",
			Changes: Changes{Set: map[string]string{QuietAnnotation: FormatQuiet(o.Fingerprint, o.Now)}}}
	}
	if quiet := o.Now.Sub(s.QuietSince); quiet < c.QuietWindow {
		return wait(min(c.QuietWindow-quiet, c.Poll), "quiet window")
	}
	if blocks := Blocking(o.Blocks, s.Override); len(blocks) > 0 {
		a := beginRollback(s, o, ReasonPreconditionChanged)
		a.Why += " (" + Summary(blocks) + ")"
		return a
	}
	return enter(PhaseCopying, o)
}

// copying first removes what an earlier run's incomplete rollback left (their names are the ones the copy needs),
// then creates the twins.
func copying(s State, o Observation, c Config) Action {
	switch {
	case o.DiscoveryIncomplete != "" && o.Leftovers > 0:
		return wait(c.Poll, "discovery incomplete ("+o.DiscoveryIncomplete+"): cannot see every owner of the leftovers")
	case o.LeftoverDependents > 0:
		return Action{Kind: RepointFromLeftovers, Why: fmt.Sprintf("%d objects are owned by an earlier run's twins", o.LeftoverDependents)}
	case o.Leftovers > 0:
		return Action{Kind: RemoveLeftovers, Why: fmt.Sprintf("%d twins of earlier runs left", o.Leftovers)}
	case o.LeftoversDeleting > 0:
		return wait(min(c.Poll, time.Second), fmt.Sprintf("%d twins of earlier runs being removed", o.LeftoversDeleting))
	case len(s.LeftoverRuns) > 0:
		return Action{Kind: Persist, Why: "the earlier runs' twins are gone", Changes: Changes{Remove: []string{LeftoversAnnotation}}}
	case o.MissingTwins > 0:
		return Action{Kind: CopyTwins, Why: fmt.Sprintf("%d objects have no complete private twin", o.MissingTwins)}
	}
	return enter(PhaseRepointing, o)
}

func resume(s State, o Observation, c Config) Action {
	switch {
	case len(o.BornObjects) > 0:
		a := beginRollback(s, o, ReasonBornObjects)
		a.Why += " (" + strings.Join(o.BornObjects, ", ") + ")"
		return a
	case o.PrivateClusterPaused:
		return Action{Kind: UnpausePrivate, Why: "unpause the private Cluster"}
	case o.Unhealthy != "":
		a := wait(c.Poll, "not green: "+o.Unhealthy)
		if !s.GreenSince.IsZero() {
			a.Kind, a.Changes = Persist, Changes{Remove: []string{GreenAnnotation}}
		}
		return a
	case s.GreenSince.IsZero():
		return Action{Kind: Persist, Why: "green", Changes: Changes{Set: map[string]string{GreenAnnotation: formatTime(o.Now)}}}
	}
	if green := o.Now.Sub(s.GreenSince); green < c.HealthWindow {
		return wait(min(c.HealthWindow-green, c.Poll), "health window")
	}
	return Action{Kind: Persist, Why: "commit: no rollback after this point", Changes: Changes{
		Set: map[string]string{
			PrivateTypesAnnotation: "true", PhaseAnnotation: string(PhaseCommitted), PhaseStartedAnnotation: formatTime(o.Now),
		},
		// Without a scope the HostedCluster is the default (private) operator's.
		Remove: []string{ScopeAnnotation, GreenAnnotation},
	}}
}

// cleanup drives Committed and CleaningUp. They cannot roll back: past the deadline the phase keeps retrying with
// back-off (Retry) and reports itself stalled once (StalledAnnotation). Nothing here stops a controller: the proxied
// ones keep running throughout.
func cleanup(s State, o Observation, c Config, phase Phase) Action {
	if phase == PhaseCommitted {
		return enter(PhaseCleaningUp, o)
	}
	if s.PhaseStarted.IsZero() {
		return restartDeadline(o)
	}
	var a Action
	switch {
	case !o.LegacyClusterPaused:
		a = Action{Kind: PauseLegacyCluster, Why: "the standard Cluster must stay paused until it is gone"}
	case o.StalePods > 0:
		a = Action{Kind: Switch, Why: fmt.Sprintf("restart %d pods of CAPI-dependent components without the proxy", o.StalePods)}
	case o.UninjectedPods > 0:
		a = wait(c.Poll, fmt.Sprintf("%d pods of CAPI-dependent components still run without the proxy", o.UninjectedPods))
	case o.OldObjects > 0:
		a = Action{Kind: DeleteOld, Why: fmt.Sprintf("%d standard objects left", o.OldObjects)}
	case o.OldDeleting > 0:
		a = wait(min(c.Poll, time.Second), fmt.Sprintf("%d standard objects being removed by the garbage collector", o.OldDeleting))
	default:
		return Action{Kind: Persist, Changes: finish(), Why: "migrated"}
	}
	if Overdue(s, o.Now, c) <= 0 {
		return a
	}
	if s.Stalled == "" {
		return stall(phase, c, a.Why)
	}
	if a.Kind == Wait {
		a.RequeueAfter = Retry(s, o.Now, c)
	}
	return a
}

// stall persists why phase is past its deadline.
func stall(phase Phase, c Config, why string) Action {
	v := fmt.Sprintf("%s past its %s deadline: %s", phase, c.Deadline(phase), why)
	if len(v) > maxSummary {
		v = v[:maxSummary-3] + "..."
	}
	return Action{Kind: Persist, Why: "stalled: " + v, Changes: Changes{Set: map[string]string{StalledAnnotation: v}}}
}

// Fail decides what a failed action means (reason says why; permanent: no retry can fix it, e.g. an admission
// denial). Before Committed a permanent failure rolls back and a transient one is retried (the phase's deadline
// bounds the retries). After Committed, and in a rollback, every failure is retried with back-off, and once the
// phase is past its deadline it is reported stalled.
func Fail(s State, o Observation, c Config, reason string, permanent bool) Action {
	switch {
	case !s.InRun():
		return wait(c.Poll, "retry after "+reason)
	case s.Phase == PhaseRollingBack || !s.Phase.BeforeCommit() && s.Phase != PhaseNone:
		if Overdue(s, o.Now, c) > 0 && s.Stalled == "" {
			return stall(s.Phase, c, reason)
		}
		return wait(Retry(s, o.Now, c), "retry after "+reason)
	case !permanent:
		return wait(c.Poll, "retry after "+reason)
	}
	return beginRollback(s, o, reason)
}

func beginRollback(s State, o Observation, reason string) Action {
	from := s.Phase
	if from == PhaseNone {
		from = PhaseLocked
	}
	return Action{Kind: Persist, Why: "roll back: " + reason, Changes: Changes{Set: map[string]string{
		PhaseAnnotation: string(PhaseRollingBack), PhaseStartedAnnotation: formatTime(o.Now),
		RollbackAnnotation: reason, RollbackFromAnnotation: string(from),
	}}}
}

func enter(p Phase, o Observation) Action {
	return Action{Kind: Persist, Why: "enter " + string(p), Changes: Changes{
		Set:    map[string]string{PhaseAnnotation: string(p), PhaseStartedAnnotation: formatTime(o.Now)},
		Remove: []string{StalledAnnotation},
	}}
}

// restartDeadline records a phase start that is missing or unreadable (a hand edit): the deadline counts from now.
func restartDeadline(o Observation) Action {
	return Action{Kind: Persist, Why: "no readable phase start: the phase's deadline counts from now",
		Changes: Changes{Set: map[string]string{PhaseStartedAnnotation: formatTime(o.Now)}}}
}

func finish() Changes {
	return Changes{Remove: append(slices.Clone(migrationAnnotations), OverrideAnnotation, LeftoversAnnotation)}
}

func wait(d time.Duration, why string) Action {
	if d <= 0 {
		d = time.Second
	}
	return Action{Kind: Wait, RequeueAfter: d, Why: why}
}
