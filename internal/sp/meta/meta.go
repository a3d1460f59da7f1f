// Package meta names the labels, annotations and finalizers the SP puts on hub objects: the contract shared by the
// renderer, the hub caches (whose selectors use them) and the reconcilers.
package meta

import "k8s.io/apimachinery/pkg/labels"

// The three labels of.
const (
	LabelManagedBy   = "managed-by"
	LabelInstanceID  = "dcm-instance-id"
	LabelServiceType = "dcm-service-type"
	LabelProvider    = "dcm.io/provider"

	ManagedByValue   = "dcm"
	ServiceTypeValue = "cluster"
)

// Bookkeeping annotations on the HostedCluster (docs/hypershift-objects.md).
const (
	// AnnotationSpec holds the normalized spec JSON echoed by POST and returned verbatim by GET and LIST.
	AnnotationSpec = "dcm-spec"
	// AnnotationOpenShiftVersion holds the resolved OpenShift release, e.g. 4.17.12.
	AnnotationOpenShiftVersion = "dcm-openshift-version"
	// AnnotationReservedAt records on an Agent when the SP reserved it (RFC 3339), for orphan clean-up.
	AnnotationReservedAt = "dcm-reserved-at"
	// AnnotationIdempotencyKey holds the Idempotency-Key of the create that made the cluster (the instance id of a
	// create without ?id= is derived from it).
	AnnotationIdempotencyKey = "dcm-idempotency-key"
	// AnnotationHostedClusterUID, on the cluster-scoped ManagedCluster (which a namespaced HostedCluster cannot
	// own), is the UID of the HostedCluster it was created for: a HostedCluster that is gone or rolled back is
	// known by it.
	AnnotationHostedClusterUID = "dcm-hosted-cluster-uid"
)

// The deletion record (tombstone) of an instance: a ConfigMap that outlives its HostedCluster for a bounded time,
// so that a replayed keyed DELETE is answered as the first one was (docs/dcm.md).
const (
	// LabelTombstone marks the tombstones (value "true"); they carry the provider label but no instance-id label:
	// they are no object of the instance.
	LabelTombstone = "dcm-tombstone"
	// AnnotationTombstoneOf is the deleted instance's id.
	AnnotationTombstoneOf = "dcm-tombstone-of"
	// AnnotationDeleteKeys holds the Idempotency-Keys of the DELETEs answered 204 (a JSON array, newest last).
	AnnotationDeleteKeys = "dcm-delete-keys"
	// AnnotationExpiresAt is when the tombstone stops answering replays and is removed (RFC 3339).
	AnnotationExpiresAt = "dcm-expires-at"
)

// HyperShift names the SP writes or reads.
const (
	// FinalizerHyperShift is the operator's finalizer on HostedClusters and NodePools.
	FinalizerHyperShift = "hypershift.openshift.io/finalizer"
	// FinalizerStatus is the SP's own finalizer on HostedClusters: removed only after the DELETED status event
	// has been acknowledged by the bus, so DELETED survives an SP restart during deletion.
	FinalizerStatus = "acm-cluster-sp.dcm.io/status-reported"
	// AnnotationCleanupCloudResources asks the operator to remove guest cloud resources before the HCP goes.
	AnnotationCleanupCloudResources = "hypershift.openshift.io/cleanup-cloud-resources"
	// LabelSafeToDelete and LabelAutoCreatedForInfra make the operator garbage-collect a Secret with its cluster.
	LabelSafeToDelete        = "hypershift.openshift.io/safe-to-delete-with-cluster"
	LabelAutoCreatedForInfra = "hypershift.openshift.io/auto-created-for-infra"
	// AnnotationResourceRequestOverridePrefix + "<deployment>.<container>" overrides control-plane requests.
	AnnotationResourceRequestOverridePrefix = "resource-request-override.hypershift.openshift.io/"
	// LabelInfraEnv is set by assisted-service on every Agent of an InfraEnv.
	LabelInfraEnv = "infraenvs.agent-install.openshift.io"
)

// Labels returns the labels of one instance's objects: the managed-by, instance-id and service-type labels and the provider's name.
func Labels(provider, instanceID string) map[string]string {
	return map[string]string{LabelManagedBy: ManagedByValue, LabelInstanceID: instanceID, LabelServiceType: ServiceTypeValue, LabelProvider: provider}
}

// Ours reports whether an object with these labels belongs to provider: it carries provider's name, or no provider
// label at all (objects created before the label existed, which the reconciler then labels).
func Ours(provider string, l map[string]string) bool {
	p, ok := l[LabelProvider]
	return !ok || p == provider
}

// Selector selects every object the SP manages (managed-by=dcm,dcm-service-type=cluster).
func Selector() labels.Selector {
	return labels.SelectorFromSet(labels.Set{LabelManagedBy: ManagedByValue, LabelServiceType: ServiceTypeValue})
}

// InstanceID returns the instance id label of an object's labels.
func InstanceID(l map[string]string) string { return l[LabelInstanceID] }
