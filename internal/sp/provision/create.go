package provision

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"slices"
	"strings"
	"time"

	"github.com/google/uuid"
	hyperv1 "github.com/openshift/hypershift/api/hypershift/v1beta1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	apimeta "k8s.io/apimachinery/pkg/api/meta"
	clusterv1 "open-cluster-management.io/api/cluster/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/dcm-sp/acm-cluster-sp/internal/sp/clusters"
	"github.com/dcm-sp/acm-cluster-sp/internal/sp/hubapi"
	"github.com/dcm-sp/acm-cluster-sp/internal/sp/inventory"
	"github.com/dcm-sp/acm-cluster-sp/internal/sp/meta"
	"github.com/dcm-sp/acm-cluster-sp/internal/sp/render"
	"github.com/dcm-sp/acm-cluster-sp/internal/sp/status"
	"github.com/dcm-sp/acm-cluster-sp/internal/sp/versions"
	"github.com/dcm-sp/acm-cluster-sp/internal/sp/wire"
)

// Writer answers the API's create, update and delete. It serializes requests per instance id and cluster name, and
// converges a new cluster's children through the Converger, as the reconciler would.
type Writer struct {
	deps
	locks keyedLocks
	conv  converging
}

// converging is what the Writer asks of the Converger: the one builder of a cluster's desired objects, the
// convergence of a new cluster's children (exactly as the reconciler would converge them) and the Agent
// reservation a bare-metal scale-up needs. Everything else both need is the deps they share.
type converging interface {
	Desired(ctx context.Context, id string, spec *clusters.Spec, r Release, fill Fill) (render.Input, error)
	EnsureChildren(ctx context.Context, hc *hyperv1.HostedCluster, spec *clusters.Spec, objs render.Objects, ch *changes) error
	ReserveAgents(ctx context.Context, id string, spec *clusters.Spec, need int, ch *changes) error
	// beginCreate marks the instance's create in flight (the reconciler leaves it alone) until end is called.
	beginCreate(id string) (end func())
	// Forget drops what is remembered of the instance (a rolled-back create: the index does not forget an instance
	// while its create is in flight).
	Forget(id string)
}

// NewWriter returns the writer; conv converges what its creates and updates write.
func NewWriter(p Ports, cfg Config, conv *Converger, log *slog.Logger) *Writer {
	return &Writer{deps: newDeps(p, cfg, log), conv: conv}
}

// Create provisions a cluster. created is false for an idempotent replay (200). id is the request's ?id= ("" when
// absent), key its Idempotency-Key ("" when absent).
//
// Without ?id= the instance id is derived from the key (clusters.KeyID), so the same key names the same cluster on
// every replica and after restarts: the key's record is the cluster itself (its id, and the key in an annotation
// of its HostedCluster), for as long as it exists. A replay with the same spec answers 200 with it; the same key
// with another spec is a 422 (the Idempotency-Key draft's answer for a key reused with another payload). Without
// either, the id is a fresh UUID; with ?id=, the id decides as it always did (the key is only recorded).
func (s *Writer) Create(ctx context.Context, id, key string, body []byte) (*clusters.Cluster, bool, error) {
	derived := false
	if key != "" {
		if err := clusters.CheckIdempotencyKey(key); err != nil {
			return nil, false, err
		}
	}
	switch {
	case id == "" && key != "":
		id, derived = clusters.KeyID(key), true
	case id == "":
		id = uuid.NewString()
	default:
		if err := clusters.CheckID(id); err != nil {
			return nil, false, err
		}
	}
	spec, err := wire.ParseSpec(body, s.cfg.Spec)
	if err != nil {
		return nil, false, err
	}
	if err := ready(s.site); err != nil {
		return nil, false, err
	}
	if !slices.Contains(s.cfg.Platforms(), string(spec.Platform)) {
		return nil, false, clusters.Unprocessable("platform %q is not available on this provider (supported: %s)", spec.Platform, strings.Join(orNone(s.cfg.Platforms()), ", "))
	}
	if derived {
		if err := s.notDeleted(ctx, id, key); err != nil {
			return nil, false, err
		}
	}
	c, created, err := s.create(ctx, id, key, spec)
	if err != nil && clusters.KindOf(err) == clusters.KindConflict && !errors.Is(err, errDifferentSpec) {
		c, err = s.confirmReplay(ctx, id, spec, err)
	}
	if derived && errors.Is(err, errDifferentSpec) {
		err = &clusters.Error{Kind: clusters.KindUnprocessable, Err: err,
			Message: fmt.Sprintf("Idempotency-Key %q was used for a different request: instance %s exists with another spec", key, id)}
	}
	if err != nil {
		return nil, false, err
	}
	present(s.cfg, c)
	return c, created, nil
}

