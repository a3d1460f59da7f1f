package crds

import (
	"bytes"
	"embed"
	"fmt"
	"io/fs"
	"sort"

	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"sigs.k8s.io/yaml"
)

// privateFS holds the generated private CRDs, written by `make capi-crds` (hack/capi-crds.sh).
//
//go:embed private/*.yaml
var privateFS embed.FS

// files returns the embedded private CRD files by name.
func files() (map[string][]byte, error) {
	names, err := fs.Glob(privateFS, "private/*.yaml")
	if err != nil {
		return nil, err
	}
	out := map[string][]byte{}
	for _, name := range names {
		data, err := privateFS.ReadFile(name)
		if err != nil {
			return nil, err
		}
		out[name] = data
	}
	return out, nil
}

// Private returns the embedded private CRDs, sorted by name, ready for server-side apply; the CRDs with a
// Webhook conversion get cc as their clientConfig.
func Private(cc apiextensionsv1.WebhookClientConfig) ([]*unstructured.Unstructured, error) {
	ccMap, err := runtime.DefaultUnstructuredConverter.ToUnstructured(&cc)
	if err != nil {
		return nil, err
	}
	all, err := files()
	if err != nil {
		return nil, err
	}
	var out []*unstructured.Unstructured
	for name, data := range all {
		u, err := Decode(name, data)
		if err != nil {
			return nil, err
		}
		if !hasPrivateSuffix(u.GetName()) {
			return nil, fmt.Errorf("%s: %s is not a private CRD", name, u.GetName())
		}
		if strategy, _, _ := unstructured.NestedString(u.Object, "spec", "conversion", "strategy"); strategy == string(apiextensionsv1.WebhookConverter) {
			if err := unstructured.SetNestedField(u.Object, runtime.DeepCopyJSON(ccMap), "spec", "conversion", "webhook", "clientConfig"); err != nil {
				return nil, fmt.Errorf("%s: %w", name, err)
			}
		}
		out = append(out, u)
	}
	sort.Slice(out, func(i, j int) bool { return out[i].GetName() < out[j].GetName() })
	return out, nil
}

// Decode reads the CRD file data (named name, for errors) as an unstructured object for server-side apply.
// Numbers stay json.Number, so no integer in a schema turns into a float.
func Decode(name string, data []byte) (*unstructured.Unstructured, error) {
	crd, err := parseCRD(data)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", name, err)
	}
	return &unstructured.Unstructured{Object: crd}, nil
}

// Manifests renders Private(cc) as one YAML stream ("---" between documents), for `crds generate`.
func Manifests(cc apiextensionsv1.WebhookClientConfig) ([]byte, error) {
	crds, err := Private(cc)
	if err != nil {
		return nil, err
	}
	var buf bytes.Buffer
	for i, crd := range crds {
		body, err := yaml.Marshal(crd.Object)
		if err != nil {
			return nil, err
		}
		if i > 0 {
			buf.WriteString("---\n")
		}
		buf.Write(body)
	}
	return buf.Bytes(), nil
}
