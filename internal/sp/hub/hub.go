// Package hub is the SP's access to the ACM hub cluster: a client for writes, and informer caches for reads.
// HostedClusters, NodePools and ManagedClusters are label-selected
// (managed-by=dcm,dcm-service-type=cluster), filtered to this provider (label dcm.io/provider), stripped by a
// transform, and fed into an Index keyed by instance id, so GET, LIST and status evaluation never call the API
// server. The namespace's Secrets are cached as metadata only: an admin kubeconfig is found by the name the
// HostedCluster gives (older operators create it without labels) and its content is read on demand, for the callers
// allowed to see it, with a short cache. ClusterImageSets, Agents, InfraEnvs, the operator's ConfigMap and
// Deployment are cached too.
//
// Informers start as their APIs are discovered (a background discovery every DiscoveryInterval), so a hub
// without the Agent CRDs still serves KubeVirt, and a CRD installed later is picked up without a restart.
//
// A failed or refused API-server call becomes a domain error through hubapi (Failure, Rejected), so that every layer
// above maps it to one HTTP status.
package hub

import (
	"context"
	"fmt"
	"log/slog"
	"strings"
	"sync"
	"time"

	hyperv1 "github.com/openshift/hypershift/api/hypershift/v1beta1"
	appsv1 "k8s.io/api/apps/v1"
	coordinationv1 "k8s.io/api/coordination/v1"
	corev1 "k8s.io/api/core/v1"
	apimeta "k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	utilruntime "k8s.io/apimachinery/pkg/util/runtime"
	"k8s.io/client-go/discovery"
	"k8s.io/client-go/rest"
	toolscache "k8s.io/client-go/tools/cache"
	clusterv1 "open-cluster-management.io/api/cluster/v1"
	"sigs.k8s.io/controller-runtime/pkg/cache"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/apiutil"

	"github.com/dcm-sp/acm-cluster-sp/internal/sp/clusters"
	"github.com/dcm-sp/acm-cluster-sp/internal/sp/hubapi"
	"github.com/dcm-sp/acm-cluster-sp/internal/sp/meta"
	"github.com/dcm-sp/acm-cluster-sp/internal/sp/platform"
)

// ClusterNamespaceLabel marks the namespace ACM creates for a ManagedCluster (where the KlusterletAddonConfig goes).
const ClusterNamespaceLabel = "cluster.open-cluster-management.io/managedCluster"

// Scheme knows the typed kinds the SP reads and writes.
func Scheme() *runtime.Scheme {
	s := runtime.NewScheme()
	utilruntime.Must(corev1.AddToScheme(s))
	utilruntime.Must(appsv1.AddToScheme(s))
	utilruntime.Must(coordinationv1.AddToScheme(s))
	utilruntime.Must(hyperv1.AddToScheme(s))
	utilruntime.Must(clusterv1.Install(s))
	return s
}

// Options configure the hub access.
type Options struct {
	Namespace           string        // the SP's namespace (HCs, NPs, Secrets)
	Provider            string        // this SP's providerName: objects labelled for another provider are ignored
	AgentNamespace      string        // InfraEnvs and Agents ("" disables baremetal caches)
	HypershiftNamespace string        // operator Deployment and supported-versions ConfigMap
	DiscoveryInterval   time.Duration // how often to check which APIs the hub serves (default 10s)
	DiscoveryTimeout    time.Duration // bound of one discovery call, so a hanging hub is noticed (default 5s)
	RequestTimeout      time.Duration // bound of every call of the write Client (default 20s); watches are not bounded
	Log                 *slog.Logger
}

// API is a group/version the SP cares about, and whether the hub serves it (with the kinds it needs).
type API string

// The APIs the SP discovers besides its platforms' (each platform's entry names its own).
const (
	APIHyperShift            API = "hypershift.openshift.io/v1beta1"
	APIClusterImageSets      API = "hive.openshift.io/v1"
	APIManagedClusters       API = "cluster.open-cluster-management.io/v1"
	APIKlusterletAddonConfig API = "agent.open-cluster-management.io/v1"
	// APIAgents is the API of the Agent caches an Agents platform reads (the bare-metal entry names it too).
	APIAgents API = "agent-install.openshift.io/v1beta1"
)

