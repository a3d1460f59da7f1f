package capitest

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
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/controller"
	"sigs.k8s.io/controller-runtime/pkg/controller/controllerutil"
	"sigs.k8s.io/controller-runtime/pkg/handler"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"
)

// HostedClusterAnnotation is HyperShift's back reference from the objects of a hosted control plane namespace to
// their HostedCluster: "<namespace>/<name>".
const HostedClusterAnnotation = "hypershift.openshift.io/cluster"

// ControlPlaneOperator is the fake control-plane-operator of one hosted control plane namespace (reference §10.1):
// it marks the HostedControlPlane ready and initialized, with its controlPlaneEndpoint, and writes the workload
// cluster's kubeconfig Secret <infraID>-kubeconfig (key value, labelled with the cluster name), which CAPI's
// ClusterCache and the ledger provider use. It never touches a Cluster API group.
type ControlPlaneOperator struct {
	// Endpoint is the HostedControlPlane's status.controlPlaneEndpoint.
	Endpoint hyperv1.APIEndpoint
	// WorkloadKubeconfig is the kubeconfig of the workload cluster (the hub itself, directly: reference §5, the
	// ClusterCache bypasses the proxy).
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
		Message: "capitest's fake control-plane-operator", ObservedGeneration: hcp.Generation,
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

// ReconcileLog records which fake HostedCluster operator reconciled which HostedCluster when (reference §10.1: the
// fake legacy and private operators log reconciles through their scope filter), so tests can assert that at most
// one operator, and none while a migration holds the lock, touched a HostedCluster.
type ReconcileLog struct {
	mu      sync.Mutex
	entries []Reconciled
}

// Reconciled is one reconcile of a HostedCluster by a fake operator.
type Reconciled struct {
	Operator      string
	HostedCluster types.NamespacedName
	Time          time.Time
}

func (l *ReconcileLog) add(op string, hc types.NamespacedName) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.entries = append(l.entries, Reconciled{Operator: op, HostedCluster: hc, Time: time.Now()})
}

// Entries returns every reconcile so far, in order.
func (l *ReconcileLog) Entries() []Reconciled {
	l.mu.Lock()
	defer l.mu.Unlock()
	return append([]Reconciled(nil), l.entries...)
}

// Count is how many times operator reconciled hc ("" counts every operator).
func (l *ReconcileLog) Count(operator string, hc types.NamespacedName) int {
	n := 0
	for _, e := range l.Entries() {
		if e.HostedCluster == hc && (operator == "" || e.Operator == operator) {
			n++
		}
	}
	return n
}

// HostedClusterOperator is a fake HyperShift operator (reference §10.1), cluster-wide: for each HostedCluster it
// accepts it copies the HostedControlPlane's endpoint to the HostedCluster's status (with Available), and marks the
// externally managed KubevirtCluster <infraID> of the control plane namespace provisioned (status.ready, and
// spec.controlPlaneEndpoint, which HyperShift sets only on some platforms). It creates nothing: CreateHostedCluster
// plays the operator's creates.
type HostedClusterOperator struct {
	// Name identifies the operator in Log (e.g. "legacy", "private").
	Name string
	// Accept chooses the HostedClusters it reconciles (nil: all), e.g. a scope predicate. It is evaluated at every
	// reconcile, on the current object.
	Accept func(*hyperv1.HostedCluster) bool
	// Log records every accepted reconcile (optional).
	Log *ReconcileLog
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
	return ctrl.NewControllerManagedBy(mgr).Named("fake-hypershift-operator-"+o.Name).
		For(&hyperv1.HostedCluster{}).
		Watches(&hyperv1.HostedControlPlane{}, toHostedCluster).
		Watches(newObject(KubevirtClusterGVK), toHostedCluster).
		WithOptions(controller.Options{MaxConcurrentReconciles: 1}).
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
		r.Log.add(r.Name, req.NamespacedName)
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
		Message: "capitest's fake HyperShift operator " + r.Name, ObservedGeneration: hc.Generation,
	})
	if equality.Semantic.DeepEqual(orig.Status, hc.Status) {
		return reconcile.Result{}, nil
	}
	return reconcile.Result{}, r.client.Status().Patch(ctx, hc, client.MergeFrom(orig))
}

func (r *hoReconciler) markInfrastructure(ctx context.Context, hcp *hyperv1.HostedControlPlane) error {
	kc := newObject(KubevirtClusterGVK)
	if err := r.client.Get(ctx, client.ObjectKey{Namespace: hcp.Namespace, Name: hcp.Spec.InfraID}, kc); err != nil {
		return client.IgnoreNotFound(err)
	}
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
	if ready, _, _ := unstructured.NestedBool(kc.Object, "status", "ready"); ready {
		return nil
	}
	orig := kc.DeepCopy()
	if err := unstructured.SetNestedField(kc.Object, true, "status", "ready"); err != nil {
		return err
	}
	return r.client.Status().Patch(ctx, kc, client.MergeFrom(orig))
}

// ControlPlaneNamespace is HyperShift's hosted control plane namespace of a HostedCluster: <namespace>-<name>.
func ControlPlaneNamespace(namespace, name string) string { return namespace + "-" + name }
