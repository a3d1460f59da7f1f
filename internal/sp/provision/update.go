package provision

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"

	"github.com/google/uuid"
	hyperv1 "github.com/openshift/hypershift/api/hypershift/v1beta1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	apimeta "k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/dcm-sp/acm-cluster-sp/internal/sp/clusters"
	"github.com/dcm-sp/acm-cluster-sp/internal/sp/hubapi"
	"github.com/dcm-sp/acm-cluster-sp/internal/sp/inventory"
	"github.com/dcm-sp/acm-cluster-sp/internal/sp/meta"
	"github.com/dcm-sp/acm-cluster-sp/internal/sp/operation"
	"github.com/dcm-sp/acm-cluster-sp/internal/sp/render"
	"github.com/dcm-sp/acm-cluster-sp/internal/sp/status"
)

// Update accepts a day-2 change (docs/day2.md): everything that can refuse it is checked first (If-Match, the
// patch, the cluster's state, the target, bare-metal Agents — the extra ones reserved), then the new spec and the
// operation record are written to the HostedCluster in one conditional update, before anything else changes. The
// leader's reconciler carries the operation out (Converge → operate), so it survives this process.
func (s *Service) Update(ctx context.Context, id string, body []byte, ifMatch string) (*clusters.Cluster, error) {
	c, err := s.update(ctx, id, body, ifMatch)
	if err != nil {
		return nil, err
	}
	s.present(c)
	return c, nil
}

func (s *Service) update(ctx context.Context, id string, body []byte, ifMatch string) (*clusters.Cluster, error) {
	if err := s.ready(); err != nil {
		return nil, err
	}
	unlock := s.locks.lock("id/" + id)
	defer unlock()
	v, ok := s.hub.Index().Get(id)
	if !ok || v.Gone() {
		return nil, clusters.NotFound("cluster %s not found", id)
	}
	opID := uuid.NewString()
	var d clusters.UpdateDecision
	var cur clusters.Cluster
	hc := v.HostedCluster
	// The decision is made on a version of the HostedCluster and recorded conditionally on it: the operator writes
	// its status all the time, so a conflict is retried on a fresh read (the decision is cheap and pure).
	for attempt := 0; ; attempt++ {
		var err error
		cur = clusters.BuildCluster(v, s.now(), s.viewSettings())
		if d, err = s.decideUpdate(ctx, v, body, ifMatch, opID, cur.ETag); err != nil {
			return nil, err
		}
		if d.Spec == nil {
			return &cur, nil // nothing changes: a replay starts nothing
		}
		if attempt == 0 {
			// A change makes HyperShift act in the control plane namespace: it must still be this cluster's alone.
			if err := s.checkControlPlaneNamespace(ctx, hc.Name, hc); err != nil {
				return nil, err
			}
		}
		err = s.recordUpdate(ctx, id, hc, d)
		if err == nil {
			break
		}
		if !apierrors.IsConflict(err) || attempt == 4 {
			return nil, err
		}
		fresh := &hyperv1.HostedCluster{}
		if gerr := s.hub.Client.Get(ctx, client.ObjectKeyFromObject(hc), fresh); gerr != nil {
			return nil, hubapi.Failure(gerr, "reading HostedCluster %s", hc.Name)
		}
		hc, v.HostedCluster = fresh, fresh
	}
	if d.Operation != nil {
		s.log.Info("operation accepted", "id", id, "name", hc.Name, "operation", d.Operation.Describe(), "from", d.Operation.From)
	}
	// Read-your-writes: the answer and a GET right after show the new spec.
	var after clusters.View
	if s.waitCache(ctx, func() bool {
		after, ok = s.hub.Index().Get(id)
		return ok && after.HostedCluster != nil && after.HostedCluster.Annotations[meta.AnnotationSpec] == d.Spec.JSON
	}) {
		c := clusters.BuildCluster(after, s.now(), s.viewSettings())
		return &c, nil
	}
	return &cur, nil
}

