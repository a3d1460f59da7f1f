package plan

import (
	"slices"
	"strings"
	"testing"
	"time"
)

// TestDeadlineBeforeReissue: in every phase before Committed, an observation that asks to re-issue the phase's
// action (an actor undid it) past the phase's deadline rolls back instead: no action extends a phase.
func TestDeadlineBeforeReissue(t *testing.T) {
	c := DefaultConfig()
	undone := map[Phase]func(*Observation){
		PhaseQuiescing:  func(o *Observation) { o.LegacyScaledDown = false },
		PhaseCopying:    func(o *Observation) { o.MissingTwins = 2 },
		PhaseRepointing: func(o *Observation) { o.PendingRepoints = 1 },
		PhaseVerifying:  func(o *Observation) {},
		PhaseSwitching:  func(o *Observation) { o.Switched = false },
		PhaseResuming:   func(o *Observation) { o.PrivateClusterPaused = true },
	}
	for _, p := range Phases[:7] {
		if p == PhaseLocked {
			continue
		}
		s := State{Locked: true, Phase: p, PhaseStarted: t0, QuietFingerprint: "fp", QuietSince: t0}
		o := Observation{Now: t0.Add(c.Deadline(p) - time.Second), WebhookHealthy: true, LegacyClusterPaused: true, LegacyScaledDown: true,
			Fingerprint: "fp", Switched: true, WorkloadsAvailable: true}
		undone[p](&o)
		if a := Step(s, o, c); a.Changes.Set[PhaseAnnotation] == string(PhaseRollingBack) {
			t.Errorf("%s before its deadline: %v", p, a)
		}
		o.Now = t0.Add(c.Deadline(p) + time.Second)
		a := Step(s, o, c)
		if a.Changes.Set[PhaseAnnotation] != string(PhaseRollingBack) || a.Changes.Set[RollbackAnnotation] != timeoutReason(p) {
			t.Errorf("%s past its deadline: %v, want a rollback %s", p, a, timeoutReason(p))
		}
	}
}

// TestActorUndoingQuiesce: an actor re-scales the legacy controllers after every action. The phase still ends at
// its deadline (counted from its persisted start, which no action moves) and rolls back; the rollback completes.
func TestActorUndoingQuiesce(t *testing.T) {
	c := fastConfig()
	w := newWorld()
	const step = 5 * time.Second
	var quiesceStart, rollbackAt time.Time
	scaleDowns := 0
	for i := range 400 {
		s := ReadState(w.annotations, false)
		a := Step(s, w.observe(), c)
		if a.Kind == Idle {
			break
		}
		if i == 399 {
			t.Fatalf("no Idle after 400 steps: the actor holds the cluster (annotations %v)", w.annotations)
		}
		w.persist(a)
		if err := w.exec(a); err != nil {
			t.Fatal(err)
		}
		after := ReadState(w.annotations, false)
		if after.Phase == PhaseQuiescing && quiesceStart.IsZero() {
			quiesceStart = w.now
		}
		if after.Phase == PhaseRollingBack && rollbackAt.IsZero() {
			rollbackAt = w.now
		}
		if a.Kind == ScaleDownLegacy {
			scaleDowns++
		}
		if after.Phase == PhaseQuiescing { // the actor: scale the legacy controllers up again
			w.scaledDown, w.legacyPods = false, 1
			w.writes++
		}
		w.now = w.now.Add(step)
	}
	if w.annotations[FailedAnnotation] != ReasonQuiesceTimeout {
		t.Fatalf("annotations %v, want migration-failed %s", w.annotations, ReasonQuiesceTimeout)
	}
	if d := rollbackAt.Sub(quiesceStart); d < c.QuiesceTimeout || d > c.QuiesceTimeout+2*step {
		t.Errorf("rolled back %s after Quiescing began, want its deadline %s", d, c.QuiesceTimeout)
	}
	if limit := int(c.QuiesceTimeout/step) + 2; scaleDowns > limit {
		t.Errorf("%d scale-downs, want at most %d (one per step until the deadline)", scaleDowns, limit)
	}
	if w.twins != 0 || !w.restored {
		t.Errorf("after the rollback: twins %d restored %v", w.twins, w.restored)
	}
}

