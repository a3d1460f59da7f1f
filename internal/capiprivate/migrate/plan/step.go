package plan

import (
	"fmt"
	"slices"
	"strings"
	"time"
)

// Phase is a migration phase (reference §8.3), persisted in PhaseAnnotation when it starts.
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

// Config holds the state machine's windows and timeouts (reference §8.3 defaults from DefaultConfig).
type Config struct {
	QuietWindow    time.Duration // Quiescing: how long nothing but the migrator may write the standard objects
	QuiesceTimeout time.Duration // Quiescing: how long the legacy pods may take to go and the window to hold
	SwitchTimeout  time.Duration // Switching: how long the proxied workloads may take to become Available
	HealthWindow   time.Duration // Resuming: how long the cluster must stay continuously green
	ResumeTimeout  time.Duration // Resuming: how long it may take to get there
	WebhookGrace   time.Duration // a locked phase waits this long for an unhealthy webhook before rolling back
	Poll           time.Duration // how soon a Wait is re-evaluated at most

	// EnhancementRollbackOrder replaces the safe rollback order with the enhancement's (delete the private copies
	// while the proxied controllers still run). It exists only so a test can show that order deletes instances;
	// never set it anywhere else.
	EnhancementRollbackOrder bool
}

// DefaultConfig is the reference's timing.
func DefaultConfig() Config {
	return Config{
		QuietWindow: 15 * time.Second, QuiesceTimeout: 5 * time.Minute, SwitchTimeout: 10 * time.Minute,
		HealthWindow: 30 * time.Second, ResumeTimeout: 5 * time.Minute, WebhookGrace: 2 * time.Minute,
		Poll: 10 * time.Second,
	}
}