// requiredResources lists, per API, the resources that must be served for the API to count as available: the SP's
// own and those of the platform table's entries.
func requiredResources() map[API][]string {
	out := map[API][]string{
		APIHyperShift:            {"hostedclusters", "nodepools"},
		APIClusterImageSets:      {"clusterimagesets"},
		APIManagedClusters:       {"managedclusters"},
		APIKlusterletAddonConfig: {"klusterletaddonconfigs"},
	}
	for _, p := range platform.All() {
		if p.API != "" {
			out[API(p.API)] = append(out[API(p.API)], p.APIResources...)
		}
	}
	return out
}

// Discovery is the result of the last background discovery.
type Discovery struct {
	At     time.Time
	Err    error        // the hub's API server could not be reached
	Served map[API]bool // which APIs are served
	// Reached is when a discovery last succeeded (zero: never): how current the SP's view of the hub is.
	Reached time.Time
}

// Hub is the SP's connection to the hub.
type Hub struct {
	opts      Options
	cfg       *rest.Config
	Client    client.Client // writes, and uncached reads on write paths
	cache     cache.Cache
	discovery discovery.DiscoveryInterface
	index     *Index
	labels    *labelSets // the label sets a cluster's cached objects share
	log       *slog.Logger

	specs       []informerSpec // every informer the hub may run, built once
	kubeconfigs *secretCache

	mu        sync.RWMutex
	started   map[string]toolscache.ResourceEventHandlerRegistration // informer name → handler registration
	last      Discovery
	cacheCtx  context.Context
	listeners []func(kind string)
}

// New prepares the hub access; nothing is contacted until Start.
func New(cfg *rest.Config, opts Options) (*Hub, error) {
	if opts.DiscoveryInterval == 0 {
		opts.DiscoveryInterval = 10 * time.Second
	}
	if opts.Log == nil {
		opts.Log = slog.New(slog.DiscardHandler)
	}
	scheme := Scheme()
	if opts.RequestTimeout == 0 {
		opts.RequestTimeout = 20 * time.Second
	}
	wcfg := rest.CopyConfig(cfg)
	wcfg.Timeout = opts.RequestTimeout
	c, err := client.New(wcfg, client.Options{Scheme: scheme})
	if err != nil {
		return nil, fmt.Errorf("hub client: %w", err)
	}
	if opts.DiscoveryTimeout == 0 {
		opts.DiscoveryTimeout = 5 * time.Second
	}
	dcfg := rest.CopyConfig(cfg)
	dcfg.Timeout = opts.DiscoveryTimeout
	dc, err := discovery.NewDiscoveryClientForConfig(dcfg)
	if err != nil {
		return nil, fmt.Errorf("hub discovery: %w", err)
	}
	httpClient, err := rest.HTTPClientFor(cfg)
	if err != nil {
		return nil, err
	}
	dynamicMapper, err := apiutil.NewDynamicRESTMapper(cfg, httpClient) // lazy: discovers on first use
	if err != nil {
		return nil, err
	}
	mapper := apimeta.FirstHitRESTMapper{MultiRESTMapper: apimeta.MultiRESTMapper{restMapper(), dynamicMapper}}
	sel := meta.Selector()
	ns := map[string]cache.Config{opts.Namespace: {}}
	shared := newLabelSets()
	trim := trimTransform(shared)
	byObject := map[client.Object]cache.ByObject{
		&hyperv1.HostedCluster{}:    {Namespaces: ns, Label: sel, UnsafeDisableDeepCopy: ptrTrue(), Transform: trim},
		&hyperv1.NodePool{}:         {Namespaces: ns, Label: sel, UnsafeDisableDeepCopy: ptrTrue(), Transform: trim},
		secretMetadata():            {Namespaces: ns, UnsafeDisableDeepCopy: ptrTrue(), Transform: trim},
		&clusterv1.ManagedCluster{}: {Label: sel, UnsafeDisableDeepCopy: ptrTrue(), Transform: trim},
		&corev1.Namespace{}:         {Label: labels.SelectorFromSet(nil).Add(mustExists(ClusterNamespaceLabel)), UnsafeDisableDeepCopy: ptrTrue()},
		&corev1.ConfigMap{}:         {Namespaces: map[string]cache.Config{opts.HypershiftNamespace: {}}, Field: fields.OneTermEqualSelector("metadata.name", "supported-versions")},
		&appsv1.Deployment{}:        {Namespaces: map[string]cache.Config{opts.HypershiftNamespace: {}}, Field: fields.OneTermEqualSelector("metadata.name", "operator")},
	}
	if opts.AgentNamespace != "" {
		agentNS := map[string]cache.Config{opts.AgentNamespace: {}}
		byObject[newUnstructured(hubapi.AgentGVK)] = cache.ByObject{Namespaces: agentNS}
		byObject[newUnstructured(hubapi.InfraEnvGVK)] = cache.ByObject{Namespaces: agentNS}
	}
	ca, err := cache.New(cfg, cache.Options{
		Scheme:                      scheme,
		Mapper:                      mapper,
		ByObject:                    byObject,
		DefaultTransform:            stripTransform,
		ReaderFailOnMissingInformer: true,
		NewInformer:                 newListingInformer,
	})
	if err != nil {
		return nil, fmt.Errorf("hub cache: %w", err)
	}
	h := &Hub{opts: opts, cfg: cfg, Client: c, cache: ca, discovery: dc, index: NewIndex(opts.Provider), labels: shared, log: opts.Log,
		started: map[string]toolscache.ResourceEventHandlerRegistration{}, kubeconfigs: newSecretCache(kubeconfigCacheTTL, kubeconfigCacheMax)}
	h.specs = h.informerSpecs()
	return h, nil
}

