// Package provision is the domain service that acts on the hub: it answers the API's create, read, list and delete,
// and it converges a cluster's objects toward the spec stored on its HostedCluster — the same convergence the
// leader's reconciler runs for every cluster, so a create interrupted between two writes, or a child deleted by
// hand, is repaired by the next reconcile.
//
// Create writes the HostedCluster (with the normalized spec, the desired state) first; every namespaced child
// (Secrets, NodePool) carries an ownerReference to it, so the hub's garbage collector removes them with it. Only
// what cannot be owned — the cluster-scoped ManagedCluster, the KlusterletAddonConfig in ACM's namespace, the
// Agent reservation labels — is cleaned up explicitly.
package provision

import (
	"context"
	"crypto/rand"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"math/big"
	"slices"
	"sort"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	hyperv1 "github.com/openshift/hypershift/api/hypershift/v1beta1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	apimeta "k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	clusterv1 "open-cluster-management.io/api/cluster/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/dcm-sp/acm-cluster-sp/internal/sp/clusters"
	"github.com/dcm-sp/acm-cluster-sp/internal/sp/hub"
	"github.com/dcm-sp/acm-cluster-sp/internal/sp/hubapi"
	"github.com/dcm-sp/acm-cluster-sp/internal/sp/meta"
	"github.com/dcm-sp/acm-cluster-sp/internal/sp/render"
	"github.com/dcm-sp/acm-cluster-sp/internal/sp/status"
	"github.com/dcm-sp/acm-cluster-sp/internal/sp/versions"
)

// Config is what the service needs from the SP configuration, resolved at start.
type Config struct {
	Provider                       string // providerName: the dcm.io/provider label of every object
	Spec                           clusters.SpecContext
	ManageACMObjects               bool
	ControlPlaneAvailabilityPolicy hyperv1.AvailabilityPolicy
	DefaultWorkerCount             int32
	KubeVirtInfraKubeconfig        []byte
	KubeVirtInfraNamespace         string
	SSHPublicKey                   string
	// PullSecret returns the configured pull secret (file content or a copy of a Secret).
	PullSecret func(ctx context.Context) ([]byte, error)
	Matrix     versions.Matrix
	Status     status.Settings
	// Platforms returns the platforms this SP can provision right now (enabled and with their APIs on the hub).
	Platforms func() []string
	// CacheWait bounds how long a create waits for its HostedCluster to appear in the cache (default 5s).
	CacheWait time.Duration
	// OperationTimeoutKubeVirt and OperationTimeoutBareMetal bound a day-2 operation (defaults 90m and 180m).
	OperationTimeoutKubeVirt, OperationTimeoutBareMetal time.Duration
	// Vocabulary is the status words reported (GET, LIST and the status events); Observed says whether the SP's
	// view of the hub is current (nil: always).
	Vocabulary status.Vocabulary
	Observed   func() status.Observation
	// DeleteKeyRetention is how long a keyed DELETE is remembered after it was answered (default 24h).
	DeleteKeyRetention time.Duration
}

// Service implements the cluster operations.
type Service struct {
	hub   *hub.Hub
	cfg   Config
	locks keyedLocks
	now   func() time.Time
	log   *slog.Logger

	mu       sync.Mutex
	kacDone  map[string]bool      // instances whose KlusterletAddonConfig exists (forgotten when the cluster is gone)
	lockDone map[string]types.UID // instances whose lock is owned by their HostedCluster (of this UID)
	views    *viewCache           // every cluster's resource as last built (GET, LIST)
	builds   atomic.Uint64        // numbers the builds views keeps (clusters.Cluster.Build)
	hosting  struct {             // the hosting cluster's name and when it was read (hostingClusterName)
		name string
		at   time.Time
	}
}

