package provision

import (
	"context"
	"strings"

	hyperv1 "github.com/openshift/hypershift/api/hypershift/v1beta1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/validation"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/dcm-sp/acm-cluster-sp/internal/sp/clusters"
	"github.com/dcm-sp/acm-cluster-sp/internal/sp/hubapi"
)

// ControlPlaneNamespace is the namespace HyperShift puts a HostedCluster's control plane in: "<namespace>-<name>",
// dots of the name turned into dashes. The operator creates it, adopts it if it exists already, and deletes it
// with the cluster — so two HostedClusters whose names meet there (x-bar in clusters, bar in clusters-x) share it,
// and deleting one takes the other's control plane down.
func ControlPlaneNamespace(namespace, name string) string {
	return namespace + "-" + strings.ReplaceAll(name, ".", "-")
}

// controlPlaneNamespaceRivals lists the other HostedClusters (namespace and name) whose control plane namespace
// would also be cpNamespace: every split of it at a dash into a valid namespace and a name, except self. Names are
// taken as written (a rival whose name has dots where cpNamespace has dashes is not found).
func controlPlaneNamespaceRivals(cpNamespace string, self types.NamespacedName) []types.NamespacedName {
	var out []types.NamespacedName
	for i := 1; i < len(cpNamespace)-1; i++ {
		if cpNamespace[i] != '-' {
			continue
		}
		c := types.NamespacedName{Namespace: cpNamespace[:i], Name: cpNamespace[i+1:]}
		if c == self || len(validation.IsDNS1123Label(c.Namespace)) > 0 || len(validation.IsDNS1123Label(c.Name)) > 0 {
			continue
		}
		out = append(out, c)
	}
	return out
}

// controlPlaneNamespaceVerdict decides whether a cluster may have its control plane in cpNamespace, from what the
// hub holds: ns is that namespace (nil: absent), self the cluster's HostedCluster (nil: not created yet), rival
// another HostedCluster whose control plane namespace is the same ("" when there is none). The namespace is the
// cluster's own only when HyperShift made it for this HostedCluster: it did not exist before the HostedCluster, and
// no other HostedCluster claims it. nil means the cluster may go ahead.
func controlPlaneNamespaceVerdict(name, cpNamespace string, ns *metav1.PartialObjectMetadata, self *hyperv1.HostedCluster, rival string) error {
	switch {
	case rival != "":
		return clusters.Conflict("cluster name %q: its control plane namespace %s is also that of HostedCluster %s (HyperShift would put both control planes there)", name, cpNamespace, rival)
	case ns == nil:
		return nil
	case ns.DeletionTimestamp != nil:
		return clusters.Conflict("cluster name %q: its control plane namespace %s is still being deleted on the hub; retry later", name, cpNamespace)
	case self == nil:
		return clusters.Conflict("cluster name %q: the namespace %s already exists on the hub, and HyperShift would put this cluster's control plane in it", name, cpNamespace)
	case ns.CreationTimestamp.Before(&self.CreationTimestamp):
		return clusters.Conflict("cluster %q: the namespace %s existed before its HostedCluster, so it is not this cluster's control plane namespace", name, cpNamespace)
	}
	return nil
}

// checkControlPlaneNamespace returns controlPlaneNamespaceVerdict on what the hub holds now. self is nil on create.
func (s *deps) checkControlPlaneNamespace(ctx context.Context, name string, self *hyperv1.HostedCluster) error {
	cpNamespace, ns, rival, err := s.controlPlaneNamespaceState(ctx, name)
	if err != nil {
		return err
	}
	return controlPlaneNamespaceVerdict(name, cpNamespace, ns, self, rival)
}

// controlPlaneNamespaceState reads, in parallel, the metadata of a cluster's control plane namespace (nil: absent)
// and the HostedClusters that could claim it, and returns the first rival found ("" when there is none).
func (s *deps) controlPlaneNamespaceState(ctx context.Context, name string) (cpNamespace string, ns *metav1.PartialObjectMetadata, rival string, err error) {
	cpNamespace = ControlPlaneNamespace(s.site.Namespace(), name)
	ns = &metav1.PartialObjectMetadata{}
	ns.SetGroupVersionKind(corev1.SchemeGroupVersion.WithKind("Namespace"))
	rivals := controlPlaneNamespaceRivals(cpNamespace, types.NamespacedName{Namespace: s.site.Namespace(), Name: name})
	found := make([]bool, len(rivals))
	steps := []func() error{func() error {
		err := s.client.Get(ctx, client.ObjectKey{Name: cpNamespace}, ns)
		if apierrors.IsNotFound(err) {
			ns = nil
			return nil
		}
		return err
	}}
	for i, r := range rivals {
		steps = append(steps, func() error {
			hc := &metav1.PartialObjectMetadata{}
			hc.SetGroupVersionKind(hyperv1.GroupVersion.WithKind("HostedCluster"))
			err := s.client.Get(ctx, client.ObjectKey(r), hc)
			found[i] = err == nil
			if apierrors.IsNotFound(err) {
				return nil
			}
			return err
		})
	}
	if err := parallel(steps...); err != nil {
		return "", nil, "", hubapi.Failure(err, "checking the control plane namespace %s of cluster %q", cpNamespace, name)
	}
	for i, r := range rivals {
		if found[i] {
			return cpNamespace, ns, r.String(), nil
		}
	}
	return cpNamespace, ns, "", nil
}
