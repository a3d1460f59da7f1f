package provision

import (
	"context"
	"encoding/json"
	"fmt"

	hyperv1 "github.com/openshift/hypershift/api/hypershift/v1beta1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/dcm-sp/acm-cluster-sp/internal/sp/clusters"
	"github.com/dcm-sp/acm-cluster-sp/internal/sp/hubapi"
	"github.com/dcm-sp/acm-cluster-sp/internal/sp/inventory"
	"github.com/dcm-sp/acm-cluster-sp/internal/sp/meta"
	"github.com/dcm-sp/acm-cluster-sp/internal/sp/operation"
	"github.com/dcm-sp/acm-cluster-sp/internal/sp/platform"
	"github.com/dcm-sp/acm-cluster-sp/internal/sp/render"
)

// patchHostedClusterMeta merge-patches the HostedCluster's annotations, conditional on the version the decision was
// made on: a concurrent change makes the caller retry on fresh state.
func (s *deps) patchHostedClusterMeta(ctx context.Context, hc *hyperv1.HostedCluster, annotations map[string]any) error {
	body, err := json.Marshal(map[string]any{"metadata": map[string]any{"resourceVersion": hc.ResourceVersion, "annotations": annotations}})
	if err != nil {
		return hubapi.Failure(err, "encoding the operation record")
	}
	target := &hyperv1.HostedCluster{ObjectMeta: metav1.ObjectMeta{Namespace: hc.Namespace, Name: hc.Name}}
	if err := s.client.Patch(ctx, target, client.RawPatch(types.MergePatchType, body)); err != nil {
		if apierrors.IsNotFound(err) {
			return clusters.NotFound("cluster %s not found", meta.InstanceID(hc.Labels))
		}
		return hubapi.Failure(err, "recording the operation on HostedCluster %s", hc.Name)
	}
	return nil
}

// operate advances a cluster's open operation one step (leader only, from Converge): the record moves first, then
// the hub — the control plane's release, then the NodePools' spec — so a restart resumes from the record.
func (s *Converger) operate(ctx context.Context, hc *hyperv1.HostedCluster, spec *clusters.Spec, in render.Input) error {
	rec := operation.Decode(hc)
	id := meta.InstanceID(hc.Labels)
	if !rec.Open() {
		if agentsOf(spec.Platform) && rec != nil && rec.Kind == operation.Scale {
			return s.releaseSurplusAgents(ctx, id, int(spec.MaxReplicas(s.cfg.DefaultWorkerCount)))
		}
		return nil
	}
	v, _ := s.index.Get(id)
	in.WorkerCount = rec.Replicas
	desired := render.Render(in).NodePool
	inSpec := func(np *hyperv1.NodePool) bool { return nodePoolInSpec(rec, np, desired) }
	verdict := operation.Next(rec, hc, v.NodePools, inSpec, s.now())
	if verdict.Action.SetControlPlaneImage != "" || verdict.Action.SyncNodePools {
		if err := s.checkControlPlaneNamespace(ctx, hc.Name, hc); err != nil {
			return err
		}
	}
	if img := verdict.Action.SetControlPlaneImage; img != "" {
		patch := []byte(fmt.Sprintf(`{"metadata":{"resourceVersion":%q},"spec":{"release":{"image":%q}}}`, hc.ResourceVersion, img))
		if err := s.client.Patch(ctx, &hyperv1.HostedCluster{ObjectMeta: metav1.ObjectMeta{Namespace: hc.Namespace, Name: hc.Name}}, client.RawPatch(types.MergePatchType, patch)); err != nil {
			if apierrors.IsConflict(err) {
				return nil // decided on a stale copy: the newer one is on its way to the cache and reconciles again
			}
			return fmt.Errorf("upgrading the control plane of %s to %s: %w", hc.Name, rec.To, err)
		}
		s.log.Info("operation: control plane release set", "id", id, "operation", rec.Describe())
		return nil // the next reconcile (the HostedCluster changed) records the progress
	}
	if verdict.Phase != rec.Phase || verdict.Message != rec.Message {
		next := *rec
		next.Phase, next.Message = verdict.Phase, verdict.Message
		annotations := map[string]any{}
		if !next.Open() {
			next.EndedAt = s.now().UTC()
			if next.Phase == operation.PhaseDone && next.Kind == operation.Upgrade {
				annotations[meta.AnnotationOpenShiftVersion] = next.To
			}
			s.log.Info("operation ended", "id", id, "operation", next.Describe(), "message", next.Message)
		}
		annotations[operation.Annotation] = next.Encode()
		if err := s.patchHostedClusterMeta(ctx, hc, annotations); err != nil {
			if apierrors.IsConflict(err) {
				return nil // as above: never record progress decided on a stale copy
			}
			return err
		}
		if !next.Open() {
			return nil
		}
	}
	if verdict.Action.SyncNodePools {
		for _, np := range v.NodePools {
			if np.DeletionTimestamp != nil || inSpec(np) {
				continue
			}
			if err := s.syncNodePool(ctx, rec, np, desired); err != nil {
				return err
			}
		}
	}
	return nil
}