// confirmReplay answers a conflict met by a create racing another create of the same instance — another replica's,
// or this one's before the cache caught up — which can meet that create's objects half made (ACM's namespace of the
// name, say, before this replica sees the HostedCluster). The instance's own HostedCluster, read from the API
// server, decides: the same spec is a replay (200), anything else keeps the conflict.
func (s *Writer) confirmReplay(ctx context.Context, id string, spec *clusters.Spec, conflict error) (*clusters.Cluster, error) {
	hc, err := s.liveHostedCluster(ctx, id)
	if err != nil || hc == nil {
		return nil, conflict
	}
	return s.replay(s.liveView(ctx, id, hc), spec)
}

// notDeleted refuses a create under a key-derived id whose cluster was created and deleted: a late replay of the
// create must not bring back, under DCM's back, a cluster DCM deleted. The deletion record tells (tombstone.go).
func (s *Writer) notDeleted(ctx context.Context, id, key string) error {
	if v, ok := s.index.Get(id); ok && v.HostedCluster != nil {
		return nil // it exists: a replay or a conflict, decided by the create
	}
	t, err := s.tombstone(ctx, id)
	if err != nil || t == nil {
		return err
	}
	return &clusters.Error{Kind: clusters.KindConflict, Err: clusters.ErrInstanceKnown,
		Message: fmt.Sprintf("instance %s of Idempotency-Key %q was deleted; a deleted instance is not created again", id, key)}
}

// errDifferentSpec marks a conflict of an instance id that exists (or is being created) with another spec: a 409
// under ?id=, a 422 under an Idempotency-Key reused for another request.
var errDifferentSpec = fmt.Errorf("the instance has another spec: %w", clusters.ErrInstanceKnown)

func differentSpec(format string, args ...any) error {
	return &clusters.Error{Kind: clusters.KindConflict, Message: fmt.Sprintf(format, args...), Err: errDifferentSpec}
}

// create provisions a cluster (Create checked the request). created is false for an idempotent replay (same id,
// same spec); key is the request's Idempotency-Key ("" when none), recorded on the HostedCluster.
//
// Order: everything that can refuse the request is checked first (spec, platform, names, version, Agent supply);
// then the HostedCluster is created with the stored spec — from then on the cluster exists and the reconciler
// will converge it even if this request dies — and the rest is converged eagerly. A failure of this request rolls
// back exactly what it created or changed.
func (s *Writer) create(ctx context.Context, id, key string, spec *clusters.Spec) (c *clusters.Cluster, created bool, err error) {
	unlock := s.locks.lock("id/"+id, "name/"+spec.Name)
	defer unlock()

	if c, done, err := s.existing(id, spec); done {
		return c, false, err
	}
	if hc, err := s.checkNameFree(ctx, id, spec.Name); err != nil {
		return nil, false, err
	} else if hc != nil { // this instance's, made by a replica whose create this cache has not seen yet
		c, err := s.replay(s.liveView(ctx, id, hc), spec)
		return c, false, err
	}
	res, err := s.resolveVersion(ctx, spec.Version)
	if err != nil {
		return nil, false, err
	}
	if agentsOf(spec.Platform) {
		// An autoscaled pool may grow to its maximum: that many Agents are needed.
		if err := s.checkAgentSupply(ctx, id, spec, int(spec.MaxReplicas(s.cfg.DefaultWorkerCount))); err != nil {
			return nil, false, err
		}
	}
	in, err := s.conv.Desired(ctx, id, spec, Release{Image: res.ReleaseImage, OpenShiftVersion: res.OpenShiftVersion,
		InfraID: spec.Name + "-" + randomSuffix(5)}, Fill{PullSecret: true, EtcdKey: true, HostingCluster: true})
	if err != nil {
		return nil, false, err
	}
	objs := render.Render(in)
	if key != "" {
		objs.HostedCluster.Annotations[meta.AnnotationIdempotencyKey] = key
	}

	defer s.conv.beginCreate(id)()
	ch := &changes{}
	if err := s.lockInstance(ctx, id, spec, ch); err != nil {
		return nil, false, err
	}
	hc := objs.HostedCluster
	if err := s.client.Create(ctx, hc); err != nil {
		c, created, err := s.hostedClusterCollision(ctx, id, spec, hc, err)
		if c == nil {
			s.rollback(ctx, id, ch) // the lock, if this request took it
		}
		return c, created, err
	}
	ch.add(hc)
	if err := s.conv.EnsureChildren(ctx, hc, spec, objs, ch); err != nil {
		if transient(err) {
			// The HostedCluster holds the desired state: the leader's reconciler completes the rest, as it would
			// had this process died here. DCM has its cluster; undoing it would only turn a blip into a failure.
			s.log.Warn("cluster created; its remaining objects are left to the reconciler", "id", id, "name", spec.Name, "error", err)
			return s.awaitCached(ctx, id), true, nil
		}
		s.rollback(ctx, id, ch)
		return nil, false, err
	}
	s.log.Info("cluster created", "id", id, "name", spec.Name, "platform", spec.Platform, "openshiftVersion", res.OpenShiftVersion)
	return s.awaitCached(ctx, id), true, nil
}

