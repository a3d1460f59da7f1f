package capipods

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"sync"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"
	"k8s.io/client-go/tools/clientcmd"
	"k8s.io/utils/ptr"
	clusterv1 "sigs.k8s.io/cluster-api/api/core/v1beta2"
	"sigs.k8s.io/cluster-api/util/annotations"
	"sigs.k8s.io/cluster-api/util/secret"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/controller"
	"sigs.k8s.io/controller-runtime/pkg/handler"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"
)

// Standard groups and the CAPK kinds, as a direct (legacy) or proxied client sees them.
const (
	ClusterGroup        = "cluster.x-k8s.io"
	InfrastructureGroup = "infrastructure.cluster.x-k8s.io"
	CAPKVersion         = "v1alpha1"
	// MachineFinalizer is CAPK's KubevirtMachine finalizer (never renamed).
	MachineFinalizer = "kubevirtmachine.infrastructure.cluster.x-k8s.io"
	// NodeLabel marks the Nodes the ledger provider created.
	NodeLabel = "capipods.capi-private.dcm.io/ledger"
	// KubeletStoppedAnnotation ("true") marks a Node whose kubelet a test stopped: the ledger provider no longer
	// reports it Ready (the Ready condition stays as the test set it), as a kubelet that stopped posting status.
	KubeletStoppedAnnotation = "capipods.capi-private.dcm.io/kubelet-stopped"
)

// CAPK kinds in the standard group.
var (
	KubevirtClusterGVK         = schema.GroupVersionKind{Group: InfrastructureGroup, Version: CAPKVersion, Kind: "KubevirtCluster"}
	KubevirtMachineGVK         = schema.GroupVersionKind{Group: InfrastructureGroup, Version: CAPKVersion, Kind: "KubevirtMachine"}
	KubevirtMachineTemplateGVK = schema.GroupVersionKind{Group: InfrastructureGroup, Version: CAPKVersion, Kind: "KubevirtMachineTemplate"}
)

func newObject(gvk schema.GroupVersionKind) *unstructured.Unstructured {
	u := &unstructured.Unstructured{}
	u.SetGroupVersionKind(gvk)
	return u
}

// Provider is the ledger infrastructure provider, the stand-in of every platform's provider (CAPK, CAPA, CAPZ,
// CAP-Agent: Platforms): it reconciles their machines (and clusters not managed externally) in the standard groups, so
// it runs directly in legacy mode and through the proxy in private mode. It honours cluster.x-k8s.io/paused and
// Cluster.spec.paused. A machine without spec.providerID gets an instance from the ledger (kubevirt://ledger-<n>) and a
// Ready Node in the workload cluster (reached through the <cluster>-kubeconfig Secret); a deleted one has its instance
// (and Node) deleted, then its finalizer removed.
type Provider struct {
	Ledger *Ledger
	// Concurrency is each controller's MaxConcurrentReconciles (default 2).
	Concurrency int
	// Platforms whose kinds it reconciles (default: all, Platforms).
	Platforms []Platform
}

// Setup implements Component: a machine and a cluster controller for each platform's kinds (Platforms).
func (p Provider) Setup(_ context.Context, mgr ctrl.Manager) error {
	if p.Ledger == nil {
		return fmt.Errorf("the ledger provider needs a ledger")
	}
	opts := controller.Options{MaxConcurrentReconciles: max(p.Concurrency, 2)}
	platforms := p.Platforms
	if len(platforms) == 0 {
		platforms = Platforms
	}
	for _, pl := range platforms {
		r := &machineReconciler{client: mgr.GetClient(), ledger: p.Ledger, platform: pl, pending: map[types.UID]Instance{}}
		if err := ctrl.NewControllerManagedBy(mgr).Named("ledger-"+strings.ToLower(pl.Machine)).
			For(newObject(pl.MachineGVK())).
			Watches(&clusterv1.Machine{}, handler.EnqueueRequestsFromMapFunc(r.machineToInfrastructure)).
			Watches(&clusterv1.Cluster{}, handler.EnqueueRequestsFromMapFunc(r.clusterToMachines)).
			WithOptions(opts).Complete(r); err != nil {
			return err
		}
		cr := &clusterReconciler{client: mgr.GetClient(), platform: pl, status: pl.shapes().ClusterStatus}
		if err := ctrl.NewControllerManagedBy(mgr).Named("ledger-" + strings.ToLower(pl.Cluster)).
			For(newObject(pl.ClusterGVK())).
			WithOptions(opts).Complete(cr); err != nil {
			return err
		}
	}
	return nil
}

