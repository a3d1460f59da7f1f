// Package controller runs capi-private's migration (reference capi-private.md §8): a leader-elected migrator that
// moves legacy HostedClusters' Cluster API objects into the private groups one hosted cluster at a time, and the
// classifier that assigns every HostedCluster its scope. It only observes and executes: every decision is
// package plan's (Step) or package scope's (Classify), and all state lives in the cluster (HostedCluster
// annotations, twins' migrated-from-uid, recorded Deployment replicas), so a kill anywhere resumes.
package controller

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"time"

	"github.com/go-logr/logr"
	hyperv1 "github.com/openshift/hypershift/api/hypershift/v1beta1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
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

// DefaultKinds are the standard kinds a migration moves, at the version it reads and writes them (core v1beta2,
// CAPK v1alpha1). A kind whose CRD is not installed is skipped.
var DefaultKinds = []schema.GroupVersionKind{
	{Group: "cluster.x-k8s.io", Version: "v1beta2", Kind: "Cluster"},
	{Group: "cluster.x-k8s.io", Version: "v1beta2", Kind: "ClusterClass"},
	{Group: "cluster.x-k8s.io", Version: "v1beta2", Kind: "MachineDeployment"},
	{Group: "cluster.x-k8s.io", Version: "v1beta2", Kind: "MachineSet"},
	{Group: "cluster.x-k8s.io", Version: "v1beta2", Kind: "Machine"},
	{Group: "cluster.x-k8s.io", Version: "v1beta2", Kind: "MachineHealthCheck"},
	{Group: "cluster.x-k8s.io", Version: "v1beta2", Kind: "MachinePool"},
	{Group: "cluster.x-k8s.io", Version: "v1beta2", Kind: "MachineDrainRule"},
	{Group: "addons.cluster.x-k8s.io", Version: "v1beta2", Kind: "ClusterResourceSet"},
	{Group: "addons.cluster.x-k8s.io", Version: "v1beta2", Kind: "ClusterResourceSetBinding"},
	{Group: "ipam.cluster.x-k8s.io", Version: "v1beta2", Kind: "IPAddressClaim"},
	{Group: "ipam.cluster.x-k8s.io", Version: "v1beta2", Kind: "IPAddress"},
	{Group: "infrastructure.cluster.x-k8s.io", Version: "v1alpha1", Kind: "KubevirtCluster"},
	{Group: "infrastructure.cluster.x-k8s.io", Version: "v1alpha1", Kind: "KubevirtClusterTemplate"},
	{Group: "infrastructure.cluster.x-k8s.io", Version: "v1alpha1", Kind: "KubevirtMachineTemplate"},
	{Group: "infrastructure.cluster.x-k8s.io", Version: "v1alpha1", Kind: "KubevirtMachine"},
}

// Options configure a Migrator. Zero values take the defaults.
type Options struct {
	// Config is the state machine's timing (plan.DefaultConfig()).
	Config plan.Config
	// Mapping is the group table (groups.Default).
	Mapping *groups.Mapping
	// Kinds are the standard kinds moved (DefaultKinds).
	Kinds []schema.GroupVersionKind
	// Switcher moves the controllers (a DeploymentSwitcher over DefaultDeployments).
	Switcher Switcher
	// Namespace limits the migrator and the classifier to the HostedClusters of one namespace ("" = all).
	Namespace string
	// ProbeNamespace is where the conversion probe runs ("default").
	ProbeNamespace string
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
}

// Migrator is the migration controller. Build it with New and add it to a manager with SetupWithManager.
type Migrator struct {
	c      client.Client // uncached: the migrator decides on what the API server says now
	disc   discovery.DiscoveryInterface
	opts   Options
	copier *plan.Copier
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
	return NewWithClient(c, disc, o), nil
}

