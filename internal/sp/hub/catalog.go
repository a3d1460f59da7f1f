package hub

// This file answers what the hub offers: image sets, supported versions, the operator, Agents and InfraEnvs, ACM's
// namespaces (provision.Catalog).

import (
	"context"
	"fmt"
	"sort"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/dcm-sp/acm-cluster-sp/internal/sp/hubapi"
	"github.com/dcm-sp/acm-cluster-sp/internal/sp/inventory"
	"github.com/dcm-sp/acm-cluster-sp/internal/sp/versions"
)

// ImageSets lists the cached ClusterImageSets.
func (h *Hub) ImageSets(ctx context.Context) ([]versions.ImageSet, error) {
	if !h.Watching("clusterimagesets") {
		return nil, nil
	}
	var list unstructured.UnstructuredList
	list.SetGroupVersionKind(hubapi.ClusterImageSetGVK.GroupVersion().WithKind("ClusterImageSetList"))
	if err := h.cache.List(ctx, &list); err != nil {
		return nil, err
	}
	out := make([]versions.ImageSet, 0, len(list.Items))
	for i := range list.Items {
		u := &list.Items[i]
		img, _, _ := unstructured.NestedString(u.Object, "spec", "releaseImage")
		out = append(out, versions.ImageSet{Name: u.GetName(), ReleaseImage: img, Visible: u.GetLabels()["visible"] == "true"})
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Name < out[j].Name })
	return out, nil
}

// SupportedVersions returns the operator's supported OpenShift minors; ok is false when the ConfigMap is absent
// (then every matrix minor counts).
func (h *Hub) SupportedVersions(ctx context.Context) (list []string, ok bool) {
	var cm corev1.ConfigMap
	if !h.Watching("supported-versions") {
		return nil, false
	}
	if err := h.cache.Get(ctx, client.ObjectKey{Namespace: h.opts.HypershiftNamespace, Name: "supported-versions"}, &cm); err != nil {
		return nil, false
	}
	return parseSupportedVersions(cm.Data["supported-versions"])
}

// OperatorAvailable reports the HyperShift operator Deployment's Available condition (from the cache).
func (h *Hub) OperatorAvailable(ctx context.Context) (available bool, found bool) {
	if !h.Watching("operator") {
		return false, false
	}
	var d appsv1.Deployment
	if err := h.cache.Get(ctx, client.ObjectKey{Namespace: h.opts.HypershiftNamespace, Name: "operator"}, &d); err != nil {
		return false, false
	}
	for _, c := range d.Status.Conditions {
		if c.Type == appsv1.DeploymentAvailable {
			return c.Status == corev1.ConditionTrue, true
		}
	}
	return false, true
}

// Agents lists the cached Agents of the agent namespace.
func (h *Hub) Agents(ctx context.Context) ([]inventory.Agent, error) {
	if !h.Watching("agents") {
		return nil, fmt.Errorf("the Agent API is not available on the hub")
	}
	var list unstructured.UnstructuredList
	list.SetGroupVersionKind(hubapi.AgentGVK.GroupVersion().WithKind("AgentList"))
	if err := h.cache.List(ctx, &list, client.InNamespace(h.opts.AgentNamespace)); err != nil {
		return nil, err
	}
	out := make([]inventory.Agent, 0, len(list.Items))
	for i := range list.Items {
		out = append(out, inventory.FromUnstructured(&list.Items[i]))
	}
	return out, nil
}

// InfraEnvNames lists the cached InfraEnvs of the agent namespace.
func (h *Hub) InfraEnvNames(ctx context.Context) ([]string, error) {
	if !h.Watching("infraenvs") {
		return nil, fmt.Errorf("the InfraEnv API is not available on the hub")
	}
	var list unstructured.UnstructuredList
	list.SetGroupVersionKind(hubapi.InfraEnvGVK.GroupVersion().WithKind("InfraEnvList"))
	if err := h.cache.List(ctx, &list, client.InNamespace(h.opts.AgentNamespace)); err != nil {
		return nil, err
	}
	out := make([]string, 0, len(list.Items))
	for _, u := range list.Items {
		out = append(out, u.GetName())
	}
	sort.Strings(out)
	return out, nil
}

// ServesKlusterletAddonConfig reports whether the last discovery found the KlusterletAddonConfig API.
func (h *Hub) ServesKlusterletAddonConfig() bool {
	return h.Serves(APIKlusterletAddonConfig)
}

// ClusterNamespaceExists reports whether ACM's namespace for a ManagedCluster exists (from the cache).
func (h *Hub) ClusterNamespaceExists(ctx context.Context, name string) bool {
	if !h.Watching("namespaces") {
		return false
	}
	var ns corev1.Namespace
	return h.cache.Get(ctx, client.ObjectKey{Name: name}, &ns) == nil && ns.DeletionTimestamp == nil
}
