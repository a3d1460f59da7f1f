package webhook

import (
	"context"
	"fmt"
	"strings"
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
}

// NewAPIVersionGetter returns a getter on client; Start it before use.
func NewAPIVersionGetter(client metadata.Interface, lookups func(result string)) *APIVersionGetter {
	factory := metadatainformer.NewSharedInformerFactory(client, 0)
	inf := factory.ForResource(crdResource)
	return &APIVersionGetter{
		client: client, factory: factory, lister: inf.Lister(), informer: inf.Informer(),
		lookups: lookups, Timeout: 10 * time.Second,
	}
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
	g.lookups("error")
	return "", fmt.Errorf("failed to get apiVersion for kind %s: %w", gk.Kind, err)
}

// crdLabels returns the labels of CRD name, from the informer ("cache") or a live GET ("live").
func (g *APIVersionGetter) crdLabels(name string) (map[string]string, string, error) {
	obj, err := g.lister.Get(name)
	if err == nil {
		if m, ok := obj.(*metav1.PartialObjectMetadata); ok {
			return m.Labels, "cache", nil
		}
	}
	ctx, cancel := context.WithTimeout(context.Background(), g.Timeout)
	defer cancel()
	m, err := g.client.Resource(crdResource).Get(ctx, name, metav1.GetOptions{})
	if err != nil {
		if apierrors.IsNotFound(err) {
			return nil, "", fmt.Errorf("CustomResourceDefinition %s not found", name)
		}
		return nil, "", fmt.Errorf("failed to get CustomResourceDefinition metadata %s: %w", name, err)
	}
	return m.Labels, "live", nil
}
