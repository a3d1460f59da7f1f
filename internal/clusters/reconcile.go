package clusters

import (
	"context"
	"fmt"
	"log/slog"
	"sync"
	"sync/atomic"
	"time"

	hyperv1 "github.com/openshift/hypershift/api/hypershift/v1beta1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	apimeta "k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/client-go/util/workqueue"
	clusterv1 "open-cluster-management.io/api/cluster/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/dcm-sp/acm-cluster-sp/internal/hub"
	"github.com/dcm-sp/acm-cluster-sp/internal/meta"
	"github.com/dcm-sp/acm-cluster-sp/internal/render"
	"github.com/dcm-sp/acm-cluster-sp/internal/status"
)

// Reporter receives every cluster's status as the Reconciler evaluates it (the CloudEvents publisher).
type Reporter interface {
	// Report hands over the current status of an instance; the reporter publishes it when it changed.
	Report(id string, st status.Status, message string)
	// Delivered reports whether the bus has acknowledged this status for the instance.
	Delivered(id string, st status.Status) bool
	// Resync makes the next reports be published again even if unchanged (periodic full re-publish).
	Resync()
	// Forget drops an instance whose deletion is complete.
	Forget(id string)
}

// ReconcilerOptions tune the Reconciler.
type ReconcilerOptions struct {
	Workers      int           // parallel reconciles (default 4)
	ResyncPeriod time.Duration // re-evaluate every cluster this often (default 10m)
	OrphanGrace  time.Duration // leftovers of an unknown instance are removed after this age (default 2m)
}

// Reconciler runs on the leader. For every instance that changed (informer events through the Index), at the
// deadlines the status function returns, and on every resync it:
//   - evaluates the status with the one status function and hands it to the Reporter;
//   - creates the KlusterletAddonConfig once ACM has created the cluster's namespace (hypershift.md §8);
//   - once the cluster is gone for DCM, deletes the SP's leftover Secrets and ManagedCluster, releases the Agents,
//     and removes the SP's status finalizer — only after the Reporter confirms DELETED was delivered, so a DELETED
//     event survives an SP restart in the middle of a deletion.
type Reconciler struct {
	svc      *Service
	hub      *hub.Hub
	reporter Reporter
	opts     ReconcilerOptions
	queue    atomic.Pointer[workqueue.TypedRateLimitingInterface[string]] // set while Start runs (a leadership term)
	log      *slog.Logger

	mu      sync.Mutex
	seen    map[string]bool // instances whose HostedCluster this process has seen
	kacDone map[string]bool
}

// NewReconciler wires a Reconciler to the hub's index. Changes are handled while Start runs; each Start begins
// with a full resync, so nothing that changed in between is missed.
func NewReconciler(svc *Service, reporter Reporter, opts ReconcilerOptions, log *slog.Logger) *Reconciler {
	if opts.Workers == 0 {
		opts.Workers = 4
	}
	if opts.ResyncPeriod == 0 {
		opts.ResyncPeriod = 10 * time.Minute
	}
	if opts.OrphanGrace == 0 {
		opts.OrphanGrace = 2 * time.Minute
	}
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	r := &Reconciler{
		svc: svc, hub: svc.hub, reporter: reporter, opts: opts, log: log,
		seen: map[string]bool{}, kacDone: map[string]bool{},
	}
	svc.hub.Index().OnChange(r.Enqueue)
	return r
}

// Enqueue schedules an instance for reconciliation (a no-op while not running: the next Start resyncs).
func (r *Reconciler) Enqueue(id string) {
	if q := r.queue.Load(); q != nil {
		(*q).Add(id)
	}
}

// Start runs the workers until ctx ends. It first re-evaluates every known instance (start-up publish). It may be
// called again after it returned (a new leadership term).
func (r *Reconciler) Start(ctx context.Context) error {
	q := workqueue.NewTypedRateLimitingQueueWithConfig(
		workqueue.NewTypedItemExponentialFailureRateLimiter[string](100*time.Millisecond, 30*time.Second),
		workqueue.TypedRateLimitingQueueConfig[string]{Name: "clusters"})
	defer q.ShutDown()
	if !r.hub.WaitForSync(ctx) {
		return ctx.Err()
	}
	r.queue.Store(&q)
	defer r.queue.Store(nil)
	r.log.Info("reconciler: started", "clusters", r.hub.Index().Len())
	r.resync(ctx)
	var wg sync.WaitGroup
	for i := 0; i < r.opts.Workers; i++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for r.processNext(ctx, q) {
			}
		}()
	}
	t := time.NewTicker(r.opts.ResyncPeriod)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			q.ShutDown()
			wg.Wait()
			return nil
		case <-t.C:
			r.resync(ctx)
		}
	}
}

