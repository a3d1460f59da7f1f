package hubtest

import (
	"bytes"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	utilyaml "k8s.io/apimachinery/pkg/util/yaml"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/client-go/dynamic"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/dcm-sp/acm-cluster-sp/internal/capiprivate/crds"
	"github.com/dcm-sp/acm-cluster-sp/internal/capiprivate/proxy"
)

// platformProvider is one vendored infrastructure provider: the value of its private CRDs'
// cluster.x-k8s.io/provider label, its fixture file under testdata/providers, the kinds a Cluster and a Machine
// reference, and the version Cluster API answers for a ref to its kinds (the newest of its contract label).
type platformProvider struct {
	name, label, cluster, machine, contractVersion string
	// groupRef, when set, is a member path of the cluster kind holding a <group>/<version> reference (CAPZ's
	// identityRef), stored private.
	groupRef []string
}

var platformProviders = []platformProvider{
	{name: "aws", label: "infrastructure-aws", cluster: "AWSCluster", machine: "AWSMachine", contractVersion: "v1beta2"},
	{name: "azure", label: "infrastructure-azure", cluster: "AzureCluster", machine: "AzureMachine", contractVersion: "v1beta1",
		groupRef: []string{"spec", "identityRef", "apiVersion"}},
	{name: "gcp", label: "infrastructure-gcp", cluster: "GCPCluster", machine: "GCPMachine", contractVersion: "v1beta1"},
	{name: "ibmcloud", label: "infrastructure-ibmcloud", cluster: "IBMPowerVSCluster", machine: "IBMPowerVSMachine", contractVersion: "v1beta2"},
	{name: "openstack", label: "infrastructure-openstack", cluster: "OpenStackCluster", machine: "OpenStackMachine", contractVersion: "v1beta1"},
}

// privateKind is one kind of a provider as its private CRD installed on the hub serves it.
type privateKind struct {
	kind, resource string
	namespaced     bool
	served         []string
	storage        string
}

// providerKinds lists the private CRDs installed on the hub with the provider label: every kind the provider
// brings, so a kind vendored without a fixture fails the test.
func providerKinds(t *testing.T, label string) map[string]privateKind {
	t.Helper()
	var list apiextensionsv1.CustomResourceDefinitionList
	if err := env.Client.List(t.Context(), &list, client.MatchingLabels{crds.LabelPrivate: "true", crds.LabelProvider: label}); err != nil {
		t.Fatal(err)
	}
	out := map[string]privateKind{}
	for _, crd := range list.Items {
		k := privateKind{kind: crd.Spec.Names.Kind, resource: crd.Spec.Names.Plural, namespaced: crd.Spec.Scope == apiextensionsv1.NamespaceScoped}
		for _, v := range crd.Spec.Versions {
			k.served = append(k.served, v.Name)
			if v.Storage {
				k.storage = v.Name
			}
		}
		out[k.kind] = k
	}
	if len(out) == 0 {
		t.Fatalf("no private CRD with %s=%s", crds.LabelProvider, label)
	}
	return out
}

// providerFixtures reads testdata/providers/<name>.yaml: one object per kind, in the standard group.
func providerFixtures(t *testing.T, name string) map[string]*unstructured.Unstructured {
	t.Helper()
	data, err := os.ReadFile(filepath.Join("testdata", "providers", name+".yaml"))
	if err != nil {
		t.Fatal(err)
	}
	out := map[string]*unstructured.Unstructured{}
	dec := utilyaml.NewYAMLOrJSONDecoder(bytes.NewReader(data), 4096)
	for {
		var m map[string]any
		if err := dec.Decode(&m); err != nil {
			break
		}
		if m == nil {
			continue
		}
		u := &unstructured.Unstructured{Object: m}
		out[u.GetKind()] = u
	}
	return out
}

// Every vendored infrastructure provider through the proxy, on the real hub: each of its kinds is created, read
// at every served version, listed, watched and patched in the standard group; it is stored in the private group
// with a private ownerReference; a Machine's and a Cluster's refs to the provider's kinds are stored private, and
// a v1beta1 read of the Machine resolves the ref's version from the private CRD's contract label (the conversion
// webhook's apiVersion getter).
func TestProvidersThroughProxy(t *testing.T) {
	ps := startProxy(t, proxy.Options{})
	pc := ps.dynamic(t, env.AdminToken)
	dc := direct(t)
	for _, p := range platformProviders {
		t.Run(p.name, func(t *testing.T) { testProvider(t, p, pc, dc) })
	}
}

