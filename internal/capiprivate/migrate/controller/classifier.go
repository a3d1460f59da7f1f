package controller

import (
	"context"
	"slices"
	"time"

	"github.com/go-logr/logr"
	hyperv1 "github.com/openshift/hypershift/api/hypershift/v1beta1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/tools/record"
	"k8s.io/client-go/util/workqueue"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/controller"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"

	"github.com/dcm-sp/acm-cluster-sp/internal/capiprivate/groups"
	"github.com/dcm-sp/acm-cluster-sp/internal/capiprivate/migrate/plan"
	"github.com/dcm-sp/acm-cluster-sp/internal/capiprivate/migrate/scope"
)

// Classifier assigns each HostedCluster its scope and keeps it consistent: it runs continuously in
// `capi-private migrate`, so its initial list is the startup scan of the HostedClusters created before the private
// operator starts — every one with a standard Cluster gets scope: legacy, which is what closes the startup race
// (docs/capi-private-migration.md, install order). It reads the Clusters live, and writes with a resourceVersion
// precondition, so a HostedCluster that changed in between is looked at again rather than misclassified.
type Classifier struct {
	// Client must be uncached (the migrator's).
	Client client.Client
	// Namespace limits it to the HostedClusters of one namespace ("" = all).
	Namespace string
	Mapping   *groups.Mapping
	Recorder  record.EventRecorder
	Log       logr.Logger
}

var standardCluster = schema.GroupVersionKind{Group: "cluster.x-k8s.io", Version: "v1beta2", Kind: "ClusterList"}

// SetupWithManager registers the classifier on HostedClusters.
func (c *Classifier) SetupWithManager(mgr ctrl.Manager) error {
	if c.Mapping == nil {
		c.Mapping = groups.Default
	}
	if c.Recorder == nil {
		//lint:ignore SA1019 the core/v1 Events recorder: its replacement writes events.k8s.io/v1 (other RBAC and another Eventf); kept until that move
		c.Recorder = mgr.GetEventRecorderFor("capi-private-classifier")
	}
	if c.Log.GetSink() == nil {
		c.Log = logr.Discard()
	}
	return ctrl.NewControllerManagedBy(mgr).Named("capi-private-classifier").
		For(&hyperv1.HostedCluster{}).
		WithOptions(controller.Options{MaxConcurrentReconciles: 1,
			RateLimiter: workqueue.NewTypedItemExponentialFailureRateLimiter[reconcile.Request](100*time.Millisecond, maxRetryDelay)}).
		Complete(c)
}

// clusters lists the Clusters of gvk's group in namespace (none when the CRD is missing).
func (c *Classifier) clusters(ctx context.Context, namespace string, gvk schema.GroupVersionKind) ([]unstructured.Unstructured, error) {
	list := &unstructured.UnstructuredList{}
	list.SetGroupVersionKind(gvk)
	if err := c.Client.List(ctx, list, client.InNamespace(namespace)); err != nil {
		if meta.IsNoMatchError(err) || apierrors.IsNotFound(err) {
			return nil, nil
		}
		return nil, err
	}
	return list.Items, nil
}

// observe reads where the HostedCluster's Cluster is. A private Cluster that copies the standard one (its
// migrated-from-uid is the standard Cluster's UID: a twin, or a rolled-back run's leftover) is not a second
// Cluster.
func (c *Classifier) observe(ctx context.Context, namespace string) (scope.Observed, error) {
	std, err := c.clusters(ctx, namespace, standardCluster)
	if err != nil {
		return scope.Observed{}, err
	}
	priv := standardCluster
	priv.Group, _ = c.Mapping.ToPrivate(priv.Group)
	private, err := c.clusters(ctx, namespace, priv)
	if err != nil {
		return scope.Observed{}, err
	}
	o := scope.Observed{StandardCluster: len(std) > 0}
	for _, p := range private {
		from := p.GetAnnotations()[plan.MigratedFromUIDAnnotation]
		if !slices.ContainsFunc(std, func(s unstructured.Unstructured) bool { return from != "" && string(s.GetUID()) == from }) {
			o.PrivateCluster = true
		}
	}
	return o, nil
}

// Reconcile classifies one HostedCluster.
func (c *Classifier) Reconcile(ctx context.Context, req reconcile.Request) (reconcile.Result, error) {
	if c.Namespace != "" && req.Namespace != c.Namespace {
		return reconcile.Result{}, nil
	}
	hc := &hyperv1.HostedCluster{}
	if err := c.Client.Get(ctx, req.NamespacedName, hc); err != nil {
		return reconcile.Result{}, client.IgnoreNotFound(err)
	}
	o, err := c.observe(ctx, ControlPlaneNamespace(hc))
	if err != nil {
		return reconcile.Result{}, err
	}
	d := scope.Classify(hc.Annotations, o)
	if d == scope.Keep {
		return reconcile.Result{}, nil
	}
	ch := scope.Changes(d)
	body := map[string]any{"metadata": map[string]any{"annotations": ch.MergePatch(), "resourceVersion": hc.ResourceVersion}}
	if err := c.Client.Patch(ctx, hc, rawMerge(body)); err != nil {
		if apierrors.IsConflict(err) {
			return reconcile.Result{Requeue: true}, nil
		}
		return reconcile.Result{}, err
	}
	c.Log.Info("classified", "hostedcluster", req.String(), "decision", d)
	if c.Recorder != nil {
		typ := "Normal"
		if d == scope.MarkInconsistent {
			typ = "Warning"
		}
		c.Recorder.Event(hc, typ, "CAPIScope"+string(d), "capi-private classifier: "+string(d))
	}
	return reconcile.Result{}, nil
}
