package controller

import (
	"github.com/prometheus/client_golang/prometheus"
	ctrlmetrics "sigs.k8s.io/controller-runtime/pkg/metrics"

	"github.com/dcm-sp/acm-cluster-sp/internal/capiprivate/migrate/plan"
)

// Metrics are the migrator's Prometheus metrics (docs/capi-private-migration.md, section "Metrics and events"). Every
// name starts with capi_private_migration_.
type Metrics struct {
	// HostedClusters counts HostedClusters by state: legacy (pending), in_progress, migrated, failed, unclassified.
	HostedClusters *prometheus.GaugeVec
	// Phase is 1 for the phase a locked HostedCluster is in.
	Phase *prometheus.GaugeVec
	// StartTimestamp is when the running migration of a HostedCluster began (for the stuck alert).
	StartTimestamp *prometheus.GaugeVec
	// Duration observes finished migrations, from lock to done.
	Duration prometheus.Histogram
	// Rollbacks and Failures count by reason: a rollback starts / a migration ends rolled back.
	Rollbacks, Failures *prometheus.CounterVec
	// ObjectsCopied, DependentsRepointed and OldObjectsDeleted count by kind.
	ObjectsCopied, DependentsRepointed, OldObjectsDeleted *prometheus.CounterVec
	// Stalled is 1 while a phase that cannot roll back (clean-up after Committed) is past its deadline and
	// retrying (alert on it).
	Stalled *prometheus.GaugeVec
	// BlockedSince is when a legacy HostedCluster's preconditions began blocking its migration (alert on
	// time() - value).
	BlockedSince *prometheus.GaugeVec
}

// NewMetrics creates the metrics and registers them with reg (nil: not registered).
func NewMetrics(reg prometheus.Registerer) *Metrics {
	const ns, sub = "capi_private", "migration"
	h := prometheus.NewHistogram(prometheus.HistogramOpts{Namespace: ns, Subsystem: sub, Name: "duration_seconds",
		Help:    "Time from lock to done of each migrated HostedCluster.",
		Buckets: []float64{1, 5, 15, 30, 60, 120, 300, 600, 900, 1200, 1800}})
	m := &Metrics{
		HostedClusters: prometheus.NewGaugeVec(prometheus.GaugeOpts{Namespace: ns, Subsystem: sub, Name: "hostedclusters",
			Help: "HostedClusters by migration state (legacy = pending)."}, []string{"state"}),
		Phase: prometheus.NewGaugeVec(prometheus.GaugeOpts{Namespace: ns, Subsystem: sub, Name: "phase",
			Help: "1 for the phase a HostedCluster's migration is in."}, []string{"namespace", "name", "phase"}),
		StartTimestamp: prometheus.NewGaugeVec(prometheus.GaugeOpts{Namespace: ns, Subsystem: sub, Name: "start_timestamp_seconds",
			Help: "Unix time the running migration of a HostedCluster started."}, []string{"namespace", "name"}),
		Duration: h,
		Rollbacks: prometheus.NewCounterVec(prometheus.CounterOpts{Namespace: ns, Subsystem: sub, Name: "rollbacks_total",
			Help: "Rollbacks started, by reason."}, []string{"reason"}),
		Failures: prometheus.NewCounterVec(prometheus.CounterOpts{Namespace: ns, Subsystem: sub, Name: "failures_total",
			Help: "Migrations that ended rolled back (migration-failed set), by reason."}, []string{"reason"}),
		ObjectsCopied: prometheus.NewCounterVec(prometheus.CounterOpts{Namespace: ns, Subsystem: sub, Name: "objects_copied_total",
			Help: "Private twins created, by kind."}, []string{"kind"}),
		DependentsRepointed: prometheus.NewCounterVec(prometheus.CounterOpts{Namespace: ns, Subsystem: sub, Name: "dependents_repointed_total",
			Help: "Objects whose ownerReferences were re-pointed (to the twins, or back in a rollback), by kind."}, []string{"kind"}),
		OldObjectsDeleted: prometheus.NewCounterVec(prometheus.CounterOpts{Namespace: ns, Subsystem: sub, Name: "old_objects_deleted_total",
			Help: "Objects removed without a provider delete (old objects after commit, twins in a rollback), by kind."}, []string{"kind"}),
		Stalled: prometheus.NewGaugeVec(prometheus.GaugeOpts{Namespace: ns, Subsystem: sub, Name: "stalled",
			Help: "1 while a migration phase that cannot roll back is past its deadline and retrying with back-off."}, []string{"namespace", "name", "phase"}),
		BlockedSince: prometheus.NewGaugeVec(prometheus.GaugeOpts{Namespace: ns, Subsystem: sub, Name: "blocked_since_timestamp_seconds",
			Help: "Unix time since which a legacy HostedCluster's preconditions block its migration."}, []string{"namespace", "name"}),
	}
	if reg != nil {
		reg.MustRegister(m.HostedClusters, m.Phase, m.StartTimestamp, h, m.Rollbacks, m.Failures, m.ObjectsCopied,
			m.DependentsRepointed, m.OldObjectsDeleted, m.Stalled, m.BlockedSince)
	}
	return m
}

// setPhase sets the phase gauge of one HostedCluster (phase none clears it).
func (m *Metrics) setPhase(namespace, name string, phase plan.Phase) {
	for _, p := range plan.Phases {
		v := 0.0
		if p == phase {
			v = 1
		}
		if phase == plan.PhaseNone {
			m.Phase.DeleteLabelValues(namespace, name, string(p))
			continue
		}
		m.Phase.WithLabelValues(namespace, name, string(p)).Set(v)
	}
}

// ctrlRegistry is controller-runtime's registry, served on the manager's metrics endpoint.
func ctrlRegistry() prometheus.Registerer { return ctrlmetrics.Registry }
