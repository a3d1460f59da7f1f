package webhook

import (
	"context"
	"fmt"
	"strings"
	"sync"
	"time"

	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/version"
	"k8s.io/client-go/metadata"
	"k8s.io/client-go/metadata/metadatainformer"
	"k8s.io/client-go/tools/cache"
	clusterv1 "sigs.k8s.io/cluster-api/api/core/v1beta2"
	"sigs.k8s.io/cluster-api/util/contract"
)

var crdResource = apiextensionsv1.SchemeGroupVersion.WithResource("customresourcedefinitions")

// contractVersions are the CAPI contracts whose label is read, newest first: the current contract v1beta2 and
// what upstream's internal/contract.GetCompatibleVersions("v1beta2") adds to it (v1beta1, until its EOL).
var contractVersions = []string{clusterv1.GroupVersion.Version, "v1beta1"}

// LatestAPIVersion is the version a ref to a kind whose CRD carries labels points at, as upstream's
// internal/contract.GetLatestContractAndAPIVersionFromContract decides it for the current contract: the first
// non-empty contract label of contractVersions (cluster.x-k8s.io/v1beta2, then cluster.x-k8s.io/v1beta1), whose
// value lists versions separated by "_", of which the newest (version.CompareKubeAwareVersionStrings) wins.
func LatestAPIVersion(crdName string, labels map[string]string) (string, error) {
	for _, c := range contractVersions {
		value := labels[clusterv1.GroupVersion.Group+"/"+c]
		if value == "" {
			continue
		}
		latest := ""
		for _, v := range strings.Split(value, "_") {
			if latest == "" || version.CompareKubeAwareVersionStrings(v, latest) > 0 {
				latest = v
			}
		}
		return latest, nil
	}
	return "", fmt.Errorf("cannot find any versions matching contract versions %q for CRD %s as contract version label(s) are either missing or empty", contractVersions, crdName)
}

// APIVersionGetter answers the apiVersion of a ref's GroupKind for upstream's v1beta1 converters
// (clusterv1beta1.SetAPIVersionGetter): it reads the CRD contract.CalculateCRDName(group, kind) from a metadata
// informer, with a live GET when the informer does not have it, and applies LatestAPIVersion. It resolves any
// group, private or not.
type APIVersionGetter struct {
	client   metadata.Interface
	factory  metadatainformer.SharedInformerFactory
	lister   cache.GenericLister
	informer cache.SharedIndexInformer
	// lookups counts answers by result: cache, live or error.
	lookups func(result string)
	// Timeout bounds a live GET (default 10s; kube-apiserver gives a conversion 30s).
	Timeout time.Duration
	// NegativeTTL is how long a CRD found missing by a live GET is remembered as missing (default 30 s; set it
	// before Start). A CRD the informer sees added is forgotten as missing at once.
	NegativeTTL time.Duration

	missing negativeCache
}

// NewAPIVersionGetter returns a getter on client; Start it before use.
func NewAPIVersionGetter(client metadata.Interface, lookups func(result string)) *APIVersionGetter {
	factory := metadatainformer.NewSharedInformerFactory(client, 0)
	inf := factory.ForResource(crdResource)
	g := &APIVersionGetter{
		client: client, factory: factory, lister: inf.Lister(), informer: inf.Informer(),
		lookups: lookups, Timeout: 10 * time.Second, NegativeTTL: 30 * time.Second,
	}
	_, _ = g.informer.AddEventHandler(cache.ResourceEventHandlerFuncs{AddFunc: func(obj any) {
		if m, ok := obj.(*metav1.PartialObjectMetadata); ok {
			g.missing.forget(m.Name)
		}
	}})
	return g
}

// Start starts the CRD informer; it stops when ctx ends.
func (g *APIVersionGetter) Start(ctx context.Context) { g.factory.Start(ctx.Done()) }

// HasSynced reports whether the informer has listed the CRDs once.
func (g *APIVersionGetter) HasSynced() bool { return g.informer.HasSynced() }

// APIVersion returns <group>/<version> for gk, the function handed to clusterv1beta1.SetAPIVersionGetter.
func (g *APIVersionGetter) APIVersion(gk schema.GroupKind) (string, error) {
	name := contract.CalculateCRDName(gk.Group, gk.Kind)
	labels, result, err := g.crdLabels(name)
	if err == nil {
		var v string
		if v, err = LatestAPIVersion(name, labels); err == nil {
			g.lookups(result)
			return schema.GroupVersion{Group: gk.Group, Version: v}.String(), nil
		}
	}
	if result != resultNegative {
		result = "error"
	}
	g.lookups(result)
	return "", fmt.Errorf("failed to get apiVersion for kind %s: %w", gk.Kind, err)
}

// resultNegative is the lookups result of a CRD answered missing from the negative cache.
const resultNegative = "negative"

// negativeCache remembers CRD names a live GET found missing, each until its expiry. It holds at most
// maxNegative names (the refs of conversion requests are its only source); past that it starts over.
type negativeCache struct {
	mu    sync.Mutex
	until map[string]time.Time
}

const maxNegative = 1024

func (c *negativeCache) has(name string, now time.Time) bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	exp, ok := c.until[name]
	if ok && !now.Before(exp) {
		delete(c.until, name)
		return false
	}
	return ok
}

func (c *negativeCache) add(name string, until time.Time) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.until == nil || len(c.until) >= maxNegative {
		c.until = map[string]time.Time{}
	}
	c.until[name] = until
}

func (c *negativeCache) forget(name string) {
	c.mu.Lock()
	defer c.mu.Unlock()
	delete(c.until, name)
}

// crdLabels returns the labels of CRD name, from the informer ("cache") or a live GET ("live"); a name found
// missing within NegativeTTL is answered missing at once ("negative").
func (g *APIVersionGetter) crdLabels(name string) (map[string]string, string, error) {
	obj, err := g.lister.Get(name)
	if err == nil {
		if m, ok := obj.(*metav1.PartialObjectMetadata); ok {
			return m.Labels, "cache", nil
		}
	}
	if g.missing.has(name, time.Now()) {
		return nil, resultNegative, fmt.Errorf("CustomResourceDefinition %s not found (remembered for up to %s)", name, g.NegativeTTL)
	}
	ctx, cancel := context.WithTimeout(context.Background(), g.Timeout)
	defer cancel()
	m, err := g.client.Resource(crdResource).Get(ctx, name, metav1.GetOptions{})
	if err != nil {
		if apierrors.IsNotFound(err) {
			g.missing.add(name, time.Now().Add(g.NegativeTTL))
			return nil, "", fmt.Errorf("CustomResourceDefinition %s not found", name)
		}
		return nil, "", fmt.Errorf("failed to get CustomResourceDefinition metadata %s: %w", name, err)
	}
	return m.Labels, "live", nil
}
