package plan

import (
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"
)

var t0 = time.Date(2026, 11, 23, 12, 0, 0, 0, time.UTC)

// world is a model of one hosted cluster that the actions change as the controller's I/O would: enough to run the
// state machine end to end, crash it anywhere, and check what it did in which order.
type world struct {
	annotations map[string]string
	now         time.Time

	legacyPaused, scaledDown bool
	legacyPods               int
	old, twins, repoints     int
	switched, available      bool
	proxiedReplicas          int
	proxiedPods              int
	privatePaused            bool
	twinDependents           int
	restored                 bool
	healthy                  bool
	webhook                  bool
	writes                   int // bumps the fingerprint
	denyCopy                 bool

	// history of executed I/O kinds
	log []Kind
}

func newWorld() *world {
	return &world{annotations: map[string]string{ScopeAnnotation: ScopeLegacy}, now: t0, old: 6, healthy: true,
		webhook: true, restored: true}
}

func (w *world) observe() Observation {
	fp := fmt.Sprintf("fp%d", w.writes)
	o := Observation{
		Now: w.now, NewID: "run1", WebhookHealthy: w.webhook,
		LegacyClusterPaused: w.legacyPaused || w.old == 0, LegacyScaledDown: w.scaledDown, LegacyPods: w.legacyPods,
		Fingerprint: fp, MissingTwins: w.old - w.twins, PendingRepoints: w.repoints,
		Switched: w.switched, WorkloadsAvailable: w.available, PrivateClusterExists: w.twins > 0,
		PrivateClusterPaused: w.privatePaused, OldObjects: w.old, ProxiedReplicas: w.proxiedReplicas,
		ProxiedPods: w.proxiedPods, TwinDependents: w.twinDependents, Twins: w.twins, LegacyRestored: w.restored,
	}
	if w.old == 0 { // after clean-up the twins are the only objects; nothing is missing
		o.MissingTwins = 0
	}
	if !w.healthy {
		o.Unhealthy = "MachineDeployment not ready"
	}
	return o
}

// exec performs a's I/O on the world (Changes are persisted first, as the controller does).
func (w *world) persist(a Action) { w.annotations = a.Changes.Apply(w.annotations) }

func (w *world) exec(a Action) error {
	if a.Kind != Persist && a.Kind != Wait && a.Kind != Idle {
		w.log = append(w.log, a.Kind)
	}
	switch a.Kind {
	case PauseLegacyCluster:
		w.legacyPaused = true
	case ScaleDownLegacy:
		w.scaledDown, w.restored = true, false
		w.legacyPods = 0
	case CopyTwins:
		if w.denyCopy {
			w.twins++ // the first twins are created, then the denial
			return fmt.Errorf("denied")
		}
		w.twins = w.old
		w.privatePaused = true // copied from the paused legacy Cluster
		w.repoints = 2
	case RepointToTwins:
		w.repoints, w.twinDependents = 0, 2
	case Switch:
		w.switched, w.available, w.proxiedReplicas, w.proxiedPods = true, true, 5, 5
	case UnpausePrivate:
		w.privatePaused = false
	case DeleteOld:
		w.old = 0
	case StopProxied:
		w.proxiedReplicas, w.proxiedPods = 0, 0
	case PausePrivate:
		w.privatePaused = true
	case RepointToOld:
		w.twinDependents, w.repoints = 0, 0
	case DeleteTwins:
		w.twins = 0
	case RestoreLegacy:
		w.restored, w.legacyPaused, w.scaledDown, w.switched = true, false, false, false
	}
	return nil
}