// existing answers a create whose id is already known to the cache: the same spec is an idempotent replay (200),
// anything else a conflict. done is false when the id is new to the cache.
func (s *Writer) existing(id string, spec *clusters.Spec) (*clusters.Cluster, bool, error) {
	v, ok := s.index.Get(id)
	if !ok || v.HostedCluster == nil {
		return nil, false, nil
	}
	c, err := s.replay(v, spec)
	return c, true, err
}

// replay decides a create of an id whose HostedCluster exists: 200 with the cluster for the same spec, 409 for a
// different spec or a cluster being deleted.
func (s *Writer) replay(v clusters.View, spec *clusters.Spec) (*clusters.Cluster, error) {
	if v.HostedCluster.DeletionTimestamp != nil {
		return nil, &clusters.Error{Kind: clusters.KindConflict, Message: fmt.Sprintf("instance %s is being deleted", v.ID), Err: clusters.ErrInstanceKnown}
	}
	if v.HostedCluster.Annotations[meta.AnnotationSpec] != spec.JSON {
		return nil, differentSpec("instance %s exists with a different spec", v.ID)
	}
	c := clusters.BuildCluster(v, s.now(), s.cfg.viewSettings())
	return &c, nil
}

// hostedClusterCollision answers a HostedCluster create the API server refused. AlreadyExists is either another
// instance's cluster of that name (409) or this instance's, created meanwhile by a replica whose cache this one
// has not seen yet: the object read from the API server then decides between an idempotent replay and a conflict.
func (s *Writer) hostedClusterCollision(ctx context.Context, id string, spec *clusters.Spec, hc *hyperv1.HostedCluster, err error) (*clusters.Cluster, bool, error) {
	switch {
	case apierrors.IsAlreadyExists(err):
		var got hyperv1.HostedCluster
		if gerr := s.client.Get(ctx, client.ObjectKeyFromObject(hc), &got); gerr != nil {
			return nil, false, clusters.Conflict("cluster name %q is already used on the hub", spec.Name)
		}
		if other := meta.InstanceID(got.Labels); other != id || !meta.Ours(s.cfg.Provider, got.Labels) {
			if other == id {
				other = ""
			}
			return nil, false, nameTaken(spec.Name, other, "HostedCluster")
		}
		c, err := s.replay(s.liveView(ctx, id, &got), spec)
		return c, false, err
	case apierrors.IsInvalid(err) || apierrors.IsForbidden(err) && isAdmissionDenial(err):
		return nil, false, hubapi.Rejected(err, "HostedCluster", hc.Name)
	}
	return nil, false, hubapi.Failure(err, "creating HostedCluster %s", hc.Name)
}

// checkNameFree refuses a name taken on the hub by anything not belonging to this instance: a HostedCluster in the
// SP's namespace, a ManagedCluster, a Namespace of that name (ACM's cluster namespace, which never carries an
// instance id, so an existing one conflicts), or a control plane namespace that would not be the cluster's own
// (checkControlPlaneNamespace) — unless this instance's HostedCluster has the name: then it is returned, since
// the create is a retry that reached a replica whose cache lags.
func (s *Writer) checkNameFree(ctx context.Context, id, name string) (*hyperv1.HostedCluster, error) {
	if other, ok := s.index.IDByName(name); ok && other != id {
		return nil, clusters.Conflict("cluster name %q is used by instance %s", name, other)
	}
	owned := func(kind string, obj client.Object) (bool, error) {
		if err := s.client.Get(ctx, client.ObjectKey{Namespace: obj.GetNamespace(), Name: name}, obj); err != nil {
			if apierrors.IsNotFound(err) || apimeta.IsNoMatchError(err) {
				return false, nil
			}
			return false, hubapi.Failure(err, "checking whether name %q is free", name)
		}
		if other := meta.InstanceID(obj.GetLabels()); other != id || !meta.Ours(s.cfg.Provider, obj.GetLabels()) {
			if obj.GetDeletionTimestamp() != nil {
				return false, clusters.Conflict("cluster name %q is still being deleted on the hub (%s %s is terminating); retry later", name, kind, name)
			}
			if other == id {
				other = "" // another provider's instance of the same id
			}
			return false, nameTaken(name, other, kind)
		}
		return true, nil
	}
	// The three reads are independent: they go out together, and are decided in order.
	hc := &hyperv1.HostedCluster{}
	hc.Namespace = s.site.Namespace()
	var hcOurs bool
	var hcErr, mcErr, nsErr, cpErr error
	steps := []func() error{
		func() error { hcOurs, hcErr = owned("HostedCluster", hc); return nil },
		func() error { _, nsErr = owned("namespace", &corev1.Namespace{}); return nil },
		func() error { cpErr = s.checkControlPlaneNamespace(ctx, name, nil); return nil },
	}
	if s.cfg.ManageACMObjects {
		steps = append(steps, func() error { _, mcErr = owned("ManagedCluster", &clusterv1.ManagedCluster{}); return nil })
	}
	_ = parallel(steps...)
	switch {
	case hcOurs:
		return hc, nil // the namespace ACM made for it is its own
	case hcErr != nil:
		return nil, hcErr
	case mcErr != nil:
		return nil, mcErr
	case nsErr != nil:
		return nil, nsErr
	}
	return nil, cpErr
}