func testProvider(t *testing.T, p platformProvider, pc, dc dynamic.Interface) {
	ctx := t.Context()
	ns := env.NewNamespace(t, "prov-"+p.name)
	kinds := providerKinds(t, p.label)
	fixtures := providerFixtures(t, p.name)
	for kind := range fixtures {
		if _, ok := kinds[kind]; !ok {
			t.Errorf("fixture %s has no private CRD labelled %s", kind, p.label)
		}
	}
	sel := "hubtest=providers-" + p.name

	// The owner: a Cluster referencing the provider's cluster kind, through the proxy.
	cluster := coreObject("Cluster", ns, "c1", map[string]any{
		"infrastructureRef": map[string]any{"apiGroup": stdInfra, "kind": p.cluster, "name": "c1"}})
	owner, err := pc.Resource(gvr(stdCore, "v1beta2", "clusters")).Namespace(ns).Create(ctx, cluster, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	ownerRef := metav1.OwnerReference{APIVersion: stdCore + "/v1beta2", Kind: "Cluster", Name: "c1", UID: owner.GetUID()}

	watches := map[string]watch.Interface{}
	for kind, k := range kinds {
		res := resourceIn(pc, gvr(stdInfra, k.storage, k.resource), k, ns)
		list, err := res.List(ctx, metav1.ListOptions{LabelSelector: sel})
		if err != nil {
			t.Fatalf("list %s through the proxy: %v", k.resource, err)
		}
		w, err := res.Watch(ctx, metav1.ListOptions{LabelSelector: sel, ResourceVersion: list.GetResourceVersion()})
		if err != nil {
			t.Fatalf("watch %s through the proxy: %v", k.resource, err)
		}
		t.Cleanup(w.Stop)
		watches[kind] = w
	}

	for _, kind := range sortedKeys(kinds) {
		k := kinds[kind]
		t.Run(kind, func(t *testing.T) {
			fx, ok := fixtures[kind]
			if !ok {
				t.Fatalf("no fixture for %s in testdata/providers/%s.yaml", kind, p.name)
			}
			providerKindRoundTrip(t, p, k, fx.DeepCopy(), ns, sel, ownerRef, pc, dc, watches[kind])
		})
	}

	// A Machine referencing the provider's machine kind: stored private; read at v1beta1 the ref's apiVersion is
	// the version of the provider's contract label.
	machine := coreObject("Machine", ns, "m1", map[string]any{"clusterName": "c1",
		"bootstrap":         map[string]any{"dataSecretName": "bootstrap"},
		"infrastructureRef": map[string]any{"apiGroup": stdInfra, "kind": p.machine, "name": "m1"}})
	if _, err := pc.Resource(gvr(stdCore, "v1beta2", "machines")).Namespace(ns).Create(ctx, machine, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	for _, o := range []struct {
		c     dynamic.Interface
		group string
	}{{pc, stdCore}, {dc, privCore}} {
		stored, err := o.c.Resource(gvr(o.group, "v1beta2", "machines")).Namespace(ns).Get(ctx, "m1", metav1.GetOptions{})
		if err != nil {
			t.Fatal(err)
		}
		want := stdInfra
		if o.group == privCore {
			want = privInfra
		}
		if got := nested(t, stored, "spec", "infrastructureRef", "apiGroup"); got != want {
			t.Errorf("Machine in %s: infrastructureRef.apiGroup %q, want %q", o.group, got, want)
		}
	}
	old, err := pc.Resource(gvr(stdCore, "v1beta1", "machines")).Namespace(ns).Get(ctx, "m1", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if got, want := nested(t, old, "spec", "infrastructureRef", "apiVersion"), stdInfra+"/"+p.contractVersion; got != want {
		t.Errorf("v1beta1 Machine through the proxy: infrastructureRef.apiVersion %q, want %q (contract label)", got, want)
	}
	storedCluster, err := dc.Resource(gvr(privCore, "v1beta2", "clusters")).Namespace(ns).Get(ctx, "c1", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if got := nested(t, storedCluster, "spec", "infrastructureRef", "apiGroup"); got != privInfra {
		t.Errorf("stored Cluster infrastructureRef.apiGroup %q", got)
	}
}

// providerKindRoundTrip creates one object of k through the proxy and checks every view of it.
func providerKindRoundTrip(t *testing.T, p platformProvider, k privateKind, obj *unstructured.Unstructured, ns, sel string,
	ownerRef metav1.OwnerReference, pc, dc dynamic.Interface, w watch.Interface) {
	ctx := t.Context()
	name := strings.ToLower(k.kind)
	obj.SetName(name)
	obj.SetLabels(map[string]string{"hubtest": strings.TrimPrefix(sel, "hubtest="), "cluster.x-k8s.io/cluster-name": "c1"})
	if k.namespaced {
		obj.SetNamespace(ns)
		obj.SetOwnerReferences([]metav1.OwnerReference{ownerRef})
	} else {
		obj.SetName(ns + "-" + name) // cluster-scoped: unique per run, no namespaced owner
		t.Cleanup(func() {
			_ = dc.Resource(gvr(privInfra, k.storage, k.resource)).Delete(ctx, obj.GetName(), metav1.DeleteOptions{})
		})
	}
	version := strings.TrimPrefix(obj.GetAPIVersion(), stdInfra+"/")
	res := resourceIn(pc, gvr(stdInfra, version, k.resource), k, ns)
	created, err := res.Create(ctx, obj, metav1.CreateOptions{})
	if err != nil {
		t.Fatalf("create through the proxy: %v", err)
	}
	if created.GetAPIVersion() != stdInfra+"/"+version {
		t.Errorf("create answered %s", created.GetAPIVersion())
	}
	for _, v := range k.served {
		got, err := resourceIn(pc, gvr(stdInfra, v, k.resource), k, ns).Get(ctx, obj.GetName(), metav1.GetOptions{})
		if err != nil {
			t.Fatalf("get at %s through the proxy: %v", v, err)
		}
		if got.GetAPIVersion() != stdInfra+"/"+v {
			t.Errorf("read at %s answered %s", v, got.GetAPIVersion())
		}
		if k.namespaced {
			if refs := got.GetOwnerReferences(); len(refs) != 1 || refs[0].APIVersion != ownerRef.APIVersion || refs[0].UID != ownerRef.UID {
				t.Errorf("ownerReferences through the proxy %+v", refs)
			}
		}
		if p.groupRef != nil && k.kind == p.cluster {
			if ref := nested(t, got, p.groupRef...); !strings.HasPrefix(ref, stdInfra+"/") {
				t.Errorf("%s through the proxy: %q", strings.Join(p.groupRef, "."), ref)
			}
		}
	}
	list, err := res.List(ctx, metav1.ListOptions{LabelSelector: sel})
	if err != nil || len(list.Items) != 1 || list.Items[0].GetAPIVersion() != stdInfra+"/"+version {
		t.Errorf("list through the proxy: %v, %d items", err, len(list.Items))
	}
	patch := []byte(`{"metadata":{"annotations":{"cluster.x-k8s.io/paused":"","hubtest":"patched"}}}`)
	if _, err := res.Patch(ctx, obj.GetName(), types.MergePatchType, patch, metav1.PatchOptions{}); err != nil {
		t.Fatalf("merge patch through the proxy: %v", err)
	}

	stored, err := resourceIn(dc, gvr(privInfra, k.storage, k.resource), k, ns).Get(ctx, obj.GetName(), metav1.GetOptions{})
	if err != nil {
		t.Fatalf("direct get of the private object: %v", err)
	}
	if stored.GetAnnotations()["hubtest"] != "patched" {
		t.Errorf("stored annotations %v", stored.GetAnnotations())
	}
	if k.namespaced {
		if refs := stored.GetOwnerReferences(); len(refs) != 1 || refs[0].APIVersion != privCore+"/v1beta2" || refs[0].UID != ownerRef.UID {
			t.Errorf("stored ownerReferences %+v", refs)
		}
	}
	if p.groupRef != nil && k.kind == p.cluster {
		if ref := nested(t, stored, p.groupRef...); !strings.HasPrefix(ref, privInfra+"/") {
			t.Errorf("stored %s: %q, want the private group", strings.Join(p.groupRef, "."), ref)
		}
	}
	got := collect(t, w, 2, func(o *unstructured.Unstructured) {
		if o.GetAPIVersion() != stdInfra+"/"+k.storage {
			t.Errorf("watch event object %s", o.GetAPIVersion())
		}
	})
	if got[0].typ != string(watch.Added) || got[1].typ != string(watch.Modified) || got[1].name != obj.GetName() {
		t.Errorf("watch through the proxy: %v, want ADDED then MODIFIED of %s", got, obj.GetName())
	}
}

// resourceIn is the resource of k at r, in ns when k is namespaced.
func resourceIn(c dynamic.Interface, r schema.GroupVersionResource, k privateKind, ns string) dynamic.ResourceInterface {
	if k.namespaced {
		return c.Resource(r).Namespace(ns)
	}
	return c.Resource(r)
}

// coreObject is a v1beta2 core Cluster API object in the standard group.
func coreObject(kind, ns, name string, spec map[string]any) *unstructured.Unstructured {
	o := &unstructured.Unstructured{Object: map[string]any{"spec": spec}}
	o.SetAPIVersion(stdCore + "/v1beta2")
	o.SetKind(kind)
	o.SetNamespace(ns)
	o.SetName(name)
	o.SetLabels(map[string]string{"cluster.x-k8s.io/cluster-name": "c1"})
	if kind == "Cluster" {
		_ = unstructured.SetNestedField(o.Object, true, "spec", "paused")
	}
	return o
}

func sortedKeys[V any](m map[string]V) []string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	return keys
}