// run drives Step until Idle (or too many steps). crashAt ≥ 0 drops the I/O of that step (a kill after the
// annotations were persisted and before the action ran).
func (w *world) run(t *testing.T, c Config, crashAt int) {
	t.Helper()
	for i := range 400 {
		s := ReadState(w.annotations, false)
		a := Step(s, w.observe(), c)
		if a.Kind == Idle {
			return
		}
		w.persist(a)
		if i != crashAt {
			if err := w.exec(a); err != nil {
				f := Fail(ReadState(w.annotations, false), w.observe(), c, ReasonCreateFailed, true)
				w.persist(f)
			}
		}
		w.now = w.now.Add(5 * time.Second)
	}
	t.Fatalf("no Idle after 400 steps; annotations %v", w.annotations)
}

func fastConfig() Config {
	c := DefaultConfig()
	c.QuietWindow, c.HealthWindow = 10*time.Second, 10*time.Second
	return c
}

func TestHappyPathEndToEnd(t *testing.T) {
	w := newWorld()
	w.run(t, fastConfig(), -1)
	want := []Kind{PauseLegacyCluster, ScaleDownLegacy, CopyTwins, RepointToTwins, Switch, UnpausePrivate, DeleteOld}
	if !slices.Equal(w.log, want) {
		t.Errorf("I/O %v, want %v", w.log, want)
	}
	if w.annotations[PrivateTypesAnnotation] != "true" || len(w.annotations) != 1 {
		t.Errorf("annotations after the run: %v, want only %s", w.annotations, PrivateTypesAnnotation)
	}
	if w.twins != 6 || w.old != 0 {
		t.Errorf("twins %d old %d", w.twins, w.old)
	}
}

// TestCrashResume kills the migrator at every step (after persisting, before the I/O): the run still finishes with
// the same result, and no I/O kind runs in a different order.
func TestCrashResume(t *testing.T) {
	ref := newWorld()
	ref.run(t, fastConfig(), -1)
	for crash := range 40 {
		t.Run(fmt.Sprint(crash), func(t *testing.T) {
			w := newWorld()
			w.run(t, fastConfig(), crash)
			if !maps2Equal(w.annotations, ref.annotations) || w.twins != ref.twins || w.old != ref.old {
				t.Errorf("after a crash at step %d: annotations %v twins %d old %d", crash, w.annotations, w.twins, w.old)
			}
			if !slices.Equal(slices.Compact(slices.Clone(w.log)), ref.log) {
				t.Errorf("I/O order %v, want %v", w.log, ref.log)
			}
		})
	}
}

func maps2Equal(a, b map[string]string) bool {
	if len(a) != len(b) {
		return false
	}
	for k, v := range a {
		if b[k] != v {
			return false
		}
	}
	return true
}

// safeOrder checks the rollback part of log: the proxied controllers stop before any private object is repointed
// away from or deleted, and the legacy controllers return only after the twins are gone.
func safeOrder(log []Kind) error {
	stop := slices.Index(log, StopProxied)
	del := slices.Index(log, DeleteTwins)
	restore := slices.Index(log, RestoreLegacy)
	switched := slices.Contains(log, Switch)
	if del >= 0 && switched && (stop < 0 || stop > del) {
		return fmt.Errorf("twins deleted (step %d) before the proxied controllers stopped (step %d): %v", del, stop, log)
	}
	if restore >= 0 && del > restore {
		return fmt.Errorf("legacy controllers restored (step %d) before the twins were deleted (step %d): %v", restore, del, log)
	}
	return nil
}