func (r *machineReconciler) machineToInfrastructure(_ context.Context, o client.Object) []reconcile.Request {
	m, ok := o.(*clusterv1.Machine)
	if !ok || m.Spec.InfrastructureRef.APIGroup != r.platform.Group || m.Spec.InfrastructureRef.Kind != r.platform.Machine {
		return nil
	}
	return []reconcile.Request{{NamespacedName: types.NamespacedName{Namespace: m.Namespace, Name: m.Spec.InfrastructureRef.Name}}}
}

func (r *machineReconciler) clusterToMachines(ctx context.Context, o client.Object) []reconcile.Request {
	gvk := r.platform.MachineGVK()
	list := &unstructured.UnstructuredList{}
	list.SetGroupVersionKind(gvk.GroupVersion().WithKind(gvk.Kind + "List"))
	if err := r.client.List(ctx, list, client.InNamespace(o.GetNamespace()), client.MatchingLabels{clusterv1.ClusterNameLabel: o.GetName()}); err != nil {
		return nil
	}
	out := make([]reconcile.Request, 0, len(list.Items))
	for _, km := range list.Items {
		out = append(out, reconcile.Request{NamespacedName: types.NamespacedName{Namespace: km.GetNamespace(), Name: km.GetName()}})
	}
	return out
}

// machineObservation is what the provider knows about a KubevirtMachine when it decides (pure input of machineStep).
type machineObservation struct {
	Deleting, HasFinalizer, Paused bool
	// ClusterFound: the Cluster named by the cluster-name label exists; InfrastructureProvisioned is its status.
	ClusterFound, InfrastructureProvisioned bool
	// MachineFound: the owning Machine exists; BootstrapReady: it has spec.bootstrap.dataSecretName;
	// MachineDeleting: it is being deleted.
	MachineFound, BootstrapReady, MachineDeleting bool
	ProviderID                                    string
	Ready                                         bool
}

// machineAction is the one thing the provider does next.
type machineAction int

const (
	waitAction      machineAction = iota // nothing to do until something changes
	deleteInstance                       // delete the instance (if any) and the Node, then remove the finalizer
	removeFinalizer                      // nothing to delete: only remove the finalizer
	addFinalizer                         // before anything is created
	createInstance                       // ledger.Create, then record spec.providerID
	provisionNode                        // create the Node, then set status.ready and addresses
)

func (a machineAction) String() string {
	return [...]string{"wait", "deleteInstance", "removeFinalizer", "addFinalizer", "createInstance", "provisionNode"}[a]
}

// machineStep decides the provider's next action. A paused object is never touched, not even on delete; a Node is
// created only once, on the way to Ready, and never for a Machine that is being deleted, so Nodes of running
// instances (and of migrated twins, which arrive Ready) are never written.
func machineStep(o machineObservation) machineAction {
	switch {
	case o.Paused:
		return waitAction
	case o.Deleting && !o.HasFinalizer:
		return waitAction
	case o.Deleting && o.ProviderID != "":
		return deleteInstance
	case o.Deleting:
		return removeFinalizer
	case !o.ClusterFound:
		return waitAction
	case !o.HasFinalizer:
		return addFinalizer
	case !o.MachineFound || !o.BootstrapReady || !o.InfrastructureProvisioned:
		return waitAction
	case o.ProviderID == "":
		if o.MachineDeleting {
			return waitAction
		}
		return createInstance
	case !o.Ready && !o.MachineDeleting:
		return provisionNode
	default:
		return waitAction
	}
}