func ptrTrue() *bool { t := true; return &t }

// restMapper maps the kinds the caches watch to their resources. It is static (their scopes and plurals are part
// of their APIs) and answers first, so building the hub access contacts nothing: an SP started while the hub is
// unreachable comes up, reports unhealthy, and starts its informers once the hub answers. Anything else falls
// through to the lazy discovery-based mapper.
func restMapper() apimeta.RESTMapper {
	m := apimeta.NewDefaultRESTMapper(nil)
	add := func(gvk schema.GroupVersionKind, plural string, scope apimeta.RESTScope) {
		m.AddSpecific(gvk, gvk.GroupVersion().WithResource(plural), gvk.GroupVersion().WithResource(strings.ToLower(gvk.Kind)), scope)
	}
	core := schema.GroupVersion{Version: "v1"}
	add(core.WithKind("Secret"), "secrets", apimeta.RESTScopeNamespace)
	add(core.WithKind("ConfigMap"), "configmaps", apimeta.RESTScopeNamespace)
	add(core.WithKind("Namespace"), "namespaces", apimeta.RESTScopeRoot)
	add(appsv1.SchemeGroupVersion.WithKind("Deployment"), "deployments", apimeta.RESTScopeNamespace)
	add(hyperv1.GroupVersion.WithKind("HostedCluster"), "hostedclusters", apimeta.RESTScopeNamespace)
	add(hyperv1.GroupVersion.WithKind("NodePool"), "nodepools", apimeta.RESTScopeNamespace)
	add(schema.GroupVersionKind{Group: clusterv1.GroupName, Version: "v1", Kind: "ManagedCluster"}, "managedclusters", apimeta.RESTScopeRoot)
	add(hubapi.ClusterImageSetGVK, "clusterimagesets", apimeta.RESTScopeRoot)
	add(hubapi.AgentGVK, "agents", apimeta.RESTScopeNamespace)
	add(hubapi.InfraEnvGVK, "infraenvs", apimeta.RESTScopeNamespace)
	return m
}

func mustExists(key string) labels.Requirement {
	r, err := labels.NewRequirement(key, "exists", nil)
	if err != nil {
		panic(err)
	}
	return *r
}