// Observation is what the controller saw of one hosted cluster just before asking Step. Counts are over the
// hosted control plane namespace.
type Observation struct {
	Now time.Time
	// NewID is the run id Lock would use (the controller makes one up; Step stays deterministic).
	NewID string

	// PreconditionFailures are the §8.2 preconditions that do not hold (Preconditions computes them).
	PreconditionFailures []string
	// WebhookHealthy: the private CRDs are Established and the conversion probe passes.
	WebhookHealthy bool
	// OtherLocked names another HostedCluster that holds the lock ("" when none).
	OtherLocked string

	// LegacyClusterPaused: the standard Cluster exists and carries spec.paused (or none exists).
	LegacyClusterPaused bool
	// LegacyScaledDown: every quiesced Deployment has recorded its replicas and is at 0 (or is proxied).
	LegacyScaledDown bool
	// LegacyPods are pods of quiesced Deployments running without the proxy.
	LegacyPods int
	// Fingerprint summarises the standard objects (uid and resourceVersion of each): it changes on any write.
	Fingerprint string

	// MissingTwins are standard objects without a private twin of this run.
	MissingTwins int
	// PendingRepoints are ownerReferences of other objects that still name an old UID.
	PendingRepoints int
	// VerifyProblems are what Verify found wrong.
	VerifyProblems []string

	// Switched: every quiesced Deployment runs with the proxy injected and its replicas restored.
	Switched bool
	// WorkloadsAvailable: those Deployments are Available with all replicas updated.
	WorkloadsAvailable bool

	// PrivateClusterExists and PrivateClusterPaused describe the private twin of the Cluster.
	PrivateClusterExists bool
	PrivateClusterPaused bool
	// Unhealthy says why Resuming's health check is not green ("" when green).
	Unhealthy string
	// BornObjects are private objects without MigratedFromUIDAnnotation: created by a controller after Resuming.
	BornObjects []string

	// OldObjects are the standard objects still present and not yet being deleted (CleaningUp removes them);
	// OldDeleting those already deleted and waiting for the garbage collector's orphan finalizer.
	OldObjects, OldDeleting int

	// ProxiedReplicas is the desired replicas of Deployments with the proxy injected, ProxiedPods their pods.
	ProxiedReplicas int
	ProxiedPods     int
	// TwinDependents are objects other than twins whose ownerReferences name a twin.
	TwinDependents int
	// Twins are the private twins of this run still present and not yet being deleted; TwinsDeleting those
	// already deleted and waiting for the garbage collector (or, in the enhancement's order, for controllers).
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

	PauseLegacyCluster Kind = "PauseLegacyCluster" // set spec.paused on the standard Cluster
	ScaleDownLegacy    Kind = "ScaleDownLegacy"    // record replicas and scale the quiesced Deployments to 0
	CopyTwins          Kind = "CopyTwins"          // create the missing twins, owners first
	RepointToTwins     Kind = "RepointToTwins"     // ownerReferences to old UIDs → the twins
	Switch             Kind = "Switch"             // inject the proxy and restore replicas
	UnpausePrivate     Kind = "UnpausePrivate"     // clear spec.paused on the private Cluster
	DeleteOld          Kind = "DeleteOld"          // remove the standard objects without triggering deletes

	StopProxied   Kind = "StopProxied"   // rollback 2: scale the proxied Deployments to 0
	PausePrivate  Kind = "PausePrivate"  // rollback 3: set spec.paused on the private Cluster
	RepointToOld  Kind = "RepointToOld"  // rollback 4: ownerReferences to twins → the old objects
	DeleteTwins   Kind = "DeleteTwins"   // rollback 5: remove the twins without triggering deletes
	RestoreLegacy Kind = "RestoreLegacy" // rollback 6: remove the injection, restore replicas, unpause
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
	if s.Deleting && phase.BeforeCommit() {
		return beginRollback(s, o, ReasonHostedClusterDeleted)
	}
	age := o.Now.Sub(s.PhaseStarted)
	if phase.BeforeCommit() && phase != PhaseLocked && !o.WebhookHealthy {
		if age > c.WebhookGrace {
			return beginRollback(s, o, ReasonWebhookUnavailable)
		}
		return wait(c.Poll, "the conversion webhook or the private CRDs are not healthy")
	}
	switch phase {
	case PhaseLocked:
		return enter(PhaseQuiescing, o)
	case PhaseQuiescing:
		return quiesce(s, o, c, age)
	case PhaseCopying:
		if o.MissingTwins > 0 {
			return Action{Kind: CopyTwins, Why: fmt.Sprintf("%d objects have no private twin", o.MissingTwins)}
		}
		return enter(PhaseRepointing, o)
	case PhaseRepointing:
		if o.PendingRepoints > 0 {
			return Action{Kind: RepointToTwins, Why: fmt.Sprintf("%d ownerReferences name old UIDs", o.PendingRepoints)}
		}
		return enter(PhaseVerifying, o)
	case PhaseVerifying:
		switch {
		case o.Fingerprint != s.QuietFingerprint:
			return beginRollback(s, o, ReasonExternalWriter)
		case o.MissingTwins > 0 || o.PendingRepoints > 0 || len(o.VerifyProblems) > 0:
			return beginRollback(s, o, ReasonVerifyMismatch)
		}
		return enter(PhaseSwitching, o)
	case PhaseSwitching:
		switch {
		case !o.Switched:
			return Action{Kind: Switch, Why: "inject the proxy and restore replicas"}
		case !o.WorkloadsAvailable && age > c.SwitchTimeout:
			return beginRollback(s, o, ReasonSwitchTimeout)
		case !o.WorkloadsAvailable:
			return wait(c.Poll, "proxied workloads not Available yet")
		}
		return enter(PhaseResuming, o)
	case PhaseResuming:
		return resume(s, o, c, age)
	case PhaseCommitted:
		return enter(PhaseCleaningUp, o)
	case PhaseCleaningUp:
		switch {
		case !o.LegacyClusterPaused:
			return Action{Kind: PauseLegacyCluster, Why: "the standard Cluster must stay paused until it is gone"}
		case o.LegacyPods > 0:
			return wait(c.Poll, fmt.Sprintf("%d pods still run without the proxy", o.LegacyPods))
		case o.OldObjects > 0:
			return Action{Kind: DeleteOld, Why: fmt.Sprintf("%d standard objects left", o.OldObjects)}
		case o.OldDeleting > 0:
			return wait(min(c.Poll, time.Second), fmt.Sprintf("%d standard objects being removed by the garbage collector", o.OldDeleting))
		}
		return Action{Kind: Persist, Changes: finish(), Why: "migrated"}
	}
	// An unknown phase (a hand edit or a newer version): wait rather than guess.
	return wait(c.Poll, fmt.Sprintf("unknown phase %q", s.Phase))
}

