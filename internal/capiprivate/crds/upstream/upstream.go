// Package upstream embeds the upstream CRD YAML vendored by hack/capi-crds.sh (see README.md), each file at
// <module>@<version>/<path in the module>.
//
// It is test, dev and generator machinery: the capi-private binary embeds only the generated private CRDs
// (package crds), never this package.
package upstream

import (
	"embed"
	"fmt"
	"io/fs"
	"sort"
	"strings"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"

	"github.com/dcm-sp/acm-cluster-sp/internal/capiprivate/crds"
)

//go:embed sigs.k8s.io github.com
var files embed.FS

// File returns the vendored file <module>@<version>/<path> (crds.Source.String()).
func File(name string) ([]byte, error) { return files.ReadFile(name) }

// Platform is the platform's standard CAPI (cluster-api v1.14.2, only v1beta2, conversion None): the CRDs the
// tests' legacy and platform objects live in.
func Platform() ([]*unstructured.Unstructured, error) {
	return glob(crds.PlatformModule + "/core/config/crd/bases/*.yaml")
}

// StandardCAPK is CAPK v0.1.10 in its standard group, with its contract label.
func StandardCAPK() ([]*unstructured.Unstructured, error) {
	return glob(crds.CAPKModule + "/config/crd/bases/*.yaml")
}

// StandardInfrastructure is every vendored infrastructure provider CRD (CAPK, CAPA, CAPZ, CAPG, CAPIBM, CAPO) in
// its standard group, with its contract label: the CRDs legacy infrastructure objects live in. Upstream serves
// more versions of some kinds than the private twins do (CAPZ's AzureASOManaged* v1alpha1); in the standard CRDs
// those extra versions keep their upstream conversion settings, so tests use the versions the private twins
// serve.
func StandardInfrastructure() ([]*unstructured.Unstructured, error) {
	var out []*unstructured.Unstructured
	seen := map[string]bool{}
	for _, src := range crds.Sources {
		if !strings.Contains(src.Path, "/infrastructure.cluster.x-k8s.io_") || seen[src.String()] {
			continue
		}
		seen[src.String()] = true
		data, err := files.ReadFile(src.String())
		if err != nil {
			return nil, fmt.Errorf("%s is not vendored (make capi-crds): %w", src, err)
		}
		u, err := crds.Decode(src.String(), data)
		if err != nil {
			return nil, err
		}
		out = append(out, u)
	}
	sort.Slice(out, func(i, j int) bool { return out[i].GetName() < out[j].GetName() })
	return out, nil
}

// HyperShift is HostedCluster and HostedControlPlane (the latter with the contract label
// cluster.x-k8s.io/v1beta1: v1beta1).
func HyperShift() ([]*unstructured.Unstructured, error) {
	return glob(crds.HyperShiftModule + "/hypershift/v1beta1/zz_generated.featuregated-crd-manifests/*/AAA_ungated.yaml")
}

func glob(pattern string) ([]*unstructured.Unstructured, error) {
	names, err := fs.Glob(files, pattern)
	if err != nil {
		return nil, err
	}
	if len(names) == 0 {
		return nil, fmt.Errorf("no vendored CRD matches %s: run make capi-crds", pattern)
	}
	sort.Strings(names)
	var out []*unstructured.Unstructured
	for _, name := range names {
		data, err := files.ReadFile(name)
		if err != nil {
			return nil, err
		}
		u, err := crds.Decode(name, data)
		if err != nil {
			return nil, err
		}
		out = append(out, u)
	}
	return out, nil
}