func newUnstructured(gvk schema.GroupVersionKind) *unstructured.Unstructured {
	u := &unstructured.Unstructured{}
	u.SetGroupVersionKind(gvk)
	return u
}

// stripTransform drops what the SP never reads from cached objects (managed fields and the last-applied annotation)
// and interns the strings they share with other objects (intern.go).
func stripTransform(obj any) (any, error) {
	if a, err := apimeta.Accessor(obj); err == nil {
		a.SetManagedFields(nil)
		if ann := a.GetAnnotations(); ann != nil {
			if _, ok := ann[corev1.LastAppliedConfigAnnotation]; ok {
				delete(ann, corev1.LastAppliedConfigAnnotation)
				a.SetAnnotations(ann)
			}
		}
	}
	internObject(obj)
	return obj, nil
}

// secretMetadata is the metadata-only view of a Secret the cache watches: no Secret content is ever held in memory
// by the informers.
func secretMetadata() *metav1.PartialObjectMetadata {
	return &metav1.PartialObjectMetadata{TypeMeta: metav1.TypeMeta{APIVersion: "v1", Kind: "Secret"}}
}

// kubeconfigCacheTTL is how long a kubeconfig read on demand is reused while its Secret's resourceVersion is
// unchanged.
const kubeconfigCacheTTL = 30 * time.Second

// kubeconfigCacheMax bounds the kubeconfigs held at once (a few KiB each). It was 1,024: with 2,000 READY clusters
// read at random the cache emptied itself over and over and nearly every GET of a READY cluster read its Secret from
// the hub (GET READY c=8 p50 4.4 ms at 10,000 clusters).
const kubeconfigCacheMax = 16384

// Kubeconfig reads the admin kubeconfig of a Secret found in the cache (key "kubeconfig"), through a short cache
// keyed by name and resourceVersion, so repeated GETs of a READY cluster cost one API read per 30 s. The Secret
// read must still belong to the cluster the reference was made for (it may have been replaced since).
func (h *Hub) Kubeconfig(ctx context.Context, ref clusters.SecretRef) ([]byte, error) {
	if data, ok := h.kubeconfigs.get(ref); ok {
		return data, nil
	}
	var s corev1.Secret
	if err := h.Client.Get(ctx, client.ObjectKey{Namespace: h.opts.Namespace, Name: ref.Name}, &s); err != nil {
		return nil, err
	}
	if !KubeconfigBelongs(h.opts.Namespace, ref.Cluster, ref.ClusterUID, &s) {
		return nil, fmt.Errorf("secret %s does not belong to HostedCluster %s", s.Name, ref.Cluster)
	}
	data := s.Data["kubeconfig"]
	h.kubeconfigs.put(clusters.SecretRef{Name: s.Name, ResourceVersion: s.ResourceVersion}, data)
	return data, nil
}

// Options are the options the hub access was built with (defaults applied).
func (h *Hub) Options() Options { return h.opts }

// Index is the read model.
func (h *Hub) Index() *Index { return h.index }

// Namespace is the SP's namespace.
func (h *Hub) Namespace() string { return h.opts.Namespace }

// AgentNamespace is the namespace of InfraEnvs and Agents ("" when baremetal is not configured).
func (h *Hub) AgentNamespace() string { return h.opts.AgentNamespace }

// Config is the hub's rest.Config.
func (h *Hub) Config() *rest.Config { return h.cfg }

// OnKindChange registers f to be called with the informer name ("clusterimagesets", "supported-versions",
// "agents", …) whenever an object of that kind changes, and with KindDiscovery after every successful discovery;
// used for platform availability and re-registration.
func (h *Hub) OnKindChange(f func(kind string)) {
	h.mu.Lock()
	h.listeners = append(h.listeners, f)
	h.mu.Unlock()
}

func (h *Hub) kindChanged(kind string) {
	h.mu.RLock()
	ls := h.listeners
	h.mu.RUnlock()
	for _, f := range ls {
		f(kind)
	}
}