// TestRollbackFromEveryPhase fails the run in each phase before Committed and checks the rollback: safe order,
// back to legacy with the reason, twins gone, nothing left locked.
func TestRollbackFromEveryPhase(t *testing.T) {
	cases := []struct {
		name   string
		inject func(w *world, a Action) // called before each step's I/O
		reason string
	}{
		{"hostedcluster deleted while quiescing", nil, ReasonHostedClusterDeleted},
		{"copy denied", func(w *world, a Action) { w.denyCopy = a.Kind == CopyTwins }, ReasonCreateFailed},
		{"external writer", func(w *world, a Action) {
			if a.Kind == RepointToTwins {
				w.writes++
			}
		}, ReasonExternalWriter},
		{"health never green", func(w *world, a Action) {
			if a.Kind == UnpausePrivate {
				w.healthy = false
			}
		}, ReasonHealthCheckTimeout},
		{"switch never available", func(w *world, a Action) {
			if a.Kind == Switch {
				w.proxiedReplicas, w.proxiedPods, w.switched = 5, 5, true
				w.available = false
			}
		}, ReasonSwitchTimeout},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			w := newWorld()
			c := fastConfig()
			deleting := false
			for i := range 400 {
				s := ReadState(w.annotations, deleting)
				a := Step(s, w.observe(), c)
				if a.Kind == Idle {
					break
				}
				if i == 399 {
					t.Fatalf("no Idle; annotations %v", w.annotations)
				}
				w.persist(a)
				if tc.inject != nil {
					tc.inject(w, a)
				}
				if a.Kind == Switch && tc.reason == ReasonSwitchTimeout {
					w.log = append(w.log, Switch)
					w.proxiedReplicas, w.proxiedPods, w.switched, w.available = 5, 5, true, false
				} else if err := w.exec(a); err != nil {
					w.persist(Fail(ReadState(w.annotations, deleting), w.observe(), c, ReasonCreateFailed, true))
				}
				if tc.reason == ReasonHostedClusterDeleted && ReadState(w.annotations, false).Phase == PhaseQuiescing {
					deleting = true
				}
				w.now = w.now.Add(20 * time.Second)
			}
			if got := w.annotations[FailedAnnotation]; got != tc.reason {
				t.Errorf("migration-failed %q, want %q (annotations %v, I/O %v)", got, tc.reason, w.annotations, w.log)
			}
			if w.annotations[ScopeAnnotation] != ScopeLegacy || w.annotations[InProgressAnnotation] != "" || w.annotations[PhaseAnnotation] != "" || w.annotations[PrivateTypesAnnotation] != "" {
				t.Errorf("annotations after rollback: %v", w.annotations)
			}
			if w.twins != 0 || w.old != 6 || !w.restored || w.proxiedPods != 0 {
				t.Errorf("world after rollback: twins %d old %d restored %v proxied pods %d", w.twins, w.old, w.restored, w.proxiedPods)
			}
			if err := safeOrder(w.log); err != nil {
				t.Error(err)
			}
			// A failed cluster stays put until an SRE clears the annotation.
			if a := Step(ReadState(w.annotations, false), w.observe(), c); a.Kind != Idle || !strings.Contains(a.Why, FailedAnnotation) {
				t.Errorf("after the rollback: %v", a)
			}
		})
	}
}

// TestRetryAfterClearingFailed: removing migration-failed (the documented manual step) lets the run start again.
func TestRetryAfterClearingFailed(t *testing.T) {
	w := newWorld()
	w.annotations[FailedAnnotation] = ReasonCreateFailed
	w.run(t, fastConfig(), -1)
	if len(w.log) != 0 {
		t.Fatalf("a failed cluster was touched: %v", w.log)
	}
	delete(w.annotations, FailedAnnotation)
	w.run(t, fastConfig(), -1)
	if w.annotations[PrivateTypesAnnotation] != "true" {
		t.Errorf("retry did not migrate: %v", w.annotations)
	}
}