func idle(s State, o Observation, c Config) Action {
	switch {
	case s.Failed != "":
		return Action{Kind: Idle, Why: fmt.Sprintf("migration failed (%s): remove %s to retry", s.Failed, FailedAnnotation)}
	case s.PrivateTypes:
		return Action{Kind: Idle, Why: "uses the private types"}
	case !s.Legacy:
		return Action{Kind: Idle, Why: "not classified yet"}
	case s.Deleting:
		return Action{Kind: Idle, Why: "being deleted"}
	case o.OtherLocked != "":
		return wait(c.Poll, "migration of "+o.OtherLocked+" in progress")
	case !o.WebhookHealthy:
		return wait(c.Poll, "the conversion webhook or the private CRDs are not healthy")
	case len(o.PreconditionFailures) > 0:
		return wait(c.Poll, "preconditions: "+strings.Join(o.PreconditionFailures, "; "))
	}
	return Action{Kind: Persist, Why: "lock", Changes: Changes{Set: map[string]string{
		InProgressAnnotation: "true", PhaseAnnotation: string(PhaseLocked), IDAnnotation: o.NewID,
		StartedAnnotation: formatTime(o.Now), PhaseStartedAnnotation: formatTime(o.Now),
	}}}
}

func quiesce(s State, o Observation, c Config, age time.Duration) Action {
	switch {
	case !o.LegacyClusterPaused:
		return Action{Kind: PauseLegacyCluster, Why: "pause the standard Cluster"}
	case !o.LegacyScaledDown:
		return Action{Kind: ScaleDownLegacy, Why: "scale the legacy controllers to 0"}
	case o.LegacyPods > 0 && age > c.QuiesceTimeout:
		return beginRollback(s, o, ReasonQuiesceTimeout)
	case o.LegacyPods > 0:
		return wait(c.Poll, fmt.Sprintf("%d legacy pods still running", o.LegacyPods))
	case o.Fingerprint != s.QuietFingerprint || s.QuietSince.IsZero():
		if age > c.QuiesceTimeout {
			return beginRollback(s, o, ReasonExternalWriter)
		}
		return Action{Kind: Persist, Why: "start the quiet window",
			Changes: Changes{Set: map[string]string{QuietAnnotation: FormatQuiet(o.Fingerprint, o.Now)}}}
	}
	if quiet := o.Now.Sub(s.QuietSince); quiet < c.QuietWindow {
		return wait(min(c.QuietWindow-quiet, c.Poll), "quiet window")
	}
	if len(o.PreconditionFailures) > 0 {
		return beginRollback(s, o, ReasonPreconditionChanged)
	}
	return enter(PhaseCopying, o)
}

func resume(s State, o Observation, c Config, age time.Duration) Action {
	switch {
	case len(o.BornObjects) > 0:
		return beginRollback(s, o, ReasonBornObjects)
	case o.PrivateClusterPaused:
		return Action{Kind: UnpausePrivate, Why: "unpause the private Cluster"}
	case o.Unhealthy != "":
		if age > c.ResumeTimeout {
			a := beginRollback(s, o, ReasonHealthCheckTimeout)
			a.Why += " (" + o.Unhealthy + ")"
			return a
		}
		a := wait(c.Poll, "not green: "+o.Unhealthy)
		if !s.GreenSince.IsZero() {
			a.Kind, a.Changes = Persist, Changes{Remove: []string{GreenAnnotation}}
		}
		return a
	case s.GreenSince.IsZero():
		return Action{Kind: Persist, Why: "green", Changes: Changes{Set: map[string]string{GreenAnnotation: formatTime(o.Now)}}}
	}
	if green := o.Now.Sub(s.GreenSince); green < c.HealthWindow {
		if age > c.ResumeTimeout+c.HealthWindow {
			return beginRollback(s, o, ReasonHealthCheckTimeout)
		}
		return wait(min(c.HealthWindow-green, c.Poll), "health window")
	}
	return Action{Kind: Persist, Why: "commit: no rollback after this point", Changes: Changes{
		Set: map[string]string{
			PrivateTypesAnnotation: "true", PhaseAnnotation: string(PhaseCommitted), PhaseStartedAnnotation: formatTime(o.Now),
		},
		Remove: []string{ScopeAnnotation, GreenAnnotation},
	}}
}

