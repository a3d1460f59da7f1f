// Package clusters is the domain service: it validates cluster requests, decides what to provision and
// orchestrates the hub writes (create with rollback, delete, clean-up), and assembles the cluster resource from the
// hub's caches with the one status function.
package clusters

import (
	"context"
	"crypto/rand"
	"errors"
	"fmt"
	"log/slog"
	"math/big"
	"regexp"
	"slices"
	"sort"
	"strings"
	"sync"
	"time"

	"github.com/google/uuid"
	hyperv1 "github.com/openshift/hypershift/api/hypershift/v1beta1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	apimeta "k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/types"
	clusterv1 "open-cluster-management.io/api/cluster/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/dcm-sp/acm-cluster-sp/internal/hub"
	"github.com/dcm-sp/acm-cluster-sp/internal/meta"
	"github.com/dcm-sp/acm-cluster-sp/internal/render"
	"github.com/dcm-sp/acm-cluster-sp/internal/status"
	"github.com/dcm-sp/acm-cluster-sp/internal/versions"
)

// Config is what the service needs from the SP configuration, resolved at start.
type Config struct {
	Spec                           SpecContext
	ManageACMObjects               bool
	ControlPlaneAvailabilityPolicy hyperv1.AvailabilityPolicy
	DefaultWorkerCount             int32
	KubeVirtInfraKubeconfig        []byte
	KubeVirtInfraNamespace         string
	SSHPublicKey                   string
	// PullSecret returns the configured pull secret (file content, inline value or a copy of a Secret).
	PullSecret func(ctx context.Context) ([]byte, error)
	Matrix     versions.Matrix
	Status     status.Settings
	// Platforms returns the platforms this SP can provision right now (enabled and with their APIs on the hub).
	Platforms func() []string
	// CacheWait bounds how long a create waits for its HostedCluster to appear in the cache (default 5s).
	CacheWait time.Duration
}

// Service implements the cluster operations.
type Service struct {
	hub   *hub.Hub
	cfg   Config
	locks keyedLocks
	now   func() time.Time
	log   *slog.Logger
}

// New returns the service.
func New(h *hub.Hub, cfg Config, log *slog.Logger) *Service {
	if cfg.CacheWait == 0 {
		cfg.CacheWait = 5 * time.Second
	}
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	return &Service{hub: h, cfg: cfg, now: time.Now, log: log}
}

// SetClock replaces the service's clock (tests).
func (s *Service) SetClock(now func() time.Time) { s.now = now }

func (s *Service) viewSettings() ViewSettings {
	return ViewSettings{Status: s.cfg.Status, DefaultWorkerCount: s.cfg.DefaultWorkerCount}
}

func (s *Service) ready() error {
	if !s.hub.Synced() {
		return unavailable("the hub caches are not synced yet; retry shortly")
	}
	return nil
}

var idRE = regexp.MustCompile(`^[a-z0-9]([a-z0-9-]{0,61}[a-z0-9])?$`)

// CheckID validates a client-chosen instance id (AEP-133 pattern; "health" would shadow the health route).
func CheckID(id string) error {
	if !idRE.MatchString(id) {
		return &Error{Kind: KindInvalid, Message: fmt.Sprintf("id %q must match ^[a-z0-9]([a-z0-9-]{0,61}[a-z0-9])?$", id), Fields: []FieldError{{"id", "invalid format"}}}
	}
	if id == "health" {
		return &Error{Kind: KindInvalid, Message: `id "health" is reserved (it is the health endpoint's path)`, Fields: []FieldError{{"id", "reserved"}}}
	}
	return nil
}

// Get returns one cluster from the caches.
func (s *Service) Get(_ context.Context, id string) (*Cluster, error) {
	if err := s.ready(); err != nil {
		return nil, err
	}
	v, ok := s.hub.Index().Get(id)
	if !ok || v.Gone() {
		return nil, notFound("cluster %s not found", id)
	}
	c := BuildCluster(v, s.now(), s.viewSettings())
	if c.Status == status.Ready && len(v.Kubeconfig) == 0 {
		s.log.Warn("cluster READY but its admin kubeconfig Secret is not in the cache yet", "id", id)
	}
	return &c, nil
}