// TestRollbackNeverDeletesWhileActorsRun is exhaustive over the rollback observations: with proxied replicas
// desired or proxied pods present, the safe order never repoints, pauses or deletes private objects, and it
// restores the legacy controllers only when no twin is left. The enhancement's order fails the same check.
func TestRollbackNeverDeletesWhileActorsRun(t *testing.T) {
	s := State{Locked: true, Phase: PhaseRollingBack, Rollback: ReasonCreateFailed, RollbackFrom: PhaseResuming, Legacy: true, PhaseStarted: t0}
	check := func(c Config) []string {
		var bad []string
		for bits := range 1 << 7 {
			o := Observation{
				Now: t0, ProxiedReplicas: bits & 1 * 3, ProxiedPods: bits >> 1 & 1 * 3,
				PrivateClusterExists: bits>>2&1 == 1, PrivateClusterPaused: bits>>3&1 == 1,
				TwinDependents: bits >> 4 & 1, Twins: bits >> 5 & 1 * 4, LegacyRestored: bits>>6&1 == 1,
			}
			a := Step(s, o, c)
			actors := o.ProxiedReplicas > 0 || o.ProxiedPods > 0
			if actors && (a.Kind == DeleteTwins || a.Kind == RepointToOld || a.Kind == RestoreLegacy) {
				bad = append(bad, fmt.Sprintf("%+v → %s", o, a.Kind))
			}
			if o.Twins > 0 && a.Kind == RestoreLegacy {
				bad = append(bad, fmt.Sprintf("%+v → %s", o, a.Kind))
			}
			if a.Kind == Persist && (o.Twins > 0 || actors || !o.LegacyRestored) {
				bad = append(bad, fmt.Sprintf("%+v → marked failed early", o))
			}
		}
		return bad
	}
	if bad := check(DefaultConfig()); len(bad) > 0 {
		t.Errorf("safe order violated:\n%s", strings.Join(bad, "\n"))
	}
	unsafe := DefaultConfig()
	unsafe.EnhancementRollbackOrder = true
	if bad := check(unsafe); len(bad) == 0 {
		t.Error("the enhancement's order passed the safety check: the check cannot fail")
	}
}

