package controller

import (
	"context"
	"fmt"
	"slices"
	"time"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/client-go/rest"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/dcm-sp/acm-cluster-sp/internal/capiprivate/groups"
	"github.com/dcm-sp/acm-cluster-sp/internal/capiprivate/proxy"
)

// watchedConditions are the conditions of a Cluster or Machine that must not turn False on a twin while they were
// True on the object it copies: a regression the move caused (or that happened while it ran).
var watchedConditions = map[string][]string{
	"Cluster": {"Available", "InfrastructureReady", "ControlPlaneInitialized", "ControlPlaneAvailable", "WorkersAvailable", "RemoteConnectionProbe"},
	"Machine": {"Available", "Ready", "InfrastructureReady", "BootstrapConfigReady", "NodeReady", "NodeHealthy"},
}

// settledPhases are the phases a Cluster or Machine twin must keep when the object it copies was in them.
var settledPhases = []string{"Provisioned", "Running"}

// unhealthy is Resuming's health check ("" when green): the quiesced workloads Available, no container restart in
// a Pod of a CAPI-dependent component (a new Pod starts at 0), no private object being deleted, no MachineDeployment
// or MachineSet twin whose counters are worse than the old object's (counterRegression), and no Cluster or Machine
// twin worse than the object it copies (objectRegression).
func unhealthy(g graph, w Workloads) string {
	if !w.Available {
		return "proxied workloads not Available"
	}
	if w.Restarts > 0 {
		return fmt.Sprintf("%d container restarts in pods of CAPI-dependent components", w.Restarts)
	}
	byUID := map[types.UID]*unstructured.Unstructured{}
	for i := range g.private {
		p := &g.private[i]
		byUID[p.GetUID()] = p
		if p.GetDeletionTimestamp() != nil {
			return p.GetKind() + "/" + p.GetName() + " is being deleted"
		}
	}
	for i := range g.old {
		o := &g.old[i]
		tw := byUID[g.id.Twins[o.GetUID()].UID]
		switch o.GetKind() {
		case "MachineDeployment", "MachineSet":
			if tw == nil {
				return o.GetKind() + "/" + o.GetName() + " has no twin"
			}
			if p := counterRegression(o, tw); p != "" {
				return o.GetKind() + "/" + o.GetName() + " " + p
			}
		case "Cluster", "Machine":
			if tw == nil {
				return o.GetKind() + "/" + o.GetName() + " has no twin"
			}
			if p := objectRegression(o, tw); p != "" {
				return o.GetKind() + "/" + o.GetName() + ": " + p
			}
		}
	}
	return ""
}

// counterRegression is what is worse in the counters of twin, a MachineDeployment or MachineSet, than in old's
// ("" when nothing): a different number of replicas, or fewer ready or available ones. More ready or available
// replicas is no regression: a migration may start while a Machine is still coming up (the settled check asks for
// every replica up to date, not ready), the old object's status stays frozen from then on, and the private
// controllers then see the Machine ready.
func counterRegression(old, twin *unstructured.Unstructured) string {
	for _, f := range []string{"replicas", "readyReplicas", "availableReplicas"} {
		was, _, _ := unstructured.NestedInt64(old.Object, "status", f)
		is, _, _ := unstructured.NestedInt64(twin.Object, "status", f)
		if is < was || f == "replicas" && is != was {
			return fmt.Sprintf("status.%s %d, was %d", f, is, was)
		}
	}
	return ""
}

// objectRegression is what is worse on twin than on old, the Cluster or Machine it copies ("" when nothing): a
// Failed phase, a settled phase lost, or a watched condition True before and False now.
func objectRegression(old, twin *unstructured.Unstructured) string {
	was, _, _ := unstructured.NestedString(old.Object, "status", "phase")
	is, _, _ := unstructured.NestedString(twin.Object, "status", "phase")
	switch {
	case is == "Failed":
		return "phase Failed"
	case slices.Contains(settledPhases, was) && is != was:
		return fmt.Sprintf("phase %s, was %s", is, was)
	}
	before, now := conditions(old), conditions(twin)
	for _, t := range watchedConditions[old.GetKind()] {
		if before[t] == "True" && now[t] == "False" {
			return "condition " + t + " False, was True"
		}
	}
	return ""
}

// conditions maps the type of each of o's status.conditions to its status.
func conditions(o *unstructured.Unstructured) map[string]string {
	list, _, _ := unstructured.NestedSlice(o.Object, "status", "conditions")
	out := map[string]string{}
	for _, c := range list {
		m, ok := c.(map[string]any)
		if !ok {
			continue
		}
		t, _ := m["type"].(string)
		s, _ := m["status"].(string)
		out[t] = s
	}
	return out
}