type machineReconciler struct {
	client   client.Client
	ledger   *Ledger
	platform Platform

	mu sync.Mutex
	// pending are instances created but not yet seen recorded in spec.providerID, by KubevirtMachine UID: a retry
	// after a failed write, or a reconcile on a cache that does not show the write yet, reuses them instead of
	// leaking a second instance (a real provider names its VMs deterministically for the same reason). A pod
	// restart loses them, as it would lose an in-flight request.
	pending map[types.UID]Instance
}

func (r *machineReconciler) Reconcile(ctx context.Context, req reconcile.Request) (reconcile.Result, error) {
	km := newObject(r.platform.MachineGVK())
	if err := r.client.Get(ctx, req.NamespacedName, km); err != nil {
		return reconcile.Result{}, client.IgnoreNotFound(err)
	}
	obs := machineObservation{
		Deleting:     !km.GetDeletionTimestamp().IsZero(),
		HasFinalizer: slices.Contains(km.GetFinalizers(), r.platform.MachineFinalizer),
		Paused:       annotations.HasPaused(km),
	}
	obs.ProviderID, _, _ = unstructured.NestedString(km.Object, "spec", "providerID")
	obs.Ready, _, _ = unstructured.NestedBool(km.Object, "status", "ready")

	cluster := &clusterv1.Cluster{}
	if name := km.GetLabels()[clusterv1.ClusterNameLabel]; name != "" {
		err := r.client.Get(ctx, client.ObjectKey{Namespace: km.GetNamespace(), Name: name}, cluster)
		if err != nil && !apierrors.IsNotFound(err) {
			return reconcile.Result{}, err
		}
		if err == nil {
			obs.ClusterFound = true
			obs.Paused = obs.Paused || annotations.IsPaused(cluster, km)
			obs.InfrastructureProvisioned = ptr.Deref(cluster.Status.Initialization.InfrastructureProvisioned, false)
		}
	}
	if owner := ownerMachine(km); owner != "" {
		m := &clusterv1.Machine{}
		err := r.client.Get(ctx, client.ObjectKey{Namespace: km.GetNamespace(), Name: owner}, m)
		if err != nil && !apierrors.IsNotFound(err) {
			return reconcile.Result{}, err
		}
		if err == nil {
			obs.MachineFound = true
			obs.BootstrapReady = m.Spec.Bootstrap.DataSecretName != nil
			obs.MachineDeleting = !m.DeletionTimestamp.IsZero()
		}
	}

	if obs.ProviderID != "" {
		r.mu.Lock()
		delete(r.pending, km.GetUID()) // recorded: no longer pending
		r.mu.Unlock()
	}
	switch machineStep(obs) {
	case deleteInstance:
		r.ledger.Delete(obs.ProviderID)
		if obs.ClusterFound {
			if node, ok := nodeName(r.ledger, obs.ProviderID); ok {
				if err := r.deleteNode(ctx, cluster, node); err != nil {
					return reconcile.Result{}, err
				}
			}
		}
		return reconcile.Result{}, r.removeFinalizer(ctx, km)
	case removeFinalizer:
		r.mu.Lock()
		in, ok := r.pending[km.GetUID()]
		delete(r.pending, km.GetUID())
		r.mu.Unlock()
		if ok {
			r.ledger.Delete(in.ProviderID)
		}
		return reconcile.Result{}, r.removeFinalizer(ctx, km)
	case addFinalizer:
		orig := km.DeepCopy()
		km.SetFinalizers(append(km.GetFinalizers(), r.platform.MachineFinalizer))
		return reconcile.Result{}, r.client.Patch(ctx, km, client.MergeFromWithOptions(orig, client.MergeFromWithOptimisticLock{}))
	case createInstance:
		r.mu.Lock()
		in, ok := r.pending[km.GetUID()]
		if !ok {
			in = r.ledger.Create(km.GetNamespace(), km.GetName())
			r.pending[km.GetUID()] = in
		}
		r.mu.Unlock()
		orig := km.DeepCopy()
		if err := unstructured.SetNestedField(km.Object, in.ProviderID, "spec", "providerID"); err != nil {
			return reconcile.Result{}, err
		}
		// The instance stays pending until the cache shows the providerID: a reconcile on a stale read must reuse it.
		return reconcile.Result{}, r.client.Patch(ctx, km, client.MergeFrom(orig))
	case provisionNode:
		node, _ := nodeName(r.ledger, obs.ProviderID)
		address := nodeAddress(obs.ProviderID)
		if err := r.createNode(ctx, cluster, node, obs.ProviderID, address); err != nil {
			return reconcile.Result{}, err
		}
		orig := km.DeepCopy()
		if err := unstructured.SetNestedField(km.Object, true, "status", "ready"); err != nil {
			return reconcile.Result{}, err
		}
		if err := unstructured.SetNestedSlice(km.Object, []any{
			map[string]any{"type": string(clusterv1.MachineInternalIP), "address": address},
			map[string]any{"type": string(clusterv1.MachineHostName), "address": node},
		}, "status", "addresses"); err != nil {
			return reconcile.Result{}, err
		}
		return reconcile.Result{}, r.client.Status().Patch(ctx, km, client.MergeFrom(orig))
	default:
		return reconcile.Result{}, nil
	}
}