// liveHostedCluster reads this provider's HostedCluster of an instance from the API server (nil: there is none).
func (s *Writer) liveHostedCluster(ctx context.Context, id string) (*hyperv1.HostedCluster, error) {
	var list hyperv1.HostedClusterList
	if err := s.client.List(ctx, &list, client.InNamespace(s.site.Namespace()), client.MatchingLabels{meta.LabelInstanceID: id}); err != nil {
		return nil, hubapi.Failure(err, "looking up cluster %s", id)
	}
	for i := range list.Items {
		if meta.Ours(s.cfg.Provider, list.Items[i].Labels) {
			return &list.Items[i], nil
		}
	}
	return nil, nil
}

func (s *Writer) resolveVersion(ctx context.Context, requested string) (versions.Resolution, error) {
	cat, err := releases(ctx, s.catalog, s.cfg.Matrix)
	if err != nil {
		return versions.Resolution{}, err
	}
	res, err := cat.Resolve(requested)
	switch {
	case errors.Is(err, versions.ErrInvalid):
		return res, &clusters.Error{Kind: clusters.KindInvalid, Message: "version: " + strings.TrimPrefix(err.Error(), versions.ErrInvalid.Error()+": "),
			Fields: []clusters.FieldError{{Field: "version", Message: "not a Kubernetes or OpenShift version"}}}
	case errors.Is(err, versions.ErrUnsupported):
		return res, clusters.Unprocessable("%s", strings.TrimPrefix(err.Error(), versions.ErrUnsupported.Error()+": "))
	}
	return res, err
}

// awaitCached waits (bounded) until the new HostedCluster is in the cache, so that a GET right after the create
// finds it, and returns the resource built from the cache.
func (s *Writer) awaitCached(ctx context.Context, id string) *clusters.Cluster {
	var v clusters.View
	if s.waitCache(ctx, func() bool {
		var ok bool
		v, ok = s.index.Get(id)
		return ok && v.HostedCluster != nil
	}) {
		c := clusters.BuildCluster(v, s.now(), s.cfg.viewSettings())
		return &c
	}
	s.log.Warn("created cluster not in the cache yet", "id", id, "waited", s.cfg.CacheWait)
	return &clusters.Cluster{ID: id, Status: status.Pending, StatusMessage: "HostedCluster created; waiting for the hosted control plane", CreateTime: s.now().UTC(), UpdateTime: s.now().UTC()}
}

// waitCache polls cond until it holds, CacheWait passes or ctx ends; it reports whether cond held.
func (s *Writer) waitCache(ctx context.Context, cond func() bool) bool {
	deadline := time.NewTimer(s.cfg.CacheWait)
	defer deadline.Stop()
	tick := time.NewTicker(5 * time.Millisecond)
	defer tick.Stop()
	for !cond() {
		select {
		case <-ctx.Done():
			return false
		case <-deadline.C:
			return false
		case <-tick.C:
		}
	}
	return true
}

// checkAgentSupply refuses a bare-metal create up front when its InfraEnv is missing or too few Agents meet the
// minimums (422 naming the shortfall). Nothing is reserved here.
func (s *Writer) checkAgentSupply(ctx context.Context, id string, spec *clusters.Spec, need int) error {
	names, err := s.catalog.InfraEnvNames(ctx)
	if err != nil {
		return clusters.Unprocessable("platform baremetal is not available: %v", err)
	}
	if !slices.Contains(names, spec.InfraEnv) {
		return clusters.Unprocessable("InfraEnv %s not found in namespace %s", spec.InfraEnv, s.site.AgentNamespace())
	}
	agents, err := s.catalog.Agents(ctx)
	if err != nil {
		return hubapi.Failure(err, "reading Agents")
	}
	req := requirements(id, spec)
	if len(inventory.Eligible(agents, req)) < need {
		return clusters.Unprocessable("%s", inventory.Shortfall(agents, req, need))
	}
	return nil
}
