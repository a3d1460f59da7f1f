package capipods

import (
	"bytes"
	"context"
	"strings"
	"sync"
	"time"

	hyperv1 "github.com/openshift/hypershift/api/hypershift/v1beta1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/utils/ptr"
	clusterv1 "sigs.k8s.io/cluster-api/api/core/v1beta2"
	"sigs.k8s.io/cluster-api/util/secret"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/builder"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/controller"
	"sigs.k8s.io/controller-runtime/pkg/controller/controllerutil"
	"sigs.k8s.io/controller-runtime/pkg/handler"
	"sigs.k8s.io/controller-runtime/pkg/predicate"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"
)

// HostedClusterAnnotation is HyperShift's back reference from the objects of a hosted control plane namespace to
// their HostedCluster: "<namespace>/<name>".
const HostedClusterAnnotation = "hypershift.openshift.io/cluster"

// ControlPlaneOperator is the fake control-plane-operator of one hosted control plane namespace: it marks the
// HostedControlPlane ready and initialized, with its controlPlaneEndpoint, and writes the workload cluster's kubeconfig
// Secret <infraID>-kubeconfig (key value, labelled with the cluster name), which CAPI's ClusterCache and the ledger
// provider use. It never touches a Cluster API group.
type ControlPlaneOperator struct {
	// Endpoint is the HostedControlPlane's status.controlPlaneEndpoint.
	Endpoint hyperv1.APIEndpoint
	// WorkloadKubeconfig is the kubeconfig of the workload cluster (the hub itself, directly: CAPI's ClusterCache reads
	// it from that Secret and bypasses the proxy).
	WorkloadKubeconfig []byte
}

// Setup implements Component.
func (o ControlPlaneOperator) Setup(_ context.Context, mgr ctrl.Manager) error {
	return ctrl.NewControllerManagedBy(mgr).Named("fake-control-plane-operator").
		For(&hyperv1.HostedControlPlane{}).
		WithOptions(controller.Options{MaxConcurrentReconciles: 1}).
		Complete(&cpoReconciler{ControlPlaneOperator: o, client: mgr.GetClient()})
}

type cpoReconciler struct {
	ControlPlaneOperator
	client client.Client
}

func (r *cpoReconciler) Reconcile(ctx context.Context, req reconcile.Request) (reconcile.Result, error) {
	hcp := &hyperv1.HostedControlPlane{}
	if err := r.client.Get(ctx, req.NamespacedName, hcp); err != nil {
		return reconcile.Result{}, client.IgnoreNotFound(err)
	}
	if !hcp.DeletionTimestamp.IsZero() {
		return reconcile.Result{}, nil
	}
	if err := r.ensureKubeconfig(ctx, hcp); err != nil {
		return reconcile.Result{}, err
	}
	orig := hcp.DeepCopy()
	hcp.Status.Ready = true
	hcp.Status.Initialized = true
	hcp.Status.ExternalManagedControlPlane = ptr.To(true)
	hcp.Status.ControlPlaneEndpoint = r.Endpoint
	meta.SetStatusCondition(&hcp.Status.Conditions, metav1.Condition{
		Type: string(hyperv1.HostedControlPlaneAvailable), Status: metav1.ConditionTrue, Reason: "FakeControlPlaneOperator",
		Message: "capipods's fake control-plane-operator", ObservedGeneration: hcp.Generation,
	})
	if equality.Semantic.DeepEqual(orig.Status, hcp.Status) {
		return reconcile.Result{}, nil
	}
	return reconcile.Result{}, r.client.Status().Patch(ctx, hcp, client.MergeFrom(orig))
}

func (r *cpoReconciler) ensureKubeconfig(ctx context.Context, hcp *hyperv1.HostedControlPlane) error {
	s := &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: hcp.Namespace, Name: secret.Name(hcp.Spec.InfraID, secret.Kubeconfig)}}
	err := r.client.Get(ctx, client.ObjectKeyFromObject(s), s)
	switch {
	case apierrors.IsNotFound(err):
		s.Labels = map[string]string{clusterv1.ClusterNameLabel: hcp.Spec.InfraID}
		s.Type = clusterv1.ClusterSecretType
		s.Data = map[string][]byte{secret.KubeconfigDataName: r.WorkloadKubeconfig}
		if err := controllerutil.SetControllerReference(hcp, s, r.client.Scheme()); err != nil {
			return err
		}
		return client.IgnoreAlreadyExists(r.client.Create(ctx, s))
	case err != nil:
		return err
	case bytes.Equal(s.Data[secret.KubeconfigDataName], r.WorkloadKubeconfig):
		return nil
	default:
		orig := s.DeepCopy()
		s.Data[secret.KubeconfigDataName] = r.WorkloadKubeconfig
		return r.client.Patch(ctx, s, client.MergeFrom(orig))
	}
}

