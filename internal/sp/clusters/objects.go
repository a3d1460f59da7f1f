package clusters

import (
	"time"

	hyperv1 "github.com/openshift/hypershift/api/hypershift/v1beta1"
	"k8s.io/apimachinery/pkg/types"
	clusterv1 "open-cluster-management.io/api/cluster/v1"

	"github.com/dcm-sp/acm-cluster-sp/internal/sp/meta"
)

// Key orders clusters for listing: creation time, then id. Stable under inserts and deletes, so it makes a
// keyset page token.
type Key struct {
	Created time.Time
	ID      string
}

// Less orders keys.
func (k Key) Less(o Key) bool {
	if !k.Created.Equal(o.Created) {
		return k.Created.Before(o.Created)
	}
	return k.ID < o.ID
}

// View is everything the SP knows about one cluster, as read from the caches. The pointers are shared with the
// caches and must not be modified.
type View struct {
	ID            string
	HostedCluster *hyperv1.HostedCluster // nil: gone (NodePools may still be known)
	NodePools     []*hyperv1.NodePool    // sorted by name; shared with the cache: read, never modify (like the objects)
	// Kubeconfig is the Secret named by status.kubeconfig, as metadata only ("" when absent): the operator creates
	// it with the HostedCluster's labels in recent versions and without labels in older ones, so it is found by
	// name. Its content is read on demand (hub.Hub.Kubeconfig), only for callers allowed to see it.
	Kubeconfig     SecretRef
	ManagedCluster *clusterv1.ManagedCluster
}

// SecretRef names a Secret of the SP's namespace and the version seen in the cache; Cluster and ClusterUID name the
// HostedCluster it was found to belong to (hub.KubeconfigBelongs), checked again when its content is read.
type SecretRef struct {
	Name, ResourceVersion string
	Cluster               string
	ClusterUID            types.UID
}

// Gone reports whether the cluster no longer exists for DCM: the HostedCluster is absent, or it is being deleted
// and only the SP's own status finalizer holds it (the operator has finished).
func (v View) Gone() bool {
	hc := v.HostedCluster
	if hc == nil {
		return true
	}
	if hc.DeletionTimestamp == nil {
		return false
	}
	for _, f := range hc.Finalizers {
		if f != meta.FinalizerStatus {
			return false
		}
	}
	return true
}