func TestStepTable(t *testing.T) {
	locked := func(p Phase, extra ...string) map[string]string {
		a := map[string]string{InProgressAnnotation: "true", ScopeAnnotation: ScopeMigrating, PhaseAnnotation: string(p),
			IDAnnotation: "run1", PhaseStartedAnnotation: formatTime(t0)}
		for i := 0; i+1 < len(extra); i += 2 {
			a[extra[i]] = extra[i+1]
		}
		return a
	}
	ok := Observation{Now: t0.Add(time.Second), NewID: "run2", WebhookHealthy: true, LegacyClusterPaused: true,
		LegacyScaledDown: true, Fingerprint: "fp", Switched: true, WorkloadsAvailable: true, LegacyRestored: true}
	with := func(f func(*Observation)) Observation { o := ok; f(&o); return o }
	quiet := FormatQuiet("fp", t0.Add(-time.Minute))
	cases := []struct {
		name     string
		ann      map[string]string
		deleting bool
		obs      Observation
		kind     Kind
		phase    Phase  // expected PhaseAnnotation after Changes ("" = unchanged)
		why      string // substring of Why
	}{
		{"unclassified", map[string]string{}, false, ok, Idle, "", "unclassified"},
		{"private", map[string]string{PrivateTypesAnnotation: "true"}, false, ok, Idle, "", "private"},
		{"failed", map[string]string{ScopeAnnotation: ScopeLegacy, FailedAnnotation: "x"}, false, ok, Idle, "", "remove"},
		{"legacy deleting", map[string]string{ScopeAnnotation: ScopeLegacy}, true, ok, Idle, "", "deleted"},
		{"other locked", map[string]string{ScopeAnnotation: ScopeLegacy}, false, with(func(o *Observation) { o.OtherLocked = "a/b" }), Wait, "", "a/b"},
		{"webhook down preflight", map[string]string{ScopeAnnotation: ScopeLegacy}, false, with(func(o *Observation) { o.WebhookHealthy = false }), Wait, "", "webhook"},
		{"precondition", map[string]string{ScopeAnnotation: ScopeLegacy}, false, with(func(o *Observation) { o.Blocks = []Block{{Class: ClassNoNodeRef, Object: "Machine/m"}} }), Persist, "", "no-noderef Machine/m"},
		{"foreign scope", map[string]string{ScopeAnnotation: "team-a"}, false, ok, Idle, "", "another operator"},
		{"discovery incomplete preflight", map[string]string{ScopeAnnotation: ScopeLegacy}, false, with(func(o *Observation) { o.DiscoveryIncomplete = "x/v1" }), Wait, "", "discovery incomplete"},
		{"lock", map[string]string{ScopeAnnotation: ScopeLegacy}, false, ok, Persist, PhaseLocked, "lock"},
		{"locked → quiescing", locked(PhaseLocked), false, ok, Persist, PhaseQuiescing, ""},
		{"locked without phase", map[string]string{InProgressAnnotation: "true", ScopeAnnotation: ScopeLegacy}, false, ok, Persist, PhaseQuiescing, ""},
		{"quiesce pause", locked(PhaseQuiescing), false, with(func(o *Observation) { o.LegacyClusterPaused = false }), PauseLegacyCluster, "", ""},
		{"quiesce scale", locked(PhaseQuiescing), false, with(func(o *Observation) { o.LegacyScaledDown = false }), ScaleDownLegacy, "", ""},
		{"quiesce pods", locked(PhaseQuiescing), false, with(func(o *Observation) { o.LegacyPods = 2 }), Wait, "", "legacy pods"},
		{"quiesce pods timeout", locked(PhaseQuiescing), false, with(func(o *Observation) { o.LegacyPods = 2; o.Now = t0.Add(6 * time.Minute) }), Persist, PhaseRollingBack, ReasonQuiesceTimeout},
		{"quiet window starts", locked(PhaseQuiescing), false, ok, Persist, "", "quiet window"},
		{"quiet window restarts on a write", locked(PhaseQuiescing, QuietAnnotation, FormatQuiet("old", t0)), false, ok, Persist, "", "quiet window"},
		{"quiet window running", locked(PhaseQuiescing, QuietAnnotation, FormatQuiet("fp", t0)), false, ok, Wait, "", "quiet window"},
		{"quiet, precondition changed", locked(PhaseQuiescing, QuietAnnotation, quiet), false, with(func(o *Observation) { o.Blocks = []Block{{Class: ClassDeleting, Object: "Machine/m"}} }), Persist, PhaseRollingBack, ReasonPreconditionChanged},
		{"quiet, overridden waitable precondition", locked(PhaseQuiescing, QuietAnnotation, quiet, OverrideAnnotation, "no-noderef"), false, with(func(o *Observation) { o.Blocks = []Block{{Class: ClassNoNodeRef, Object: "Machine/m"}} }), Persist, PhaseCopying, ""},
		{"quiet → copying", locked(PhaseQuiescing, QuietAnnotation, quiet), false, ok, Persist, PhaseCopying, ""},
		{"copy", locked(PhaseCopying), false, with(func(o *Observation) { o.MissingTwins = 3 }), CopyTwins, "", "3 objects"},
		{"copy webhook down", locked(PhaseCopying), false, with(func(o *Observation) { o.WebhookHealthy = false }), Wait, "", "webhook"},
		{"copy webhook down too long", locked(PhaseCopying), false, with(func(o *Observation) { o.WebhookHealthy = false; o.Now = t0.Add(3 * time.Minute) }), Persist, PhaseRollingBack, ReasonWebhookUnavailable},
		{"copied → repointing", locked(PhaseCopying), false, ok, Persist, PhaseRepointing, ""},
		{"repoint", locked(PhaseRepointing), false, with(func(o *Observation) { o.PendingRepoints = 1 }), RepointToTwins, "", ""},
		{"repointed → verifying", locked(PhaseRepointing), false, ok, Persist, PhaseVerifying, ""},
		{"verify external writer", locked(PhaseVerifying, QuietAnnotation, FormatQuiet("other", t0)), false, ok, Persist, PhaseRollingBack, ReasonExternalWriter},
		{"verify mismatch", locked(PhaseVerifying, QuietAnnotation, quiet), false, with(func(o *Observation) { o.VerifyProblems = []string{"x"} }), Persist, PhaseRollingBack, ReasonVerifyMismatch},
		{"verify missing twin", locked(PhaseVerifying, QuietAnnotation, quiet), false, with(func(o *Observation) { o.MissingTwins = 1 }), Persist, PhaseRollingBack, ReasonVerifyMismatch},
		{"verified → switching", locked(PhaseVerifying, QuietAnnotation, quiet), false, ok, Persist, PhaseSwitching, ""},
		{"switch", locked(PhaseSwitching), false, with(func(o *Observation) { o.Switched = false }), Switch, "", ""},
		{"switch waiting", locked(PhaseSwitching), false, with(func(o *Observation) { o.WorkloadsAvailable = false }), Wait, "", "Available"},
		{"switch timeout", locked(PhaseSwitching), false, with(func(o *Observation) { o.WorkloadsAvailable = false; o.Now = t0.Add(11 * time.Minute) }), Persist, PhaseRollingBack, ReasonSwitchTimeout},
		{"switched → resuming", locked(PhaseSwitching), false, ok, Persist, PhaseResuming, ""},
		{"unpause", locked(PhaseResuming), false, with(func(o *Observation) { o.PrivateClusterPaused = true }), UnpausePrivate, "", ""},
		{"born objects", locked(PhaseResuming), false, with(func(o *Observation) { o.BornObjects = []string{"Machine/new"} }), Persist, PhaseRollingBack, ReasonBornObjects},
		{"green starts", locked(PhaseResuming), false, ok, Persist, "", "green"},
		{"green lost", locked(PhaseResuming, GreenAnnotation, formatTime(t0)), false, with(func(o *Observation) { o.Unhealthy = "x" }), Persist, "", "not green"},
		{"not green", locked(PhaseResuming), false, with(func(o *Observation) { o.Unhealthy = "x" }), Wait, "", "not green"},
		{"not green timeout", locked(PhaseResuming), false, with(func(o *Observation) { o.Unhealthy = "x"; o.Now = t0.Add(6 * time.Minute) }), Persist, PhaseRollingBack, ReasonHealthCheckTimeout},
		{"health window", locked(PhaseResuming, GreenAnnotation, formatTime(t0)), false, ok, Wait, "", "health window"},
		{"commit", locked(PhaseResuming, GreenAnnotation, formatTime(t0.Add(-time.Minute))), false, ok, Persist, PhaseCommitted, "commit"},
		{"deleted before commit", locked(PhaseSwitching), true, ok, Persist, PhaseRollingBack, ReasonHostedClusterDeleted},
		{"deleted after commit", locked(PhaseCommitted), true, ok, Persist, PhaseCleaningUp, ""},
		{"cleanup repause", locked(PhaseCleaningUp), false, with(func(o *Observation) { o.LegacyClusterPaused = false }), PauseLegacyCluster, "", ""},
		{"cleanup waits for unproxied pods", locked(PhaseCleaningUp), false, with(func(o *Observation) { o.UninjectedPods = 1 }), Wait, "", "without the proxy"},
		{"cleanup restarts an unproxied pod", locked(PhaseCleaningUp), false, with(func(o *Observation) { o.UninjectedPods, o.StalePods = 2, 1 }), Switch, "", "restart 1 pods"},
		{"cleanup ignores the quiesced Deployments' own pods", locked(PhaseCleaningUp), false, with(func(o *Observation) { o.LegacyPods = 1 }), Persist, "", "migrated"},
		{"switch restarts pods", locked(PhaseSwitching), false, with(func(o *Observation) { o.Switched, o.StalePods = false, 2 }), Switch, "", "restart 2 pods"},
		{"proxy read fails", locked(PhaseSwitching), false, with(func(o *Observation) { o.ProxyProblem = "watch: boom" }), Wait, "", "through the proxy failed: watch: boom"},
		{"proxy read fails past the deadline", locked(PhaseSwitching), false, with(func(o *Observation) { o.ProxyProblem = "x"; o.Now = t0.Add(11 * time.Minute) }), Persist, PhaseRollingBack, ReasonSwitchTimeout},
		{"cleanup delete", locked(PhaseCleaningUp), false, with(func(o *Observation) { o.OldObjects = 4; o.OldDeleting = 2 }), DeleteOld, "", ""},
		{"cleanup waits for the garbage collector", locked(PhaseCleaningUp), false, with(func(o *Observation) { o.OldDeleting = 2 }), Wait, "", "garbage collector"},
		{"rollback waits for twins being removed", locked(PhaseRollingBack), false, with(func(o *Observation) { o.TwinsDeleting = 2; o.LegacyRestored = false }), Wait, "", "being removed"},
		{"done", locked(PhaseCleaningUp), false, ok, Persist, "", "migrated"},
		{"unknown phase", locked("Bogus"), false, ok, Wait, "", "unknown"},
		{"rollback stops proxied first", locked(PhaseRollingBack), false, with(func(o *Observation) { o.ProxiedReplicas = 2; o.Twins = 3 }), StopProxied, "", ""},
		{"rollback waits for pods", locked(PhaseRollingBack), false, with(func(o *Observation) { o.ProxiedPods = 1; o.Twins = 3 }), Wait, "", "proxied pods"},
		{"rollback pauses private", locked(PhaseRollingBack), false, with(func(o *Observation) { o.PrivateClusterExists = true; o.Twins = 3 }), PausePrivate, "", ""},
		{"rollback repoints", locked(PhaseRollingBack), false, with(func(o *Observation) { o.TwinDependents = 1; o.Twins = 3 }), RepointToOld, "", ""},
		{"rollback deletes twins", locked(PhaseRollingBack), false, with(func(o *Observation) { o.Twins = 3; o.LegacyRestored = false }), DeleteTwins, "", ""},
		{"rollback restores", locked(PhaseRollingBack), false, with(func(o *Observation) { o.LegacyRestored = false }), RestoreLegacy, "", ""},
		{"rollback done", locked(PhaseRollingBack, RollbackAnnotation, ReasonVerifyMismatch), false, ok, Persist, "", "rolled back"},
		{"no phase start: the deadline starts now", locked(PhaseCopying, PhaseStartedAnnotation, "garbage"), false, ok, Persist, "", "counts from now"},
		{"repointing waits for complete discovery", locked(PhaseRepointing), false, with(func(o *Observation) { o.DiscoveryIncomplete = "metrics.k8s.io/v1beta1"; o.PendingRepoints = 1 }), Wait, "", "discovery incomplete"},
		{"verifying waits for complete discovery", locked(PhaseVerifying, QuietAnnotation, quiet), false, with(func(o *Observation) { o.DiscoveryIncomplete = "x/v1" }), Wait, "", "discovery incomplete"},
		{"rollback waits for complete discovery", locked(PhaseRollingBack), false, with(func(o *Observation) { o.DiscoveryIncomplete = "x/v1"; o.Twins = 2; o.TwinDependents = 0 }), Wait, "", "discovery incomplete"},
		{"copy: leftovers' dependents first", locked(PhaseCopying), false, with(func(o *Observation) { o.LeftoverDependents = 1; o.Leftovers = 3; o.MissingTwins = 3 }), RepointFromLeftovers, "", "earlier run"},
		{"copy: leftovers removed before the copy", locked(PhaseCopying), false, with(func(o *Observation) { o.Leftovers = 3; o.MissingTwins = 3 }), RemoveLeftovers, "", "earlier runs"},
		{"copy: leftovers being removed", locked(PhaseCopying), false, with(func(o *Observation) { o.LeftoversDeleting = 3; o.MissingTwins = 3 }), Wait, "", "being removed"},
		{"copy: leftovers gone, record dropped", locked(PhaseCopying, LeftoversAnnotation, "run0"), false, with(func(o *Observation) { o.MissingTwins = 3 }), Persist, "", "gone"},
		{"copy: leftovers wait for complete discovery", locked(PhaseCopying), false, with(func(o *Observation) { o.Leftovers = 1; o.DiscoveryIncomplete = "x/v1" }), Wait, "", "discovery incomplete"},
	}
	c := DefaultConfig()
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			a := Step(ReadState(tc.ann, tc.deleting), tc.obs, c)
			if a.Kind != tc.kind || !strings.Contains(a.Why, tc.why) {
				t.Fatalf("Step = %v, want %s (…%s…)", a, tc.kind, tc.why)
			}
			if tc.phase != "" {
				if got := a.Changes.Apply(tc.ann)[PhaseAnnotation]; got != string(tc.phase) {
					t.Errorf("phase after %v = %q, want %q", a, got, tc.phase)
				}
			}
			if tc.phase == PhaseRollingBack && a.Changes.Set[RollbackAnnotation] != tc.why {
				t.Errorf("rollback reason %q, want %q", a.Changes.Set[RollbackAnnotation], tc.why)
			}
			if a.Kind == Wait && a.RequeueAfter <= 0 {
				t.Errorf("Wait without RequeueAfter")
			}
		})
	}
}

