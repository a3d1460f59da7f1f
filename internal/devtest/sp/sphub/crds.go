package sphub

import (
	"bytes"
	"context"
	"embed"
	"fmt"
	"io/fs"
	"sort"
	"strings"
	"time"

	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/util/wait"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/yaml"
)

// crdFS holds the reviewed CRD manifests, regenerated from pinned Go modules by `make crds` (hack/crds.sh).
//
//go:embed crds/*.yaml
var crdFS embed.FS

func crdFiles() []string {
	names, _ := fs.Glob(crdFS, "crds/*.yaml")
	sort.Strings(names)
	return names
}

// CRDs returns the embedded CustomResourceDefinitions as unstructured objects, ready for server-side apply.
func CRDs() ([]*unstructured.Unstructured, error) {
	var out []*unstructured.Unstructured
	for _, name := range crdFiles() {
		data, err := crdFS.ReadFile(name)
		if err != nil {
			return nil, err
		}
		obj := map[string]any{}
		if err := yaml.Unmarshal(bytes.TrimSpace(data), &obj); err != nil {
			return nil, fmt.Errorf("%s: %w", name, err)
		}
		u := &unstructured.Unstructured{Object: obj}
		if u.GetKind() != "CustomResourceDefinition" {
			return nil, fmt.Errorf("%s: kind %q, want CustomResourceDefinition", name, u.GetKind())
		}
		out = append(out, u)
	}
	return out, nil
}

// FieldManager is the server-side-apply field manager of everything sphub writes.
const FieldManager = "acm-cluster-sp-devhub"

// InstallCRDs server-side applies every embedded CRD (client-side apply would overflow the 256 KiB
// last-applied annotation on the HostedCluster and KubeVirt CRDs) and waits until all are Established.
func InstallCRDs(ctx context.Context, c client.Client) error {
	crds, err := CRDs()
	if err != nil {
		return err
	}
	for _, crd := range crds {
		if err := c.Apply(ctx, client.ApplyConfigurationFromUnstructured(crd), client.FieldOwner(FieldManager), client.ForceOwnership); err != nil {
			return fmt.Errorf("applying CRD %s: %w", crd.GetName(), err)
		}
	}
	return wait.PollUntilContextTimeout(ctx, 100*time.Millisecond, 60*time.Second, true, func(ctx context.Context) (bool, error) {
		for _, crd := range crds {
			var got apiextensionsv1.CustomResourceDefinition
			if err := c.Get(ctx, client.ObjectKey{Name: crd.GetName()}, &got); err != nil {
				return false, nil
			}
			if !established(&got) {
				return false, nil
			}
		}
		return true, nil
	})
}

func established(crd *apiextensionsv1.CustomResourceDefinition) bool {
	for _, c := range crd.Status.Conditions {
		if c.Type == apiextensionsv1.Established && c.Status == apiextensionsv1.ConditionTrue {
			return true
		}
	}
	return false
}

// CRDNames lists the names of the embedded CRDs (e.g. hostedclusters.hypershift.openshift.io).
func CRDNames() []string {
	var out []string
	for _, f := range crdFiles() {
		out = append(out, strings.TrimSuffix(strings.TrimPrefix(f, "crds/"), ".yaml"))
	}
	return out
}