// List returns one page of clusters in (create_time, id) order and the token of the next page ("" on the last).
func (s *Service) List(_ context.Context, pageSize *int, pageToken string) ([]Cluster, string, error) {
	if err := s.ready(); err != nil {
		return nil, "", err
	}
	size, err := PageSize(pageSize)
	if err != nil {
		return nil, "", err
	}
	var after *hub.Key
	if pageToken != "" {
		k, err := DecodePageToken(pageToken)
		if err != nil {
			return nil, "", err
		}
		after = &k
	}
	views, more := s.hub.Index().Page(after, size)
	now := s.now()
	out := make([]Cluster, len(views))
	for i, v := range views {
		out[i] = BuildCluster(v, now, s.viewSettings())
	}
	next := ""
	if more && len(views) > 0 {
		last := views[len(views)-1]
		next = EncodePageToken(hub.Key{Created: last.HostedCluster.CreationTimestamp.Time, ID: last.ID})
	}
	return out, next, nil
}

// Create provisions a cluster. created is false for an idempotent replay (same id, same spec).
func (s *Service) Create(ctx context.Context, id string, body []byte) (c *Cluster, created bool, err error) {
	if err := s.ready(); err != nil {
		return nil, false, err
	}
	if id == "" {
		id = uuid.NewString()
	} else if err := CheckID(id); err != nil {
		return nil, false, err
	}
	spec, err := ParseSpec(body, s.cfg.Spec)
	if err != nil {
		return nil, false, err
	}
	if !slices.Contains(s.cfg.Platforms(), string(spec.Platform)) {
		return nil, false, unprocessable("platform %q is not available on this provider (supported: %s)", spec.Platform, strings.Join(orNone(s.cfg.Platforms()), ", "))
	}
	unlock := s.locks.lock("id/"+id, "name/"+spec.Name)
	defer unlock()

	if c, done, err := s.existing(id, spec); done {
		return c, false, err
	}
	if err := s.checkNameFree(ctx, id, spec.Name); err != nil {
		return nil, false, err
	}
	res, err := s.resolveVersion(ctx, spec.Version)
	if err != nil {
		return nil, false, err
	}
	replicas := s.cfg.DefaultWorkerCount
	if spec.Workers.Count != nil {
		replicas = *spec.Workers.Count
	}
	var release func(context.Context)
	if spec.Platform == render.BareMetal {
		if release, err = s.reserveAgents(ctx, id, spec, int(replicas)); err != nil {
			return nil, false, err
		}
	}
	in, err := s.renderInput(ctx, id, spec, res, replicas)
	if err != nil {
		if release != nil {
			release(context.WithoutCancel(ctx))
		}
		return nil, false, err
	}
	if err := s.createObjects(ctx, id, spec, render.Render(in), release); err != nil {
		return nil, false, err
	}
	s.log.Info("cluster created", "id", id, "name", spec.Name, "platform", spec.Platform, "openshiftVersion", res.OpenShiftVersion)
	return s.awaitCached(ctx, id), true, nil
}

// existing answers a create whose id is already known: the same spec is an idempotent replay (200), anything else
// a conflict. done is false when the id is new.
func (s *Service) existing(id string, spec *Spec) (*Cluster, bool, error) {
	v, ok := s.hub.Index().Get(id)
	if !ok || v.HostedCluster == nil {
		return nil, false, nil
	}
	if v.HostedCluster.DeletionTimestamp != nil {
		return nil, true, conflict("instance %s is being deleted", id)
	}
	if v.HostedCluster.Annotations[meta.AnnotationSpec] != spec.JSON {
		return nil, true, conflict("instance %s exists with a different spec", id)
	}
	c := BuildCluster(v, s.now(), s.viewSettings())
	return &c, true, nil
}