// ReconcileLog records, per fake HostedCluster operator, every reconcile of a HostedCluster and every event on a
// HostedCluster its scope predicate turned away, so tests can assert which operator reconciled a HostedCluster,
// that none did while a migration held the lock, and that they had their chance (they saw it and skipped it).
type ReconcileLog struct {
	mu      sync.Mutex
	entries []Reconciled
}

// Reconciled is one reconcile of a HostedCluster by a fake operator, or (Skipped) one event on it that the
// operator's scope predicate turned away.
type Reconciled struct {
	Operator      string
	HostedCluster types.NamespacedName
	Time          time.Time
	// Scope is the HostedCluster's scope annotation the operator saw.
	Scope string
	// Skipped: the scope predicate turned the event away (no reconcile).
	Skipped bool
}

func (l *ReconcileLog) add(e Reconciled) {
	l.mu.Lock()
	defer l.mu.Unlock()
	e.Time = time.Now()
	l.entries = append(l.entries, e)
}

// Entries returns every entry so far, in order.
func (l *ReconcileLog) Entries() []Reconciled {
	l.mu.Lock()
	defer l.mu.Unlock()
	return append([]Reconciled(nil), l.entries...)
}

// Count is how many times operator reconciled hc ("" counts every operator).
func (l *ReconcileLog) Count(operator string, hc types.NamespacedName) int {
	return l.count(operator, hc, false)
}

// Skips is how many events on hc operator's scope predicate turned away ("" counts every operator).
func (l *ReconcileLog) Skips(operator string, hc types.NamespacedName) int {
	return l.count(operator, hc, true)
}

func (l *ReconcileLog) count(operator string, hc types.NamespacedName, skipped bool) int {
	n := 0
	for _, e := range l.Entries() {
		if e.HostedCluster == hc && (operator == "" || e.Operator == operator) && e.Skipped == skipped {
			n++
		}
	}
	return n
}

// HyperShift's operator settings and annotations for scoping (support/k8sutil/constants.go).
const (
	// EnableScopingEnv "true" turns HyperShift's HostedCluster scoping on.
	EnableScopingEnv = "ENABLE_HOSTEDCLUSTERS_ANNOTATION_SCOPING"
	// ScopeEnv is the scope an operator serves ("" or unset: the HostedClusters without a scope).
	ScopeEnv = "HOSTEDCLUSTERS_SCOPE_ANNOTATION"
	// ScopeAnnotation is the HostedCluster's scope.
	ScopeAnnotation = "hypershift.openshift.io/scope"
	// NodePoolAnnotation links an object to its NodePool ("<namespace>/<name>").
	NodePoolAnnotation = "hypershift.openshift.io/nodePool"
)

// ScopeMatches is HyperShift's scoping rule (PredicatesForHostedClusterAnnotationScoping, support/util/util.go),
// written down here rather than imported: env is the operator's environment, hcScope the scope annotation of the
// HostedCluster an event's object belongs to ("" when it has none or cannot be found).
//   - scoping not enabled (EnableScopingEnv is not "true"): every event passes;
//   - the operator serves no scope and the HostedCluster has none: passes;
//   - otherwise it passes only when the HostedCluster's scope equals the operator's.
func ScopeMatches(env map[string]string, hcScope string) bool {
	if env[EnableScopingEnv] != "true" {
		return true
	}
	if hcScope == "" && env[ScopeEnv] == "" {
		return true
	}
	return hcScope == env[ScopeEnv]
}

// LegacyOperatorEnv is the environment of the legacy HyperShift operator (scope legacy), PrivateOperatorEnv the
// private one's: the default operator, serving the HostedClusters without a scope.
var (
	LegacyOperatorEnv  = map[string]string{EnableScopingEnv: "true", ScopeEnv: "legacy"}
	PrivateOperatorEnv = map[string]string{EnableScopingEnv: "true"}
)

// hostedClusterOf is HyperShift's getHostedClusterScopeAnnotation lookup: the HostedCluster an object belongs to
// (itself; a NodePool's spec.clusterName; otherwise through its nodePool or cluster annotation), nil when
// there is none or it cannot be read (HyperShift then takes the scope as "").
func hostedClusterOf(ctx context.Context, r client.Reader, obj client.Object) *hyperv1.HostedCluster {
	var key string
	switch o := obj.(type) {
	case *hyperv1.HostedCluster:
		return o
	case *hyperv1.NodePool:
		key = o.Namespace + "/" + o.Spec.ClusterName
	default:
		key = obj.GetAnnotations()[HostedClusterAnnotation]
		if np := obj.GetAnnotations()[NodePoolAnnotation]; np != "" {
			ns, name, _ := strings.Cut(np, "/")
			pool := &hyperv1.NodePool{}
			if err := r.Get(ctx, types.NamespacedName{Namespace: ns, Name: name}, pool); err != nil {
				return nil
			}
			key = pool.Namespace + "/" + pool.Spec.ClusterName
		}
	}
	ns, name, found := strings.Cut(key, "/")
	if !found {
		return nil
	}
	hc := &hyperv1.HostedCluster{}
	if err := r.Get(ctx, types.NamespacedName{Namespace: ns, Name: name}, hc); err != nil {
		return nil
	}
	return hc
}

