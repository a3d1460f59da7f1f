package controller

import (
	"fmt"
	"strings"

	hyperv1 "github.com/openshift/hypershift/api/hypershift/v1beta1"

	"github.com/dcm-sp/acm-cluster-sp/internal/capiprivate/migrate/plan"
)

// transition emits the events and metrics of a state change from s to after.
func (m *Migrator) transition(hc *hyperv1.HostedCluster, s, after plan.State, a plan.Action) {
	ev := func(typ, reason, msg string) {
		if m.opts.Recorder != nil {
			m.opts.Recorder.Event(hc, typ, reason, truncate(msg, 1024))
		}
	}
	met := m.opts.Metrics
	switch {
	case !s.InRun() && after.InRun():
		ev("Normal", "MigrationStarted", fmt.Sprintf("migration %s to the private Cluster API types started", after.ID))
		met.StartTimestamp.WithLabelValues(hc.Namespace, hc.Name).Set(float64(after.Started.Unix()))
	case s.InRun() && !after.InRun():
		met.StartTimestamp.DeleteLabelValues(hc.Namespace, hc.Name)
		if after.Failed != "" {
			met.Failures.WithLabelValues(after.Failed).Inc()
			ev("Warning", "MigrationFailed", fmt.Sprintf("migration %s rolled back (%s); the cluster is back on the legacy controllers. %s. Remove the %s annotation to retry",
				s.ID, after.Failed, a.Why, plan.FailedAnnotation))
		} else {
			if !s.Started.IsZero() {
				met.Duration.Observe(m.opts.Now().Sub(s.Started).Seconds())
			}
			ev("Normal", "Migrated", fmt.Sprintf("migration %s done: the cluster uses the private Cluster API types", s.ID))
		}
	}
	if after.Phase != s.Phase {
		met.setPhase(hc.Namespace, hc.Name, after.Phase)
		switch after.Phase {
		case plan.PhaseNone:
		case plan.PhaseRollingBack:
			met.Rollbacks.WithLabelValues(after.Rollback).Inc()
			ev("Warning", "MigrationRollingBack", fmt.Sprintf("rolling back from %s: %s", after.RollbackFrom, a.Why))
		default:
			ev("Normal", "MigrationPhase", fmt.Sprintf("phase %s", after.Phase))
		}
	}
	if after.Stalled != "" && after.Stalled != s.Stalled {
		met.Stalled.WithLabelValues(hc.Namespace, hc.Name, string(after.Phase)).Set(1)
		ev("Warning", "MigrationStalled", after.Stalled+"; retrying with back-off (the CAPI controllers keep running)")
	}
	if after.Blocked != "" && after.Blocked != s.Blocked {
		met.BlockedSince.WithLabelValues(hc.Namespace, hc.Name).Set(float64(after.BlockedSince.Unix()))
		reason := "MigrationBlocked"
		if strings.HasPrefix(after.Blocked, plan.OverduePrefix) {
			reason = "MigrationBlockedOverdue"
		}
		ev("Warning", reason, a.Why)
	}
}