func (r *Reconciler) resync(ctx context.Context) {
	if r.reporter != nil {
		r.reporter.Resync()
	}
	for _, id := range r.hub.Index().IDs() {
		r.Enqueue(id)
	}
	r.sweepOrphans(ctx)
}

func (r *Reconciler) processNext(ctx context.Context, q workqueue.TypedRateLimitingInterface[string]) bool {
	id, shutdown := q.Get()
	if shutdown {
		return false
	}
	defer q.Done(id)
	requeue, err := r.reconcile(ctx, id)
	switch {
	case err != nil:
		r.log.Warn("reconcile failed; retrying", "id", id, "error", err)
		q.AddRateLimited(id)
	case requeue > 0:
		q.Forget(id)
		q.AddAfter(id, requeue)
	default:
		q.Forget(id)
	}
	return true
}

// reconcile handles one instance and returns when to look again (0: only on the next change).
func (r *Reconciler) reconcile(ctx context.Context, id string) (time.Duration, error) {
	v, known := r.hub.Index().Get(id)
	r.mu.Lock()
	if v.HostedCluster != nil {
		r.seen[id] = true
	}
	seen := r.seen[id]
	r.mu.Unlock()

	if !known || v.Gone() {
		if !seen {
			return 0, nil // never a cluster here (e.g. leftovers of a rolled-back create): the orphan sweep handles it
		}
		return r.finishDeletion(ctx, id, v)
	}
	if v.HostedCluster == nil {
		return 0, nil // NodePools without their HostedCluster yet
	}
	now := r.svc.now()
	res := status.Map(v.HostedCluster, v.NodePools, now, r.svc.cfg.Status)
	if r.reporter != nil {
		r.reporter.Report(id, res.Status, res.Message)
	}
	if err := r.ensureKlusterletAddonConfig(ctx, id, v.HostedCluster); err != nil {
		return 0, err
	}
	if !res.RecheckAt.IsZero() {
		return res.RecheckAt.Sub(now) + 10*time.Millisecond, nil
	}
	return 0, nil
}