// HostedClusterOperator is a fake HyperShift operator, cluster-wide: for each HostedCluster it reconciles it copies
// the HostedControlPlane's endpoint to the HostedCluster's status (with Available), and marks the externally
// managed infrastructure cluster <infraID> of the control plane namespace (any platform's) provisioned (status.ready, and
// spec.controlPlaneEndpoint, which HyperShift sets only on some platforms). It creates nothing: CreateHostedCluster
// plays the operator's creates.
//
// Its scoping is HyperShift's, exactly: Env is read like HyperShift reads its environment, and ScopeMatches filters
// the events of every watch (the HostedCluster, and the objects that name one) — the reconciler itself does not
// check the scope again, as HyperShift's does not.
type HostedClusterOperator struct {
	// Name identifies the operator in Log (e.g. "legacy", "private").
	Name string
	// Env is the operator's environment (EnableScopingEnv, ScopeEnv); nil: scoping off.
	Env map[string]string
	// Accept, when set, keeps tests apart (e.g. by namespace); it is no part of HyperShift's behaviour. It is
	// evaluated at every reconcile, on the current object, and before logging a skipped event.
	Accept func(*hyperv1.HostedCluster) bool
	// Log records every accepted reconcile and every event on an accepted HostedCluster the scope turned away
	// (optional).
	Log *ReconcileLog
}

// scopePredicate is HyperShift's event filter for o's Env, logging what it turns away.
func (o HostedClusterOperator) scopePredicate(r client.Reader) predicate.Predicate {
	return predicate.NewPredicateFuncs(func(obj client.Object) bool {
		hc := hostedClusterOf(context.Background(), r, obj)
		scope := ""
		if hc != nil {
			scope = hc.Annotations[ScopeAnnotation]
		}
		pass := ScopeMatches(o.Env, scope)
		if !pass && hc != nil && o.Log != nil && (o.Accept == nil || o.Accept(hc)) {
			o.Log.add(Reconciled{Operator: o.Name, HostedCluster: client.ObjectKeyFromObject(hc), Scope: scope, Skipped: true})
		}
		return pass
	})
}

// Setup implements Component.
func (o HostedClusterOperator) Setup(_ context.Context, mgr ctrl.Manager) error {
	toHostedCluster := handler.EnqueueRequestsFromMapFunc(func(_ context.Context, obj client.Object) []reconcile.Request {
		ns, name, ok := strings.Cut(obj.GetAnnotations()[HostedClusterAnnotation], "/")
		if !ok {
			return nil
		}
		return []reconcile.Request{{NamespacedName: types.NamespacedName{Namespace: ns, Name: name}}}
	})
	scoped := builder.WithPredicates(o.scopePredicate(mgr.GetClient()))
	b := ctrl.NewControllerManagedBy(mgr).Named("fake-hypershift-operator-"+o.Name).
		For(&hyperv1.HostedCluster{}, scoped).
		Watches(&hyperv1.HostedControlPlane{}, toHostedCluster, scoped)
	for _, p := range Platforms {
		b = b.Watches(newObject(p.ClusterGVK()), toHostedCluster, scoped)
	}
	return b.WithOptions(controller.Options{MaxConcurrentReconciles: 1}).
		Complete(&hoReconciler{HostedClusterOperator: o, client: mgr.GetClient()})
}

type hoReconciler struct {
	HostedClusterOperator
	client client.Client
}