func TestRetryBackoff(t *testing.T) {
	c := DefaultConfig()
	s := State{Phase: PhaseCleaningUp, PhaseStarted: t0}
	for _, tc := range []struct {
		after time.Duration
		want  time.Duration
	}{
		{time.Minute, c.Poll},                           // before the deadline
		{c.CleanupTimeout + time.Second, c.Poll},        // just past it: never faster than Poll
		{c.CleanupTimeout + 4*time.Minute, time.Minute}, // a quarter of the time past it
		{c.CleanupTimeout + 10*time.Hour, c.MaxBackoff},
	} {
		if got := Retry(s, t0.Add(tc.after), c); got != tc.want {
			t.Errorf("Retry %s after the start = %s, want %s", tc.after, got, tc.want)
		}
	}
	// Retries past the deadline are spaced ever further apart: over a day, a few dozen attempts, not thousands.
	now, n := t0.Add(c.CleanupTimeout), 0
	for now.Before(t0.Add(24 * time.Hour)) {
		now = now.Add(Retry(s, now, c))
		n++
	}
	if n > 400 {
		t.Errorf("%d retries in a day", n)
	}
	if Overdue(State{Phase: PhaseCleaningUp}, t0, c) != 0 {
		t.Error("a phase without a start is never overdue")
	}
}

// TestCleanupStalls: after Committed a missed deadline never rolls back; the phase is reported stalled once and
// keeps its action, waiting with back-off.
func TestCleanupStalls(t *testing.T) {
	c := DefaultConfig()
	ann := map[string]string{InProgressAnnotation: "true", PrivateTypesAnnotation: "true", PhaseAnnotation: string(PhaseCleaningUp),
		IDAnnotation: "run1", PhaseStartedAnnotation: formatTime(t0)}
	late := t0.Add(c.CleanupTimeout + 8*time.Minute)
	pods := Observation{Now: late, LegacyClusterPaused: true, UninjectedPods: 1, ProxiedReplicas: 3}
	a := Step(ReadState(ann, false), pods, c)
	if a.Kind != Persist || !strings.Contains(a.Changes.Set[StalledAnnotation], "still run without the proxy") {
		t.Fatalf("overdue: %v", a)
	}
	ann = a.Changes.Apply(ann)
	a = Step(ReadState(ann, false), pods, c)
	if a.Kind != Wait || a.RequeueAfter != 2*time.Minute {
		t.Errorf("stalled: %v, want a Wait of 2m", a)
	}
	del := pods
	del.UninjectedPods, del.OldObjects = 0, 4
	if a := Step(ReadState(ann, false), del, c); a.Kind != DeleteOld {
		t.Errorf("stalled with objects left: %v, want DeleteOld", a)
	}
	done := pods
	done.UninjectedPods = 0
	a = Step(ReadState(ann, false), done, c)
	if a.Kind != Persist || !slices.Contains(a.Changes.Remove, StalledAnnotation) || !slices.Contains(a.Changes.Remove, InProgressAnnotation) {
		t.Errorf("done after stalling: %v", a)
	}
	for _, k := range []Kind{StopProxied, PausePrivate, RepointToOld, DeleteTwins, RestoreLegacy} {
		if a.Kind == k {
			t.Errorf("clean-up stopped controllers: %v", a)
		}
	}
}