// finishDeletion reports DELETED, removes the leftovers and finally lets the HostedCluster go.
func (r *Reconciler) finishDeletion(ctx context.Context, id string, v hub.View) (time.Duration, error) {
	if r.reporter != nil {
		r.reporter.Report(id, status.Deleted, "Cluster deleted")
	}
	name := ""
	if v.HostedCluster != nil {
		name = v.HostedCluster.Name
	}
	if err := r.cleanup(ctx, id, name); err != nil {
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
	hc := v.HostedCluster
	patch := client.MergeFromWithOptions(hc.DeepCopy(), client.MergeFromWithOptimisticLock{})
	target := hc.DeepCopy()
	kept := target.Finalizers[:0]
	for _, f := range target.Finalizers {
		if f != meta.FinalizerStatus {
			kept = append(kept, f)
		}
	}
	target.Finalizers = kept
	if err := r.hub.Client.Patch(ctx, target, patch); err != nil && !apierrors.IsNotFound(err) {
		return 0, fmt.Errorf("removing the status finalizer: %w", err)
	}
	r.log.Info("cluster deleted", "id", id, "name", hc.Name)
	return 0, nil
}

func (r *Reconciler) forget(id string) {
	r.mu.Lock()
	delete(r.seen, id)
	delete(r.kacDone, id)
	r.mu.Unlock()
	if r.reporter != nil {
		r.reporter.Forget(id)
	}
}

// cleanup deletes what the SP created for an instance and the operator leaves behind on a bare hub: the
// instance's Secrets, its ManagedCluster and KlusterletAddonConfig, and its Agent reservations.
func (r *Reconciler) cleanup(ctx context.Context, id, name string) error {
	if err := r.deleteSecretsOf(ctx, id); err != nil {
		return err
	}
	if name != "" && r.svc.cfg.ManageACMObjects {
		if err := r.svc.deleteACMObjects(ctx, id, name); err != nil {
			return err
		}
	}
	return r.svc.ReleaseAgents(ctx, id)
}

// deleteSecretsOf deletes every cached Secret labelled with the instance id.
func (r *Reconciler) deleteSecretsOf(ctx context.Context, id string) error {
	for _, s := range r.hub.Index().SecretsOf(id) {
		sec := &corev1.Secret{}
		sec.Namespace, sec.Name = s.Namespace, s.Name
		if err := r.hub.Client.Delete(ctx, sec); err != nil && !apierrors.IsNotFound(err) {
			return fmt.Errorf("deleting Secret %s: %w", s.Name, err)
		}
	}
	return nil
}

// ensureKlusterletAddonConfig creates the cluster's KAC once ACM's namespace for it exists (when the KAC API is
// served and ACM objects are managed).
func (r *Reconciler) ensureKlusterletAddonConfig(ctx context.Context, id string, hc *hyperv1.HostedCluster) error {
	if !r.svc.cfg.ManageACMObjects || hc.DeletionTimestamp != nil || !r.hub.LastDiscovery().Served[hub.APIKlusterletAddonConfig] {
		return nil
	}
	r.mu.Lock()
	done := r.kacDone[id]
	r.mu.Unlock()
	if done || !r.hub.ClusterNamespaceExists(ctx, hc.Name) {
		return nil
	}
	var mc clusterv1.ManagedCluster
	if err := r.hub.Client.Get(ctx, client.ObjectKey{Name: hc.Name}, &mc); err != nil || meta.InstanceID(mc.Labels) != id {
		return client.IgnoreNotFound(err) // not our ManagedCluster: nothing to configure
	}
	kac := render.KlusterletAddonConfig(id, hc.Name)
	if err := r.hub.Client.Create(ctx, kac); err != nil && !apierrors.IsAlreadyExists(err) {
		if apimeta.IsNoMatchError(err) {
			return nil
		}
		return fmt.Errorf("creating KlusterletAddonConfig %s: %w", hc.Name, err)
	}
	r.mu.Lock()
	r.kacDone[id] = true
	r.mu.Unlock()
	r.log.Info("KlusterletAddonConfig created", "id", id, "name", hc.Name)
	return nil
}

// sweepOrphans removes leftovers of instances that have no HostedCluster: Secrets older than OrphanGrace (a
// create in flight on another replica has Secrets before its HostedCluster) and Agent reservations older than it.
func (r *Reconciler) sweepOrphans(ctx context.Context) {
	now := r.svc.now()
	for id, newest := range r.hub.Index().SecretInstanceIDs() {
		if v, ok := r.hub.Index().Get(id); (ok && v.HostedCluster != nil) || now.Sub(newest) < r.opts.OrphanGrace {
			continue
		}
		if err := r.deleteSecretsOf(ctx, id); err != nil {
			r.log.Warn("orphan sweep", "id", id, "error", err)
			continue
		}
		r.log.Info("orphan sweep: removed Secrets of an instance without HostedCluster", "id", id)
	}
	if r.hub.AgentNamespace() == "" || !r.hub.Watching("agents") {
		return
	}
	var list unstructured.UnstructuredList
	list.SetGroupVersionKind(hub.AgentGVK.GroupVersion().WithKind("AgentList"))
	if err := r.hub.Client.List(ctx, &list, client.InNamespace(r.hub.AgentNamespace()), client.HasLabels{meta.LabelInstanceID}); err != nil {
		r.log.Warn("orphan sweep: listing Agents", "error", err)
		return
	}
	for _, a := range list.Items {
		id := meta.InstanceID(a.GetLabels())
		if v, ok := r.hub.Index().Get(id); ok && v.HostedCluster != nil {
			continue
		}
		at, err := time.Parse(time.RFC3339, a.GetAnnotations()[meta.AnnotationReservedAt])
		if err == nil && now.Sub(at) < r.opts.OrphanGrace {
			continue
		}
		if err := r.svc.releaseAgent(ctx, a.GetName(), id); err != nil {
			r.log.Warn("orphan sweep: releasing Agent", "agent", a.GetName(), "error", err)
		} else {
			r.log.Info("orphan sweep: released Agent of an instance without HostedCluster", "agent", a.GetName(), "id", id)
		}
	}
}