// rollback undoes a run in the safe order (reference §8.5): first nothing acts on the private objects any more,
// then the dependents go back to the old objects, then the twins are removed (with nothing left to act on their
// deletion), and only then do the legacy controllers come back.
func rollback(s State, o Observation, c Config) Action {
	if c.EnhancementRollbackOrder {
		return enhancementRollback(s, o, c)
	}
	switch {
	case o.ProxiedReplicas > 0:
		return Action{Kind: StopProxied, Why: "stop the proxied controllers first"}
	case o.ProxiedPods > 0:
		return wait(min(c.Poll, time.Second), fmt.Sprintf("%d proxied pods still running", o.ProxiedPods))
	case o.PrivateClusterExists && !o.PrivateClusterPaused:
		return Action{Kind: PausePrivate, Why: "pause the private Cluster"}
	case o.TwinDependents > 0:
		return Action{Kind: RepointToOld, Why: fmt.Sprintf("%d objects are owned by twins", o.TwinDependents)}
	case o.Twins > 0:
		return Action{Kind: DeleteTwins, Why: fmt.Sprintf("%d twins left", o.Twins)}
	case o.TwinsDeleting > 0:
		return wait(min(c.Poll, time.Second), fmt.Sprintf("%d twins being removed", o.TwinsDeleting))
	case !o.LegacyRestored:
		return Action{Kind: RestoreLegacy, Why: "give the cluster back to the legacy controllers"}
	}
	reason := s.Rollback
	if reason == "" {
		reason = "unknown"
	}
	set := map[string]string{FailedAnnotation: reason, ScopeAnnotation: ScopeLegacy}
	return Action{Kind: Persist, Why: "rolled back: " + reason,
		Changes: Changes{Set: set, Remove: append(slices.Clone(migrationAnnotations), PrivateTypesAnnotation)}}
}

// enhancementRollback is the enhancement's order: delete the private objects, then restore the legacy control,
// with the proxied controllers still running while the private objects are deleted. Kept only for the test that
// shows why it is unsafe.
func enhancementRollback(s State, o Observation, c Config) Action {
	switch {
	case o.TwinDependents > 0:
		return Action{Kind: RepointToOld, Why: "(enhancement order) repoint"}
	case o.Twins > 0:
		return Action{Kind: DeleteTwins, Why: "(enhancement order) delete the private objects first"}
	case o.TwinsDeleting > 0:
		return wait(min(c.Poll, time.Second), "(enhancement order) the private objects' deletion is under way")
	case o.ProxiedReplicas > 0:
		return Action{Kind: StopProxied, Why: "(enhancement order) stop the proxied controllers"}
	}
	c.EnhancementRollbackOrder = false
	return rollback(s, o, c)
}

// Fail decides what a failed action means (reason is one of the Reason constants): before Committed the run rolls
// back; after it, and during a rollback, the action is retried.
func Fail(s State, o Observation, c Config, reason string) Action {
	if s.Phase == PhaseRollingBack || (s.Phase != PhaseNone && !s.Phase.BeforeCommit()) || (s.Phase == PhaseNone && !s.Locked) {
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
	return Action{Kind: Persist, Why: "enter " + string(p), Changes: Changes{Set: map[string]string{
		PhaseAnnotation: string(p), PhaseStartedAnnotation: formatTime(o.Now),
	}}}
}

func finish() Changes { return Changes{Remove: slices.Clone(migrationAnnotations)} }

func wait(d time.Duration, why string) Action {
	if d <= 0 {
		d = time.Second
	}
	return Action{Kind: Wait, RequeueAfter: d, Why: why}
}