// checkNameFree refuses a name taken on the hub by anything not belonging to this instance: a HostedCluster in the
// SP's namespace, a ManagedCluster, or a Namespace of that name (ACM's cluster namespace, which never carries an
// instance id, so an existing one always conflicts).
func (s *Service) checkNameFree(ctx context.Context, id, name string) error {
	if other, ok := s.hub.Index().IDByName(name); ok && other != id {
		return conflict("cluster name %q is used by instance %s", name, other)
	}
	owned := func(kind string, obj client.Object) error {
		if err := s.hub.Client.Get(ctx, client.ObjectKey{Namespace: obj.GetNamespace(), Name: name}, obj); err != nil {
			if apierrors.IsNotFound(err) || apimeta.IsNoMatchError(err) {
				return nil
			}
			return internal(err, "checking whether name %q is free", name)
		}
		if other := meta.InstanceID(obj.GetLabels()); other != id {
			if obj.GetDeletionTimestamp() != nil {
				return conflict("cluster name %q is still being deleted on the hub (%s %s is terminating); retry later", name, kind, name)
			}
			if other != "" {
				return conflict("cluster name %q is used by instance %s", name, other)
			}
			return conflict("cluster name %q is already used on the hub (%s %s exists)", name, kind, name)
		}
		return nil
	}
	hc := &hyperv1.HostedCluster{}
	hc.Namespace = s.hub.Namespace()
	if err := owned("HostedCluster", hc); err != nil {
		return err
	}
	if s.cfg.ManageACMObjects {
		if err := owned("ManagedCluster", &clusterv1.ManagedCluster{}); err != nil {
			return err
		}
	}
	return owned("namespace", &corev1.Namespace{})
}

// catalog is the hub's provisionable releases: its ClusterImageSets, filtered by the operator's supported versions
// and the version matrix. Creates resolve against it and registration advertises its Kubernetes minors.
func (s *Service) catalog(ctx context.Context) (versions.Catalog, error) {
	sets, err := s.hub.ImageSets(ctx)
	if err != nil {
		return versions.Catalog{}, internal(err, "reading ClusterImageSets")
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
		return res, &Error{Kind: KindInvalid, Message: "version: " + strings.TrimPrefix(err.Error(), versions.ErrInvalid.Error()+": "), Fields: []FieldError{{"version", "not a Kubernetes or OpenShift version"}}}
	case errors.Is(err, versions.ErrUnsupported):
		return res, unprocessable("%s", strings.TrimPrefix(err.Error(), versions.ErrUnsupported.Error()+": "))
	}
	return res, err
}

func (s *Service) renderInput(ctx context.Context, id string, spec *Spec, res versions.Resolution, replicas int32) (render.Input, error) {
	pull := spec.PullSecret
	if pull == nil {
		var err error
		if pull, err = s.cfg.PullSecret(ctx); err != nil {
			return render.Input{}, internal(err, "reading the configured pull secret")
		}
	}
	key := make([]byte, 32)
	if _, err := rand.Read(key); err != nil {
		return render.Input{}, internal(err, "generating the etcd encryption key")
	}
	policy := s.cfg.ControlPlaneAvailabilityPolicy
	switch spec.ControlPlane.Count {
	case 1:
		policy = hyperv1.SingleReplica
	case 3, 5:
		policy = hyperv1.HighlyAvailable
	}
	in := render.Input{
		ID: id, Name: spec.Name, Namespace: s.hub.Namespace(), InfraID: spec.Name + "-" + randomSuffix(5),
		Platform: spec.Platform, SpecJSON: spec.JSON, ReleaseImage: res.ReleaseImage, OpenShiftVersion: res.OpenShiftVersion,
		ControllerAvailabilityPolicy: policy, ControlPlaneCPU: spec.ControlPlane.CPU, ControlPlaneMemory: spec.ControlPlane.Memory,
		WorkerCount: replicas, WorkerMemory: spec.Workers.Memory, WorkerStorage: spec.Workers.Storage,
		BaseDomain: spec.BaseDomain, PullSecret: pull, SSHPublicKey: s.cfg.SSHPublicKey, EtcdEncryptionKey: key,
		AgentNamespace: s.hub.AgentNamespace(), ManagedCluster: s.cfg.ManageACMObjects,
		HostingClusterName: s.hostingClusterName(ctx), Finalizers: []string{meta.FinalizerStatus},
	}
	if spec.Workers.CPU != nil {
		cores := uint32(*spec.Workers.CPU)
		in.WorkerCores = &cores
	}
	if spec.Platform == render.KubeVirt {
		in.KubeVirtInfraKubeconfig, in.KubeVirtInfraNamespace = s.cfg.KubeVirtInfraKubeconfig, s.cfg.KubeVirtInfraNamespace
	}
	if spec.Platform == render.BareMetal {
		// Hardware sizes are Agent minimums, not VM sizes.
		in.WorkerMemory, in.WorkerStorage, in.WorkerCores = nil, nil, nil
	}
	return in, nil
}

