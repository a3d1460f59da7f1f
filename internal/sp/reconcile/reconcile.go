// Package reconcile is the leader's level-triggered loop, in the shape of Kubernetes controllers (informer events →
// work queue → reconcile one key): for every instance that changed, at the deadlines the status function returns,
// and on every resync it
//   - evaluates the status with the one status function and hands it to the Reporter (status events);
//   - converges a live cluster's children toward the spec stored on its HostedCluster (Provisioner.Converge);
//   - for a cluster being deleted — by the API or by an operator with kubectl — removes what cannot be owned (the
//     ManagedCluster and KlusterletAddonConfig, the Agent reservations) and, once the Reporter confirms DELETED was
//     delivered, the SP's status finalizer, so a DELETED event survives an SP restart in the middle of a deletion;
//   - sweeps this provider's orphans.
//
// It knows the rest of the SP only through the interfaces below, and registers nothing with them: whoever wires it
// feeds the index's changes to Enqueue. Its term is a leaderloop.Loop.
package reconcile

import (
	"context"
	"log/slog"
	"sync"
	"time"

	hyperv1 "github.com/openshift/hypershift/api/hypershift/v1beta1"
	"github.com/prometheus/client_golang/prometheus"

	"github.com/dcm-sp/acm-cluster-sp/internal/sp/clusters"
	"github.com/dcm-sp/acm-cluster-sp/internal/sp/leaderloop"
	"github.com/dcm-sp/acm-cluster-sp/internal/sp/status"
)

// Index is the read model the reconciler works from (hub.Index). Its changes reach the reconciler through
// Enqueue, registered by whoever wires the two.
type Index interface {
	Get(id string) (clusters.View, bool)
	IDs() []string
	Len() int
}

// Provisioner changes the hub (provision.Converger).
type Provisioner interface {
	// Converge drives a live cluster's children toward its stored spec.
	Converge(ctx context.Context, hc *hyperv1.HostedCluster) error
	// Creating reports whether a create of this process is writing the instance now (it converges the children).
	Creating(id string) bool
	// LiveView reads an instance's HostedCluster and NodePools from the API server (HostedCluster nil: gone).
	LiveView(ctx context.Context, id string, hc *hyperv1.HostedCluster) (clusters.View, error)
	// DeleteACMObjects deletes the cluster's ManagedCluster and KlusterletAddonConfig (if they are the instance's).
	DeleteACMObjects(ctx context.Context, id, name string) error
	// ReleaseAgents removes the instance's Agent reservations.
	ReleaseAgents(ctx context.Context, id string) error
	// RemoveStatusFinalizer lets the HostedCluster go.
	RemoveStatusFinalizer(ctx context.Context, hc *hyperv1.HostedCluster) error
	// SweepOrphans removes leftovers of instances known() says have no HostedCluster, older than grace.
	SweepOrphans(ctx context.Context, known func(id string) bool, grace time.Duration)
	// Forget drops per-instance memory once a deletion is complete.
	Forget(id string)
	// Now is the clock statuses are evaluated with; StatusSettings the status function's settings.
	Now() time.Time
	StatusSettings() status.Settings
	// Report puts a status decision into the reported vocabulary, with what the cluster produced (the same words
	// GET and LIST answer).
	Report(v clusters.View, r status.Result) status.Report
}

// Reporter receives every cluster's status as the Reconciler evaluates it (the CloudEvents publisher).
type Reporter interface {
	// Report hands over the current status of an instance; the reporter publishes it when it changed.
	Report(id string, r status.Report)
	// Delivered reports whether the bus has acknowledged this status for the instance.
	Delivered(id string, st status.Status) bool
	// Resync makes the next reports be published again even if unchanged (periodic full re-publish).
	Resync()
	// Forget drops an instance whose deletion is complete.
	Forget(id string)
}

// Options tune the Reconciler.
type Options struct {
	Workers      int           // parallel reconciles (default 4)
	ResyncPeriod time.Duration // re-evaluate every cluster this often (default 10m; config resyncPeriod)
	OrphanGrace  time.Duration // leftovers of an unknown instance are removed after this age (default 2m)
	// WaitForSync blocks until the caches behind the Index have synced (false: ctx ended). Nothing is reconciled
	// or swept from a cache that is still filling.
	WaitForSync func(ctx context.Context) bool
	// CatchUp waits (bounded) until the caches hold at least what the API server holds now. A term starts with it,
	// so a new leader does not re-report a status older than one the previous leader published moments ago.
	CatchUp func(ctx context.Context) error
	Log     *slog.Logger
	// Registry receives acm_sp_reconciles_total{result="ok"|"error"} (nil: not exported).
	Registry prometheus.Registerer
}