func TestReadState(t *testing.T) {
	a := map[string]string{
		PrivateTypesAnnotation: "true", ScopeAnnotation: ScopeLegacy, InProgressAnnotation: "true", FailedAnnotation: "x",
		PhaseAnnotation: "Copying", IDAnnotation: "id", StartedAnnotation: "2026-11-23T12:00:00Z",
		PhaseStartedAnnotation: "garbage", QuietAnnotation: "ab@cd@2026-11-23T12:00:05Z",
	}
	s := ReadState(a, true)
	if !s.PrivateTypes || !s.Legacy || !s.Locked || s.Failed != "x" || s.Phase != PhaseCopying || s.ID != "id" ||
		!s.Started.Equal(t0) || !s.PhaseStarted.IsZero() || s.QuietFingerprint != "ab@cd" || !s.QuietSince.Equal(t0.Add(5*time.Second)) || !s.Deleting {
		t.Errorf("%+v", s)
	}
	ch := Changes{Set: map[string]string{"a": "1"}, Remove: []string{PhaseAnnotation}}
	if got := ch.Apply(a); got["a"] != "1" || got[PhaseAnnotation] != "" || a[PhaseAnnotation] != "Copying" {
		t.Errorf("Apply: %v (input %v)", got, a)
	}
	if mp := ch.MergePatch(); mp["a"] != "1" || mp[PhaseAnnotation] != nil || len(mp) != 2 {
		t.Errorf("MergePatch %v", mp)
	}
}

