package crds_test

import (
	"bytes"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"reflect"
	"slices"
	"strings"
	"testing"

	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	"k8s.io/apimachinery/pkg/version"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/cluster-api/util/contract"
	"sigs.k8s.io/yaml"

	"github.com/dcm-sp/acm-cluster-sp/internal/capiprivate/crds"
	"github.com/dcm-sp/acm-cluster-sp/internal/capiprivate/crds/upstream"
	"github.com/dcm-sp/acm-cluster-sp/internal/capiprivate/groups"
	"github.com/dcm-sp/acm-cluster-sp/internal/devtest/golden"
)

func generate(t *testing.T, src crds.Source, file string, cc apiextensionsv1.WebhookClientConfig) (string, []byte) {
	t.Helper()
	data, err := os.ReadFile(filepath.Join("testdata", file))
	if err != nil {
		t.Fatal(err)
	}
	name, out, err := crds.Generate(src, data, cc)
	if err != nil {
		t.Fatal(err)
	}
	return name, out
}

// Generate's steps on small CRDs, as golden files.
func TestGenerateGolden(t *testing.T) {
	src := crds.Source{Module: "example.com/capi@v1.0.0", Path: "config/widgets.yaml", Provider: "cluster-api"}
	name, out := generate(t, src, "widgets.yaml", crds.DefaultClientConfig())
	if name != "widgets.cluster.hypershift.openshift.io" {
		t.Errorf("name %s", name)
	}
	golden.Assert(t, "widgets.golden.yaml", out)

	// A URL client config with a caBundle, as the tests install it.
	_, out = generate(t, src, "widgets.yaml", apiextensionsv1.WebhookClientConfig{
		URL: ptr.To("https://127.0.0.1:9443/convert"), CABundle: []byte("-----BEGIN CERTIFICATE-----\n"),
	})
	golden.Assert(t, "widgets-url.golden.yaml", out)

	// One served version: conversion None.
	src = crds.Source{Module: "example.com/capk@v0.1.0", Path: "config/gadgets.yaml", Provider: "infrastructure-kubevirt"}
	name, out = generate(t, src, "gadgets.yaml", crds.DefaultClientConfig())
	if name != "gadgets.infrastructure.cluster.hypershift.openshift.io" {
		t.Errorf("name %s", name)
	}
	golden.Assert(t, "gadgets.golden.yaml", out)
}

func TestGenerateRejects(t *testing.T) {
	src := crds.Source{Module: "m@v1", Path: "p.yaml", Provider: "x"}
	widgets, err := os.ReadFile("testdata/widgets.yaml")
	if err != nil {
		t.Fatal(err)
	}
	for name, data := range map[string]string{
		"not a CRD":            "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: x\n",
		"unmapped group":       strings.ReplaceAll(string(widgets), "cluster.x-k8s.io", "runtime.cluster.x-k8s.io"),
		"name is not plural.g": strings.Replace(string(widgets), "name: widgets.cluster.x-k8s.io", "name: widget.cluster.x-k8s.io", 1),
		"storage not served": strings.Replace(string(widgets), "    served: true\n    storage: true",
			"    served: false\n    storage: true", 1),
		"no storage version": strings.Replace(string(widgets), "storage: true", "storage: false", 1),
	} {
		if _, _, err := crds.Generate(src, []byte(data), crds.DefaultClientConfig()); err == nil {
			t.Errorf("%s: Generate succeeded", name)
		}
	}
	// Serve must keep the storage version and name only versions upstream serves.
	for name, serve := range map[string][]string{
		"storage not kept":  {"v1beta1"},
		"unknown version":   {"v1beta2", "v9"},
		"no version at all": {},
	} {
		src := crds.Source{Module: "m@v1", Path: "p.yaml", Provider: "x", Serve: serve}
		if _, _, err := crds.Generate(src, widgets, crds.DefaultClientConfig()); err == nil {
			t.Errorf("Serve %s %v: Generate succeeded", name, serve)
		}
	}
	// Serve limits the served versions: one left, conversion None.
	src = crds.Source{Module: "m@v1", Path: "p.yaml", Provider: "x", Serve: []string{"v1beta2"}}
	_, out, err := crds.Generate(src, widgets, crds.DefaultClientConfig())
	if err != nil || bytes.Contains(out, []byte("name: v1beta1")) || !bytes.Contains(out, []byte("strategy: None")) {
		t.Errorf("Serve [v1beta2]: err %v, output:\n%s", err, out)
	}
}

