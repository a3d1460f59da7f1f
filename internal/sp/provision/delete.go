package provision

import (
	"context"
	"encoding/json"

	hyperv1 "github.com/openshift/hypershift/api/hypershift/v1beta1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/dcm-sp/acm-cluster-sp/internal/sp/clusters"
	"github.com/dcm-sp/acm-cluster-sp/internal/sp/hubapi"
	"github.com/dcm-sp/acm-cluster-sp/internal/sp/meta"
)

// Delete starts deleting a cluster: the ManagedCluster and KlusterletAddonConfig first, then the HostedCluster
// with the cloud-resource clean-up annotation; the operator removes the NodePools, the garbage collector the
// Secrets. The reconciler finishes the rest once the HostedCluster is gone. key is the request's Idempotency-Key
// ("" when none): a keyed DELETE is remembered, and its replay answered, after the cluster is gone (tombstone.go).
func (s *Writer) Delete(ctx context.Context, id, key string) error {
	if key != "" {
		if err := clusters.CheckIdempotencyKey(key); err != nil {
			return err
		}
	}
	if err := ready(s.site); err != nil {
		return err
	}
	unlock := s.locks.lock("id/" + id)
	defer unlock()
	var hc *hyperv1.HostedCluster
	if v, ok := s.index.Get(id); ok && !v.Gone() {
		hc = v.HostedCluster
	} else {
		// Created moments ago through another replica, this one's cache may not show it yet: a 404 here would
		// leave a cluster DCM believes deleted. Ask the API server before answering.
		live, err := s.liveHostedCluster(ctx, id)
		if err != nil {
			return err
		}
		if live == nil {
			return s.deletedBefore(ctx, id, key)
		}
		hc = live
	}
	if err := s.rememberDelete(ctx, hc, id, key); err != nil {
		return err
	}
	if hc.DeletionTimestamp != nil {
		return nil // already being deleted: 204 again
	}
	if err := s.DeleteACMObjects(ctx, id, hc.Name); err != nil {
		return err
	}
	annotations := map[string]string{meta.AnnotationCleanupCloudResources: "true"}
	if _, _, rival, err := s.controlPlaneNamespaceState(ctx, hc.Name); err != nil {
		return err
	} else if rival != "" {
		// Another HostedCluster's control plane lives in the same namespace: HyperShift must not delete it with ours.
		s.log.Warn("cluster deleted without its control plane namespace: another HostedCluster uses it", "id", id, "name", hc.Name, "other", rival)
		annotations[hyperv1.SkipControlPlaneNamespaceDeletionAnnotation] = "true"
	}
	patch, err := json.Marshal(map[string]any{"metadata": map[string]any{"annotations": annotations}})
	if err != nil {
		return hubapi.Failure(err, "annotating HostedCluster %s for clean-up", hc.Name)
	}
	target := &hyperv1.HostedCluster{}
	target.Namespace, target.Name = hc.Namespace, hc.Name
	if err := s.client.Patch(ctx, target, client.RawPatch(types.MergePatchType, patch)); err != nil {
		if apierrors.IsNotFound(err) {
			return clusters.NotFound("cluster %s not found", id)
		}
		return hubapi.Failure(err, "annotating HostedCluster %s for clean-up", hc.Name)
	}
	uid := hc.UID
	if err := s.client.Delete(ctx, target, client.PropagationPolicy("Background"), client.Preconditions{UID: &uid}); err != nil && !apierrors.IsNotFound(err) {
		return hubapi.Failure(err, "deleting HostedCluster %s", hc.Name)
	}
	s.log.Info("cluster deletion started", "id", id, "name", hc.Name)
	// Read-your-writes: wait (bounded) until the cache shows the deletion, so a GET right after says DELETING.
	s.waitCache(ctx, func() bool {
		v, ok := s.index.Get(id)
		return !ok || v.HostedCluster == nil || v.HostedCluster.DeletionTimestamp != nil
	})
	return nil
}
