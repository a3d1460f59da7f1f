package hub

// This file runs discovery and the informers that feed the Index.

import (
	"context"
	"errors"
	"strings"
	"time"

	hyperv1 "github.com/openshift/hypershift/api/hypershift/v1beta1"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	toolscache "k8s.io/client-go/tools/cache"
	clusterv1 "open-cluster-management.io/api/cluster/v1"
	"sigs.k8s.io/controller-runtime/pkg/cache"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/dcm-sp/acm-cluster-sp/internal/sp/hubapi"
	"github.com/dcm-sp/acm-cluster-sp/internal/sp/meta"
)

// Start runs the caches and the discovery loop until ctx ends. It returns at once; use WaitForSync.
func (h *Hub) Start(ctx context.Context) {
	h.mu.Lock()
	h.cacheCtx = ctx
	h.mu.Unlock()
	go func() {
		if err := h.cache.Start(ctx); err != nil {
			h.log.Error("hub cache stopped", "error", err)
		}
	}()
	go func() {
		t := time.NewTicker(h.opts.DiscoveryInterval)
		defer t.Stop()
		for {
			h.Discover(ctx)
			select {
			case <-ctx.Done():
				return
			case <-t.C:
			}
		}
	}()
}

// Discover checks which APIs the hub serves and starts the informers of newly served ones.
func (h *Hub) Discover(ctx context.Context) Discovery {
	d := Discovery{At: time.Now(), Served: map[API]bool{}}
	d.Reached = d.At
	for api, resources := range requiredResources() {
		list, err := h.discovery.ServerResourcesForGroupVersion(string(api))
		if err != nil {
			if !isNotFound(err) {
				d.Err = err
			}
			continue
		}
		have := map[string]bool{}
		for _, r := range list.APIResources {
			have[r.Name] = true
		}
		ok := true
		for _, r := range resources {
			ok = ok && have[r]
		}
		d.Served[api] = ok
	}
	if d.Err != nil {
		// Keep what was known: an unreachable hub says nothing about which APIs exist.
		h.mu.Lock()
		prev := h.last
		h.last = Discovery{At: d.At, Err: d.Err, Served: prev.Served, Reached: prev.Reached}
		h.mu.Unlock()
		return h.LastDiscovery()
	}
	h.mu.Lock()
	h.last = d
	h.mu.Unlock()
	h.startInformers(ctx, d)
	h.kindChanged(KindDiscovery)
	return d
}

// KindDiscovery is the OnKindChange notification sent after every successful discovery.
const KindDiscovery = "discovery"

func isNotFound(err error) bool {
	var se interface{ Status() metav1.Status }
	if errors.As(err, &se) {
		return se.Status().Code == 404
	}
	return strings.Contains(err.Error(), "the server could not find the requested resource")
}

// LastReached is when a discovery last reached the hub's API server (zero: never). Unlike LastDiscovery it copies
// nothing: GET and LIST ask it for every cluster they answer.
func (h *Hub) LastReached() time.Time {
	h.mu.RLock()
	defer h.mu.RUnlock()
	return h.last.Reached
}

// Serves reports whether the last discovery found api served.
func (h *Hub) Serves(api API) bool {
	h.mu.RLock()
	defer h.mu.RUnlock()
	return h.last.Served[api]
}

// LastDiscovery returns the result of the last discovery.
func (h *Hub) LastDiscovery() Discovery {
	h.mu.RLock()
	defer h.mu.RUnlock()
	served := make(map[API]bool, len(h.last.Served))
	for k, v := range h.last.Served {
		served[k] = v
	}
	return Discovery{At: h.last.At, Err: h.last.Err, Served: served, Reached: h.last.Reached}
}

// informerSpec is one cache informer and what feeds the index from it.
type informerSpec struct {
	name    string
	api     API // "" for core kinds, always served
	obj     func() client.Object
	handler toolscache.ResourceEventHandler
	needs   bool // part of "synced" (required for serving)
}

func (h *Hub) informerSpecs() []informerSpec {
	x := h.index
	specs := []informerSpec{
		{name: "hostedclusters", api: APIHyperShift, needs: true, obj: func() client.Object { return &hyperv1.HostedCluster{} },
			handler: typedHandler(x.PutHostedCluster, forgetting(h.labels, x.DeleteHostedCluster))},
		{name: "nodepools", api: APIHyperShift, needs: true, obj: func() client.Object { return &hyperv1.NodePool{} },
			handler: typedHandler(x.PutNodePool, forgetting(h.labels, x.DeleteNodePool))},
		{name: "secrets", needs: true, obj: func() client.Object { return secretMetadata() },
			handler: typedHandler(x.PutSecret, forgetting(h.labels, x.DeleteSecret))},
		{name: "managedclusters", api: APIManagedClusters, obj: func() client.Object { return &clusterv1.ManagedCluster{} },
			handler: typedHandler(x.PutManagedCluster, x.DeleteManagedCluster)},
		{name: "clusterimagesets", api: APIClusterImageSets, obj: func() client.Object { return newUnstructured(hubapi.ClusterImageSetGVK) }, needs: true},
		{name: "supported-versions", obj: func() client.Object { return &corev1.ConfigMap{} }},
		{name: "operator", obj: func() client.Object { return &appsv1.Deployment{} }},
		{name: "namespaces", obj: func() client.Object { return &corev1.Namespace{} },
			handler: typedHandler(func(ns *corev1.Namespace) { x.NotifyName(ns.Name) }, func(ns *corev1.Namespace) { x.NotifyName(ns.Name) })},
	}
	if h.opts.AgentNamespace != "" {
		specs = append(specs,
			informerSpec{name: "agents", api: APIAgents, obj: func() client.Object { return newUnstructured(hubapi.AgentGVK) }},
			informerSpec{name: "infraenvs", api: APIAgents, obj: func() client.Object { return newUnstructured(hubapi.InfraEnvGVK) }},
		)
	}
	return specs
}