// The committed private CRDs are exactly what Generate makes of the vendored upstream files (make verify checks
// the vendored files against the modules).
func TestCommittedPrivateCRDsAreGenerated(t *testing.T) {
	seen := map[string]bool{}
	for _, src := range crds.Sources {
		data, err := upstream.File(src.String())
		if err != nil {
			t.Fatalf("%s is not vendored (make capi-crds): %v", src, err)
		}
		name, out, err := crds.Generate(src, data, crds.DefaultClientConfig())
		if err != nil {
			t.Fatal(err)
		}
		committed, err := os.ReadFile(filepath.Join("private", crds.FileName(name)))
		if err != nil {
			t.Fatal(err)
		}
		if !bytes.Equal(out, committed) {
			t.Errorf("private/%s is stale: run make capi-crds", crds.FileName(name))
		}
		seen[crds.FileName(name)] = true
	}
	entries, err := os.ReadDir("private")
	if err != nil {
		t.Fatal(err)
	}
	for _, e := range entries {
		if !seen[e.Name()] {
			t.Errorf("private/%s is not generated from any crds.Source", e.Name())
		}
	}
}

func toMap(t *testing.T, data []byte) map[string]any {
	t.Helper()
	var m map[string]any
	if err := yaml.Unmarshal(data, &m, func(d *json.Decoder) *json.Decoder { d.UseNumber(); return d }); err != nil {
		t.Fatal(err)
	}
	return m
}

// What Generate promises, checked on every real private CRD.
func TestPrivateCRDInvariants(t *testing.T) {
	for _, src := range crds.Sources {
		data, err := upstream.File(src.String())
		if err != nil {
			t.Fatal(err)
		}
		_, out, err := crds.Generate(src, data, crds.DefaultClientConfig())
		if err != nil {
			t.Fatal(err)
		}
		var up, priv apiextensionsv1.CustomResourceDefinition
		if err := yaml.UnmarshalStrict(data, &up); err != nil {
			t.Fatal(err)
		}
		if err := yaml.UnmarshalStrict(out, &priv); err != nil {
			t.Fatal(err)
		}
		t.Run(priv.Name, func(t *testing.T) {
			group, _ := groups.Default.ToPrivate(up.Spec.Group)
			if priv.Spec.Group != group || group == "" {
				t.Errorf("group %s, want %s", priv.Spec.Group, group)
			}
			if want := contract.CalculateCRDName(group, up.Spec.Names.Kind); priv.Name != want {
				t.Errorf("name %s, want %s (contract.CalculateCRDName)", priv.Name, want)
			}
			if !reflect.DeepEqual(priv.Spec.Names, up.Spec.Names) || priv.Spec.Scope != up.Spec.Scope {
				t.Errorf("names or scope changed")
			}
			// Served versions kept verbatim (schemas never edited), unserved ones (and those outside Serve) dropped,
			// storage unchanged.
			var want []apiextensionsv1.CustomResourceDefinitionVersion
			for _, v := range up.Spec.Versions {
				if v.Served && (src.Serve == nil || slices.Contains(src.Serve, v.Name)) {
					want = append(want, v)
				}
			}
			if !reflect.DeepEqual(priv.Spec.Versions, want) {
				t.Errorf("versions differ from upstream's served versions")
			}
			if got := storage(&priv); got != storage(&up) || got == "" {
				t.Errorf("storage version %s, upstream %s", got, storage(&up))
			}
			for k, v := range up.Labels {
				if priv.Labels[k] != v {
					t.Errorf("upstream label %s=%s lost", k, v)
				}
			}
			if priv.Labels[crds.LabelPrivate] != "true" || priv.Labels[crds.LabelProvider] != src.Provider {
				t.Errorf("labels %v", priv.Labels)
			}
			// Every infrastructure kind carries a contract label whose newest version the private CRD serves: what
			// CAPI (and the webhook's apiVersion getter) answer for a ref to the kind.
			if up.Spec.Group == "infrastructure.cluster.x-k8s.io" {
				if v, err := webhookLatest(priv.Name, priv.Labels); err != nil || !served(&priv, v) {
					t.Errorf("contract labels %v: latest %q (%v) is not served", priv.Labels, v, err)
				}
			}
			if priv.Annotations[crds.AnnotationSource] != src.String() {
				t.Errorf("source annotation %q", priv.Annotations[crds.AnnotationSource])
			}
			conv := priv.Spec.Conversion
			if len(want) > 1 {
				if conv == nil || conv.Strategy != apiextensionsv1.WebhookConverter || conv.Webhook == nil ||
					!reflect.DeepEqual(conv.Webhook.ConversionReviewVersions, []string{"v1"}) ||
					!reflect.DeepEqual(conv.Webhook.ClientConfig, ptr.To(crds.DefaultClientConfig())) {
					t.Errorf("conversion %+v, want Webhook", conv)
				}
			} else if conv == nil || conv.Strategy != apiextensionsv1.NoneConverter {
				t.Errorf("conversion %+v, want None", conv)
			}
			// Outside metadata and descriptions, the standard group appears nowhere (checked for v1.12.x).
			m := toMap(t, out)
			delete(m, "metadata")
			walkStrings(m, "", func(path, s string) {
				if strings.Contains(s, up.Spec.Group) {
					t.Errorf("%s still names %s: %q", path, up.Spec.Group, s)
				}
			})
		})
	}
}