// New returns the service.
func New(h *hub.Hub, cfg Config, log *slog.Logger) *Service {
	if cfg.CacheWait == 0 {
		cfg.CacheWait = 5 * time.Second
	}
	if cfg.OperationTimeoutKubeVirt == 0 {
		cfg.OperationTimeoutKubeVirt = 90 * time.Minute
	}
	if cfg.OperationTimeoutBareMetal == 0 {
		cfg.OperationTimeoutBareMetal = 180 * time.Minute
	}
	if cfg.DeleteKeyRetention == 0 {
		cfg.DeleteKeyRetention = 24 * time.Hour
	}
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	s := &Service{hub: h, cfg: cfg, now: time.Now, log: log, kacDone: map[string]bool{}, lockDone: map[string]types.UID{}, views: newViewCache()}
	idx := h.Index()
	idx.OnChange(func(id string) {
		_, known := idx.Get(id)
		s.views.changed(id, !known)
	})
	return s
}

// Settings is the configuration the service runs with.
func (s *Service) Settings() Config { return s.cfg }

// SetClock replaces the service's clock (tests).
func (s *Service) SetClock(now func() time.Time) { s.now = now }

// Now is the service's clock (the reconciler evaluates statuses with it).
func (s *Service) Now() time.Time { return s.now() }

// StatusSettings are the status function's settings.
func (s *Service) StatusSettings() status.Settings { return s.cfg.Status }

func (s *Service) viewSettings() clusters.ViewSettings {
	return clusters.ViewSettings{Status: s.cfg.Status, DefaultWorkerCount: s.cfg.DefaultWorkerCount}
}

func (s *Service) ready() error {
	if !s.hub.Synced() {
		return clusters.Unavailable("the hub caches are not synced yet; retry shortly")
	}
	return nil
}

// Get returns one cluster from the caches.
func (s *Service) Get(_ context.Context, id string) (*clusters.Cluster, error) {
	if err := s.ready(); err != nil {
		return nil, err
	}
	now := s.now()
	if c, ok := s.views.get(id, now); ok {
		s.present(&c)
		return &c, nil
	}
	since := s.views.sequence()
	v, ok := s.hub.Index().Get(id)
	if !ok || v.Gone() {
		return nil, clusters.NotFound("cluster %s not found", id)
	}
	c := s.build(v, now, since)
	if c.Status == status.Ready && !c.HasKubeconfig() {
		s.log.Warn("cluster READY but its admin kubeconfig Secret is not in the cache yet", "id", id)
	}
	s.present(&c)
	return &c, nil
}

// build assembles a cluster's resource from a view read after s.views.sequence() returned since, and caches it.
func (s *Service) build(v clusters.View, now time.Time, since uint64) clusters.Cluster {
	c := clusters.BuildCluster(v, now, s.viewSettings())
	c.Build = s.builds.Add(1)
	s.views.put(v.ID, since, c, now)
	return c
}

// Kubeconfig reads the admin kubeconfig of a cluster Get returned (only for callers allowed to see it).
func (s *Service) Kubeconfig(ctx context.Context, c *clusters.Cluster) ([]byte, error) {
	if !c.HasKubeconfig() {
		return nil, nil
	}
	data, err := s.hub.Kubeconfig(ctx, c.Kubeconfig)
	if err != nil {
		return nil, hubapi.Failure(err, "reading the admin kubeconfig of cluster %s", c.ID)
	}
	return data, nil
}

// List returns one page of clusters in (create_time, id) order and the token of the next page ("" on the last).
func (s *Service) List(_ context.Context, pageSize *int, pageToken string) ([]clusters.Cluster, string, error) {
	size, err := clusters.PageSize(pageSize)
	if err != nil {
		return nil, "", err
	}
	var after *clusters.Key
	if pageToken != "" {
		k, err := clusters.DecodePageToken(pageToken)
		if err != nil {
			return nil, "", err
		}
		after = &k
	}
	if err := s.ready(); err != nil {
		return nil, "", err
	}
	now := s.now()
	since := s.views.sequence()
	views, more := s.hub.Index().Page(after, size)
	out := make([]clusters.Cluster, len(views))
	for i, v := range views {
		if c, ok := s.views.get(v.ID, now); ok {
			out[i] = c
		} else {
			out[i] = s.build(v, now, since)
		}
		s.present(&out[i])
	}
	next := ""
	if more && len(views) > 0 {
		last := views[len(views)-1]
		next = clusters.EncodePageToken(clusters.Key{Created: last.HostedCluster.CreationTimestamp.Time, ID: last.ID})
	}
	return out, next, nil
}

