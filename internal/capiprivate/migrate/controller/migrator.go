// Package controller runs capi-private's migration: a leader-elected migrator that moves legacy HostedClusters'
// Cluster API objects into the private groups one hosted cluster at a time, and the classifier that assigns every
// HostedCluster its scope. It only observes and executes: every decision is package plan's (Step) or package
// scope's (Classify), and all state lives in the cluster (HostedCluster annotations, twins' migrated-from-uid and
// run id, recorded Deployment replicas), so a kill anywhere resumes.
package controller

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"sync"
	"time"

	"github.com/go-logr/logr"
	hyperv1 "github.com/openshift/hypershift/api/hypershift/v1beta1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/discovery"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/record"
	"k8s.io/client-go/util/workqueue"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/controller"
	"sigs.k8s.io/controller-runtime/pkg/handler"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"

	"github.com/dcm-sp/acm-cluster-sp/internal/capiprivate/crds"
	"github.com/dcm-sp/acm-cluster-sp/internal/capiprivate/groups"
	"github.com/dcm-sp/acm-cluster-sp/internal/capiprivate/migrate/plan"
	"github.com/dcm-sp/acm-cluster-sp/internal/capiprivate/migrate/scope"
)

// LeaderElectionID is the Lease the migrate command is elected on.
const LeaderElectionID = "capi-private-migrate"

// Options configure a Migrator. Zero values take the defaults.
type Options struct {
	// Config is the state machine's timing; zero fields take plan.DefaultConfig()'s.
	Config plan.Config
	// Mapping is the group table (groups.Default). The kinds moved are discovered: every namespaced kind of a
	// standard group of the table whose private CRD is installed.
	Mapping *groups.Mapping
	// Switcher moves the controllers (a RolloutSwitcher over DefaultDeployments and the injector's default
	// component table).
	Switcher Switcher
	// ProxyClient reads through the proxy's translation in this process (ProxyClient; Start and New build it from
	// their config). Switching reads the cluster's objects with it before the run may go on; without it a run
	// never leaves Switching.
	ProxyClient client.WithWatch
	// Namespace limits the migrator and the classifier to the HostedClusters of one namespace ("" = all).
	Namespace string
	// ProbeNamespace is where the conversion probe runs ("default").
	ProbeNamespace string
	// StateNamespace holds the migrator's records of its runs (DefaultStateNamespace): a namespace only
	// capi-private may write, since the migrator acts on what they say.
	StateNamespace string
	// Metrics (NewMetrics(nil) when nil: kept but not exported).
	Metrics *Metrics
	// Recorder records Kubernetes events on the HostedClusters (none when nil).
	Recorder record.EventRecorder
	// Log (discarded when unset).
	Log logr.Logger
	// Now and NewID are the clock and the run-id source (tests).
	Now   func() time.Time
	NewID func() string
	// AfterAction, when set, is called after each executed action (tests kill the migrator there).
	AfterAction func(hc types.NamespacedName, phase plan.Phase, a plan.Action)
	// OnWait, when set, is called for each Wait Step decides (tests count the chances the migrator had).
	OnWait func(hc types.NamespacedName, phase plan.Phase, a plan.Action)
}

// Migrator is the migration controller. Build it with New and add it to a manager with SetupWithManager.
type Migrator struct {
	c      client.Client // uncached: the migrator decides on what the API server says now
	disc   discovery.DiscoveryInterface
	opts   Options
	copier *plan.Copier

	mu        sync.Mutex
	holdUntil time.Time // no pass before this (an action was undone: retry later, not at once)
}

// New builds a Migrator talking to kube-apiserver directly (never through the proxy: it sees both group sets).
func New(cfg *rest.Config, o Options) (*Migrator, error) {
	c, err := client.New(cfg, client.Options{Scheme: Scheme()})
	if err != nil {
		return nil, err
	}
	disc, err := discovery.NewDiscoveryClientForConfig(cfg)
	if err != nil {
		return nil, err
	}
	if o.ProxyClient == nil {
		if o.ProxyClient, err = ProxyClient(cfg, o.Mapping); err != nil {
			return nil, err
		}
	}
	return NewWithClient(c, disc, o), nil
}

