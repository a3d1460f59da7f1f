package provision

import (
	"context"
	"strings"

	"github.com/google/uuid"
	hyperv1 "github.com/openshift/hypershift/api/hypershift/v1beta1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	apimeta "k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/dcm-sp/acm-cluster-sp/internal/sp/clusters"
	"github.com/dcm-sp/acm-cluster-sp/internal/sp/hubapi"
	"github.com/dcm-sp/acm-cluster-sp/internal/sp/inventory"
	"github.com/dcm-sp/acm-cluster-sp/internal/sp/meta"
	"github.com/dcm-sp/acm-cluster-sp/internal/sp/operation"
	"github.com/dcm-sp/acm-cluster-sp/internal/sp/platform"
	"github.com/dcm-sp/acm-cluster-sp/internal/sp/status"
	"github.com/dcm-sp/acm-cluster-sp/internal/sp/wire"
)

// Update accepts a day-2 change (docs/day2.md): everything that can refuse it is checked first (If-Match, the
// patch, the cluster's state, the target, bare-metal Agents — the extra ones reserved), then the new spec and the
// operation record are written to the HostedCluster in one conditional update, before anything else changes. The
// leader's reconciler carries the operation out (Converge → operate), so it survives this process.
func (s *Writer) Update(ctx context.Context, id string, body []byte, ifMatch string) (*clusters.Cluster, error) {
	c, err := s.update(ctx, id, body, ifMatch)
	if err != nil {
		return nil, err
	}
	present(s.cfg, c)
	return c, nil
}

func (s *Writer) update(ctx context.Context, id string, body []byte, ifMatch string) (*clusters.Cluster, error) {
	if err := ready(s.site); err != nil {
		return nil, err
	}
	unlock := s.locks.lock("id/" + id)
	defer unlock()
	v, ok := s.index.Get(id)
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
		cur = clusters.BuildCluster(v, s.now(), s.cfg.viewSettings())
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
		if gerr := s.client.Get(ctx, client.ObjectKeyFromObject(hc), fresh); gerr != nil {
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
		after, ok = s.index.Get(id)
		return ok && after.HostedCluster != nil && after.HostedCluster.Annotations[meta.AnnotationSpec] == d.Spec.JSON
	}) {
		c := clusters.BuildCluster(after, s.now(), s.cfg.viewSettings())
		return &c, nil
	}
	return &cur, nil
}

// decideUpdate gathers the state of one cluster and decides the patch (clusters.DecideUpdate).
func (s *Writer) decideUpdate(ctx context.Context, v clusters.View, body []byte, ifMatch, opID, etag string) (clusters.UpdateDecision, error) {
	hc := v.HostedCluster
	if !etagMatches(ifMatch, etag) {
		return clusters.UpdateDecision{}, clusters.PreconditionFailed("If-Match %s does not match the cluster's ETag %s: it changed since it was read", ifMatch, etag)
	}
	cat, err := releases(ctx, s.catalog, s.cfg.Matrix)
	if err != nil {
		return clusters.UpdateDecision{}, err
	}
	platform, ok := clusters.PlatformOf(hc.Spec.Platform.Type)
	if !ok {
		return clusters.UpdateDecision{}, clusters.Unprocessable("the cluster's HostedCluster has platform type %q, which this service provider does not serve: it cannot change it", hc.Spec.Platform.Type)
	}
	timeout, _ := clusters.OperationTimeout(platform, s.cfg.OperationTimeouts)
	st := clusters.UpdateState{
		StoredSpec: hc.Annotations[meta.AnnotationSpec], Deleting: hc.DeletionTimestamp != nil, EverCompleted: status.CompletedVersion(hc) != "",
		Operation: operation.Decode(hc), CompletedVersion: status.CompletedVersion(hc), Upgradeable: upgradeableBlock(hc),
		SpecImage: hc.Spec.Release.Image,
		Catalog:   cat, DefaultWorkerCount: s.cfg.DefaultWorkerCount, HCGeneration: hc.Generation, Now: s.now(),
		Timeout:     timeout,
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
	patch, err := wire.DecodePatch(body, st.StoredSpec)
	if err != nil {
		return clusters.UpdateDecision{}, err
	}
	return clusters.DecideUpdate(patch, s.cfg.Spec, st)
}

// recordUpdate checks and reserves what a bare-metal change needs, then writes the new spec and the operation
// record in one conditional update of the HostedCluster (nothing else changes before it).
func (s *Writer) recordUpdate(ctx context.Context, id string, hc *hyperv1.HostedCluster, d clusters.UpdateDecision) error {
	ch := &changes{}
	if p, _ := platform.Of(hc.Spec.Platform.Type); p.Agents && d.Operation != nil {
		switch d.Operation.Kind {
		case operation.Scale:
			// Reserve the extra Agents first (an autoscaled pool's maximum): a shortfall is a 422 before anything is
			// recorded.
			if err := s.conv.ReserveAgents(ctx, id, d.Spec, int(d.Spec.MaxReplicas(s.cfg.DefaultWorkerCount)), ch); err != nil {
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

// checkBoundAgents accepts a bare-metal resize only when every Agent reserved for the cluster meets the new
// minimums (InPlace NodePools never re-provision existing nodes: the sizes stay selection minimums).
func (s *Writer) checkBoundAgents(ctx context.Context, id string, spec *clusters.Spec) error {
	agents, err := s.catalog.Agents(ctx)
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
