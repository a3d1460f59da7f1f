package provision

import (
	"context"
	"crypto/rand"
	"log/slog"
	"slices"
	"sync"
	"time"

	hyperv1 "github.com/openshift/hypershift/api/hypershift/v1beta1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	clusterv1 "open-cluster-management.io/api/cluster/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/dcm-sp/acm-cluster-sp/internal/sp/clusters"
	"github.com/dcm-sp/acm-cluster-sp/internal/sp/hubapi"
	"github.com/dcm-sp/acm-cluster-sp/internal/sp/meta"
	"github.com/dcm-sp/acm-cluster-sp/internal/sp/platform"
	"github.com/dcm-sp/acm-cluster-sp/internal/sp/render"
	"github.com/dcm-sp/acm-cluster-sp/internal/sp/status"
)

// Converger is the reconciler's service: it converges a live cluster toward its stored spec (children, Agent
// reservations, ACM objects, the day-2 operation's next step), cleans up after a deletion and sweeps orphans. It
// remembers, per instance, what it has ensured once (forgotten when the cluster is gone).
type Converger struct {
	deps

	mu       sync.Mutex
	kacDone  map[string]bool      // instances whose KlusterletAddonConfig exists (forgotten when the cluster is gone)
	lockDone map[string]types.UID // instances whose lock is owned by their HostedCluster (of this UID)
	creates  inFlight             // instances whose create this process is writing (Writer.create)
	expected expectations         // children this process created that the index does not show yet
	hosting  struct {             // the hosting cluster's name and when it was read (hostingClusterName)
		name string
		at   time.Time
	}
}

// NewConverger returns the converger.
func NewConverger(p Ports, cfg Config, log *slog.Logger) *Converger {
	return &Converger{deps: newDeps(p, cfg, log), kacDone: map[string]bool{}, lockDone: map[string]types.UID{}}
}

// Creating reports whether this process's create of the instance is writing it now: the reconciler then looks again
// later instead of converging the same children at the same time.
func (s *Converger) Creating(id string) bool { return s.creates.has(id) }

// beginCreate marks a create of id in flight until the returned function is called (Writer.create).
func (s *Converger) beginCreate(id string) (end func()) { return s.creates.begin(id) }

// Settings is the configuration the services run with (defaults applied).
func (s *Converger) Settings() Config { return s.cfg }

// Now is the service's clock (the reconciler evaluates statuses with it).
func (s *Converger) Now() time.Time { return s.now() }

// StatusSettings are the status function's settings.
func (s *Converger) StatusSettings() status.Settings { return s.cfg.Status }

// Forget drops what the service remembers about an instance whose deletion is complete (the reconciler) or that the
// index no longer knows (Services.IndexChanged).
func (s *Converger) Forget(id string) {
	s.mu.Lock()
	delete(s.kacDone, id)
	delete(s.lockDone, id)
	s.mu.Unlock()
	s.expected.forget(id)
}

// observed ends the expectations of the cluster's children that its view now shows (or that expired).
func (s *Converger) observed(v clusters.View) {
	s.expected.observed(v.ID, func(c child) bool {
		switch c.kind {
		case kindNodePool:
			return slices.ContainsFunc(v.NodePools, func(np *hyperv1.NodePool) bool { return np.Name == c.name })
		case kindManagedCluster:
			return v.ManagedCluster != nil && v.ManagedCluster.Name == c.name
		case kindSecret:
			_, ok := s.index.Secret(c.name)
			return ok
		}
		return false
	}, s.now())
}

// Remembered is how many instances the service holds state for (tests: memory follows the live clusters).
func (s *Converger) Remembered() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return max(len(s.kacDone), len(s.lockDone), s.expected.instances())
}

// Report is a cluster's status as the status events carry it: Map's decision in the configured vocabulary — the
// same words GET and LIST answer — and what the cluster produced.
func (s *Converger) Report(v clusters.View, r status.Result) status.Report {
	st, msg := s.cfg.Vocabulary.Present(r, observed(s.cfg))
	return status.Report{Status: st, Message: msg, Output: clusters.Output(v)}
}

// Release is the release a cluster's objects are rendered at, and the identity its HostedCluster was made with.
type Release struct {
	Image, OpenShiftVersion string
	InfraID                 string
	Policy                  hyperv1.AvailabilityPolicy // "": from the spec and the configuration
}