func (r *machineReconciler) removeFinalizer(ctx context.Context, km *unstructured.Unstructured) error {
	orig := km.DeepCopy()
	km.SetFinalizers(slices.DeleteFunc(km.GetFinalizers(), func(f string) bool { return f == r.platform.MachineFinalizer }))
	return client.IgnoreNotFound(r.client.Patch(ctx, km, client.MergeFromWithOptions(orig, client.MergeFromWithOptimisticLock{})))
}

// ownerMachine is the name of the KubevirtMachine's owning Machine (any version of the standard core group).
func ownerMachine(o metav1.Object) string {
	for _, ref := range o.GetOwnerReferences() {
		gv, err := schema.ParseGroupVersion(ref.APIVersion)
		if err == nil && gv.Group == ClusterGroup && ref.Kind == "Machine" {
			return ref.Name
		}
	}
	return ""
}

// nodeName is the Node of a providerID: the ledger's record, or the providerID's last segment for an instance the
// ledger does not know (any more).
func nodeName(l *Ledger, providerID string) (string, bool) {
	if in, ok := l.Lookup(providerID); ok {
		return in.Node, true
	}
	name, ok := strings.CutPrefix(providerID, ProviderIDPrefix)
	return name, ok && name != ""
}

// nodeAddress is a stable fake InternalIP for an instance: 10.<n/65536>.<n/256%256>.<n%256>.
func nodeAddress(providerID string) string {
	n := instanceNumber(providerID)
	return fmt.Sprintf("10.%d.%d.%d", (n>>16)&255, (n>>8)&255, n&255)
}

// workloadClient is a client for the cluster's workload API server, from its <cluster>-kubeconfig Secret (key
// value). It is built for each use: the provider writes Nodes once per instance.
func (r *machineReconciler) workloadClient(ctx context.Context, cluster *clusterv1.Cluster) (client.Client, error) {
	s := &corev1.Secret{}
	key := client.ObjectKey{Namespace: cluster.Namespace, Name: secret.Name(cluster.Name, secret.Kubeconfig)}
	if err := r.client.Get(ctx, key, s); err != nil {
		return nil, fmt.Errorf("reading the workload kubeconfig %s: %w", key, err)
	}
	cfg, err := clientcmd.RESTConfigFromKubeConfig(s.Data[secret.KubeconfigDataName])
	if err != nil {
		return nil, fmt.Errorf("workload kubeconfig %s: %w", key, err)
	}
	return client.New(cfg, client.Options{Scheme: clientgoscheme.Scheme})
}