// hostingClusterName is the name of the ManagedCluster labelled local-cluster=true (ACM lets it be renamed).
func (s *Service) hostingClusterName(ctx context.Context) string {
	if !s.cfg.ManageACMObjects {
		return ""
	}
	var list clusterv1.ManagedClusterList
	if err := s.hub.Client.List(ctx, &list, client.MatchingLabels{"local-cluster": "true"}); err == nil && len(list.Items) > 0 {
		return list.Items[0].Name
	}
	return "local-cluster"
}

// createObjects creates the rendered objects in order; any failure deletes, in reverse order, what this request
// created and releases the Agents (D12), then answers 409 for a name collision and 500 otherwise.
func (s *Service) createObjects(ctx context.Context, id string, spec *Spec, objs render.Objects, release func(context.Context)) error {
	var created []client.Object
	rollback := func() {
		rctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 30*time.Second)
		defer cancel()
		for i := len(created) - 1; i >= 0; i-- {
			o := created[i]
			if err := s.deleteOwned(rctx, o); err != nil {
				s.log.Error("rollback: could not delete", "id", id, "kind", fmt.Sprintf("%T", o), "name", o.GetName(), "error", err)
			}
		}
		if release != nil {
			release(rctx)
		}
	}
	all := make([]client.Object, 0, len(objs.Secrets)+3)
	for _, sec := range objs.Secrets {
		all = append(all, sec)
	}
	all = append(all, objs.HostedCluster, objs.NodePool)
	if objs.ManagedCluster != nil {
		all = append(all, objs.ManagedCluster)
	}
	for _, o := range all {
		err := s.hub.Client.Create(ctx, o)
		if err == nil {
			created = append(created, o)
			continue
		}
		rollback()
		if apierrors.IsAlreadyExists(err) {
			return s.explainAlreadyExists(ctx, id, spec, o)
		}
		if apierrors.IsInvalid(err) {
			return internal(err, "the hub rejected the rendered %T %s", o, o.GetName())
		}
		return internal(err, "creating %T %s", o, o.GetName())
	}
	return nil
}

// explainAlreadyExists turns a create collision into the right answer: another instance's object is a name
// conflict; this instance's own object means a concurrent create of the same id (another replica) won the race.
func (s *Service) explainAlreadyExists(ctx context.Context, id string, spec *Spec, o client.Object) error {
	existing := o.DeepCopyObject().(client.Object)
	if err := s.hub.Client.Get(ctx, client.ObjectKeyFromObject(o), existing); err == nil {
		if other := meta.InstanceID(existing.GetLabels()); other != id {
			if other == "" {
				return conflict("cluster name %q is already used on the hub (%s exists)", spec.Name, o.GetName())
			}
			return conflict("cluster name %q is used by instance %s", spec.Name, other)
		}
	}
	return conflict("a create of instance %s is already in progress; retry to get its result", id)
}

// deleteOwned deletes an object this request created (preconditioned on its UID so a newer object of the same
// name is never touched).
func (s *Service) deleteOwned(ctx context.Context, o client.Object) error {
	opts := []client.DeleteOption{client.PropagationPolicy("Background")}
	if uid := o.GetUID(); uid != "" {
		opts = append(opts, client.Preconditions{UID: &uid})
	}
	if hc, ok := o.(*hyperv1.HostedCluster); ok && len(hc.Finalizers) > 0 {
		// Our own status finalizer would keep a rolled-back HostedCluster forever.
		patch := client.MergeFrom(hc.DeepCopy())
		hc.Finalizers = nil
		if err := s.hub.Client.Patch(ctx, hc, patch); err != nil && !apierrors.IsNotFound(err) {
			return err
		}
	}
	if err := s.hub.Client.Delete(ctx, o, opts...); err != nil && !apierrors.IsNotFound(err) && !apierrors.IsConflict(err) {
		return err
	}
	return nil
}

