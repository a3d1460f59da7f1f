package plan

import (
	"fmt"
	"slices"
	"strings"
	"time"
)

// rollback undoes a run in the safe order: first nothing acts on the private objects any more, then the
// dependents go back to the old objects, then the twins are removed (with nothing left to act on their deletion),
// and only then do the legacy controllers come back. Past its deadline it gives up safely (giveUp).
func rollback(s State, o Observation, c Config) Action {
	switch {
	case s.PhaseStarted.IsZero():
		return restartDeadline(o)
	case Overdue(s, o.Now, c) > 0:
		return giveUp(s, o)
	case c.EnhancementRollbackOrder:
		return enhancementRollback(s, o, c)
	}
	switch {
	case o.ProxiedReplicas > 0:
		return Action{Kind: StopProxied, Why: "stop the proxied controllers first"}
	case o.ProxiedPods > 0:
		return wait(min(c.Poll, time.Second), fmt.Sprintf("%d proxied pods still running", o.ProxiedPods))
	case o.PrivateClusterExists && !o.PrivateClusterPaused:
		return Action{Kind: PausePrivate, Why: "pause the private Cluster"}
	case o.DiscoveryIncomplete != "" && o.Twins > 0:
		return wait(c.Poll, "discovery incomplete ("+o.DiscoveryIncomplete+"): cannot see every owner of the twins")
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
	return rolledBack(s, reason, false)
}

// giveUp ends a rollback that missed its deadline without ever leaving the cluster without CAPI controllers: if
// proxied controllers still run, the private Cluster is paused first (they then leave the twins alone); the
// legacy controllers are restored; the HostedCluster is marked migration-failed: rollback-incomplete, and the
// twins left are recorded as leftovers, which the next run removes before copying. A private Cluster that cannot
// be paused while nothing proxied runs does not hold the legacy controllers back: nothing acts on it.
func giveUp(s State, o Observation) Action {
	proxied := o.ProxiedReplicas > 0 || o.ProxiedPods > 0
	switch {
	case proxied && o.PrivateClusterExists && !o.PrivateClusterPaused:
		return Action{Kind: PausePrivate, Why: "rollback past its deadline: pause the private Cluster before the legacy controllers return"}
	case !o.LegacyRestored:
		return Action{Kind: RestoreLegacy, Why: "rollback past its deadline: give the cluster back to the legacy controllers"}
	}
	a := rolledBack(s, ReasonRollbackIncomplete, o.Twins+o.TwinsDeleting > 0)
	a.Why += fmt.Sprintf(" (rolling back from %s after %s; %d twins left for the next run)", s.RollbackFrom, s.Rollback, o.Twins+o.TwinsDeleting)
	return a
}

// rolledBack ends the run: migration-failed: reason, scope legacy (the legacy operator's again), every run
// annotation removed; leftovers records this run's id when its twins could not all be removed.
func rolledBack(s State, reason string, leftovers bool) Action {
	set := map[string]string{FailedAnnotation: reason, ScopeAnnotation: ScopeLegacy}
	if leftovers && s.ID != "" && !slices.Contains(s.LeftoverRuns, s.ID) {
		set[LeftoversAnnotation] = strings.Join(append(slices.Clone(s.LeftoverRuns), s.ID), ",")
	}
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