// Fill says which contents Desired reads or generates: a create fills them all, Converge only what the hub lacks.
type Fill struct {
	PullSecret     bool // read the pull secret (the request's, else the configured one)
	EtcdKey        bool // generate a new etcd encryption key
	HostingCluster bool // read the hosting cluster's name (the ManagedCluster's hosting annotation)
}

// Desired is the one builder of what a cluster's objects must be — what a create writes and what Converge drives
// toward: the render input of cluster id with spec at release r, with the contents fill asks for.
func (s *Converger) Desired(ctx context.Context, id string, spec *clusters.Spec, r Release, fill Fill) (render.Input, error) {
	in := s.input(id, spec, r)
	var err error
	if fill.PullSecret {
		if in.PullSecret, err = s.pullSecret(ctx, spec); err != nil {
			return in, err
		}
	}
	if fill.EtcdKey {
		if in.EtcdEncryptionKey, err = newEtcdKey(); err != nil {
			return in, err
		}
	}
	if fill.HostingCluster {
		in.HostingClusterName = s.hostingClusterName(ctx)
	}
	return in, nil
}

// input is the render input of a cluster: the spec plus what was decided at create (r) — from the request itself
// at create, from the HostedCluster later. Secret contents are not filled in (Desired fills what it is asked to).
func (s *Converger) input(id string, spec *clusters.Spec, r Release) render.Input {
	policy := r.Policy
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
		ID: id, Provider: s.cfg.Provider, Name: spec.Name, Namespace: s.site.Namespace(), InfraID: r.InfraID,
		Platform: spec.Platform, SpecJSON: spec.JSON, ReleaseImage: r.Image, OpenShiftVersion: r.OpenShiftVersion,
		ControllerAvailabilityPolicy: policy, ControlPlaneCPU: spec.ControlPlane.CPU, ControlPlaneMemory: spec.ControlPlane.Memory,
		WorkerCount: replicas, WorkerMemory: spec.Workers.Memory, WorkerStorage: spec.Workers.Storage,
		BaseDomain: spec.BaseDomain, SSHPublicKey: s.cfg.SSHPublicKey,
		AgentNamespace: s.site.AgentNamespace(), ManagedCluster: s.cfg.ManageACMObjects,
		Finalizers: []string{meta.FinalizerStatus},
	}
	if spec.Workers.CPU != nil {
		cores := uint32(*spec.Workers.CPU)
		in.WorkerCores = &cores
	}
	if a := spec.Autoscaling; a != nil {
		in.Autoscaling = &hyperv1.NodePoolAutoScaling{Min: a.Min, Max: a.Max}
	}
	p, _ := platform.Lookup(spec.Platform)
	if p.InfraCluster {
		in.InfraKubeconfig, in.InfraNamespace = s.cfg.InfraKubeconfig, s.cfg.InfraNamespace
	}
	if p.Agents {
		// Hardware sizes are Agent minimums, not VM sizes.
		in.WorkerMemory, in.WorkerStorage, in.WorkerCores = nil, nil, nil
	}
	return in
}

// pullSecret is the cluster's pull secret: the request's own (older DCM catalogs), else the configured one.
func (s *Converger) pullSecret(ctx context.Context, spec *clusters.Spec) ([]byte, error) {
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
func (s *Converger) hostingClusterName(ctx context.Context) string {
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
	if err := s.client.List(ctx, &list, client.MatchingLabels{"local-cluster": "true"}); err != nil {
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

// LiveView reads an instance's HostedCluster (by hc's name) and its NodePool from the API server; the view's
// HostedCluster is nil when it is gone.
func (s *Converger) LiveView(ctx context.Context, id string, hc *hyperv1.HostedCluster) (clusters.View, error) {
	var live hyperv1.HostedCluster
	if err := s.client.Get(ctx, client.ObjectKeyFromObject(hc), &live); err != nil {
		if apierrors.IsNotFound(err) {
			return clusters.View{ID: id}, nil
		}
		return clusters.View{}, err
	}
	return s.liveView(ctx, id, &live), nil
}

// liveView is an instance's view read from the API server (its HostedCluster, and its NodePool when there is one),
// for a replica whose cache has not seen it yet.
func (s *deps) liveView(ctx context.Context, id string, hc *hyperv1.HostedCluster) clusters.View {
	v := clusters.View{ID: id, HostedCluster: hc}
	var np hyperv1.NodePool
	if err := s.client.Get(ctx, client.ObjectKey{Namespace: hc.Namespace, Name: hc.Name}, &np); err == nil && meta.InstanceID(np.Labels) == id {
		v.NodePools = []*hyperv1.NodePool{&np}
	}
	return v
}