// decideUpdate gathers the state of one cluster and decides the patch (clusters.DecideUpdate).
func (s *Service) decideUpdate(ctx context.Context, v clusters.View, body []byte, ifMatch, opID, etag string) (clusters.UpdateDecision, error) {
	hc := v.HostedCluster
	if !etagMatches(ifMatch, etag) {
		return clusters.UpdateDecision{}, clusters.PreconditionFailed("If-Match %s does not match the cluster's ETag %s: it changed since it was read", ifMatch, etag)
	}
	cat, err := s.catalog(ctx)
	if err != nil {
		return clusters.UpdateDecision{}, err
	}
	platform := clusters.PlatformOf(hc.Spec.Platform.Type)
	st := clusters.UpdateState{
		StoredSpec: hc.Annotations[meta.AnnotationSpec], Deleting: hc.DeletionTimestamp != nil, EverCompleted: status.CompletedVersion(hc) != "",
		Operation: operation.Decode(hc), CompletedVersion: status.CompletedVersion(hc), Upgradeable: upgradeableBlock(hc),
		SpecImage: hc.Spec.Release.Image,
		Catalog:   cat, DefaultWorkerCount: s.cfg.DefaultWorkerCount, HCGeneration: hc.Generation, Now: s.now(),
		Timeout:     clusters.OperationTimeout(platform, s.cfg.OperationTimeoutKubeVirt, s.cfg.OperationTimeoutBareMetal),
		OperationID: opID,
	}
	if hc.Status.Version != nil {
		st.DesiredImage = hc.Status.Version.Desired.Image
	}
	if st.Operation != nil && st.Operation.Kind == operation.Upgrade {
		st.SpecVersion = st.Operation.To
	}
	for _, np := range v.NodePools {
		st.NodePoolVersions = append(st.NodePoolVersions, np.Status.Version)
	}
	return clusters.DecideUpdate(body, s.cfg.Spec, st)
}

// recordUpdate checks and reserves what a bare-metal change needs, then writes the new spec and the operation
// record in one conditional update of the HostedCluster (nothing else changes before it).
func (s *Service) recordUpdate(ctx context.Context, id string, hc *hyperv1.HostedCluster, d clusters.UpdateDecision) error {
	ch := &changes{}
	if clusters.PlatformOf(hc.Spec.Platform.Type) == clusters.BareMetal && d.Operation != nil {
		switch d.Operation.Kind {
		case operation.Scale:
			// Reserve the extra Agents first (an autoscaled pool's maximum): a shortfall is a 422 before anything is
			// recorded.
			if err := s.ensureAgents(ctx, id, d.Spec, int(d.Spec.MaxReplicas(s.cfg.DefaultWorkerCount)), ch); err != nil {
				s.rollback(ctx, id, ch)
				return err
			}
		case operation.Resize:
			if err := s.checkBoundAgents(ctx, id, d.Spec); err != nil {
				return err
			}
		}
	}
	annotations := map[string]any{meta.AnnotationSpec: d.Spec.JSON}
	if d.Operation != nil {
		annotations[operation.Annotation] = d.Operation.Encode()
	}
	if err := s.patchHostedClusterMeta(ctx, hc, annotations); err != nil {
		s.rollback(ctx, id, ch)
		return err
	}
	return nil
}

// etagMatches implements If-Match (RFC 9110 §13.1.1): absent or "*" matches; otherwise one of the listed tags
// (weak or strong) must be the current one.
func etagMatches(ifMatch, etag string) bool {
	ifMatch = strings.TrimSpace(ifMatch)
	if ifMatch == "" || ifMatch == "*" {
		return true
	}
	for _, t := range strings.Split(ifMatch, ",") {
		if strings.TrimPrefix(strings.TrimSpace(t), "W/") == etag {
			return true
		}
	}
	return false
}

// patchHostedClusterMeta merge-patches the HostedCluster's annotations, conditional on the version the decision was
// made on: a concurrent change makes the caller retry on fresh state.
func (s *Service) patchHostedClusterMeta(ctx context.Context, hc *hyperv1.HostedCluster, annotations map[string]any) error {
	body, err := json.Marshal(map[string]any{"metadata": map[string]any{"resourceVersion": hc.ResourceVersion, "annotations": annotations}})
	if err != nil {
		return hubapi.Failure(err, "encoding the operation record")
	}
	target := &hyperv1.HostedCluster{ObjectMeta: metav1.ObjectMeta{Namespace: hc.Namespace, Name: hc.Name}}
	if err := s.hub.Client.Patch(ctx, target, client.RawPatch(types.MergePatchType, body)); err != nil {
		if apierrors.IsNotFound(err) {
			return clusters.NotFound("cluster %s not found", meta.InstanceID(hc.Labels))
		}
		return hubapi.Failure(err, "recording the operation on HostedCluster %s", hc.Name)
	}
	return nil
}