// webhookLatest is the newest version a CRD's contract label names (cluster.x-k8s.io/v1beta2, else v1beta1;
// versions separated by "_"), as Cluster API reads it.
func webhookLatest(name string, labels map[string]string) (string, error) {
	for _, key := range []string{"cluster.x-k8s.io/v1beta2", "cluster.x-k8s.io/v1beta1"} {
		if value := labels[key]; value != "" {
			vs := strings.Split(value, "_")
			slices.SortFunc(vs, version.CompareKubeAwareVersionStrings)
			return vs[len(vs)-1], nil
		}
	}
	return "", fmt.Errorf("%s has no contract label", name)
}

func served(crd *apiextensionsv1.CustomResourceDefinition, v string) bool {
	for _, sv := range crd.Spec.Versions {
		if sv.Name == v && sv.Served {
			return true
		}
	}
	return false
}

func storage(crd *apiextensionsv1.CustomResourceDefinition) string {
	for _, v := range crd.Spec.Versions {
		if v.Storage {
			return v.Name
		}
	}
	return ""
}

// walkStrings calls f on every string value of v, except descriptions.
func walkStrings(v any, path string, f func(path, s string)) {
	switch v := v.(type) {
	case map[string]any:
		for k, e := range v {
			if k != "description" {
				walkStrings(e, path+"."+k, f)
			}
		}
	case []any:
		for _, e := range v {
			walkStrings(e, path+"[]", f)
		}
	case string:
		f(path, v)
	}
}

func TestPrivateSetsClientConfig(t *testing.T) {
	cc := apiextensionsv1.WebhookClientConfig{URL: ptr.To("https://127.0.0.1:1/convert"), CABundle: []byte("ca")}
	all, err := crds.Private(cc)
	if err != nil {
		t.Fatal(err)
	}
	if len(all) != len(crds.Sources) {
		t.Fatalf("%d private CRDs, want %d", len(all), len(crds.Sources))
	}
	for _, u := range all {
		var crd apiextensionsv1.CustomResourceDefinition
		body, _ := json.Marshal(u.Object)
		if err := json.Unmarshal(body, &crd); err != nil {
			t.Fatal(err)
		}
		if !strings.HasSuffix(crd.Name, crds.PrivateSuffix) {
			t.Errorf("%s is not private", crd.Name)
		}
		if crd.Spec.Conversion.Strategy == apiextensionsv1.WebhookConverter && !reflect.DeepEqual(crd.Spec.Conversion.Webhook.ClientConfig, &cc) {
			t.Errorf("%s: clientConfig %+v", crd.Name, crd.Spec.Conversion.Webhook.ClientConfig)
		}
	}
	stream, err := crds.Manifests(cc)
	if err != nil {
		t.Fatal(err)
	}
	if n := bytes.Count(stream, []byte("\n---\n")) + 1; n != len(all) {
		t.Errorf("Manifests has %d documents, want %d", n, len(all))
	}
}
