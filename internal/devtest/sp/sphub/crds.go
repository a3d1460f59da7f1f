package sphub

import (
	"bytes"
	"context"
	"crypto/sha256"
	"embed"
	"encoding/hex"
	"fmt"
	"io/fs"
	"sort"
	"strings"
	"time"

	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/rest"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/yaml"

	"github.com/dcm-sp/acm-cluster-sp/internal/devtest/localhub"
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

// crdBase is the hub every local hub starts from: the embedded CRDs, applied and Established. localhub builds it
// once and caches it; its Key is the manifests' content.
func crdBase() (*localhub.Base, error) {
	h := sha256.New()
	for _, name := range crdFiles() {
		data, err := crdFS.ReadFile(name)
		if err != nil {
			return nil, err
		}
		fmt.Fprintf(h, "%s %d\n", name, len(data))
		h.Write(data)
	}
	return &localhub.Base{
		Key: "sphub CRDs " + hex.EncodeToString(h.Sum(nil)),
		Build: func(ctx context.Context, cfg *rest.Config) error {
			c, err := client.New(cfg, client.Options{Scheme: Scheme()})
			if err != nil {
				return err
			}
			return InstallCRDs(ctx, c)
		},
	}, nil
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