// NewWithClient builds a Migrator on an existing uncached client.
func NewWithClient(c client.Client, disc discovery.DiscoveryInterface, o Options) *Migrator {
	if o.Config == (plan.Config{}) {
		o.Config = plan.DefaultConfig()
	}
	if o.Mapping == nil {
		o.Mapping = groups.Default
	}
	if len(o.Kinds) == 0 {
		o.Kinds = DefaultKinds
	}
	if o.Switcher == nil {
		o.Switcher = DeploymentSwitcher{Client: c}
	}
	if o.ProbeNamespace == "" {
		o.ProbeNamespace = "default"
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
	hcs := &hyperv1.HostedClusterList{}
	if err := m.c.List(ctx, hcs, client.InNamespace(m.opts.Namespace)); err != nil {
		return reconcile.Result{}, err
	}
	m.gauges(hcs.Items)
	var cands []plan.Candidate
	byKey := map[string]*hyperv1.HostedCluster{}
	for i := range hcs.Items {
		hc := &hcs.Items[i]
		c := plan.Candidate{Namespace: hc.Namespace, Name: hc.Name, Created: hc.CreationTimestamp.Time,
			State: plan.ReadState(hc.Annotations, hc.DeletionTimestamp != nil)}
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

// drive runs Step and its actions for one HostedCluster until Step says Wait or Idle. It returns when to look
// again and whether the HostedCluster is (now) in a run.
func (m *Migrator) drive(ctx context.Context, hc *hyperv1.HostedCluster, other string) (time.Duration, bool, error) {
	key := types.NamespacedName{Namespace: hc.Namespace, Name: hc.Name}
	log := m.opts.Log.WithValues("hostedcluster", key.String())
	for range maxStepsPerPass {
		if err := m.c.Get(ctx, key, hc); err != nil {
			return 0, false, client.IgnoreNotFound(err)
		}
		s := plan.ReadState(hc.Annotations, hc.DeletionTimestamp != nil)
		o, w, err := m.observe(ctx, hc, s)
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
			return a.RequeueAfter, s.InRun(), nil
		}
		log.Info("action", "phase", s.Phase, "action", a.String())
		if err := m.execute(ctx, hc, s, o, w, a); err != nil {
			var perm *permanentError
			if !errors.As(err, &perm) {
				return 0, true, err
			}
			log.Info("action failed", "action", a.Kind, "reason", perm.reason, "error", err.Error())
			s = plan.ReadState(hc.Annotations, hc.DeletionTimestamp != nil)
			f := plan.Fail(s, o, m.opts.Config, perm.reason)
			if f.Kind == plan.Wait {
				return f.RequeueAfter, true, nil
			}
			if err := m.persist(ctx, hc, s, f); err != nil {
				return 0, true, err
			}
		}
		if m.opts.AfterAction != nil {
			m.opts.AfterAction(key, s.Phase, a)
		}
	}
	return time.Second, true, nil
}

// permanentError is an action failure that no retry fixes (an admission denial, a conflicting object): the run
// rolls back (before Committed) with reason.
type permanentError struct {
	reason string
	err    error
}

func (e *permanentError) Error() string { return e.reason + ": " + e.err.Error() }
func (e *permanentError) Unwrap() error { return e.err }

// persist writes a's annotation Changes on the HostedCluster (optimistic: a concurrent writer makes it retry),
// records the event and metrics a transition means, and updates hc.
func (m *Migrator) persist(ctx context.Context, hc *hyperv1.HostedCluster, s plan.State, a plan.Action) error {
	if a.Changes.Empty() {
		return nil
	}
	body := map[string]any{"metadata": map[string]any{"annotations": a.Changes.MergePatch(), "resourceVersion": hc.ResourceVersion}}
	if err := m.c.Patch(ctx, hc, rawMerge(body)); err != nil {
		return err
	}
	after := plan.ReadState(hc.Annotations, hc.DeletionTimestamp != nil)
	m.transition(hc, s, after, a)
	return nil
}

// transition emits the events and metrics of a state change from s to after.
func (m *Migrator) transition(hc *hyperv1.HostedCluster, s, after plan.State, a plan.Action) {
	ev := func(typ, reason, msg string) {
		if m.opts.Recorder != nil {
			m.opts.Recorder.Event(hc, typ, reason, msg)
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
			ev("Warning", "MigrationFailed", fmt.Sprintf("migration %s rolled back (%s); the cluster is back on the legacy controllers. Remove the %s annotation to retry", s.ID, after.Failed, plan.FailedAnnotation))
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
}

// gauges sets the HostedCluster state gauge from a full list.
func (m *Migrator) gauges(hcs []hyperv1.HostedCluster) {
	counts := map[string]int{}
	for _, hc := range hcs {
		counts[scope.State(hc.Annotations)]++
	}
	for _, st := range States {
		m.opts.Metrics.HostedClusters.WithLabelValues(st).Set(float64(counts[st]))
	}
}

// ControlPlaneNamespace is HyperShift's hosted control plane namespace of a HostedCluster.
func ControlPlaneNamespace(hc *hyperv1.HostedCluster) string { return hc.Namespace + "-" + hc.Name }

// graph is what observe read of a hosted cluster's CAPI objects.
type graph struct {
	old, private []unstructured.Unstructured
	twins        plan.UIDMap
}

// listKinds lists every kind of m's kinds in namespace, in the standard (private false) or private groups.
// Kinds without a CRD are skipped.
func (m *Migrator) listKinds(ctx context.Context, namespace string, private bool) ([]unstructured.Unstructured, error) {
	var out []unstructured.Unstructured
	for _, gvk := range m.opts.Kinds {
		if private {
			gvk = m.copier.PrivateGVK(gvk)
		}
		list := &unstructured.UnstructuredList{}
		list.SetGroupVersionKind(gvk.GroupVersion().WithKind(gvk.Kind + "List"))
		if err := m.c.List(ctx, list, client.InNamespace(namespace)); err != nil {
			if meta.IsNoMatchError(err) || apierrors.IsNotFound(err) {
				continue
			}
			return nil, fmt.Errorf("listing %s: %w", gvk.Kind, err)
		}
		for i := range list.Items {
			list.Items[i].SetGroupVersionKind(gvk)
		}
		out = append(out, list.Items...)
	}
	return out, nil
}

func (m *Migrator) readGraph(ctx context.Context, namespace string) (graph, error) {
	var g graph
	var err error
	if g.old, err = m.listKinds(ctx, namespace, false); err != nil {
		return g, err
	}
	if g.private, err = m.listKinds(ctx, namespace, true); err != nil {
		return g, err
	}
	g.twins = plan.Twins(g.old, g.private)
	return g, nil
}

func clusterOf(objs []unstructured.Unstructured) *unstructured.Unstructured {
	for i := range objs {
		if objs[i].GetKind() == "Cluster" {
			return &objs[i]
		}
	}
	return nil
}

func paused(o *unstructured.Unstructured) bool {
	p, _, _ := unstructured.NestedBool(o.Object, "spec", "paused")
	return p
}

// webhookHealthy: the private CRDs of the moved kinds are Established and the conversion probe passes.
func (m *Migrator) webhookHealthy(ctx context.Context) bool {
	return crds.Probe(ctx, m.c, m.opts.ProbeNamespace) == nil
}

// observe gathers the plan.Observation of one HostedCluster; the expensive parts only in the phases that read
// them.
func (m *Migrator) observe(ctx context.Context, hc *hyperv1.HostedCluster, s plan.State) (plan.Observation, graph, error) {
	ns := ControlPlaneNamespace(hc)
	o := plan.Observation{Now: m.opts.Now(), NewID: m.opts.NewID()}
	g, err := m.readGraph(ctx, ns)
	if err != nil {
		return o, g, err
	}
	if !s.InRun() && (!s.Legacy || s.Failed != "" || s.PrivateTypes || s.Deleting) {
		return o, g, nil // idle: nothing to observe
	}
	o.WebhookHealthy = m.webhookHealthy(ctx)
	o.PreconditionFailures = plan.Preconditions(g.old, s.InRun())
	if cl := clusterOf(g.old); cl != nil {
		o.LegacyClusterPaused = paused(cl)
	} else {
		o.LegacyClusterPaused = true
	}
	if pc := clusterOf(g.private); pc != nil {
		o.PrivateClusterExists, o.PrivateClusterPaused = true, paused(pc)
	}
	w, err := m.opts.Switcher.Observe(ctx, ns)
	if err != nil {
		return o, g, err
	}
	o.LegacyScaledDown, o.LegacyPods = w.LegacyScaledDown, w.LegacyPods
	o.Switched, o.WorkloadsAvailable = w.Switched, w.Available
	o.ProxiedReplicas, o.ProxiedPods = w.ProxiedReplicas, w.ProxiedPods
	o.Fingerprint = plan.Fingerprint(g.old)
	for i := range g.old {
		if g.old[i].GetDeletionTimestamp() != nil {
			o.OldDeleting++
		} else {
			o.OldObjects++
		}
	}
	deleting := map[types.UID]bool{}
	for i := range g.private {
		if g.private[i].GetDeletionTimestamp() != nil {
			deleting[g.private[i].GetUID()] = true
		}
	}
	for _, r := range g.twins {
		if deleting[r.UID] {
			o.TwinsDeleting++
		} else {
			o.Twins++
		}
	}
	o.MissingTwins = len(plan.Missing(g.old, g.twins)) + m.statusPending(g)
	o.LegacyRestored = w.Restored && (clusterOf(g.old) == nil || !paused(clusterOf(g.old)))
	switch s.Phase {
	case plan.PhaseRepointing, plan.PhaseVerifying:
		deps, err := m.dependents(ctx, ns, uidSet(g.old))
		if err != nil {
			return o, g, err
		}
		o.PendingRepoints = len(deps)
		if s.Phase == plan.PhaseVerifying {
			o.VerifyProblems = m.copier.Verify(g.old, g.private, s.ID)
		}
	case plan.PhaseResuming:
		o.BornObjects = plan.Born(g.old, g.private)
		o.Unhealthy = unhealthy(g, w)
	case plan.PhaseRollingBack:
		twinUIDs := map[types.UID]bool{}
		for _, r := range g.twins {
			twinUIDs[r.UID] = true
		}
		deps, err := m.dependents(ctx, ns, twinUIDs)
		if err != nil {
			return o, g, err
		}
		o.TwinDependents = len(deps)
	}
	return o, g, nil
}

func uidSet(objs []unstructured.Unstructured) map[types.UID]bool {
	out := map[types.UID]bool{}
	for i := range objs {
		out[objs[i].GetUID()] = true
	}
	return out
}

// statusPending counts twins still missing their status.
func (m *Migrator) statusPending(g graph) int {
	byUID := map[types.UID]*unstructured.Unstructured{}
	for i := range g.private {
		byUID[g.private[i].GetUID()] = &g.private[i]
	}
	n := 0
	for i := range g.old {
		if ref, ok := g.twins[g.old[i].GetUID()]; ok && byUID[ref.UID] != nil && plan.StatusPending(&g.old[i], byUID[ref.UID]) {
			n++
		}
	}
	return n
}

// unhealthy is Resuming's health check ("" when green): workloads Available, MachineDeployment and MachineSet
// counters of the twins equal to the old objects', no deletionTimestamp on a private object.
func unhealthy(g graph, w Workloads) string {
	if !w.Available {
		return "proxied workloads not Available"
	}
	byUID := map[types.UID]*unstructured.Unstructured{}
	for i := range g.private {
		p := &g.private[i]
		byUID[p.GetUID()] = p
		if p.GetDeletionTimestamp() != nil {
			return p.GetKind() + "/" + p.GetName() + " is being deleted"
		}
	}
	for i := range g.old {
		o := &g.old[i]
		if o.GetKind() != "MachineDeployment" && o.GetKind() != "MachineSet" {
			continue
		}
		tw := byUID[g.twins[o.GetUID()].UID]
		if tw == nil {
			return o.GetKind() + "/" + o.GetName() + " has no twin"
		}
		for _, f := range []string{"replicas", "readyReplicas", "availableReplicas"} {
			a, _, _ := unstructured.NestedInt64(o.Object, "status", f)
			b, _, _ := unstructured.NestedInt64(tw.Object, "status", f)
			if a != b {
				return fmt.Sprintf("%s/%s status.%s %d, was %d", o.GetKind(), o.GetName(), f, b, a)
			}
		}
	}
	return ""
}

// dependent is an object outside the mapped groups with an ownerReference to one of a set of UIDs.
type dependent struct {
	obj *metav1.PartialObjectMetadata
}

// dependents lists every namespaced, listable resource in namespace (outside the mapped groups, standard and
// private) and returns the objects with an ownerReference naming a UID of uids. Cluster-scoped objects cannot
// have namespaced owners, so the namespace is complete.
func (m *Migrator) dependents(ctx context.Context, namespace string, uids map[types.UID]bool) ([]dependent, error) {
	if len(uids) == 0 {
		return nil, nil
	}
	lists, err := m.disc.ServerPreferredNamespacedResources()
	if err != nil && len(lists) == 0 {
		return nil, fmt.Errorf("discovery: %w", err)
	}
	var out []dependent
	for _, l := range lists {
		gv, err := schema.ParseGroupVersion(l.GroupVersion)
		if err != nil || m.opts.Mapping.IsStandard(gv.Group) || m.opts.Mapping.IsPrivate(gv.Group) {
			continue
		}
		for _, r := range l.APIResources {
			if !slices.Contains(r.Verbs, "list") || !slices.Contains(r.Verbs, "patch") {
				continue
			}
			list := &metav1.PartialObjectMetadataList{}
			list.SetGroupVersionKind(gv.WithKind(r.Kind + "List"))
			if err := m.c.List(ctx, list, client.InNamespace(namespace)); err != nil {
				if apierrors.IsNotFound(err) || apierrors.IsMethodNotSupported(err) || meta.IsNoMatchError(err) {
					continue
				}
				return nil, fmt.Errorf("listing %s: %w", r.Name, err)
			}
			for i := range list.Items {
				for _, ref := range list.Items[i].OwnerReferences {
					if uids[ref.UID] {
						it := list.Items[i]
						it.SetGroupVersionKind(gv.WithKind(r.Kind))
						out = append(out, dependent{obj: &it})
						break
					}
				}
			}
		}
	}
	return out, nil
}

func rawMerge(body map[string]any) client.Patch {
	b, err := json.Marshal(body)
	if err != nil {
		panic(err) // maps of strings and numbers always marshal
	}
	return client.RawPatch(types.MergePatchType, b)
}
