package inject

import (
	"context"
	"fmt"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/dcm-sp/acm-cluster-sp/internal/capiprivate/migrate/plan"
)

// HostedClusterKind is what the injector reads of HyperShift (metadata only: names and annotations), and
// hostedControlPlaneList what names a namespace's HostedCluster when two HostedClusters map to the namespace.
var (
	HostedClusterKind      = schema.GroupVersionKind{Group: "hypershift.openshift.io", Version: "v1beta1", Kind: "HostedCluster"}
	hostedControlPlaneList = schema.GroupVersionKind{Group: "hypershift.openshift.io", Version: "v1beta1", Kind: "HostedControlPlaneList"}
)

// controlPlaneNamespaceIndex indexes the cached HostedClusters by their control plane namespace.
const controlPlaneNamespaceIndex = "capi-private.controlPlaneNamespace"

// HostedClusterMeta is an empty HostedCluster metadata object (the cache's and the live reads' type).
func HostedClusterMeta() *metav1.PartialObjectMetadata {
	o := &metav1.PartialObjectMetadata{}
	o.SetGroupVersionKind(HostedClusterKind)
	return o
}

func hostedClusterMetaList() *metav1.PartialObjectMetadataList {
	l := &metav1.PartialObjectMetadataList{}
	l.SetGroupVersionKind(HostedClusterKind.GroupVersion().WithKind(HostedClusterKind.Kind + "List"))
	return l
}

// IndexControlPlaneNamespace registers the index Routes reads with the manager's field indexer.
func IndexControlPlaneNamespace(ctx context.Context, fi client.FieldIndexer) error {
	return fi.IndexField(ctx, HostedClusterMeta(), controlPlaneNamespaceIndex, func(o client.Object) []string {
		return []string{plan.ControlPlaneNamespace(o.GetNamespace(), o.GetName())}
	})
}

// Routes decides a namespace's route (RouteOf) from what kube-apiserver holds: the cache first; the API server when
// the cache has not seen the namespace or its HostedCluster yet (HyperShift creates both moments before the first
// Pod), so a new cluster's first Pod is decided on current data, not refused.
type Routes struct {
	// Cache holds Namespaces and HostedCluster metadata (indexed by IndexControlPlaneNamespace); Live reads the
	// API server.
	Cache, Live client.Reader
}

// Route returns the route of namespace ns.
func (r *Routes) Route(ctx context.Context, ns string) (RouteDecision, error) {
	labels, err := r.namespaceLabels(ctx, ns)
	if err != nil {
		return RouteDecision{}, err
	}
	if labels[HostedControlPlaneLabel] != "true" {
		return RouteOf(ns, labels, nil), nil
	}
	owners, err := r.owners(ctx, ns)
	if err != nil {
		return RouteDecision{}, err
	}
	if owners, err = r.designated(ctx, ns, owners); err != nil {
		return RouteDecision{}, err
	}
	d := RouteOf(ns, labels, owners)
	if d.Route != Unknown {
		return d, nil
	}
	// The cache may lag behind the classifier's mark or the HostedCluster itself: decide on the API server's view.
	list := hostedClusterMetaList()
	if err := r.Live.List(ctx, list); err != nil {
		return RouteDecision{}, fmt.Errorf("listing HostedClusters: %w", err)
	}
	if owners, err = r.designated(ctx, ns, ownersOf(list.Items, ns)); err != nil {
		return RouteDecision{}, err
	}
	return RouteOf(ns, labels, owners), nil
}

// designated narrows HostedClusters that map to the same namespace (HyperShift's naming makes "a-b"/"c",
// "a"/"b-c" and "a"/"b.c" meet) to the one the namespace's HostedControlPlane names: only HyperShift writes that
// object, whereas anyone who may create a HostedCluster can make another one map here.
func (r *Routes) designated(ctx context.Context, ns string, owners []Owner) ([]Owner, error) {
	if len(owners) < 2 {
		return owners, nil
	}
	hcps := &metav1.PartialObjectMetadataList{}
	hcps.SetGroupVersionKind(hostedControlPlaneList)
	if err := r.Live.List(ctx, hcps, client.InNamespace(ns)); err != nil {
		return nil, fmt.Errorf("listing the HostedControlPlanes of %s: %w", ns, err)
	}
	var out []Owner
	for _, o := range owners {
		for _, hcp := range hcps.Items {
			if plan.Designates(hcp.Annotations, o.Namespace, o.Name) {
				out = append(out, o)
				break
			}
		}
	}
	if len(out) == 0 {
		return owners, nil // none designated: RouteOf refuses the ambiguity
	}
	return out, nil
}

func (r *Routes) namespaceLabels(ctx context.Context, ns string) (map[string]string, error) {
	obj := &corev1.Namespace{}
	err := r.Cache.Get(ctx, types.NamespacedName{Name: ns}, obj)
	if err != nil {
		if err = r.Live.Get(ctx, types.NamespacedName{Name: ns}, obj); err != nil {
			return nil, fmt.Errorf("reading namespace %s: %w", ns, err)
		}
	}
	return obj.Labels, nil
}

func (r *Routes) owners(ctx context.Context, ns string) ([]Owner, error) {
	list := hostedClusterMetaList()
	if err := r.Cache.List(ctx, list, client.MatchingFields{controlPlaneNamespaceIndex: ns}); err != nil {
		return nil, nil // the cache cannot answer (not started): Route asks the API server
	}
	return ownersOf(list.Items, ns), nil
}

// ownersOf are the HostedClusters of items whose control plane namespace is ns.
func ownersOf(items []metav1.PartialObjectMetadata, ns string) []Owner {
	var out []Owner
	for _, o := range items {
		if plan.ControlPlaneNamespace(o.Namespace, o.Name) == ns {
			out = append(out, Owner{Namespace: o.Namespace, Name: o.Name, Annotations: o.Annotations})
		}
	}
	return out
}