// awaitCached waits (bounded) until the new HostedCluster is in the cache, so that a GET right after the create
// finds it, and returns the resource built from the cache.
func (s *Service) awaitCached(ctx context.Context, id string) *Cluster {
	var v hub.View
	if s.waitCache(ctx, func() bool {
		var ok bool
		v, ok = s.hub.Index().Get(id)
		return ok && v.HostedCluster != nil
	}) {
		c := BuildCluster(v, s.now(), s.viewSettings())
		return &c
	}
	s.log.Warn("created cluster not in the cache yet", "id", id, "waited", s.cfg.CacheWait)
	return &Cluster{ID: id, Status: status.Pending, StatusMessage: "HostedCluster created; waiting for the hosted control plane", CreateTime: s.now().UTC(), UpdateTime: s.now().UTC()}
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
// with the cloud-resource clean-up annotation; the operator removes the NodePools. Leftovers are removed by the
// Reconciler once the HostedCluster is gone.
func (s *Service) Delete(ctx context.Context, id string) error {
	if err := s.ready(); err != nil {
		return err
	}
	unlock := s.locks.lock("id/" + id)
	defer unlock()
	v, ok := s.hub.Index().Get(id)
	if !ok || v.Gone() {
		return notFound("cluster %s not found", id)
	}
	hc := v.HostedCluster
	if hc.DeletionTimestamp != nil {
		return nil // already being deleted: 204 again
	}
	if s.cfg.ManageACMObjects {
		if err := s.deleteACMObjects(ctx, id, hc.Name); err != nil {
			return err
		}
	}
	patch := []byte(fmt.Sprintf(`{"metadata":{"annotations":{%q:"true"}}}`, meta.AnnotationCleanupCloudResources))
	target := &hyperv1.HostedCluster{}
	target.Namespace, target.Name = hc.Namespace, hc.Name
	if err := s.hub.Client.Patch(ctx, target, client.RawPatch(types.MergePatchType, patch)); err != nil {
		if apierrors.IsNotFound(err) {
			return notFound("cluster %s not found", id)
		}
		return internal(err, "annotating HostedCluster %s for clean-up", hc.Name)
	}
	uid := hc.UID
	if err := s.hub.Client.Delete(ctx, target, client.PropagationPolicy("Background"), client.Preconditions{UID: &uid}); err != nil && !apierrors.IsNotFound(err) {
		return internal(err, "deleting HostedCluster %s", hc.Name)
	}
	s.log.Info("cluster deletion started", "id", id, "name", hc.Name)
	// Read-your-writes: wait (bounded) until the cache shows the deletion, so a GET right after says DELETING.
	s.waitCache(ctx, func() bool {
		v, ok := s.hub.Index().Get(id)
		return !ok || v.HostedCluster == nil || v.HostedCluster.DeletionTimestamp != nil
	})
	return nil
}

// deleteACMObjects deletes the KlusterletAddonConfig and the ManagedCluster of a cluster — only if they are this
// instance's (labelled with its id).
func (s *Service) deleteACMObjects(ctx context.Context, id, name string) error {
	kac := &unstructured.Unstructured{}
	kac.SetGroupVersionKind(hub.KlusterletAddonConfigGVK)
	if err := s.hub.Client.Get(ctx, client.ObjectKey{Namespace: name, Name: name}, kac); err == nil && meta.InstanceID(kac.GetLabels()) == id {
		if err := s.hub.Client.Delete(ctx, kac); err != nil && !apierrors.IsNotFound(err) {
			return internal(err, "deleting KlusterletAddonConfig %s", name)
		}
	} else if err != nil && !apierrors.IsNotFound(err) && !apimeta.IsNoMatchError(err) {
		return internal(err, "reading KlusterletAddonConfig %s", name)
	}
	var mc clusterv1.ManagedCluster
	if err := s.hub.Client.Get(ctx, client.ObjectKey{Name: name}, &mc); err == nil && meta.InstanceID(mc.Labels) == id {
		if err := s.hub.Client.Delete(ctx, &mc); err != nil && !apierrors.IsNotFound(err) {
			return internal(err, "deleting ManagedCluster %s", name)
		}
	} else if err != nil && !apierrors.IsNotFound(err) && !apimeta.IsNoMatchError(err) {
		return internal(err, "reading ManagedCluster %s", name)
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