func (r *machineReconciler) createNode(ctx context.Context, cluster *clusterv1.Cluster, name, providerID, address string) error {
	wc, err := r.workloadClient(ctx, cluster)
	if err != nil {
		return err
	}
	node := &corev1.Node{
		ObjectMeta: metav1.ObjectMeta{Name: name, Labels: map[string]string{NodeLabel: "true", corev1.LabelHostname: name}},
		Spec:       corev1.NodeSpec{ProviderID: providerID},
	}
	if err := wc.Create(ctx, node); err != nil {
		if !apierrors.IsAlreadyExists(err) {
			return err
		}
		if err := wc.Get(ctx, client.ObjectKeyFromObject(node), node); err != nil {
			return err
		}
	}
	if nodeReady(node) || node.Annotations[KubeletStoppedAnnotation] == "true" {
		return nil
	}
	now := metav1.Now()
	node.Status.Conditions = []corev1.NodeCondition{{
		Type: corev1.NodeReady, Status: corev1.ConditionTrue, Reason: "LedgerInstanceRunning",
		Message: "the ledger's instance is running", LastHeartbeatTime: now, LastTransitionTime: now,
	}}
	// The pressure conditions a kubelet reports, all clear: CAPI's NodeHealthy (and so Machine Ready) needs them.
	for _, c := range []corev1.NodeConditionType{corev1.NodeMemoryPressure, corev1.NodeDiskPressure, corev1.NodePIDPressure} {
		node.Status.Conditions = append(node.Status.Conditions, corev1.NodeCondition{
			Type: c, Status: corev1.ConditionFalse, Reason: "LedgerInstanceRunning", LastHeartbeatTime: now, LastTransitionTime: now,
		})
	}
	node.Status.Addresses = []corev1.NodeAddress{{Type: corev1.NodeInternalIP, Address: address}, {Type: corev1.NodeHostName, Address: name}}
	return wc.Status().Update(ctx, node)
}

func nodeReady(n *corev1.Node) bool {
	for _, c := range n.Status.Conditions {
		if c.Type == corev1.NodeReady {
			return c.Status == corev1.ConditionTrue
		}
	}
	return false
}

func (r *machineReconciler) deleteNode(ctx context.Context, cluster *clusterv1.Cluster, name string) error {
	wc, err := r.workloadClient(ctx, cluster)
	if apierrors.IsNotFound(err) {
		return nil // no workload cluster any more: nothing to clean up
	}
	if err != nil {
		return err
	}
	return client.IgnoreNotFound(wc.Delete(ctx, &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: name}}))
}

// clusterReconciler marks a platform's infrastructure clusters provisioned (status.ready, with the platform's
// other status fields), except externally managed ones (cluster.x-k8s.io/managed-by, as HyperShift's are on most
// platforms: the HostedCluster operator marks those) and paused ones.
type clusterReconciler struct {
	client   client.Client
	platform Platform
	status   map[string]any
}

func (r *clusterReconciler) Reconcile(ctx context.Context, req reconcile.Request) (reconcile.Result, error) {
	kc := newObject(r.platform.ClusterGVK())
	if err := r.client.Get(ctx, req.NamespacedName, kc); err != nil {
		return reconcile.Result{}, client.IgnoreNotFound(err)
	}
	if annotations.IsExternallyManaged(kc) || annotations.HasPaused(kc) || !kc.GetDeletionTimestamp().IsZero() {
		return reconcile.Result{}, nil
	}
	if ready, _, _ := unstructured.NestedBool(kc.Object, "status", "ready"); ready {
		return reconcile.Result{}, nil
	}
	orig := kc.DeepCopy()
	for k, v := range r.status {
		if err := unstructured.SetNestedField(kc.Object, runtime.DeepCopyJSONValue(v), "status", k); err != nil {
			return reconcile.Result{}, err
		}
	}
	if err := unstructured.SetNestedField(kc.Object, true, "status", "ready"); err != nil {
		return reconcile.Result{}, err
	}
	return reconcile.Result{}, r.client.Status().Patch(ctx, kc, client.MergeFrom(orig))
}