func TestQueue(t *testing.T) {
	legacy := State{Legacy: true}
	cs := []Candidate{
		{Namespace: "b", Name: "young", Created: t0.Add(time.Hour), State: legacy},
		{Namespace: "a", Name: "old", Created: t0, State: legacy},
		{Namespace: "a", Name: "also-old", Created: t0, State: legacy},
		{Namespace: "c", Name: "running", Created: t0.Add(2 * time.Hour), State: State{Legacy: true, Locked: true, Phase: PhaseCopying}},
		{Namespace: "c", Name: "failed", Created: t0, State: State{Legacy: true, Failed: "x"}},
		{Namespace: "c", Name: "private", Created: t0, State: State{PrivateTypes: true}},
		{Namespace: "c", Name: "unclassified", Created: t0},
		{Namespace: "c", Name: "deleting", Created: t0, State: State{Legacy: true, Deleting: true}},
		{Namespace: "c", Name: "cleaning", Created: t0.Add(3 * time.Hour), State: State{PrivateTypes: true, Locked: true, Phase: PhaseCleaningUp}},
	}
	var got []string
	for _, c := range Queue(cs) {
		got = append(got, c.Key())
	}
	want := []string{"c/running", "c/cleaning", "a/also-old", "a/old", "b/young"}
	if !slices.Equal(got, want) {
		t.Errorf("Queue = %v, want %v", got, want)
	}
}
