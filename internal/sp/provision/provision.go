// Package provision is the domain service that acts on the hub: it answers the API's create, read, list, update and
// delete, and it converges a cluster's objects toward the spec stored on its HostedCluster — the same convergence
// the leader's reconciler runs for every cluster, so a create interrupted between two writes, or a child deleted by
// hand, is repaired by the next reconcile.
//
// It is three services, one per caller, over the narrow ports of ports.go (a controller-runtime client, the
// read model and the hub's catalog): the Writer answers create, update and delete (idempotent replays, the
// instance lock, the rollback of what a failed request did, the deletion records); the Converger is the
// reconciler's (convergence, day-2 steps, clean-up, orphan sweeps); the Reader answers GET, LIST, the kubeconfig
// and the provisionable versions. The Writer converges a new cluster's children through the Converger, exactly as
// the reconciler would, through the small surface it declares (converging, create.go: Desired, EnsureChildren,
// ReserveAgents); what both read or undo on the hub are methods of the deps they share. Each use case has its
// file: create.go, update.go, delete.go (the Writer); converge.go, operate.go, cleanup.go (the Converger);
// reader.go (the Reader).
//
// Create writes the HostedCluster (with the normalized spec, the desired state) first; every namespaced child
// (Secrets, NodePool) carries an ownerReference to it, so the hub's garbage collector removes them with it. Only
// what cannot be owned — the cluster-scoped ManagedCluster, the KlusterletAddonConfig in ACM's namespace, the
// Agent reservation labels — is cleaned up explicitly.
package provision

import (
	"context"
	"crypto/rand"
	"errors"
	"fmt"
	"log/slog"
	"math/big"
	"strings"
	"time"

	hyperv1 "github.com/openshift/hypershift/api/hypershift/v1beta1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/dcm-sp/acm-cluster-sp/internal/sp/clusters"
	"github.com/dcm-sp/acm-cluster-sp/internal/sp/hubapi"
	"github.com/dcm-sp/acm-cluster-sp/internal/sp/status"
	"github.com/dcm-sp/acm-cluster-sp/internal/sp/versions"
)

// Services are the three services of one SP over the same hub. Their IndexChanged must be registered with the
// index by the caller, on every replica (New registers nothing).
type Services struct {
	*Writer
	*Reader
	*Converger
}

// New builds the three services over the hub's ports.
func New(p Ports, cfg Config, log *slog.Logger) Services {
	conv := NewConverger(p, cfg, log)
	return Services{Writer: NewWriter(p, cfg, conv, log), Reader: NewReader(p, cfg, log), Converger: conv}
}

// IndexChanged is what the services do when the index reports a cluster changed or gone, decided on one lookup:
// the reader builds it afresh; the converger forgets a gone one (a follower remembers what the creates it served
// ensured, and never reconciles) and stops expecting the children the index now shows.
func (s Services) IndexChanged(id string) {
	v, known := s.Reader.index.Get(id)
	s.Reader.views.changed(id, !known)
	if !known {
		// A create in flight writes children whose informers' events can reach the index before its HostedCluster's:
		// what it expects stays (a create that rolled back forgets the instance itself).
		if !s.Converger.Creating(id) {
			s.Converger.Forget(id)
		}
	} else {
		s.Converger.observed(v)
	}
}

// withDefaults fills in the defaults of the unset durations and the vocabulary (the seed).
func (cfg Config) withDefaults() Config {
	if cfg.Vocabulary == nil {
		cfg.Vocabulary = status.Seed{}
	}
	if cfg.CacheWait == 0 {
		cfg.CacheWait = 5 * time.Second
	}
	if cfg.DeleteKeyRetention == 0 {
		cfg.DeleteKeyRetention = 24 * time.Hour
	}
	return cfg
}

// deps are what each service is built with: the hub's ports, the configuration (defaults applied), a logger and
// the clock. Every service has its own copy; no service reads another one's state through it.
type deps struct {
	client  client.Client
	index   Index
	catalog Catalog
	site    Site
	cfg     Config
	log     *slog.Logger
	now     func() time.Time
}