// Reconciler runs on the leader; see the package documentation.
type Reconciler struct {
	index    Index
	prov     Provisioner
	reporter Reporter // nil without status events
	opts     Options
	log      *slog.Logger

	loop *leaderloop.Loop // the term's queue and workers

	mu      sync.Mutex
	seen    map[string]bool // instances whose HostedCluster this process has seen
	resyncs int             // full resyncs done (each with an orphan sweep)

	results *prometheus.CounterVec // reconciles by result
}

// New prepares a Reconciler over the index; it registers nothing (feed the index's changes to Enqueue). Changes
// are handled while Start runs; each Start begins with a full resync, so nothing that changed in between is missed.
func New(index Index, prov Provisioner, reporter Reporter, opts Options) *Reconciler {
	if opts.Workers == 0 {
		opts.Workers = 4
	}
	if opts.ResyncPeriod == 0 {
		opts.ResyncPeriod = 10 * time.Minute
	}
	if opts.OrphanGrace == 0 {
		opts.OrphanGrace = 2 * time.Minute
	}
	if opts.Log == nil {
		opts.Log = slog.New(slog.DiscardHandler)
	}
	if opts.WaitForSync == nil {
		opts.WaitForSync = func(context.Context) bool { return true }
	}
	r := &Reconciler{index: index, prov: prov, reporter: reporter, opts: opts, log: opts.Log, seen: map[string]bool{},
		results: prometheus.NewCounterVec(prometheus.CounterOpts{Name: "acm_sp_reconciles_total",
			Help: "Reconciles of one cluster by result: ok, or error (retried with backoff; the log says why)."}, []string{"result"})}
	r.results.WithLabelValues("ok")
	r.results.WithLabelValues("error")
	if opts.Registry != nil {
		opts.Registry.MustRegister(r.results)
	}
	r.loop = leaderloop.New(leaderloop.Options{Name: "clusters", Workers: opts.Workers,
		RetryMin: 100 * time.Millisecond, RetryMax: 30 * time.Second, Handle: r.handle})
	return r
}

// ResyncPeriod is how often every cluster is re-evaluated.
func (r *Reconciler) ResyncPeriod() time.Duration { return r.opts.ResyncPeriod }

// EnqueueAll schedules every known instance (the hub's observability changed: every status may read differently).
func (r *Reconciler) EnqueueAll() {
	for _, id := range r.index.IDs() {
		r.Enqueue(id)
	}
}

// Enqueue schedules an instance for reconciliation (a no-op while not running: the next Start resyncs).
func (r *Reconciler) Enqueue(id string) { r.loop.Add(id) }

// Start runs the workers until ctx ends. It first re-evaluates every known instance (start-up publish). It may be
// called again after it returned (a new leadership term).
func (r *Reconciler) Start(ctx context.Context) error {
	if !r.opts.WaitForSync(ctx) {
		return nil
	}
	if r.opts.CatchUp != nil {
		began := time.Now()
		if err := r.opts.CatchUp(ctx); err != nil {
			if ctx.Err() != nil {
				return nil
			}
			r.log.Warn("reconciler: starting from caches that may lag the API server", "error", err)
		} else {
			r.log.Debug("reconciler: caches caught up with the API server", "took", time.Since(began).String())
		}
	}
	r.log.Info("reconciler: started", "clusters", r.index.Len())
	r.loop.Run(ctx, leaderloop.Term{Begin: r.resync, While: leaderloop.Every(r.opts.ResyncPeriod, r.resync), End: func() {
		// The next leader (maybe this replica again) starts from the hub; a replica that leads no more must not
		// keep what it learned about clusters that may be deleted meanwhile.
		r.forgetUnknown(nil)
	}})
	return nil
}

func (r *Reconciler) resync(ctx context.Context) {
	if r.reporter != nil {
		r.reporter.Resync()
	}
	ids := r.index.IDs()
	for _, id := range ids {
		r.Enqueue(id)
	}
	r.forgetUnknown(ids)
	r.prov.SweepOrphans(ctx, func(id string) bool {
		v, ok := r.index.Get(id)
		return ok && v.HostedCluster != nil
	}, r.opts.OrphanGrace)
	r.mu.Lock()
	r.resyncs++
	r.mu.Unlock()
}

// Resyncs is how many full resyncs (each ending with an orphan sweep) this process has done.
func (r *Reconciler) Resyncs() int {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.resyncs
}

// handle is the term's handler: one reconcile, counted, and when to look again (leaderloop.Handler).
func (r *Reconciler) handle(ctx context.Context, id string) (time.Duration, error) {
	requeue, err := r.reconcile(ctx, id)
	if err != nil {
		r.results.WithLabelValues("error").Inc()
		r.log.Warn("reconcile failed; retrying", "id", id, "error", err)
		return 0, err
	}
	r.results.WithLabelValues("ok").Inc()
	return requeue, nil
}

// createRecheck is when to look again at an instance whose create this process is writing.
const createRecheck = 250 * time.Millisecond

