package hub

import (
	configv1 "github.com/openshift/api/config/v1"
	hyperv1 "github.com/openshift/hypershift/api/hypershift/v1beta1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	toolscache "k8s.io/client-go/tools/cache"
	clusterv1 "open-cluster-management.io/api/cluster/v1"

	"github.com/dcm-sp/acm-cluster-sp/internal/sp/clusters"
)

// The informers keep every HostedCluster and NodePool of the namespace, and every ManagedCluster of the provider, for
// as long as it exists, so what they keep of each is what the SP's memory grows with. These transforms keep what the SP reads — the status function,
// the resource view, the reconciler's convergence and the day-2 decisions — and drop the rest of the operator's
// spec and status (on a real hub most of the object: services, networking, etcd, platform details, the platform
// and configuration status, a long version history). Writes never start from a cached object's fields beyond
// these: the SP patches only what it changes (merge patches, or a diff of two trimmed copies).
//
// trim_test.go checks that the status, the resource view and the day-2 state read from a trimmed object equal
// those read from the full one, for every step of the simulated timeline and the recorded shapes.

// TrimHostedCluster keeps of a HostedCluster its metadata and:
//   - spec: release image, infraID, controller availability policy, platform type, DNS, ingress configuration;
//   - status: conditions, version (history up to and including the newest Completed entry), kubeconfig
//     reference, control plane endpoint.
func TrimHostedCluster(hc *hyperv1.HostedCluster) *hyperv1.HostedCluster {
	out := &hyperv1.HostedCluster{TypeMeta: hc.TypeMeta, ObjectMeta: hc.ObjectMeta}
	out.Spec.Release = hc.Spec.Release
	out.Spec.InfraID = hc.Spec.InfraID
	out.Spec.ControllerAvailabilityPolicy = hc.Spec.ControllerAvailabilityPolicy
	out.Spec.Platform.Type = hc.Spec.Platform.Type
	out.Spec.DNS = hyperv1.DNSSpec{BaseDomain: hc.Spec.DNS.BaseDomain, BaseDomainPrefix: hc.Spec.DNS.BaseDomainPrefix}
	if cfg := hc.Spec.Configuration; cfg != nil && cfg.Ingress != nil {
		out.Spec.Configuration = &hyperv1.ClusterConfiguration{Ingress: &configv1.IngressSpec{Domain: cfg.Ingress.Domain, AppsDomain: cfg.Ingress.AppsDomain}}
	}
	out.Status.Conditions = exact(hc.Status.Conditions)
	out.Status.KubeConfig = hc.Status.KubeConfig
	out.Status.ControlPlaneEndpoint = hc.Status.ControlPlaneEndpoint
	if v := hc.Status.Version; v != nil {
		kept := *v
		kept.History = exact(historyToCompleted(v.History))
		out.Status.Version = &kept
	}
	return out
}

// historyToCompleted is the version history (newest first) up to and including its newest Completed entry: the
// newest entry (the rollout in progress) and the version the cluster last completed are all the SP reads.
func historyToCompleted(h []configv1.UpdateHistory) []configv1.UpdateHistory {
	for i := range h {
		if h[i].State == configv1.CompletedUpdate {
			return h[: i+1 : i+1]
		}
	}
	return h
}

// exact copies a slice the decoder grew (by doubling: up to half of it spare) into one of its length, so that the
// cache keeps neither the spare capacity nor, for a part of a longer slice, the rest of it.
func exact[S ~[]E, E any](s S) S {
	if len(s) == 0 {
		return nil
	}
	return append(make(S, 0, len(s)), s...)
}

// TrimNodePool keeps of a NodePool its metadata, its status and, of its spec: replicas, autoscaling, release and
// platform (its type and sizes, which a resize compares).
func TrimNodePool(np *hyperv1.NodePool) *hyperv1.NodePool {
	out := &hyperv1.NodePool{TypeMeta: np.TypeMeta, ObjectMeta: np.ObjectMeta, Status: np.Status}
	out.Status.Conditions = exact(np.Status.Conditions)
	out.Spec.ClusterName = np.Spec.ClusterName
	out.Spec.Replicas = np.Spec.Replicas
	out.Spec.AutoScaling = np.Spec.AutoScaling
	out.Spec.Release = np.Spec.Release
	out.Spec.Platform = np.Spec.Platform
	return out
}

// TrimManagedCluster keeps of a ManagedCluster its metadata but its annotations and, of its status, the console URL
// claim (clusters.ConsoleURLClaim): the SP reads nothing else of it (the index finds it by name and instance label,
// and it is never written from the cache; the HostedCluster UID annotation a deletion checks is read from the API
// server). The annotations, the klusterlet's conditions, capacity, version and other claims are dropped.
func TrimManagedCluster(mc *clusterv1.ManagedCluster) *clusterv1.ManagedCluster {
	out := &clusterv1.ManagedCluster{TypeMeta: mc.TypeMeta, ObjectMeta: mc.ObjectMeta}
	out.Annotations = nil
	for _, c := range mc.Status.ClusterClaims {
		if c.Name == clusters.ConsoleURLClaim {
			out.Status.ClusterClaims = []clusterv1.ManagedClusterClaim{c}
			break
		}
	}
	return out
}

// TrimSecret keeps of a Secret's metadata all but its annotations: the SP finds its Secrets by name, instance label
// and owner, and reads a kubeconfig's content from the API server; no annotation of a Secret is read. The cache holds
// four or more Secrets per cluster.
func TrimSecret(s *metav1.PartialObjectMetadata) *metav1.PartialObjectMetadata {
	out := &metav1.PartialObjectMetadata{TypeMeta: s.TypeMeta, ObjectMeta: s.ObjectMeta}
	out.Annotations = nil
	return out
}

// trimTransform is the informers' transform for HostedClusters, NodePools, ManagedClusters and Secrets' metadata:
// stripTransform, then the trims above; the labels of a cluster's HostedCluster, NodePools and Secrets are shared
// (labelSets).
func trimTransform(labels *labelSets) toolscache.TransformFunc {
	return func(obj any) (any, error) {
		obj, err := stripTransform(obj)
		if err != nil {
			return obj, err
		}
		switch o := obj.(type) {
		case *hyperv1.HostedCluster:
			obj = TrimHostedCluster(o)
		case *hyperv1.NodePool:
			obj = TrimNodePool(o)
		case *metav1.PartialObjectMetadata:
			obj = TrimSecret(o)
		case *clusterv1.ManagedCluster:
			return TrimManagedCluster(o), nil // its labels are its own: nothing to share them with
		default:
			return obj, nil
		}
		m := obj.(metav1.Object)
		m.SetLabels(labels.share(m.GetLabels()))
		return obj, nil
	}
}