// newListingInformer is client-go's shared informer, made to start from a list and a watch rather than client-go's
// streaming list (WatchList: the initial objects as the events of one watch, on by default since client-go 1.35).
// Against kube-apiserver 1.34 the streaming start was the slower and the costlier: at 1,000 clusters it took the
// SP 2–4 times as long to be ready and twice the CPU, and kube-apiserver 1.7 times the CPU (`make bench`'s start
// row; figures in docs/performance.md).
func newListingInformer(lw toolscache.ListerWatcher, obj runtime.Object, resync time.Duration, indexers toolscache.Indexers) toolscache.SharedIndexInformer {
	if c, ok := lw.(toolscache.ListerWatcherWithContext); ok { // controller-runtime's: keep its contexts
		return toolscache.NewSharedIndexInformer(listingWithContext{listing{lw}, c}, obj, resync, indexers)
	}
	return toolscache.NewSharedIndexInformer(listing{lw}, obj, resync, indexers)
}

// listing is a ListerWatcher that tells the reflector it does not support streaming lists, so it lists instead.
type listing struct{ toolscache.ListerWatcher }

func (listing) IsWatchListSemanticsUnSupported() bool { return true }

type listingWithContext struct {
	listing
	toolscache.ListerWatcherWithContext
}

// forgetting is del that first drops the deleted object's instance from the shared label sets.
func forgetting[T client.Object](labels *labelSets, del func(T)) func(T) {
	return func(o T) {
		labels.forget(meta.InstanceID(o.GetLabels()))
		del(o)
	}
}

// typedHandler adapts typed add/update/delete callbacks, unwrapping delete tombstones.
func typedHandler[T client.Object](put, del func(T)) toolscache.ResourceEventHandler {
	return toolscache.ResourceEventHandlerFuncs{
		AddFunc:    func(obj any) { put(obj.(T)) },
		UpdateFunc: func(_, obj any) { put(obj.(T)) },
		DeleteFunc: func(obj any) {
			if t, ok := obj.(toolscache.DeletedFinalStateUnknown); ok {
				obj = t.Obj
			}
			if o, ok := obj.(T); ok {
				del(o)
			}
		},
	}
}

func (h *Hub) startInformers(ctx context.Context, d Discovery) {
	for _, spec := range h.specs {
		h.mu.RLock()
		_, done := h.started[spec.name]
		h.mu.RUnlock()
		if done || (spec.api != "" && !d.Served[spec.api]) {
			continue
		}
		inf, err := h.cache.GetInformer(ctx, spec.obj(), cache.BlockUntilSynced(false))
		if err != nil {
			h.log.Warn("hub: cannot watch", "kind", spec.name, "error", err)
			continue
		}
		name := spec.name
		handler := spec.handler
		notifyKind := toolscache.ResourceEventHandlerFuncs{
			AddFunc:    func(any) { h.kindChanged(name) },
			UpdateFunc: func(any, any) { h.kindChanged(name) },
			DeleteFunc: func(any) { h.kindChanged(name) },
		}
		if handler == nil {
			handler = notifyKind
		} else {
			inner := handler
			handler = toolscache.ResourceEventHandlerFuncs{
				AddFunc:    func(o any) { inner.OnAdd(o, false); h.kindChanged(name) },
				UpdateFunc: func(a, b any) { inner.OnUpdate(a, b); h.kindChanged(name) },
				DeleteFunc: func(o any) { inner.OnDelete(o); h.kindChanged(name) },
			}
		}
		reg, err := inf.AddEventHandler(handler)
		if err != nil {
			h.log.Warn("hub: cannot watch", "kind", spec.name, "error", err)
			continue
		}
		h.mu.Lock()
		h.started[spec.name] = reg
		h.mu.Unlock()
		h.log.Debug("hub: watching", "kind", spec.name)
	}
}

// Watching reports whether the informer of a kind has been started and has synced.
func (h *Hub) Watching(name string) bool {
	h.mu.RLock()
	reg, ok := h.started[name]
	h.mu.RUnlock()
	return ok && reg.HasSynced()
}

// Synced reports whether every informer needed to serve the API is running and synced (on every request's path).
func (h *Hub) Synced() bool {
	for _, spec := range h.specs {
		h.mu.RLock()
		reg, ok := h.started[spec.name]
		h.mu.RUnlock()
		if (spec.needs && !ok) || (ok && !reg.HasSynced()) {
			return false
		}
	}
	return true
}

// WaitForSync blocks until Synced or ctx ends.
func (h *Hub) WaitForSync(ctx context.Context) bool {
	t := time.NewTicker(20 * time.Millisecond)
	defer t.Stop()
	for !h.Synced() {
		select {
		case <-ctx.Done():
			return false
		case <-t.C:
		}
	}
	return true
}