// NewWithClient builds a Migrator on an existing uncached client. Every write carries the field manager
// plan.FieldManager.
func NewWithClient(c client.Client, disc discovery.DiscoveryInterface, o Options) *Migrator {
	o.Config = o.Config.WithDefaults()
	if o.Mapping == nil {
		o.Mapping = groups.Default
	}
	c = client.WithFieldOwner(c, plan.FieldManager)
	if o.Switcher == nil {
		o.Switcher = RolloutSwitcher{Client: c}
	}
	if o.ProbeNamespace == "" {
		o.ProbeNamespace = "default"
	}
	if o.StateNamespace == "" {
		o.StateNamespace = DefaultStateNamespace
	}
	if o.Metrics == nil {
		o.Metrics = NewMetrics(nil)
	}
	if o.Log.GetSink() == nil {
		o.Log = logr.Discard()
	}
	if o.Now == nil {
		o.Now = time.Now
	}
	if o.NewID == nil {
		o.NewID = randomID
	}
	return &Migrator{c: c, disc: disc, opts: o, copier: plan.NewCopier(o.Mapping)}
}

func randomID() string {
	b := make([]byte, 4)
	_, _ = rand.Read(b)
	return hex.EncodeToString(b)
}

// queueKey is the migrator's only work item: each pass looks at every HostedCluster and migrates one at a time.
var queueKey = reconcile.Request{NamespacedName: types.NamespacedName{Name: "capi-private-migration"}}

// SetupWithManager registers the migrator: any HostedCluster change enqueues the single work item, and at most
// one reconcile runs at a time (MaxConcurrentReconciles 1; leader election is the manager's).
func (m *Migrator) SetupWithManager(mgr ctrl.Manager) error {
	if m.opts.Recorder == nil {
		//lint:ignore SA1019 the core/v1 Events recorder: its replacement writes events.k8s.io/v1 (other RBAC and another Eventf); kept until that move
		m.opts.Recorder = mgr.GetEventRecorderFor("capi-private-migrate")
	}
	return ctrl.NewControllerManagedBy(mgr).Named("capi-private-migrator").
		Watches(&hyperv1.HostedCluster{}, handler.EnqueueRequestsFromMapFunc(
			func(context.Context, client.Object) []reconcile.Request { return []reconcile.Request{queueKey} })).
		WithOptions(controller.Options{MaxConcurrentReconciles: 1,
			// Failures (kube-apiserver down, conflicts) retry at most maxRetryDelay apart: the default limiter's
			// backoff grows to 16 minutes, and nothing else would wake a run that is waiting on itself.
			RateLimiter: workqueue.NewTypedItemExponentialFailureRateLimiter[reconcile.Request](100*time.Millisecond, maxRetryDelay)}).
		Complete(m)
}

// maxRetryDelay caps the retry backoff after a failed pass.
const maxRetryDelay = 10 * time.Second

// maxStepsPerPass bounds the actions one reconcile executes before it yields.
const maxStepsPerPass = 200

// Reconcile is one pass: update the gauges, then take the HostedClusters in plan.Queue order and drive the first
// one that has work until it has to wait.
func (m *Migrator) Reconcile(ctx context.Context, _ reconcile.Request) (reconcile.Result, error) {
	m.mu.Lock()
	hold := time.Until(m.holdUntil)
	m.mu.Unlock()
	if hold > 0 {
		return reconcile.Result{RequeueAfter: hold}, nil
	}
	hcs := &hyperv1.HostedClusterList{}
	if err := m.c.List(ctx, hcs, client.InNamespace(m.opts.Namespace)); err != nil {
		return reconcile.Result{}, err
	}
	recs, err := m.records(ctx)
	if err != nil {
		return reconcile.Result{}, err
	}
	exists := map[types.UID]bool{}
	anns := make([]map[string]string, len(hcs.Items))
	refusals := make([]string, len(hcs.Items))
	for i := range hcs.Items {
		hc := &hcs.Items[i]
		exists[hc.UID] = true
		r := recs[hc.UID]
		if r == nil {
			r = &runRecord{run: plan.Record{}}
		}
		if err := m.settle(ctx, hc, r); err != nil {
			return reconcile.Result{}, err
		}
		anns[i], refusals[i] = plan.Trusted(hc.Annotations, r.run)
	}
	if err := m.collectRecords(ctx, recs, exists); err != nil {
		return reconcile.Result{}, err
	}
	m.gauges(hcs.Items, anns)
	var cands []plan.Candidate
	byKey := map[string]*hyperv1.HostedCluster{}
	for i := range hcs.Items {
		hc := &hcs.Items[i]
		if refusals[i] != "" {
			// Annotations claiming a run the migrator did not record start, advance and block nothing.
			m.refuse(hc, refusals[i])
			continue
		}
		c := plan.Candidate{Namespace: hc.Namespace, Name: hc.Name, Created: hc.CreationTimestamp.Time, State: stateOf(hc, anns[i])}
		if c.State.InRun() {
			// A run another cluster would wait for must be this HostedCluster's own: annotations claiming a run
			// on a namespace that is not its control plane block nothing.
			why, err := m.controlPlaneProof(ctx, hc)
			if err != nil {
				return reconcile.Result{}, err
			}
			if why != "" {
				m.refuse(hc, why)
				continue
			}
		}
		cands = append(cands, c)
		byKey[c.Key()] = hc
	}
	queue := plan.Queue(cands)
	requeue := time.Duration(0)
	for _, c := range queue {
		after, started, err := m.drive(ctx, byKey[c.Key()], lockedOther(queue, c))
		if err != nil {
			return reconcile.Result{}, err
		}
		if after > 0 && (requeue == 0 || after < requeue) {
			requeue = after
		}
		if started || c.State.InRun() {
			break // one migration at a time: the one under way is the only one driven
		}
	}
	return reconcile.Result{RequeueAfter: requeue}, nil
}

