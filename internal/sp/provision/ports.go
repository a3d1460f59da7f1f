package provision

import (
	"context"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	clusterv1 "open-cluster-management.io/api/cluster/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/dcm-sp/acm-cluster-sp/internal/sp/clusters"
	"github.com/dcm-sp/acm-cluster-sp/internal/sp/inventory"
	"github.com/dcm-sp/acm-cluster-sp/internal/sp/versions"
)

// Ports are what the services need from the hub. The hub adapter (*hub.Hub and its Index) satisfies them; unit
// tests use controller-runtime's fake client and in-memory implementations.
type Ports struct {
	// Client writes, and reads uncached on the write paths (decisions that a lagging cache must not make).
	Client client.Client
	// Index is the read model of this provider's clusters.
	Index Index
	// Catalog is what the hub offers to provision with.
	Catalog Catalog
	// Site is where the SP works and how current its view is.
	Site Site
}

// Index is the read model: every cluster of this provider as the caches show it, by instance id.
type Index interface {
	// Get returns an instance's view (ok false: the caches hold nothing of it).
	Get(id string) (clusters.View, bool)
	// IDByName returns the instance whose HostedCluster has this name.
	IDByName(name string) (string, bool)
	// AppendPage appends to dst up to limit clusters after the key, in (create time, id) order, and reports whether
	// more follow.
	AppendPage(dst []clusters.View, after *clusters.Key, limit int) (views []clusters.View, more bool)
	// Secret returns the metadata of a Secret of the SP's namespace.
	Secret(name string) (*metav1.PartialObjectMetadata, bool)
	// ManagedClusters are this provider's ManagedClusters by instance id.
	ManagedClusters() map[string]*clusterv1.ManagedCluster
	// UnownedSecretInstances are the instances with Secrets that no HostedCluster owns, created before the time.
	UnownedSecretInstances(before time.Time) []string
	// SecretsOf are the names of an instance's Secrets.
	SecretsOf(id string) []string
}

// Catalog is what the hub offers to provision with, read from its caches.
type Catalog interface {
	// ImageSets are the ClusterImageSets (none when the API is not served).
	ImageSets(ctx context.Context) ([]versions.ImageSet, error)
	// SupportedVersions are the operator's supported OpenShift minors (ok false: every minor of the matrix counts).
	SupportedVersions(ctx context.Context) (list []string, ok bool)
	// Agents are the Agents of the agent namespace (an error when the Agent API is not available).
	Agents(ctx context.Context) ([]inventory.Agent, error)
	// InfraEnvNames are the InfraEnvs of the agent namespace.
	InfraEnvNames(ctx context.Context) ([]string, error)
	// ClusterNamespaceExists reports whether ACM's namespace for a ManagedCluster exists (not being deleted).
	ClusterNamespaceExists(ctx context.Context, name string) bool
	// ServesKlusterletAddonConfig reports whether the hub serves the KlusterletAddonConfig API.
	ServesKlusterletAddonConfig() bool
}

// Site is where the SP works on the hub and how current its view of it is.
type Site interface {
	// Namespace is the SP's namespace (HostedClusters, NodePools, Secrets, locks and deletion records).
	Namespace() string
	// AgentNamespace holds the InfraEnvs and Agents ("" without bare metal).
	AgentNamespace() string
	// Synced reports whether every cache the API needs is running and synced.
	Synced() bool
	// Watching reports whether the cache of a kind ("agents", …) is running and synced.
	Watching(kind string) bool
	// Kubeconfig reads the admin kubeconfig a cluster's resource refers to, from the HostedCluster's own Secret.
	Kubeconfig(ctx context.Context, ref clusters.SecretRef) ([]byte, error)
}