// create provisions a cluster (Create checked the request). created is false for an idempotent replay (same id,
// same spec); key is the request's Idempotency-Key ("" when none), recorded on the HostedCluster.
//
// Order: everything that can refuse the request is checked first (spec, platform, names, version, Agent supply);
// then the HostedCluster is created with the stored spec — from then on the cluster exists and the reconciler
// will converge it even if this request dies — and the rest is converged eagerly. A failure of this request rolls
// back exactly what it created or changed.
func (s *Service) create(ctx context.Context, id, key string, spec *clusters.Spec) (c *clusters.Cluster, created bool, err error) {
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
	if spec.Platform == clusters.BareMetal {
		// An autoscaled pool may grow to its maximum: that many Agents are needed.
		if err := s.checkAgentSupply(ctx, id, spec, int(spec.MaxReplicas(s.cfg.DefaultWorkerCount))); err != nil {
			return nil, false, err
		}
	}
	in, err := s.input(id, spec, res.ReleaseImage, res.OpenShiftVersion, spec.Name+"-"+randomSuffix(5), "")
	if err != nil {
		return nil, false, err
	}
	if in.PullSecret, err = s.pullSecret(ctx, spec); err != nil {
		return nil, false, err
	}
	if in.EtcdEncryptionKey, err = newEtcdKey(); err != nil {
		return nil, false, err
	}
	in.HostingClusterName = s.hostingClusterName(ctx)
	objs := render.Render(in)
	if key != "" {
		objs.HostedCluster.Annotations[meta.AnnotationIdempotencyKey] = key
	}

	ch := &changes{}
	if err := s.lockInstance(ctx, id, spec, ch); err != nil {
		return nil, false, err
	}
	hc := objs.HostedCluster
	if err := s.hub.Client.Create(ctx, hc); err != nil {
		c, created, err := s.hostedClusterCollision(ctx, id, spec, hc, err)
		if c == nil {
			s.rollback(ctx, id, ch) // the lock, if this request took it
		}
		return c, created, err
	}
	ch.add(hc)
	if err := s.ensureChildren(ctx, hc, spec, objs, ch); err != nil {
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
func (s *Service) existing(id string, spec *clusters.Spec) (*clusters.Cluster, bool, error) {
	v, ok := s.hub.Index().Get(id)
	if !ok || v.HostedCluster == nil {
		return nil, false, nil
	}
	c, err := s.replay(v, spec)
	return c, true, err
}

// replay decides a create of an id whose HostedCluster exists: 200 with the cluster for the same spec, 409 for a
// different spec or a cluster being deleted.
func (s *Service) replay(v clusters.View, spec *clusters.Spec) (*clusters.Cluster, error) {
	if v.HostedCluster.DeletionTimestamp != nil {
		return nil, clusters.Conflict("instance %s is being deleted", v.ID)
	}
	if v.HostedCluster.Annotations[meta.AnnotationSpec] != spec.JSON {
		return nil, differentSpec("instance %s exists with a different spec", v.ID)
	}
	c := clusters.BuildCluster(v, s.now(), s.viewSettings())
	return &c, nil
}

// hostedClusterCollision answers a HostedCluster create the API server refused. AlreadyExists is either another
// instance's cluster of that name (409) or this instance's, created meanwhile by a replica whose cache this one
// has not seen yet: the object read from the API server then decides between an idempotent replay and a conflict.
func (s *Service) hostedClusterCollision(ctx context.Context, id string, spec *clusters.Spec, hc *hyperv1.HostedCluster, err error) (*clusters.Cluster, bool, error) {
	switch {
	case apierrors.IsAlreadyExists(err):
		var got hyperv1.HostedCluster
		if gerr := s.hub.Client.Get(ctx, client.ObjectKeyFromObject(hc), &got); gerr != nil {
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

func nameTaken(name, other, kind string) error {
	if other == "" {
		return clusters.Conflict("cluster name %q is already used on the hub (%s %s exists)", name, kind, name)
	}
	return clusters.Conflict("cluster name %q is used by instance %s", name, other)
}

// isAdmissionDenial reports a 403 that an admission webhook or policy returned for an object (not the SP's own
// missing permission, which stays an internal error).
func isAdmissionDenial(err error) bool {
	return strings.Contains(err.Error(), "admission webhook") || strings.Contains(err.Error(), "ValidatingAdmissionPolicy")
}

// checkNameFree refuses a name taken on the hub by anything not belonging to this instance: a HostedCluster in the
// SP's namespace, a ManagedCluster, a Namespace of that name (ACM's cluster namespace, which never carries an
// instance id, so an existing one conflicts), or a control plane namespace that would not be the cluster's own
// (checkControlPlaneNamespace) — unless this instance's HostedCluster has the name: then it is returned, since
// the create is a retry that reached a replica whose cache lags.
func (s *Service) checkNameFree(ctx context.Context, id, name string) (*hyperv1.HostedCluster, error) {
	if other, ok := s.hub.Index().IDByName(name); ok && other != id {
		return nil, clusters.Conflict("cluster name %q is used by instance %s", name, other)
	}
	owned := func(kind string, obj client.Object) (bool, error) {
		if err := s.hub.Client.Get(ctx, client.ObjectKey{Namespace: obj.GetNamespace(), Name: name}, obj); err != nil {
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
	hc.Namespace = s.hub.Namespace()
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
func (s *Service) liveHostedCluster(ctx context.Context, id string) (*hyperv1.HostedCluster, error) {
	var list hyperv1.HostedClusterList
	if err := s.hub.Client.List(ctx, &list, client.InNamespace(s.hub.Namespace()), client.MatchingLabels{meta.LabelInstanceID: id}); err != nil {
		return nil, hubapi.Failure(err, "looking up cluster %s", id)
	}
	for i := range list.Items {
		if meta.Ours(s.cfg.Provider, list.Items[i].Labels) {
			return &list.Items[i], nil
		}
	}
	return nil, nil
}

// liveView is an instance's view read from the API server (its HostedCluster, and its NodePool when there is one),
// for a replica whose cache has not seen it yet.
// LiveView reads an instance's HostedCluster (by hc's name) and its NodePool from the API server; the view's
// HostedCluster is nil when it is gone.
func (s *Service) LiveView(ctx context.Context, id string, hc *hyperv1.HostedCluster) (clusters.View, error) {
	var live hyperv1.HostedCluster
	if err := s.hub.Client.Get(ctx, client.ObjectKeyFromObject(hc), &live); err != nil {
		if apierrors.IsNotFound(err) {
			return clusters.View{ID: id}, nil
		}
		return clusters.View{}, err
	}
	return s.liveView(ctx, id, &live), nil
}

func (s *Service) liveView(ctx context.Context, id string, hc *hyperv1.HostedCluster) clusters.View {
	v := clusters.View{ID: id, HostedCluster: hc}
	var np hyperv1.NodePool
	if err := s.hub.Client.Get(ctx, client.ObjectKey{Namespace: hc.Namespace, Name: hc.Name}, &np); err == nil && meta.InstanceID(np.Labels) == id {
		v.NodePools = []*hyperv1.NodePool{&np}
	}
	return v
}

// catalog is the hub's provisionable releases: its ClusterImageSets, filtered by the operator's supported versions
// and the version matrix. Creates resolve against it and registration advertises its Kubernetes minors.
func (s *Service) catalog(ctx context.Context) (versions.Catalog, error) {
	sets, err := s.hub.ImageSets(ctx)
	if err != nil {
		return versions.Catalog{}, hubapi.Failure(err, "reading ClusterImageSets")
	}
	supported, ok := s.hub.SupportedVersions(ctx)
	if !ok {
		supported = nil
	}
	return versions.NewCatalog(s.cfg.Matrix, sets, supported), nil
}

// KubernetesVersions lists the Kubernetes minors this hub can provision now (registration capabilities).
func (s *Service) KubernetesVersions(ctx context.Context) []string {
	c, err := s.catalog(ctx)
	if err != nil {
		s.log.Warn("cannot compute the supported Kubernetes versions", "error", err)
		return nil
	}
	return c.KubernetesMinors()
}

func (s *Service) resolveVersion(ctx context.Context, requested string) (versions.Resolution, error) {
	cat, err := s.catalog(ctx)
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

// input is the render input of a cluster: the request's spec plus what was decided at create (release image,
// OpenShift version, infraID, availability policy) — from the request itself at create, from the HostedCluster
// later. Secret contents are not filled in: only a create, or a convergence that must recreate a Secret, reads them.
func (s *Service) input(id string, spec *clusters.Spec, releaseImage, openshiftVersion, infraID string, policy hyperv1.AvailabilityPolicy) (render.Input, error) {
	if policy == "" {
		policy = s.cfg.ControlPlaneAvailabilityPolicy
		switch spec.ControlPlane.Count {
		case 1:
			policy = hyperv1.SingleReplica
		case 3, 5:
			policy = hyperv1.HighlyAvailable
		}
	}
	replicas := spec.Replicas(s.cfg.DefaultWorkerCount)
	in := render.Input{
		ID: id, Provider: s.cfg.Provider, Name: spec.Name, Namespace: s.hub.Namespace(), InfraID: infraID,
		Platform: spec.Platform, SpecJSON: spec.JSON, ReleaseImage: releaseImage, OpenShiftVersion: openshiftVersion,
		ControllerAvailabilityPolicy: policy, ControlPlaneCPU: spec.ControlPlane.CPU, ControlPlaneMemory: spec.ControlPlane.Memory,
		WorkerCount: replicas, WorkerMemory: spec.Workers.Memory, WorkerStorage: spec.Workers.Storage,
		BaseDomain: spec.BaseDomain, SSHPublicKey: s.cfg.SSHPublicKey,
		AgentNamespace: s.hub.AgentNamespace(), ManagedCluster: s.cfg.ManageACMObjects,
		Finalizers: []string{meta.FinalizerStatus},
	}
	if spec.Workers.CPU != nil {
		cores := uint32(*spec.Workers.CPU)
		in.WorkerCores = &cores
	}
	if a := spec.Autoscaling; a != nil {
		in.Autoscaling = &hyperv1.NodePoolAutoScaling{Min: a.Min, Max: a.Max}
	}
	switch spec.Platform {
	case clusters.KubeVirt:
		in.KubeVirtInfraKubeconfig, in.KubeVirtInfraNamespace = s.cfg.KubeVirtInfraKubeconfig, s.cfg.KubeVirtInfraNamespace
	case clusters.BareMetal:
		// Hardware sizes are Agent minimums, not VM sizes.
		in.WorkerMemory, in.WorkerStorage, in.WorkerCores = nil, nil, nil
	}
	return in, nil
}

// pullSecret is the cluster's pull secret: the request's own (older DCM catalogs), else the configured one.
func (s *Service) pullSecret(ctx context.Context, spec *clusters.Spec) ([]byte, error) {
	if spec.PullSecret != nil {
		return spec.PullSecret, nil
	}
	data, err := s.cfg.PullSecret(ctx)
	if err != nil {
		return nil, hubapi.Failure(err, "reading the configured pull secret")
	}
	return data, nil
}

func newEtcdKey() ([]byte, error) {
	key := make([]byte, 32)
	if _, err := rand.Read(key); err != nil {
		return nil, hubapi.Failure(err, "generating the etcd encryption key")
	}
	return key, nil
}

// hostingClusterTTL is how long the hosting cluster's name is reused before it is looked up again: it changes only
// when an administrator renames ACM's local cluster, so a lookup per create would be one API call spent for nothing.
const hostingClusterTTL = 5 * time.Minute

// hostingClusterName is the name of the ManagedCluster labelled local-cluster=true (ACM lets it be renamed), read
// from the hub at most every hostingClusterTTL (metadata only). A failed lookup is not cached.
func (s *Service) hostingClusterName(ctx context.Context) string {
	if !s.cfg.ManageACMObjects {
		return ""
	}
	s.mu.Lock()
	name, at := s.hosting.name, s.hosting.at
	s.mu.Unlock()
	if name != "" && s.now().Sub(at) < hostingClusterTTL {
		return name
	}
	var list metav1.PartialObjectMetadataList
	list.SetGroupVersionKind(schema.GroupVersionKind{Group: clusterv1.GroupName, Version: "v1", Kind: "ManagedClusterList"})
	if err := s.hub.Client.List(ctx, &list, client.MatchingLabels{"local-cluster": "true"}); err != nil {
		return "local-cluster"
	}
	name = "local-cluster"
	if len(list.Items) > 0 {
		name = list.Items[0].Name
	}
	s.mu.Lock()
	s.hosting.name, s.hosting.at = name, s.now()
	s.mu.Unlock()
	return name
}

// transient reports a failure worth retrying (the hub unavailable, slow, or changing underneath), as opposed to a
// refusal (a conflict of names, an invalid object) that no retry fixes.
func transient(err error) bool {
	var de *clusters.Error
	if !errors.As(err, &de) {
		de = hubapi.Failure(err, "")
	}
	return de.Kind == clusters.KindUnavailable || de.Kind == clusters.KindTimeout
}

// changes records what one create changed on the hub, so that its rollback undoes exactly that. Children written in
// parallel record themselves concurrently (add); it is read once they are done.
type changes struct {
	mu      sync.Mutex
	created []client.Object // in creation order
	agents  []string        // Agents this request labelled (not those a previous attempt had reserved)
}

// add records a created object (nil-safe: convergence records nothing).
func (ch *changes) add(o client.Object) {
	if ch == nil {
		return
	}
	ch.mu.Lock()
	ch.created = append(ch.created, o)
	ch.mu.Unlock()
}

// lock is the instance lock this create took, if it did.
func (ch *changes) lock() *corev1.ConfigMap {
	if ch == nil {
		return nil
	}
	ch.mu.Lock()
	defer ch.mu.Unlock()
	for _, o := range ch.created {
		if cm, ok := o.(*corev1.ConfigMap); ok {
			return cm
		}
	}
	return nil
}

// rollback deletes, in reverse order, what this request created and releases the Agents it reserved. A
// HostedCluster loses only the SP's own finalizer (optimistic lock), never the operator's.
func (s *Service) rollback(ctx context.Context, id string, ch *changes) {
	rctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 30*time.Second)
	defer cancel()
	for i := len(ch.created) - 1; i >= 0; i-- {
		o := ch.created[i]
		if hc, ok := o.(*hyperv1.HostedCluster); ok {
			if err := s.RemoveStatusFinalizer(rctx, hc); err != nil {
				s.log.Error("rollback: could not remove the status finalizer", "id", id, "name", hc.Name, "error", err)
			}
		}
		if err := s.deleteCreated(rctx, o); err != nil {
			s.log.Error("rollback: could not delete", "id", id, "kind", kindOf(o), "name", o.GetName(), "error", err)
		}
	}
	for _, name := range ch.agents {
		if err := s.releaseAgent(rctx, name, id); err != nil {
			s.log.Error("rollback: could not release Agent", "id", id, "agent", name, "error", err)
		}
	}
}

// deleteCreated deletes an object this request created (preconditioned on its UID so a newer object of the same
// name is never touched).
func (s *Service) deleteCreated(ctx context.Context, o client.Object) error {
	opts := []client.DeleteOption{client.PropagationPolicy("Background")}
	if uid := o.GetUID(); uid != "" {
		opts = append(opts, client.Preconditions{UID: &uid})
	}
	if err := s.hub.Client.Delete(ctx, o, opts...); err != nil && !apierrors.IsNotFound(err) && !apierrors.IsConflict(err) {
		return err
	}
	return nil
}

// RemoveStatusFinalizer removes the SP's finalizer — and only it — from a HostedCluster, with an optimistic lock
// (a conflict is retried on a fresh read), so another actor's finalizer change is never overwritten.
func (s *Service) RemoveStatusFinalizer(ctx context.Context, hc *hyperv1.HostedCluster) error {
	cur := hc.DeepCopy()
	for attempt := 0; attempt < 5; attempt++ {
		if !slices.Contains(cur.Finalizers, meta.FinalizerStatus) {
			return nil
		}
		patch := client.MergeFromWithOptions(cur.DeepCopy(), client.MergeFromWithOptimisticLock{})
		cur.Finalizers = slices.DeleteFunc(slices.Clone(cur.Finalizers), func(f string) bool { return f == meta.FinalizerStatus })
		err := s.hub.Client.Patch(ctx, cur, patch)
		switch {
		case err == nil || apierrors.IsNotFound(err):
			return nil
		case !apierrors.IsConflict(err):
			return err
		}
		cur = &hyperv1.HostedCluster{}
		if err := s.hub.Client.Get(ctx, client.ObjectKeyFromObject(hc), cur); err != nil {
			return client.IgnoreNotFound(err)
		}
		if cur.UID != hc.UID {
			return nil // a newer cluster of the same name: not ours to touch
		}
	}
	return fmt.Errorf("HostedCluster %s kept changing", hc.Name)
}

// awaitCached waits (bounded) until the new HostedCluster is in the cache, so that a GET right after the create
// finds it, and returns the resource built from the cache.
func (s *Service) awaitCached(ctx context.Context, id string) *clusters.Cluster {
	var v clusters.View
	if s.waitCache(ctx, func() bool {
		var ok bool
		v, ok = s.hub.Index().Get(id)
		return ok && v.HostedCluster != nil
	}) {
		c := clusters.BuildCluster(v, s.now(), s.viewSettings())
		return &c
	}
	s.log.Warn("created cluster not in the cache yet", "id", id, "waited", s.cfg.CacheWait)
	return &clusters.Cluster{ID: id, Status: status.Pending, StatusMessage: "HostedCluster created; waiting for the hosted control plane", CreateTime: s.now().UTC(), UpdateTime: s.now().UTC()}
}

// waitCache polls cond until it holds, CacheWait passes or ctx ends; it reports whether cond held.
func (s *Service) waitCache(ctx context.Context, cond func() bool) bool {
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

// Delete starts deleting a cluster: the ManagedCluster and KlusterletAddonConfig first, then the HostedCluster
// with the cloud-resource clean-up annotation; the operator removes the NodePools, the garbage collector the
// Secrets. The reconciler finishes the rest once the HostedCluster is gone. key is the request's Idempotency-Key
// ("" when none): a keyed DELETE is remembered, and its replay answered, after the cluster is gone (tombstone.go).
func (s *Service) Delete(ctx context.Context, id, key string) error {
	if key != "" {
		if err := clusters.CheckIdempotencyKey(key); err != nil {
			return err
		}
	}
	if err := s.ready(); err != nil {
		return err
	}
	unlock := s.locks.lock("id/" + id)
	defer unlock()
	var hc *hyperv1.HostedCluster
	if v, ok := s.hub.Index().Get(id); ok && !v.Gone() {
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
	if err := s.hub.Client.Patch(ctx, target, client.RawPatch(types.MergePatchType, patch)); err != nil {
		if apierrors.IsNotFound(err) {
			return clusters.NotFound("cluster %s not found", id)
		}
		return hubapi.Failure(err, "annotating HostedCluster %s for clean-up", hc.Name)
	}
	uid := hc.UID
	if err := s.hub.Client.Delete(ctx, target, client.PropagationPolicy("Background"), client.Preconditions{UID: &uid}); err != nil && !apierrors.IsNotFound(err) {
		return hubapi.Failure(err, "deleting HostedCluster %s", hc.Name)
	}
	s.log.Info("cluster deletion started", "id", id, "name", hc.Name)
	// Read-your-writes: wait (bounded) until the cache shows the deletion, so a GET right after says DELETING.
	s.waitCache(ctx, func() bool {
		v, ok := s.hub.Index().Get(id)
		return !ok || v.HostedCluster == nil || v.HostedCluster.DeletionTimestamp != nil
	})
	return nil
}

// DeleteACMObjects deletes the KlusterletAddonConfig and the ManagedCluster of a cluster — only if they are this
// instance's (labelled with its id). A no-op without manageACMObjects.
func (s *Service) DeleteACMObjects(ctx context.Context, id, name string) error {
	if !s.cfg.ManageACMObjects || name == "" {
		return nil
	}
	kac := &unstructured.Unstructured{}
	kac.SetGroupVersionKind(hubapi.KlusterletAddonConfigGVK)
	if err := s.hub.Client.Get(ctx, client.ObjectKey{Namespace: name, Name: name}, kac); err == nil && meta.InstanceID(kac.GetLabels()) == id {
		if err := s.hub.Client.Delete(ctx, kac); err != nil && !apierrors.IsNotFound(err) {
			return hubapi.Failure(err, "deleting KlusterletAddonConfig %s", name)
		}
	} else if err != nil && !apierrors.IsNotFound(err) && !apimeta.IsNoMatchError(err) {
		return hubapi.Failure(err, "reading KlusterletAddonConfig %s", name)
	}
	var mc clusterv1.ManagedCluster
	if err := s.hub.Client.Get(ctx, client.ObjectKey{Name: name}, &mc); err == nil && meta.InstanceID(mc.Labels) == id {
		uid := mc.UID
		if err := s.hub.Client.Delete(ctx, &mc, client.Preconditions{UID: &uid}); err != nil && !apierrors.IsNotFound(err) {
			return hubapi.Failure(err, "deleting ManagedCluster %s", name)
		}
	} else if err != nil && !apierrors.IsNotFound(err) && !apimeta.IsNoMatchError(err) {
		return hubapi.Failure(err, "reading ManagedCluster %s", name)
	}
	return nil
}

// keyedLocks serializes operations per key (instance id, cluster name) inside the process; the API server's
// AlreadyExists on the names is the guard across processes.
type keyedLocks struct {
	mu    sync.Mutex
	locks map[string]*keyedLock
}

type keyedLock struct {
	sync.Mutex
	refs int
}

// lock takes every key's lock (in sorted order, so two callers never deadlock) and returns the unlock function.
func (k *keyedLocks) lock(keys ...string) func() {
	sorted := append([]string(nil), keys...)
	sort.Strings(sorted)
	held := make([]*keyedLock, 0, len(sorted))
	for _, key := range sorted {
		k.mu.Lock()
		if k.locks == nil {
			k.locks = map[string]*keyedLock{}
		}
		l := k.locks[key]
		if l == nil {
			l = &keyedLock{}
			k.locks[key] = l
		}
		l.refs++
		k.mu.Unlock()
		l.Lock()
		held = append(held, l)
	}
	return func() {
		for i := len(held) - 1; i >= 0; i-- {
			held[i].Unlock()
			k.mu.Lock()
			held[i].refs--
			if held[i].refs == 0 {
				delete(k.locks, sorted[i])
			}
			k.mu.Unlock()
		}
	}
}

func orNone(list []string) []string {
	if len(list) == 0 {
		return []string{"none"}
	}
	return list
}

// randomSuffix returns n characters from [a-z0-9] (the infraID suffix).
func randomSuffix(n int) string {
	const alphabet = "abcdefghijklmnopqrstuvwxyz0123456789"
	b := make([]byte, n)
	for i := range b {
		x, _ := rand.Int(rand.Reader, big.NewInt(int64(len(alphabet))))
		b[i] = alphabet[x.Int64()]
	}
	return string(b)
}

// kindOf names an object's kind for messages (the typed objects' TypeMeta is empty).
func kindOf(o client.Object) string {
	if k := o.GetObjectKind().GroupVersionKind().Kind; k != "" {
		return k
	}
	t := fmt.Sprintf("%T", o)
	return t[strings.LastIndex(t, ".")+1:]
}