func lockedOther(queue []plan.Candidate, self plan.Candidate) string {
	for _, c := range queue {
		if c.Key() != self.Key() && c.State.InRun() {
			return c.Key()
		}
	}
	return ""
}

// actionKey identifies an action within a pass: its kind, and for annotation-only actions what they record.
func actionKey(a plan.Action) string {
	if a.Kind == plan.Persist {
		return "Persist:" + a.Why
	}
	return string(a.Kind)
}

// drive runs Step and its actions for one HostedCluster until Step says Wait or Idle. An action asked for a second
// time in the same pass was undone by someone (HyperShift re-rendering a Deployment, an operator re-scaling it):
// the pass yields and no pass runs before plan.Retry, so an actor fighting the migrator costs one action per
// retry interval, and the phase's deadline ends the fight. It returns when to look again and whether the
// HostedCluster is (now) in a run.
func (m *Migrator) drive(ctx context.Context, hc *hyperv1.HostedCluster, other string) (time.Duration, bool, error) {
	key := types.NamespacedName{Namespace: hc.Namespace, Name: hc.Name}
	log := m.opts.Log.WithValues("hostedcluster", key.String())
	done := map[string]bool{}
	for range maxStepsPerPass {
		if err := m.c.Get(ctx, key, hc); err != nil {
			return 0, false, client.IgnoreNotFound(err)
		}
		rec, err := m.recordOf(ctx, hc)
		if err != nil {
			return 0, false, err
		}
		if err := m.settle(ctx, hc, rec); err != nil {
			return 0, false, err
		}
		s, why := trusted(hc, rec)
		if why != "" {
			m.refuse(hc, why)
			return 0, false, nil
		}
		if s.InRun() || s.Legacy {
			// Before anything in its control plane namespace is read or changed (a lock, a phase's step).
			why, err := m.controlPlaneProof(ctx, hc)
			if err != nil {
				return 0, false, err
			}
			if why != "" {
				m.refuse(hc, why)
				return 0, false, nil
			}
		}
		o, g, err := m.observe(ctx, hc, s)
		if err != nil {
			return 0, s.InRun(), err
		}
		o.OtherLocked = other
		a := plan.Step(s, o, m.opts.Config)
		switch a.Kind {
		case plan.Idle:
			return 0, s.InRun(), nil
		case plan.Wait:
			log.V(1).Info("waiting", "phase", s.Phase, "why", a.Why)
			if m.opts.OnWait != nil {
				m.opts.OnWait(key, s.Phase, a)
			}
			return a.RequeueAfter, s.InRun(), nil
		}
		if done[actionKey(a)] {
			retry := plan.Retry(s, o.Now, m.opts.Config)
			log.Info("action undone since it ran in this pass: retrying later", "phase", s.Phase, "action", a.String(), "after", retry)
			m.mu.Lock()
			m.holdUntil = time.Now().Add(retry)
			m.mu.Unlock()
			return retry, true, nil
		}
		done[actionKey(a)] = true
		log.Info("action", "phase", s.Phase, "action", a.String())
		if err := m.execute(ctx, hc, rec, s, g, a); err != nil {
			after, err := m.failed(ctx, hc, rec, o, a, err)
			if err != nil || after > 0 {
				return after, true, err
			}
		}
		if m.opts.AfterAction != nil {
			m.opts.AfterAction(key, s.Phase, a)
		}
	}
	return time.Second, true, nil
}