// reconcile handles one instance and returns when to look again (0: only on the next change).
func (r *Reconciler) reconcile(ctx context.Context, id string) (time.Duration, error) {
	v, known := r.index.Get(id)
	r.mu.Lock()
	if v.HostedCluster != nil {
		r.seen[id] = true
	}
	seen := r.seen[id]
	r.mu.Unlock()

	if !known || v.Gone() {
		if !seen && v.HostedCluster == nil {
			return 0, nil // never a cluster here (e.g. leftovers of a rolled-back create): the orphan sweep handles it
		}
		return r.finishDeletion(ctx, id, v)
	}
	if v.HostedCluster == nil {
		return 0, nil // NodePools without their HostedCluster yet
	}
	hc := v.HostedCluster
	now := r.prov.Now()
	res := status.Map(hc, v.NodePools, now, r.prov.StatusSettings())
	if res.SteppedBack && r.reporter != nil {
		// The index's HostedClusters and NodePools come from separate watches: NodePools deleted with their
		// HostedCluster can leave the cache before the HostedCluster's deletion reaches it. Confirm first.
		live, err := r.prov.LiveView(ctx, id, hc)
		if err != nil {
			return 0, err
		}
		if live.HostedCluster == nil {
			return 0, nil // gone: the index's delete event finishes it
		}
		hc = live.HostedCluster
		v.HostedCluster, v.NodePools = live.HostedCluster, live.NodePools
		res = status.Map(hc, live.NodePools, now, r.prov.StatusSettings())
	}
	if r.reporter != nil {
		r.reporter.Report(id, r.prov.Report(v, res))
	}
	if hc.DeletionTimestamp != nil {
		// Deleted through the API or by an operator with kubectl: the un-ownable objects go now.
		if err := r.prov.DeleteACMObjects(ctx, id, hc.Name); err != nil {
			return 0, err
		}
	} else if r.prov.Creating(id) {
		// This process's create is writing the cluster's children now: converging them too, from a cache that has
		// not seen them yet, would only race it. The events of its writes bring the instance back; this is the net.
		return createRecheck, nil
	} else if err := r.prov.Converge(ctx, hc); err != nil {
		return 0, err
	}
	if !res.RecheckAt.IsZero() {
		return res.RecheckAt.Sub(now) + 10*time.Millisecond, nil
	}
	return 0, nil
}

// finishDeletion reports DELETED, removes what cannot be owned and finally lets the HostedCluster go.
func (r *Reconciler) finishDeletion(ctx context.Context, id string, v clusters.View) (time.Duration, error) {
	if r.reporter != nil {
		r.reporter.Report(id, status.Report{Status: status.Deleted, Message: "Cluster deleted"}) // DELETED in every vocabulary
	}
	name := ""
	if v.HostedCluster != nil {
		name = v.HostedCluster.Name
	}
	if err := r.prov.DeleteACMObjects(ctx, id, name); err != nil {
		return 0, err
	}
	if err := r.prov.ReleaseAgents(ctx, id); err != nil {
		return 0, err
	}
	if v.HostedCluster == nil {
		r.forget(id)
		return 0, nil
	}
	if r.reporter != nil && !r.reporter.Delivered(id, status.Deleted) {
		// The acknowledgement of DELETED re-enqueues the instance (the publisher's OnDelivered); this is only the
		// safety net, so it need not repeat the clean-up's reads every second during a long NATS outage.
		return 30 * time.Second, nil
	}
	if err := r.prov.RemoveStatusFinalizer(ctx, v.HostedCluster); err != nil {
		return 0, err
	}
	r.log.Info("cluster deleted", "id", id, "name", name)
	return 0, nil
}

// forgetUnknown drops what is remembered about instances the index no longer knows (a deletion that finished while
// this replica was not leading never reaches finishDeletion here), so memory follows the live clusters.
func (r *Reconciler) forgetUnknown(ids []string) {
	live := make(map[string]bool, len(ids))
	for _, id := range ids {
		live[id] = true
	}
	r.mu.Lock()
	var gone []string
	for id := range r.seen {
		if !live[id] {
			gone = append(gone, id)
		}
	}
	r.mu.Unlock()
	for _, id := range gone {
		r.forget(id)
	}
}

// Queued is how many instances wait in the reconciler's queue, not yet being reconciled (0 between terms).
func (r *Reconciler) Queued() int { return r.loop.Len() }

// Remembered is how many instances the reconciler holds state for (tests: memory follows the live clusters).
func (r *Reconciler) Remembered() int {
	r.mu.Lock()
	defer r.mu.Unlock()
	return len(r.seen)
}

func (r *Reconciler) forget(id string) {
	r.mu.Lock()
	delete(r.seen, id)
	r.mu.Unlock()
	r.prov.Forget(id)
	if r.reporter != nil {
		r.reporter.Forget(id)
	}
}