// ProxyClient is a client that reads through the proxy's translation in this process, as the sidecars do: cfg
// (straight to kube-apiserver) with proxy.WrapTransport, so it speaks the standard groups and is answered from the
// private ones.
func ProxyClient(cfg *rest.Config, m *groups.Mapping) (client.WithWatch, error) {
	c := rest.CopyConfig(cfg)
	c.WrapTransport = proxy.WrapTransport(m)
	return client.NewWithWatch(c, client.Options{Scheme: Scheme()})
}

// proxyReadTimeout bounds each read of the proxy check; the watch must deliver its first event within it.
const proxyReadTimeout = 10 * time.Second

// proxyProblem reads the hosted cluster's objects through the proxy's translation as a migrated controller will
// ("" when every read works): a GET of the Cluster (it must be the private twin), a LIST of every moved kind
// (as many objects as there are twins of it) and a WATCH of the Cluster (its first event is the twin, in the
// standard group).
func (m *Migrator) proxyProblem(ctx context.Context, g graph) string {
	c := m.opts.ProxyClient
	if c == nil {
		return "no client through the proxy"
	}
	ctx, cancel := context.WithTimeout(ctx, proxyReadTimeout)
	defer cancel()
	twin := clusterOf(g.private)
	if twin == nil {
		return "no private Cluster"
	}
	counts := map[schema.GroupVersionKind]int{}
	for i := range g.private {
		counts[g.private[i].GroupVersionKind()]++
	}
	var clusterGVK schema.GroupVersionKind
	for _, k := range g.api.catalog.Moved {
		if k.Private.GroupKind() == twin.GroupVersionKind().GroupKind() {
			clusterGVK = k.Standard
		}
		list := &unstructured.UnstructuredList{}
		list.SetGroupVersionKind(k.Standard.GroupVersion().WithKind(k.Standard.Kind + "List"))
		if err := c.List(ctx, list, client.InNamespace(g.namespace)); err != nil {
			return fmt.Sprintf("list %s: %v", k.Standard.Kind, err)
		}
		if want := counts[k.Private]; len(list.Items) != want {
			return fmt.Sprintf("list %s: %d objects, %d private ones stored", k.Standard.Kind, len(list.Items), want)
		}
	}
	if clusterGVK.Empty() {
		return "the Cluster's kind is not moved"
	}
	got := &unstructured.Unstructured{}
	got.SetGroupVersionKind(clusterGVK)
	if err := c.Get(ctx, client.ObjectKeyFromObject(twin), got); err != nil {
		return fmt.Sprintf("get Cluster %s: %v", twin.GetName(), err)
	}
	if got.GetUID() != twin.GetUID() || got.GroupVersionKind() != clusterGVK {
		return fmt.Sprintf("get Cluster %s: %s uid %s, want the twin %s as %s", twin.GetName(), got.GroupVersionKind(), got.GetUID(), twin.GetUID(), clusterGVK)
	}
	return watchFirst(ctx, c, clusterGVK, twin)
}

// watchFirst watches twin's kind (as gvk) by name and checks the first event: the twin, in gvk.
func watchFirst(ctx context.Context, c client.WithWatch, gvk schema.GroupVersionKind, twin *unstructured.Unstructured) string {
	list := &unstructured.UnstructuredList{}
	list.SetGroupVersionKind(gvk.GroupVersion().WithKind(gvk.Kind + "List"))
	w, err := c.Watch(ctx, list, client.InNamespace(twin.GetNamespace()),
		client.MatchingFieldsSelector{Selector: fields.OneTermEqualSelector("metadata.name", twin.GetName())})
	if err != nil {
		return fmt.Sprintf("watch Cluster: %v", err)
	}
	defer w.Stop()
	select {
	case ev, ok := <-w.ResultChan():
		u, isObj := ev.Object.(*unstructured.Unstructured)
		switch {
		case !ok:
			return "watch Cluster: closed before its first event"
		case ev.Type != watch.Added || !isObj:
			return fmt.Sprintf("watch Cluster: first event %s", ev.Type)
		case u.GetUID() != twin.GetUID() || u.GroupVersionKind() != gvk:
			return fmt.Sprintf("watch Cluster: %s uid %s, want the twin %s as %s", u.GroupVersionKind(), u.GetUID(), twin.GetUID(), gvk)
		}
		return ""
	case <-ctx.Done():
		return "watch Cluster: no event within " + proxyReadTimeout.String()
	}
}