// failed handles a failed action: plan.Fail decides (a rollback, a stalled report, or a retry). A transient
// failure before Committed goes back to the work queue (the phase's deadline bounds its retries). It returns
// when to look again (0: go on with the pass).
func (m *Migrator) failed(ctx context.Context, hc *hyperv1.HostedCluster, rec *runRecord, o plan.Observation, a plan.Action, err error) (time.Duration, error) {
	var perm *permanentError
	permanent := errors.As(err, &perm)
	s, _ := trusted(hc, rec)
	reason := fmt.Sprintf("%s failed: %v", a.Kind, err)
	if permanent {
		reason = perm.reason
	}
	afterCommit := s.Phase == plan.PhaseRollingBack || (s.Phase != plan.PhaseNone && !s.Phase.BeforeCommit())
	if !permanent && !afterCommit {
		return 0, err
	}
	m.opts.Log.Info("action failed", "hostedcluster", hc.Namespace+"/"+hc.Name, "action", a.Kind, "reason", reason)
	if m.opts.Recorder != nil && afterCommit {
		m.opts.Recorder.Event(hc, "Warning", "MigrationRetrying", truncate(reason, 1024))
	}
	f := plan.Fail(s, o, m.opts.Config, reason, permanent)
	if f.Kind == plan.Wait {
		return f.RequeueAfter, nil
	}
	return 0, m.persist(ctx, hc, rec, s, f)
}

func truncate(s string, n int) string {
	if len(s) > n {
		return s[:n-3] + "..."
	}
	return s
}

// permanentError is an action failure that no retry fixes (an admission denial, a conflicting object): the run
// rolls back (before Committed) with reason.
type permanentError struct {
	reason string
	err    error
}

func (e *permanentError) Error() string { return e.reason + ": " + e.err.Error() }
func (e *permanentError) Unwrap() error { return e.err }

// persist writes a's annotation Changes: a change to the run keys first to hc's record, with the change marked
// pending, then onto the HostedCluster (optimistic: a concurrent writer makes it retry; the next look finishes
// the pending mirroring), then clears the mark. It records the event and metrics a transition means, and updates
// hc and rec.
func (m *Migrator) persist(ctx context.Context, hc *hyperv1.HostedCluster, rec *runRecord, s plan.State, a plan.Action) error {
	if a.Changes.Empty() {
		return nil
	}
	run := rec.run.With(a.Changes)
	recorded := !maps.Equal(run, rec.run)
	if recorded {
		if err := m.writeRecord(ctx, hc, rec, run, &a.Changes); err != nil {
			return err
		}
	}
	body := map[string]any{"metadata": map[string]any{"annotations": a.Changes.MergePatch(), "resourceVersion": hc.ResourceVersion}}
	if err := m.c.Patch(ctx, hc, rawMerge(body)); err != nil {
		return err
	}
	if recorded {
		if err := m.writeRecord(ctx, hc, rec, rec.run, nil); err != nil {
			return err
		}
	}
	after, _ := trusted(hc, rec)
	m.transition(hc, s, after, a)
	return nil
}

// ControlPlaneNamespace is HyperShift's hosted control plane namespace of a HostedCluster.
func ControlPlaneNamespace(hc *hyperv1.HostedCluster) string {
	return plan.ControlPlaneNamespace(hc.Namespace, hc.Name)
}

// webhookHealthy: the conversion probe passes (its dry-run create goes through the private CRDs and the webhook).
func (m *Migrator) webhookHealthy(ctx context.Context) bool {
	return crds.Probe(ctx, m.c, m.opts.ProbeNamespace) == nil
}

func rawMerge(body map[string]any) client.Patch {
	b, err := json.Marshal(body)
	if err != nil {
		panic(err) // maps of strings, numbers and API types always marshal
	}
	return client.RawPatch(types.MergePatchType, b)
}

// gauges sets the per-state gauge, and the stalled and blocked gauges, from a full list and each HostedCluster's
// trusted annotations (plan.Trusted).
func (m *Migrator) gauges(hcs []hyperv1.HostedCluster, anns []map[string]string) {
	counts := map[string]int{}
	met := m.opts.Metrics
	met.Stalled.Reset()
	met.BlockedSince.Reset()
	for i := range hcs {
		hc := &hcs[i]
		counts[scope.State(anns[i])]++
		s := stateOf(hc, anns[i])
		if s.Stalled != "" {
			met.Stalled.WithLabelValues(hc.Namespace, hc.Name, string(s.Phase)).Set(1)
		}
		if s.Blocked != "" && !s.InRun() && !s.BlockedSince.IsZero() {
			met.BlockedSince.WithLabelValues(hc.Namespace, hc.Name).Set(float64(s.BlockedSince.Unix()))
		}
	}
	for _, st := range scope.States {
		met.HostedClusters.WithLabelValues(st).Set(float64(counts[st]))
	}
}
