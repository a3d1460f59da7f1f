package translate

import (
	"bytes"
	"encoding/json"
	"os"
	"slices"
	"strings"
	"testing"

	apidiscoveryv2 "k8s.io/api/apidiscovery/v2"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/dcm-sp/acm-cluster-sp/internal/capiprivate/groups"
)

func upstream(t *testing.T, name string) []byte {
	t.Helper()
	b, err := os.ReadFile("testdata/upstream/" + name)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// expectedOrder is the group order a client must see: every platform entry replaced by its private twin renamed,
// private entries removed from their own positions.
func expectedOrder(upstreamOrder []string) []string {
	var out []string
	for _, g := range upstreamOrder {
		if groups.Default.IsPrivate(g) {
			continue
		}
		out = append(out, g)
	}
	return out
}

func TestDiscoveryV1(t *testing.T) {
	in := upstream(t, "discovery-v1-apis.json")
	var before metav1.APIGroupList
	if err := json.Unmarshal(in, &before); err != nil {
		t.Fatal(err)
	}
	res, err := tr.ResponseDiscovery(in)
	if err != nil {
		t.Fatal(err)
	}
	var after metav1.APIGroupList
	if err := json.Unmarshal(res.Body, &after); err != nil {
		t.Fatal(err)
	}
	var order []string
	privateVersions := map[string]metav1.APIGroup{}
	for _, g := range before.Groups {
		order = append(order, g.Name)
		if std, ok := groups.Default.ToStandard(g.Name); ok {
			privateVersions[std] = g
		}
	}
	var got []string
	for _, g := range after.Groups {
		got = append(got, g.Name)
		if p, ok := privateVersions[g.Name]; ok {
			// The private entry, renamed: same versions, standard groupVersions.
			if len(g.Versions) != len(p.Versions) {
				t.Errorf("%s: versions %v, want %v", g.Name, g.Versions, p.Versions)
			}
			for i, v := range g.Versions {
				if v.Version != p.Versions[i].Version || v.GroupVersion != g.Name+"/"+v.Version {
					t.Errorf("%s: version %+v", g.Name, v)
				}
			}
			if g.PreferredVersion.GroupVersion != g.Name+"/"+p.PreferredVersion.Version {
				t.Errorf("%s: preferred %+v", g.Name, g.PreferredVersion)
			}
		}
	}
	if want := expectedOrder(order); !slices.Equal(got, want) {
		t.Errorf("groups:\n got %v\nwant %v", got, want)
	}
	if len(got) != len(before.Groups)-len(groups.Default.Rows()) {
		t.Errorf("%d groups, want %d", len(got), len(before.Groups)-4)
	}
}

func TestDiscoveryPositionWithoutPlatform(t *testing.T) {
	in := []byte(`{"kind":"APIGroupList","apiVersion":"v1","groups":[{"name":"apps","versions":[{"groupVersion":"apps/v1","version":"v1"}]},{"name":"cluster.hypershift.openshift.io","versions":[{"groupVersion":"cluster.hypershift.openshift.io/v1beta2","version":"v1beta2"}],"preferredVersion":{"groupVersion":"cluster.hypershift.openshift.io/v1beta2","version":"v1beta2"}},{"name":"batch","versions":[]},{"name":"ipam.cluster.x-k8s.io","versions":[{"groupVersion":"ipam.cluster.x-k8s.io/v1beta2","version":"v1beta2"}]}]}`)
	want := `{"kind":"APIGroupList","apiVersion":"v1","groups":[{"name":"apps","versions":[{"groupVersion":"apps/v1","version":"v1"}]},{"name":"cluster.x-k8s.io","versions":[{"groupVersion":"cluster.x-k8s.io/v1beta2","version":"v1beta2"}],"preferredVersion":{"groupVersion":"cluster.x-k8s.io/v1beta2","version":"v1beta2"}},{"name":"batch","versions":[]}]}`
	res, err := tr.ResponseDiscovery(in)
	if err != nil {
		t.Fatal(err)
	}
	if string(res.Body) != want {
		t.Errorf("\n got %s\nwant %s", res.Body, want)
	}
}

func TestDiscoveryAggregated(t *testing.T) {
	v2 := upstream(t, "discovery-v2-apis.json")
	// kube-apiserver 1.34 serves only v2; v2beta1 has the same shape, and client-go 0.34 still asks for it.
	v2beta1 := bytes.Replace(v2, []byte(`"apiVersion":"apidiscovery.k8s.io/v2"`), []byte(`"apiVersion":"apidiscovery.k8s.io/v2beta1"`), 1)
	for name, in := range map[string][]byte{"v2": v2, "v2beta1": v2beta1} {
		t.Run(name, func(t *testing.T) {
			var before, after apidiscoveryv2.APIGroupDiscoveryList
			if err := json.Unmarshal(in, &before); err != nil {
				t.Fatal(err)
			}
			res, err := tr.ResponseDiscovery(in)
			if err != nil {
				t.Fatal(err)
			}
			if err := json.Unmarshal(res.Body, &after); err != nil {
				t.Fatal(err)
			}
			if !bytes.Contains(res.Body, []byte(`"apiVersion":"apidiscovery.k8s.io/`+name+`"`)) {
				t.Error("apiVersion of the list changed")
			}
			var order, got []string
			private := map[string]apidiscoveryv2.APIGroupDiscovery{}
			for _, g := range before.Items {
				order = append(order, g.Name)
				if std, ok := groups.Default.ToStandard(g.Name); ok {
					private[std] = g
				}
			}
			for _, g := range after.Items {
				got = append(got, g.Name)
				p, ok := private[g.Name]
				if !ok {
					continue
				}
				// Same resources as the private group, every responseKind renamed.
				if len(g.Versions) != len(p.Versions) {
					t.Fatalf("%s: %d versions", g.Name, len(g.Versions))
				}
				for i, v := range g.Versions {
					if len(v.Resources) != len(p.Versions[i].Resources) {
						t.Fatalf("%s/%s: %d resources", g.Name, v.Version, len(v.Resources))
					}
					for j, r := range v.Resources {
						if r.Resource != p.Versions[i].Resources[j].Resource || r.ResponseKind.Group != g.Name {
							t.Errorf("%s/%s: %s responseKind %+v", g.Name, v.Version, r.Resource, r.ResponseKind)
						}
						for _, s := range r.Subresources {
							if s.ResponseKind != nil && s.ResponseKind.Group != g.Name && s.ResponseKind.Group != "autoscaling" {
								t.Errorf("%s: subresource %s responseKind %+v", r.Resource, s.Subresource, s.ResponseKind)
							}
						}
					}
				}
			}
			if want := expectedOrder(order); !slices.Equal(got, want) {
				t.Errorf("groups:\n got %v\nwant %v", got, want)
			}
		})
	}
}

func TestDiscoveryGroupAndResources(t *testing.T) {
	res, err := tr.ResponseDiscovery(upstream(t, "discovery-v1-group.json"))
	if err != nil {
		t.Fatal(err)
	}
	var g metav1.APIGroup
	if err := json.Unmarshal(res.Body, &g); err != nil {
		t.Fatal(err)
	}
	if g.Name != "cluster.x-k8s.io" || g.PreferredVersion.GroupVersion != "cluster.x-k8s.io/v1beta2" || len(g.Versions) != 2 {
		t.Errorf("APIGroup %+v", g)
	}
	res, err = tr.ResponseDiscovery(upstream(t, "discovery-v1-resources.json"))
	if err != nil {
		t.Fatal(err)
	}
	var l metav1.APIResourceList
	if err := json.Unmarshal(res.Body, &l); err != nil {
		t.Fatal(err)
	}
	if l.GroupVersion != "cluster.x-k8s.io/v1beta2" || len(l.APIResources) == 0 {
		t.Errorf("APIResourceList %+v", l)
	}
	for _, r := range l.APIResources {
		if r.Group != "" && r.Group != "autoscaling" {
			t.Errorf("resource %s group %q", r.Name, r.Group)
		}
	}
	// resources[].group is renamed where set.
	in := `{"kind":"APIResourceList","apiVersion":"v1","groupVersion":"cluster.hypershift.openshift.io/v1beta2","resources":[{"name":"machinesets/scale","group":"autoscaling","version":"v1","kind":"Scale"},{"name":"x","group":"cluster.hypershift.openshift.io","kind":"X"}]}`
	want := `{"kind":"APIResourceList","apiVersion":"v1","groupVersion":"cluster.x-k8s.io/v1beta2","resources":[{"name":"machinesets/scale","group":"autoscaling","version":"v1","kind":"Scale"},{"name":"x","group":"cluster.x-k8s.io","kind":"X"}]}`
	if res, err := tr.ResponseDiscovery([]byte(in)); err != nil || string(res.Body) != want {
		t.Errorf("got %s %v", res.Body, err)
	}
}

func TestDiscoveryFailClosed(t *testing.T) {
	for in, reason := range map[string]string{
		`{"kind":"Mystery","x":"cluster.hypershift.openshift.io"}`:               ReasonInvalidDiscovery,
		`{"kind":"APIGroupList","groups":{"cluster.hypershift.openshift.io":1}}`: ReasonInvalidDiscovery,
		`{"kind":"APIGroupList","groups":["cluster.hypershift.openshift.io"]}`:   ReasonInvalidDiscovery,
		`["cluster.hypershift.openshift.io"]`:                                    ReasonInvalidDiscovery,
		`{"kind":"APIGroup","name":"cluster.hypershift.openshift.io"`:            ReasonInvalidJSON,
	} {
		if _, err := tr.ResponseDiscovery([]byte(in)); ReasonOf(err) != reason {
			t.Errorf("%s: %v, want %s", in, err, reason)
		}
	}
	core := []byte(`{"kind":"APIVersions","versions":["v1"]}`)
	if res, err := tr.ResponseDiscovery(core); err != nil || &res.Body[0] != &core[0] {
		t.Errorf("core discovery: %v", err)
	}
}

func TestOpenAPIIndex(t *testing.T) {
	in := upstream(t, "openapi-v3-index.json")
	var before, after struct {
		Paths map[string]struct {
			ServerRelativeURL string `json:"serverRelativeURL"`
		} `json:"paths"`
	}
	if err := json.Unmarshal(in, &before); err != nil {
		t.Fatal(err)
	}
	res, err := tr.ResponseOpenAPIIndex(in)
	if err != nil {
		t.Fatal(err)
	}
	if err := json.Unmarshal(res.Body, &after); err != nil {
		t.Fatal(err)
	}
	for k, v := range before.Paths {
		g := strings.Split(k, "/")
		switch {
		case len(g) == 3 && groups.Default.IsPrivate(g[1]):
			std, _ := groups.Default.ToStandard(g[1])
			nk := "apis/" + std + "/" + g[2]
			got, ok := after.Paths[nk]
			_, hash, _ := strings.Cut(v.ServerRelativeURL, "?")
			if !ok || got.ServerRelativeURL != "/openapi/v3/"+nk+"?"+hash {
				t.Errorf("%s → %s: %+v", k, nk, got)
			}
			if _, ok := after.Paths[k]; ok {
				t.Errorf("private key %s kept", k)
			}
		case len(g) == 3 && groups.Default.IsStandard(g[1]):
			// the platform's document: replaced by the private one above
		default:
			if after.Paths[k] != v {
				t.Errorf("%s changed: %+v", k, after.Paths[k])
			}
		}
	}
	// Standard keys exist only for versions the private groups serve.
	if len(after.Paths) != len(before.Paths)-countPlatformKeys(before.Paths) {
		t.Errorf("%d keys after, %d before", len(after.Paths), len(before.Paths))
	}
}

func countPlatformKeys[V any](m map[string]V) int {
	n := 0
	for k := range m {
		if g := strings.Split(k, "/"); len(g) == 3 && groups.Default.IsStandard(g[1]) {
			n++
		}
	}
	return n
}

func TestOpenAPIDocument(t *testing.T) {
	for _, f := range []string{"openapi-v3-infra.json", "openapi-v3-ipam.json"} {
		t.Run(f, func(t *testing.T) {
			res, err := tr.ResponseOpenAPIDocument(upstream(t, f))
			if err != nil {
				t.Fatal(err)
			}
			var doc struct {
				Paths      map[string]map[string]json.RawMessage `json:"paths"`
				Components struct {
					Schemas map[string]json.RawMessage `json:"schemas"`
				} `json:"components"`
			}
			if err := json.Unmarshal(res.Body, &doc); err != nil {
				t.Fatal(err)
			}
			// Every $ref resolves to a schema of the translated document.
			var refs int
			walkAll(decode(t, res.Body), func(key string, v any) {
				if s, ok := v.(string); ok && key == "$ref" {
					refs++
					name := strings.TrimPrefix(s, schemaRefPrefix)
					if _, ok := doc.Components.Schemas[name]; !ok {
						t.Errorf("dangling $ref %s", s)
					}
				}
			})
			if refs == 0 {
				t.Error("no $ref seen")
			}
			for name, raw := range doc.Components.Schemas {
				if strings.HasPrefix(name, "io.x-k8s.cluster") {
					var s struct {
						GVK []metav1.GroupVersionKind `json:"x-kubernetes-group-version-kind"`
					}
					_ = json.Unmarshal(raw, &s)
					if len(s.GVK) != 1 || !strings.HasSuffix(s.GVK[0].Group, "cluster.x-k8s.io") ||
						name != restFriendly(s.GVK[0].Group)+"."+s.GVK[0].Version+"."+s.GVK[0].Kind {
						t.Errorf("schema %s: GVK %+v", name, s.GVK)
					}
				}
			}
			for p := range doc.Paths {
				if !strings.Contains(p, ".cluster.x-k8s.io/") {
					t.Errorf("path %s", p)
				}
			}
		})
	}
}

func walkAll(v any, f func(key string, v any)) {
	switch v := v.(type) {
	case map[string]any:
		for k, x := range v {
			f(k, x)
			walkAll(x, f)
		}
	case []any:
		for _, x := range v {
			walkAll(x, f)
		}
	}
}

func TestOpenAPINames(t *testing.T) {
	for in, want := range map[string]string{
		"io.openshift.hypershift.cluster.v1beta2.Machine":                         "io.x-k8s.cluster.v1beta2.Machine",
		"io.openshift.hypershift.cluster.infrastructure.v1alpha1.KubevirtMachine": "io.x-k8s.cluster.infrastructure.v1alpha1.KubevirtMachine",
		"io.openshift.hypershift.cluster.ipam.v1beta2.IPAddressClaimList":         "io.x-k8s.cluster.ipam.v1beta2.IPAddressClaimList",
	} {
		got, ok := tr.openAPIName(in, DirectionResponse)
		if !ok || got != want {
			t.Errorf("openAPIName(%s) = %s", in, got)
		}
		back, ok := tr.openAPIName(got, DirectionRequest)
		if !ok || back != in {
			t.Errorf("openAPIName(%s) back = %s", got, back)
		}
	}
	for _, in := range []string{"io.k8s.apimachinery.pkg.apis.meta.v1.ObjectMeta", "Machine", "a.b"} {
		if got, ok := tr.openAPIName(in, DirectionResponse); ok {
			t.Errorf("openAPIName(%s) = %s", in, got)
		}
	}
	// Operation IDs and tags, as kube-apiserver builds them.
	if got := operationID("cluster.x-k8s.io", true); got != "ClusterXK8sIo" {
		t.Errorf("operationID = %s", got)
	}
	if got := operationID("infrastructure.cluster.hypershift.openshift.io", false); got != "infrastructureClusterHypershiftOpenshiftIo" {
		t.Errorf("tag = %s", got)
	}
	if got := operationID("apiextensions.k8s.io", false); got != "apiextensions" {
		t.Errorf("tag = %s", got)
	}
}