func (r *hoReconciler) Reconcile(ctx context.Context, req reconcile.Request) (reconcile.Result, error) {
	hc := &hyperv1.HostedCluster{}
	if err := r.client.Get(ctx, req.NamespacedName, hc); err != nil {
		return reconcile.Result{}, client.IgnoreNotFound(err)
	}
	if r.Accept != nil && !r.Accept(hc) {
		return reconcile.Result{}, nil
	}
	if r.Log != nil {
		r.Log.add(Reconciled{Operator: r.Name, HostedCluster: req.NamespacedName, Scope: hc.Annotations[ScopeAnnotation]})
	}
	if !hc.DeletionTimestamp.IsZero() {
		return reconcile.Result{}, nil
	}
	hcp := &hyperv1.HostedControlPlane{}
	if err := r.client.Get(ctx, client.ObjectKey{Namespace: ControlPlaneNamespace(hc.Namespace, hc.Name), Name: hc.Name}, hcp); err != nil {
		return reconcile.Result{}, client.IgnoreNotFound(err)
	}
	if !hcp.Status.Ready {
		return reconcile.Result{}, nil
	}
	if err := r.markInfrastructure(ctx, hcp); err != nil {
		return reconcile.Result{}, err
	}
	orig := hc.DeepCopy()
	hc.Status.ControlPlaneEndpoint = hcp.Status.ControlPlaneEndpoint
	meta.SetStatusCondition(&hc.Status.Conditions, metav1.Condition{
		Type: string(hyperv1.HostedClusterAvailable), Status: metav1.ConditionTrue, Reason: "FakeHyperShiftOperator",
		Message: "capipods's fake HyperShift operator " + r.Name, ObservedGeneration: hc.Generation,
	})
	if equality.Semantic.DeepEqual(orig.Status, hc.Status) {
		return reconcile.Result{}, nil
	}
	return reconcile.Result{}, r.client.Status().Patch(ctx, hc, client.MergeFrom(orig))
}

// StartHyperShiftOperator starts a cluster-wide fake HyperShift operator named name in mode with environment env
// (LegacyOperatorEnv, PrivateOperatorEnv, or nil for no scoping), reconciling through accept (nil: all; a test
// filter, no part of HyperShift) and logging to Reconciles. Stop it with Manager.Stop.
func (h *Harness) StartHyperShiftOperator(ctx context.Context, name string, mode Mode, env map[string]string, accept func(*hyperv1.HostedCluster) bool) (*Manager, error) {
	cfg, err := h.Config(mode, "hypershift-operator", "")
	if err != nil {
		return nil, err
	}
	m, err := StartManager(cfg, ManagerOptions{
		Name:       "hypershift-operator-" + name,
		Components: []Component{HostedClusterOperator{Name: name, Env: env, Accept: accept, Log: h.Reconciles}},
		Log:        h.opts.Log.WithName("hypershift-operator-" + name),
	})
	if err != nil {
		return nil, err
	}
	if err := m.WaitReady(ctx); err != nil {
		_ = m.Stop()
		return nil, err
	}
	return m, nil
}

// markInfrastructure writes the control plane endpoint into the infrastructure cluster <infraID>, whichever
// platform's it is, and marks it provisioned when it is externally managed (else its provider does).
func (r *hoReconciler) markInfrastructure(ctx context.Context, hcp *hyperv1.HostedControlPlane) error {
	for _, p := range Platforms {
		kc := newObject(p.ClusterGVK())
		if err := r.client.Get(ctx, client.ObjectKey{Namespace: hcp.Namespace, Name: hcp.Spec.InfraID}, kc); err != nil {
			if apierrors.IsNotFound(err) {
				continue
			}
			return err
		}
		return r.markProvisioned(ctx, hcp, kc, p.ExternallyManaged)
	}
	return nil
}

func (r *hoReconciler) markProvisioned(ctx context.Context, hcp *hyperv1.HostedControlPlane, kc *unstructured.Unstructured, ready bool) error {
	if !kc.GetDeletionTimestamp().IsZero() {
		return nil
	}
	endpoint := map[string]any{"host": hcp.Status.ControlPlaneEndpoint.Host, "port": int64(hcp.Status.ControlPlaneEndpoint.Port)}
	current, _, _ := unstructured.NestedMap(kc.Object, "spec", "controlPlaneEndpoint")
	if !equality.Semantic.DeepEqual(current, endpoint) {
		orig := kc.DeepCopy()
		if err := unstructured.SetNestedMap(kc.Object, endpoint, "spec", "controlPlaneEndpoint"); err != nil {
			return err
		}
		if err := r.client.Patch(ctx, kc, client.MergeFrom(orig)); err != nil {
			return err
		}
	}
	if done, _, _ := unstructured.NestedBool(kc.Object, "status", "ready"); done || !ready {
		return nil
	}
	orig := kc.DeepCopy()
	if err := unstructured.SetNestedField(kc.Object, true, "status", "ready"); err != nil {
		return err
	}
	return r.client.Status().Patch(ctx, kc, client.MergeFrom(orig))
}

// ControlPlaneNamespace is HyperShift's hosted control plane namespace of a HostedCluster: <namespace>-<name>, the
// name's dots made dashes (hypershift-operator/controllers/manifests/manifests.go, HostedControlPlaneNamespace).
func ControlPlaneNamespace(namespace, name string) string {
	return namespace + "-" + strings.ReplaceAll(name, ".", "-")
}

// HostedControlPlaneLabel=true is on every hosted control plane namespace HyperShift creates
// (hypershift-operator/controllers/hostedcluster/hostedcluster_controller.go, reconcileControlPlaneNamespace).
const HostedControlPlaneLabel = "hypershift.openshift.io/hosted-control-plane"