func newDeps(p Ports, cfg Config, log *slog.Logger) deps {
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	return deps{client: p.Client, index: p.Index, catalog: p.Catalog, site: p.Site, cfg: cfg.withDefaults(), log: log, now: time.Now}
}

// Config is what the services need from the SP configuration, resolved at start.
type Config struct {
	Provider                       string // providerName: the dcm.io/provider label of every object
	Spec                           clusters.SpecContext
	ManageACMObjects               bool
	ControlPlaneAvailabilityPolicy hyperv1.AvailabilityPolicy
	DefaultWorkerCount             int32
	InfraKubeconfig                []byte // an InfraCluster platform's external infrastructure cluster (nil: the hub)
	InfraNamespace                 string
	SSHPublicKey                   string
	// PullSecret returns the configured pull secret (file content or a copy of a Secret).
	PullSecret func(ctx context.Context) ([]byte, error)
	Matrix     versions.Matrix
	Status     status.Settings
	// Platforms returns the platforms this SP can provision right now (enabled and with their APIs on the hub).
	Platforms func() []string
	// CacheWait bounds how long a create waits for its HostedCluster to appear in the cache (default 5s).
	CacheWait time.Duration
	// OperationTimeouts bound a day-2 operation, by platform (a platform not set here takes its default from
	// package platform's table).
	OperationTimeouts map[clusters.Platform]time.Duration
	// Vocabulary is the status words reported (GET, LIST and the status events; nil: the seed); Observed says
	// whether the SP's view of the hub is current (nil: always).
	Vocabulary status.Vocabulary
	Observed   func() status.Observation
	// DeleteKeyRetention is how long a keyed DELETE is remembered after it was answered (default 24h).
	DeleteKeyRetention time.Duration
}

// viewSettings are the settings a cluster's resource is built with.
func (cfg Config) viewSettings() clusters.ViewSettings {
	return clusters.ViewSettings{Status: cfg.Status, DefaultWorkerCount: cfg.DefaultWorkerCount}
}

// ready refuses a request while the caches it is answered from are not synced.
func ready(site Site) error {
	if !site.Synced() {
		return clusters.Unavailable("the hub caches are not synced yet; retry shortly")
	}
	return nil
}

// releases is the hub's provisionable releases: its ClusterImageSets, filtered by the operator's supported versions
// and the version matrix. Creates resolve against it and registration advertises its Kubernetes minors.
func releases(ctx context.Context, cat Catalog, matrix versions.Matrix) (versions.Catalog, error) {
	sets, err := cat.ImageSets(ctx)
	if err != nil {
		return versions.Catalog{}, hubapi.Failure(err, "reading ClusterImageSets")
	}
	supported, ok := cat.SupportedVersions(ctx)
	if !ok {
		supported = nil
	}
	return versions.NewCatalog(matrix, sets, supported), nil
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

// observed is whether the SP's view of the hub is current now.
func observed(cfg Config) status.Observation {
	if cfg.Observed == nil {
		return status.Observation{}
	}
	return cfg.Observed()
}

// present puts a resource's status into the configured vocabulary, as the API answers it. What the API derives from
// a cached build stays valid (the vocabulary is fixed) unless the hub is not observed: that status is the moment's,
// so the resource loses its build number (it is encoded afresh) — and, UNAVAILABLE, it carries no kubeconfig (which
// could not be read anyway).
func present(cfg Config, c *clusters.Cluster) { *c = *presented(cfg, c) }

// presented is c as present makes it: c itself when presenting changes nothing (so a cached build, shared and never
// changed, is answered without a copy), else a presented copy.
func presented(cfg Config, c *clusters.Cluster) *clusters.Cluster {
	o := observed(cfg)
	st, msg := cfg.Vocabulary.Present(status.Result{Status: c.Status, Message: c.StatusMessage, Why: c.Why}, o)
	lost := o.Lost && st == status.Unavailable
	if st == c.Status && msg == c.StatusMessage && !lost {
		return c
	}
	p := *c
	if lost {
		p.Build, p.Kubeconfig = 0, clusters.SecretRef{}
	}
	p.Status, p.StatusMessage = st, msg
	return &p
}