// checkBoundAgents accepts a bare-metal resize only when every Agent reserved for the cluster meets the new
// minimums (InPlace NodePools never re-provision existing nodes: the sizes stay selection minimums).
func (s *Service) checkBoundAgents(ctx context.Context, id string, spec *clusters.Spec) error {
	agents, err := s.hub.Agents(ctx)
	if err != nil {
		return hubapi.Failure(err, "reading Agents")
	}
	req := requirements(id, spec)
	var short []string
	for _, a := range agents {
		if a.Labels[meta.LabelInstanceID] != id {
			continue
		}
		if why := inventory.Undersized(a, req); why != "" {
			short = append(short, a.Name+": "+why)
		}
	}
	if len(short) > 0 {
		return clusters.Unprocessable("the cluster's Agents do not meet the new minimums (%s); a bare-metal resize cannot replace nodes", strings.Join(short, "; "))
	}
	return nil
}

// upgradeableBlock is the CVO's reason while ClusterVersionUpgradeable=False ("" otherwise).
func upgradeableBlock(hc *hyperv1.HostedCluster) string {
	c := apimeta.FindStatusCondition(hc.Status.Conditions, string(hyperv1.ClusterVersionUpgradeable))
	if c == nil || c.Status != metav1.ConditionFalse {
		return ""
	}
	return c.Reason + ": " + c.Message
}

// operate advances a cluster's open operation one step (leader only, from Converge): the record moves first, then
// the hub — the control plane's release, then the NodePools' spec — so a restart resumes from the record.
func (s *Service) operate(ctx context.Context, hc *hyperv1.HostedCluster, spec *clusters.Spec, in render.Input) error {
	rec := operation.Decode(hc)
	id := meta.InstanceID(hc.Labels)
	if !rec.Open() {
		if spec.Platform == clusters.BareMetal && rec != nil && rec.Kind == operation.Scale {
			return s.releaseSurplusAgents(ctx, id, int(spec.MaxReplicas(s.cfg.DefaultWorkerCount)))
		}
		return nil
	}
	v, _ := s.hub.Index().Get(id)
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
		if err := s.hub.Client.Patch(ctx, &hyperv1.HostedCluster{ObjectMeta: metav1.ObjectMeta{Namespace: hc.Namespace, Name: hc.Name}}, client.RawPatch(types.MergePatchType, patch)); err != nil {
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
		have, want := np.Spec.Platform.Kubevirt, desired.Spec.Platform.Kubevirt
		if want == nil || have == nil {
			return true // bare metal: the sizes are Agent minimums, stored only
		}
		return sameCompute(have, want)
	}
	return true
}

func sameCompute(have, want *hyperv1.KubevirtNodePoolPlatform) bool {
	if have.Compute == nil || have.RootVolume == nil || have.RootVolume.Persistent == nil || have.RootVolume.Persistent.Size == nil {
		return false
	}
	return ptr.Deref(have.Compute.Cores, 0) == ptr.Deref(want.Compute.Cores, 0) &&
		have.Compute.Memory != nil && have.Compute.Memory.Cmp(*want.Compute.Memory) == 0 &&
		have.RootVolume.Persistent.Size.Cmp(*want.RootVolume.Persistent.Size) == 0
}

// syncNodePool patches the field the operation changes, conditional on the NodePool's version.
func (s *Service) syncNodePool(ctx context.Context, rec *operation.Record, np, desired *hyperv1.NodePool) error {
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
		kv := next.Spec.Platform.Kubevirt
		want := desired.Spec.Platform.Kubevirt
		if kv.Compute == nil {
			kv.Compute = &hyperv1.KubevirtCompute{}
		}
		kv.Compute.Cores, kv.Compute.Memory = want.Compute.Cores, want.Compute.Memory
		if kv.RootVolume == nil || kv.RootVolume.Persistent == nil {
			kv.RootVolume = want.RootVolume
		} else {
			kv.RootVolume.Persistent.Size = want.RootVolume.Persistent.Size
		}
	}
	if err := s.hub.Client.Patch(ctx, next, client.MergeFromWithOptions(np, client.MergeFromWithOptimisticLock{})); err != nil {
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
func (s *Service) releaseSurplusAgents(ctx context.Context, id string, keep int) error {
	agents, err := s.hub.Agents(ctx)
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