// TestGiveUp: a rollback past its deadline never deletes, pauses the private Cluster first only while proxied
// controllers still run, restores the legacy controllers, and records the twins it leaves.
func TestGiveUp(t *testing.T) {
	c := DefaultConfig()
	s := State{Locked: true, Phase: PhaseRollingBack, PhaseStarted: t0, ID: "run2", LeftoverRuns: []string{"run0"},
		Rollback: ReasonCreateFailed, RollbackFrom: PhaseResuming}
	late := t0.Add(c.RollbackTimeout + time.Second)
	for bits := range 1 << 6 {
		o := Observation{Now: late, ProxiedReplicas: bits & 1, ProxiedPods: bits >> 1 & 1, PrivateClusterExists: bits>>2&1 == 1,
			PrivateClusterPaused: bits>>3&1 == 1, Twins: bits >> 4 & 1 * 3, TwinDependents: 1, LegacyRestored: bits>>5&1 == 1}
		a := Step(s, o, c)
		proxied := o.ProxiedReplicas > 0 || o.ProxiedPods > 0
		switch {
		case a.Kind == DeleteTwins || a.Kind == RepointToOld || a.Kind == StopProxied || a.Kind == Wait:
			t.Errorf("%+v → %v: a rollback past its deadline only pauses and restores", o, a)
		case proxied && o.PrivateClusterExists && !o.PrivateClusterPaused && a.Kind != PausePrivate:
			t.Errorf("%+v → %v: the private Cluster must be paused before the legacy controllers return", o, a)
		case a.Kind == PausePrivate && !proxied:
			t.Errorf("%+v → %v: nothing proxied runs; pausing must not hold the legacy controllers back", o, a)
		case a.Kind == Persist && !o.LegacyRestored:
			t.Errorf("%+v → %v: marked failed with the legacy controllers not restored", o, a)
		case a.Kind == Persist:
			ch := a.Changes.Set
			if ch[FailedAnnotation] != ReasonRollbackIncomplete || ch[ScopeAnnotation] != ScopeLegacy {
				t.Errorf("%+v → %v", o, a)
			}
			if wantLeft := o.Twins > 0; (ch[LeftoversAnnotation] == "run0,run2") != wantLeft {
				t.Errorf("%+v → leftovers %q", o, ch[LeftoversAnnotation])
			}
		}
	}
}

func TestConfigWithDefaults(t *testing.T) {
	c := Config{QuietWindow: time.Second}.WithDefaults()
	d := DefaultConfig()
	if c.QuietWindow != time.Second || c.CopyTimeout != d.CopyTimeout || c.MaxBackoff != d.MaxBackoff || c.Poll != d.Poll {
		t.Errorf("%+v", c)
	}
	for _, p := range Phases {
		if d.Deadline(p) <= 0 {
			t.Errorf("%s has no deadline", p)
		}
	}
}

func TestFail(t *testing.T) {
	c := DefaultConfig()
	o := Observation{Now: t0}
	for _, tc := range []struct {
		phase     Phase
		locked    bool
		permanent bool
		rollback  bool
	}{
		{PhaseNone, false, true, false}, {PhaseLocked, true, true, true}, {PhaseCopying, true, true, true}, {PhaseResuming, true, true, true},
		{PhaseCopying, true, false, false}, // transient: retried until the phase's deadline
		{PhaseCommitted, true, true, false}, {PhaseCleaningUp, true, true, false}, {PhaseRollingBack, true, true, false},
	} {
		s := State{Phase: tc.phase, Locked: tc.locked, PhaseStarted: t0}
		a := Fail(s, o, c, ReasonCreateFailed, tc.permanent)
		rolled := a.Changes.Set[PhaseAnnotation] == string(PhaseRollingBack)
		if rolled != tc.rollback {
			t.Errorf("Fail in %q: %v, rollback %v want %v", tc.phase, a, rolled, tc.rollback)
		}
		if rolled && a.Changes.Set[RollbackFromAnnotation] == "" {
			t.Errorf("Fail in %q: no rollback-from", tc.phase)
		}
		if !rolled && a.Kind != Wait {
			t.Errorf("Fail in %q (not overdue): %v, want a Wait", tc.phase, a)
		}
	}
	// Past the deadline after Committed or in a rollback: stalled once, then retries with back-off.
	for _, p := range []Phase{PhaseCleaningUp, PhaseRollingBack} {
		s := State{Phase: p, Locked: true, PhaseStarted: t0}
		late := Observation{Now: t0.Add(c.Deadline(p) + 8*time.Minute)}
		a := Fail(s, late, c, "action DeleteOld failed: denied", false)
		if a.Kind != Persist || !strings.Contains(a.Changes.Set[StalledAnnotation], "denied") {
			t.Errorf("%s overdue: %v", p, a)
		}
		s.Stalled = "x"
		if a := Fail(s, late, c, "again", false); a.Kind != Wait || a.RequeueAfter != 2*time.Minute {
			t.Errorf("%s overdue and stalled: %v, want a Wait of 2m (a quarter of 8m)", p, a)
		}
	}
}