// nodePoolInSpec: the NodePool already carries what the operation changes (only that: other fields stay
// byte-stable, since changing e.g. the pull secret's name would roll every node).
func nodePoolInSpec(rec *operation.Record, np, desired *hyperv1.NodePool) bool {
	switch rec.Kind {
	case operation.Upgrade:
		return np.Spec.Release.Image == rec.ReleaseImage
	case operation.Scale:
		if rec.Autoscaled() {
			a := np.Spec.AutoScaling
			return np.Spec.Replicas == nil && a != nil && a.Min == rec.AutoscalingMin && a.Max == rec.AutoscalingMax
		}
		return np.Spec.AutoScaling == nil && ptr.Deref(np.Spec.Replicas, -1) == rec.Replicas
	case operation.Resize:
		p, ok := platform.Of(np.Spec.Platform.Type)
		if !ok || p.Resized == nil {
			return true // the platform's sizes are not on the NodePool (bare metal's are Agent minimums, stored only)
		}
		return p.Resized(np.Spec.Platform, desired.Spec.Platform)
	}
	return true
}

// syncNodePool patches the field the operation changes, conditional on the NodePool's version.
func (s *Converger) syncNodePool(ctx context.Context, rec *operation.Record, np, desired *hyperv1.NodePool) error {
	next := np.DeepCopy()
	switch rec.Kind {
	case operation.Upgrade:
		next.Spec.Release.Image = rec.ReleaseImage
	case operation.Scale:
		// replicas and autoScaling are mutually exclusive (CEL): one merge patch sets one and clears the other.
		next.Spec.Replicas, next.Spec.AutoScaling = ptr.To(rec.Replicas), nil
		if rec.Autoscaled() {
			next.Spec.Replicas, next.Spec.AutoScaling = nil, &hyperv1.NodePoolAutoScaling{Min: rec.AutoscalingMin, Max: rec.AutoscalingMax}
		}
	case operation.Resize:
		if p, ok := platform.Of(np.Spec.Platform.Type); ok && p.Resize != nil {
			p.Resize(&next.Spec.Platform, desired.Spec.Platform)
		}
	}
	if err := s.client.Patch(ctx, next, client.MergeFromWithOptions(np, client.MergeFromWithOptimisticLock{})); err != nil {
		if apierrors.IsConflict(err) {
			return nil // the NodePool changed meanwhile: its newer version reconciles again
		}
		if apierrors.IsInvalid(err) {
			return hubapi.Rejected(err, "NodePool", np.Name)
		}
		return fmt.Errorf("patching NodePool %s for %s: %w", np.Name, rec.Describe(), err)
	}
	s.log.Info("operation: NodePool patched", "id", meta.InstanceID(np.Labels), "nodePool", np.Name, "operation", rec.Describe())
	return nil
}

// releaseSurplusAgents drops the reservation of Agents beyond the cluster's worker count once they are unbound
// (after a bare-metal scale-down the operator unbinds them; they need re-discovery before another cluster).
func (s *Converger) releaseSurplusAgents(ctx context.Context, id string, keep int) error {
	agents, err := s.catalog.Agents(ctx)
	if err != nil {
		return err
	}
	var mine []inventory.Agent
	for _, a := range agents {
		if a.Labels[meta.LabelInstanceID] == id {
			mine = append(mine, a)
		}
	}
	surplus := len(mine) - keep
	for _, a := range mine {
		if surplus <= 0 {
			break
		}
		if a.ClusterDeploymentName != "" || a.BoundCondition == "True" {
			continue // still bound: the operator has not let it go yet
		}
		if err := s.releaseAgent(ctx, a.Name, id); err != nil {
			return err
		}
		surplus--
	}
	return nil
}
