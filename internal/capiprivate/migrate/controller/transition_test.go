package controller

import (
	"strings"
	"testing"
	"time"

	hyperv1 "github.com/openshift/hypershift/api/hypershift/v1beta1"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/tools/record"

	"github.com/dcm-sp/acm-cluster-sp/internal/capiprivate/migrate/plan"
)

// TestTransitionMetricsAndEvents drives transition through a run that rolls back and one that finishes, and checks
// the gauges, counters, histogram and events each state change produces.
func TestTransitionMetricsAndEvents(t *testing.T) {
	reg := prometheus.NewRegistry()
	rec := record.NewFakeRecorder(20)
	now := time.Date(2026, 11, 23, 12, 10, 0, 0, time.UTC)
	m := &Migrator{opts: Options{Metrics: NewMetrics(reg), Recorder: rec, Now: func() time.Time { return now }}}
	hc := &hyperv1.HostedCluster{ObjectMeta: metav1.ObjectMeta{Namespace: "clusters", Name: "a"}}
	started := "2026-11-23T12:00:00Z"
	st := func(a map[string]string) plan.State { return plan.ReadState(a, false) }
	idle := st(map[string]string{plan.ScopeAnnotation: plan.ScopeLegacy})
	locked := st(map[string]string{plan.InProgressAnnotation: "true", plan.PhaseAnnotation: "Locked", plan.IDAnnotation: "r1", plan.StartedAnnotation: started})
	copying := st(map[string]string{plan.InProgressAnnotation: "true", plan.PhaseAnnotation: "Copying", plan.IDAnnotation: "r1", plan.StartedAnnotation: started})
	rolling := st(map[string]string{plan.InProgressAnnotation: "true", plan.PhaseAnnotation: "RollingBack", plan.IDAnnotation: "r1",
		plan.StartedAnnotation: started, plan.RollbackAnnotation: plan.ReasonCreateFailed})
	failed := st(map[string]string{plan.ScopeAnnotation: plan.ScopeLegacy, plan.FailedAnnotation: plan.ReasonCreateFailed})
	cleaning := st(map[string]string{plan.InProgressAnnotation: "true", plan.PhaseAnnotation: "CleaningUp", plan.IDAnnotation: "r2", plan.StartedAnnotation: started})
	done := st(map[string]string{plan.PrivateTypesAnnotation: "true"})

	m.transition(hc, idle, locked, plan.Action{})
	if v := testutil.ToFloat64(m.opts.Metrics.StartTimestamp.WithLabelValues("clusters", "a")); v != float64(time.Date(2026, 11, 23, 12, 0, 0, 0, time.UTC).Unix()) {
		t.Errorf("start timestamp %v", v)
	}
	m.transition(hc, locked, copying, plan.Action{})
	if testutil.ToFloat64(m.opts.Metrics.Phase.WithLabelValues("clusters", "a", "Copying")) != 1 ||
		testutil.ToFloat64(m.opts.Metrics.Phase.WithLabelValues("clusters", "a", "Locked")) != 0 {
		t.Error("phase gauge does not follow the phase")
	}
	m.transition(hc, copying, rolling, plan.Action{Why: "roll back: create-failed"})
	m.transition(hc, rolling, failed, plan.Action{})
	if testutil.ToFloat64(m.opts.Metrics.Rollbacks.WithLabelValues(plan.ReasonCreateFailed)) != 1 ||
		testutil.ToFloat64(m.opts.Metrics.Failures.WithLabelValues(plan.ReasonCreateFailed)) != 1 {
		t.Error("rollback and failure counters")
	}
	if n := testutil.CollectAndCount(m.opts.Metrics.Phase); n != 0 {
		t.Errorf("%d phase series left after the run", n)
	}
	if n := testutil.CollectAndCount(m.opts.Metrics.StartTimestamp); n != 0 {
		t.Errorf("%d start series left after the run", n)
	}
	m.transition(hc, cleaning, done, plan.Action{})
	if n := testutil.CollectAndCount(reg, "capi_private_migration_duration_seconds"); n != 1 {
		t.Errorf("duration histogram series %d", n)
	}
	var events []string
	for len(rec.Events) > 0 {
		events = append(events, <-rec.Events)
	}
	want := []string{"MigrationStarted", "MigrationPhase phase Locked", "MigrationPhase phase Copying", "MigrationRollingBack", "MigrationFailed", "Migrated"}
	if len(events) != len(want) {
		t.Fatalf("events %q", events)
	}
	for i, w := range want {
		if !strings.Contains(events[i], w) {
			t.Errorf("event %d %q, want %s", i, events[i], w)
		}
	}
	if !strings.Contains(events[3], "create-failed") || !strings.Contains(events[4], plan.FailedAnnotation) {
		t.Errorf("rollback/failure events lack the cause or the manual step: %q", events[3:5])
	}
}

func TestGauges(t *testing.T) {
	m := &Migrator{opts: Options{Metrics: NewMetrics(nil)}}
	hc := func(a map[string]string) hyperv1.HostedCluster {
		return hyperv1.HostedCluster{ObjectMeta: metav1.ObjectMeta{Annotations: a}}
	}
	hcs := []hyperv1.HostedCluster{
		hc(map[string]string{plan.ScopeAnnotation: plan.ScopeLegacy}), hc(map[string]string{plan.ScopeAnnotation: plan.ScopeLegacy}),
		hc(map[string]string{plan.PrivateTypesAnnotation: "true"}), hc(map[string]string{plan.InProgressAnnotation: "true"}),
		hc(map[string]string{plan.FailedAnnotation: "x"}), hc(nil),
	}
	anns := make([]map[string]string, len(hcs))
	for i := range hcs {
		anns[i] = hcs[i].Annotations
	}
	m.gauges(hcs, anns)
	for state, want := range map[string]float64{"legacy": 2, "migrated": 1, "in_progress": 1, "failed": 1, "unclassified": 1} {
		if v := testutil.ToFloat64(m.opts.Metrics.HostedClusters.WithLabelValues(state)); v != want {
			t.Errorf("hostedclusters{state=%s} = %v, want %v", state, v, want)
		}
	}
}
