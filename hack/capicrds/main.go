// Command capicrds is the Go half of hack/capi-crds.sh: the fix-ups of vendored upstream CRDs and the generation
// of capi-private's private CRDs. It is not part of any binary.
//
// Usage:
//
//	capicrds label IN OUT KEY=VALUE...
//	    Copy the CRD in IN to OUT with the labels added (kustomize commonLabels that upstream only applies at
//	    deploy time, such as CAPK's contract label cluster.x-k8s.io/v1beta1: v1alpha1).
//	capicrds served-only IN OUT VERSION
//	    Copy the CRD in IN to OUT with only version VERSION, made the served storage version, and conversion None.
//	capicrds private UPSTREAMDIR OUTDIR
//	    Generate the private twin of every crds.Sources file under UPSTREAMDIR (<module>@<version>/<path>) with
//	    crds.Generate and the default webhook client config, as OUTDIR/<name>.yaml.
//
// The fix-ups write YAML from sigs.k8s.io/yaml (keys sorted, numbers kept exact) without a header comment;
// capi-crds.sh adds that.
package main

import (
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strings"

	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	"sigs.k8s.io/yaml"

	"github.com/dcm-sp/acm-cluster-sp/internal/capiprivate/crds"
)

func main() {
	if err := run(os.Args[1:]); err != nil {
		fmt.Fprintln(os.Stderr, "capicrds:", err)
		os.Exit(1)
	}
}

func run(args []string) error {
	switch {
	case len(args) >= 4 && args[0] == "label":
		return fixup(args[1], args[2], func(crd map[string]any) error { return label(crd, args[3:]) })
	case len(args) == 4 && args[0] == "served-only":
		return fixup(args[1], args[2], func(crd map[string]any) error { return servedOnly(crd, args[3]) })
	case len(args) == 3 && args[0] == "private":
		return private(args[1], args[2])
	}
	return fmt.Errorf("usage: capicrds label IN OUT KEY=VALUE... | capicrds served-only IN OUT VERSION | capicrds private UPSTREAMDIR OUTDIR")
}

func useNumber(d *json.Decoder) *json.Decoder { d.UseNumber(); return d }

func fixup(in, out string, f func(map[string]any) error) error {
	src, err := os.ReadFile(in)
	if err != nil {
		return err
	}
	var crd map[string]any
	if err := yaml.Unmarshal(src, &crd, useNumber); err != nil {
		return fmt.Errorf("%s: %w", in, err)
	}
	if crd["kind"] != "CustomResourceDefinition" {
		return fmt.Errorf("%s: kind is %v, want CustomResourceDefinition", in, crd["kind"])
	}
	if err := f(crd); err != nil {
		return fmt.Errorf("%s: %w", in, err)
	}
	body, err := yaml.Marshal(crd)
	if err != nil {
		return err
	}
	var typed apiextensionsv1.CustomResourceDefinition
	if err := yaml.UnmarshalStrict(body, &typed); err != nil {
		return fmt.Errorf("%s: not a strict apiextensions.k8s.io/v1 CRD after the fix-up: %w", in, err)
	}
	return os.WriteFile(out, body, 0o644)
}

func label(crd map[string]any, pairs []string) error {
	meta, _ := crd["metadata"].(map[string]any)
	labels, _ := meta["labels"].(map[string]any)
	if labels == nil {
		labels = map[string]any{}
	}
	for _, p := range pairs {
		k, v, ok := strings.Cut(p, "=")
		if !ok || k == "" {
			return fmt.Errorf("label %q is not KEY=VALUE", p)
		}
		if old, exists := labels[k]; exists && old != v {
			return fmt.Errorf("label %s is already %v upstream; is the fix-up still right?", k, old)
		}
		labels[k] = v
	}
	meta["labels"] = labels
	return nil
}

func servedOnly(crd map[string]any, version string) error {
	spec, _ := crd["spec"].(map[string]any)
	versions, _ := spec["versions"].([]any)
	var kept []any
	for _, v := range versions {
		v, _ := v.(map[string]any)
		if v["name"] == version {
			if v["served"] != true || v["storage"] != true {
				return fmt.Errorf("version %s is not the served storage version upstream", version)
			}
			kept = append(kept, v)
		}
	}
	if len(kept) != 1 {
		return fmt.Errorf("no version %s", version)
	}
	spec["versions"] = kept
	spec["conversion"] = map[string]any{"strategy": string(apiextensionsv1.NoneConverter)}
	return nil
}

func private(upstreamDir, outDir string) error {
	for _, src := range crds.Sources {
		data, err := os.ReadFile(filepath.Join(upstreamDir, filepath.FromSlash(src.String())))
		if err != nil {
			return err
		}
		name, out, err := crds.Generate(src, data, crds.DefaultClientConfig())
		if err != nil {
			return err
		}
		if err := os.WriteFile(filepath.Join(outDir, crds.FileName(name)), out, 0o644); err != nil {
			return err
		}
	}
	return nil
}
