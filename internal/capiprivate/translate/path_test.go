package translate

import (
	"testing"
)

func TestRequestPath(t *testing.T) {
	const priv = "cluster.hypershift.openshift.io"
	cases := []struct {
		in   string
		want Path
	}{
		{"/apis/cluster.x-k8s.io/v1beta2/namespaces/ns/machines/m1", Path{
			Upstream: "/apis/" + priv + "/v1beta2/namespaces/ns/machines/m1", Changed: true, Kind: PathResource,
			Group: "cluster.x-k8s.io", Version: "v1beta2", Namespace: "ns", Resource: "machines", Name: "m1", Mapped: true}},
		{"/apis/cluster.x-k8s.io/v1beta1/namespaces/ns/machinesets/ms/scale", Path{
			Upstream: "/apis/" + priv + "/v1beta1/namespaces/ns/machinesets/ms/scale", Changed: true, Kind: PathResource,
			Group: "cluster.x-k8s.io", Version: "v1beta1", Namespace: "ns", Resource: "machinesets", Name: "ms", Subresource: "scale", Mapped: true}},
		{"/apis/infrastructure.cluster.x-k8s.io/v1alpha1/namespaces/ns/kubevirtmachines/m/status", Path{
			Upstream: "/apis/infrastructure.cluster.hypershift.openshift.io/v1alpha1/namespaces/ns/kubevirtmachines/m/status", Changed: true,
			Kind: PathResource, Group: "infrastructure.cluster.x-k8s.io", Version: "v1alpha1", Namespace: "ns",
			Resource: "kubevirtmachines", Name: "m", Subresource: "status", Mapped: true}},
		{"/apis/cluster.x-k8s.io/v1beta2/machines", Path{
			Upstream: "/apis/" + priv + "/v1beta2/machines", Changed: true, Kind: PathResource,
			Group: "cluster.x-k8s.io", Version: "v1beta2", Resource: "machines", Mapped: true}},
		{"/apis/cluster.x-k8s.io/v1beta2/watch/namespaces/ns/machines", Path{
			Upstream: "/apis/" + priv + "/v1beta2/watch/namespaces/ns/machines", Changed: true, Kind: PathResource,
			Group: "cluster.x-k8s.io", Version: "v1beta2", Namespace: "ns", Resource: "machines", Watch: true, Mapped: true}},
		{"/apis/cluster.x-k8s.io", Path{Upstream: "/apis/" + priv, Changed: true, Kind: PathDiscoveryGroup,
			Group: "cluster.x-k8s.io", Mapped: true}},
		{"/apis/cluster.x-k8s.io/v1beta2", Path{Upstream: "/apis/" + priv + "/v1beta2", Changed: true,
			Kind: PathDiscoveryVersion, Group: "cluster.x-k8s.io", Version: "v1beta2", Mapped: true}},
		{"/apis/cluster.x-k8s.io/", Path{Upstream: "/apis/" + priv + "/", Changed: true, Kind: PathDiscoveryGroup,
			Group: "cluster.x-k8s.io", Mapped: true}},
		{"/apis", Path{Upstream: "/apis", Kind: PathDiscoveryRoot}},
		{"/api", Path{Upstream: "/api", Kind: PathDiscoveryRoot}},
		{"/api/v1", Path{Upstream: "/api/v1", Kind: PathDiscoveryVersion, Version: "v1"}},
		{"/api/v1/namespaces/ns/secrets/s", Path{Upstream: "/api/v1/namespaces/ns/secrets/s", Kind: PathResource,
			Version: "v1", Namespace: "ns", Resource: "secrets", Name: "s"}},
		{"/api/v1/namespaces/ns", Path{Upstream: "/api/v1/namespaces/ns", Kind: PathResource, Version: "v1",
			Resource: "namespaces", Name: "ns"}},
		{"/api/v1/namespaces/ns/finalize", Path{Upstream: "/api/v1/namespaces/ns/finalize", Kind: PathResource,
			Version: "v1", Resource: "namespaces", Name: "ns", Subresource: "finalize"}},
		{"/api/v1/namespaces/ns/pods/p/log", Path{Upstream: "/api/v1/namespaces/ns/pods/p/log", Kind: PathStream,
			Version: "v1", Namespace: "ns", Resource: "pods", Name: "p", Subresource: "log"}},
		{"/api/v1/namespaces/ns/pods/p/exec", Path{Upstream: "/api/v1/namespaces/ns/pods/p/exec", Kind: PathStream,
			Version: "v1", Namespace: "ns", Resource: "pods", Name: "p", Subresource: "exec"}},
		{"/api/v1/namespaces/ns/events", Path{Upstream: "/api/v1/namespaces/ns/events", Kind: PathResource,
			Version: "v1", Namespace: "ns", Resource: "events"}},
		// The closed table: other groups pass.
		{"/apis/bootstrap.cluster.x-k8s.io/v1beta1/namespaces/ns/kubeadmconfigs", Path{
			Upstream: "/apis/bootstrap.cluster.x-k8s.io/v1beta1/namespaces/ns/kubeadmconfigs", Kind: PathResource,
			Group: "bootstrap.cluster.x-k8s.io", Version: "v1beta1", Namespace: "ns", Resource: "kubeadmconfigs"}},
		// CAP-Agent's own group is not renamed (nor is its CRD).
		{"/apis/capi-provider.agent-install.openshift.io/v1beta1/namespaces/ns/agentmachines/a", Path{
			Upstream: "/apis/capi-provider.agent-install.openshift.io/v1beta1/namespaces/ns/agentmachines/a", Kind: PathResource,
			Group: "capi-provider.agent-install.openshift.io", Version: "v1beta1", Namespace: "ns", Resource: "agentmachines", Name: "a"}},
		{"/apis/apiextensions.k8s.io/v1/customresourcedefinitions/agentmachines.capi-provider.agent-install.openshift.io", Path{
			Upstream: "/apis/apiextensions.k8s.io/v1/customresourcedefinitions/agentmachines.capi-provider.agent-install.openshift.io", Kind: PathResource,
			Group: "apiextensions.k8s.io", Version: "v1", Resource: "customresourcedefinitions", Name: "agentmachines.capi-provider.agent-install.openshift.io"}},
		// A name that looks like a group is a name.
		{"/apis/cluster.x-k8s.io/v1beta2/namespaces/cluster.x-k8s.io/machines/cluster.x-k8s.io", Path{
			Upstream: "/apis/" + priv + "/v1beta2/namespaces/cluster.x-k8s.io/machines/cluster.x-k8s.io", Changed: true,
			Kind: PathResource, Group: "cluster.x-k8s.io", Version: "v1beta2", Namespace: "cluster.x-k8s.io",
			Resource: "machines", Name: "cluster.x-k8s.io", Mapped: true}},
		// Private and escaped groups are not in the view.
		{"/apis/cluster.hypershift.openshift.io/v1beta2/machines", Path{Upstream: "/apis/cluster.hypershift.openshift.io/v1beta2/machines",
			Hidden: true, Kind: PathResource, Group: priv, Version: "v1beta2", Resource: "machines"}},
		{"/apis/cluster.x-k8s.io.platform.invalid/v1beta2", Path{Upstream: "/apis/cluster.x-k8s.io.platform.invalid/v1beta2",
			Hidden: true, Kind: PathDiscoveryVersion, Group: "cluster.x-k8s.io.platform.invalid", Version: "v1beta2"}},
		// CRDs by name.
		{"/apis/apiextensions.k8s.io/v1/customresourcedefinitions/machines.cluster.x-k8s.io", Path{
			Upstream: "/apis/apiextensions.k8s.io/v1/customresourcedefinitions/machines." + priv, Changed: true,
			Kind: PathResource, Group: "apiextensions.k8s.io", Version: "v1", Resource: "customresourcedefinitions",
			Name: "machines.cluster.x-k8s.io"}},
		{"/apis/apiextensions.k8s.io/v1/customresourcedefinitions/kubevirtmachines.infrastructure.cluster.x-k8s.io/status", Path{
			Upstream: "/apis/apiextensions.k8s.io/v1/customresourcedefinitions/kubevirtmachines.infrastructure.cluster.hypershift.openshift.io/status",
			Changed:  true, Kind: PathResource, Group: "apiextensions.k8s.io", Version: "v1", Resource: "customresourcedefinitions",
			Name: "kubevirtmachines.infrastructure.cluster.x-k8s.io", Subresource: "status"}},
		{"/apis/apiextensions.k8s.io/v1/watch/customresourcedefinitions/machines.cluster.x-k8s.io", Path{
			Upstream: "/apis/apiextensions.k8s.io/v1/watch/customresourcedefinitions/machines." + priv, Changed: true,
			Kind: PathResource, Group: "apiextensions.k8s.io", Version: "v1", Resource: "customresourcedefinitions",
			Name: "machines.cluster.x-k8s.io", Watch: true}},
		{"/apis/apiextensions.k8s.io/v1/customresourcedefinitions/machines." + priv, Path{
			Upstream: "/apis/apiextensions.k8s.io/v1/customresourcedefinitions/machines." + priv, Hidden: true,
			Kind: PathResource, Group: "apiextensions.k8s.io", Version: "v1", Resource: "customresourcedefinitions",
			Name: "machines." + priv}},
		{"/apis/apiextensions.k8s.io/v1/customresourcedefinitions/machines.cluster.x-k8s.io.platform.invalid", Path{
			Upstream: "/apis/apiextensions.k8s.io/v1/customresourcedefinitions/machines.cluster.x-k8s.io.platform.invalid", Hidden: true,
			Kind: PathResource, Group: "apiextensions.k8s.io", Version: "v1", Resource: "customresourcedefinitions",
			Name: "machines.cluster.x-k8s.io.platform.invalid"}},
		{"/apis/apiextensions.k8s.io/v1/customresourcedefinitions/hostedclusters.hypershift.openshift.io", Path{
			Upstream: "/apis/apiextensions.k8s.io/v1/customresourcedefinitions/hostedclusters.hypershift.openshift.io",
			Kind:     PathResource, Group: "apiextensions.k8s.io", Version: "v1", Resource: "customresourcedefinitions",
			Name: "hostedclusters.hypershift.openshift.io"}},
		// OpenAPI.
		{"/openapi/v3", Path{Upstream: "/openapi/v3", Kind: PathOpenAPIIndex}},
		{"/openapi/v3/apis/cluster.x-k8s.io/v1beta2", Path{Upstream: "/openapi/v3/apis/" + priv + "/v1beta2", Changed: true,
			Kind: PathOpenAPIDocument, Group: "cluster.x-k8s.io", Version: "v1beta2", Mapped: true}},
		{"/openapi/v3/apis/" + priv + "/v1beta2", Path{Upstream: "/openapi/v3/apis/" + priv + "/v1beta2", Hidden: true,
			Kind: PathOpenAPIDocument, Group: priv, Version: "v1beta2"}},
		{"/openapi/v3/api/v1", Path{Upstream: "/openapi/v3/api/v1", Kind: PathOpenAPIDocument, Version: "v1"}},
		{"/openapi/v2", Path{Upstream: "/openapi/v2", Kind: PathOpenAPIV2}},
		{"/openapi/v2/x", Path{Upstream: "/openapi/v2/x"}},
		{"/healthz", Path{Upstream: "/healthz"}},
		{"/", Path{Upstream: "/"}},
	}
	for _, c := range cases {
		got, err := tr.RequestPath(c.in)
		if err != nil {
			t.Errorf("%s: %v", c.in, err)
			continue
		}
		if got != c.want {
			t.Errorf("%s:\n got %+v\nwant %+v", c.in, got, c.want)
		}
	}
	for _, bad := range []string{"", "apis/cluster.x-k8s.io", "/apis//cluster.x-k8s.io/v1beta2", "/apis/./cluster.x-k8s.io",
		"/apis/x/../cluster.x-k8s.io/v1beta2/machines", "/apis/cluster.x-k8s.io/v1beta2/machines//m"} {
		if _, err := tr.RequestPath(bad); ReasonOf(err) != ReasonInvalidPath {
			t.Errorf("%q: err = %v, want %s", bad, err, ReasonInvalidPath)
		}
	}
}

func TestPathContext(t *testing.T) {
	p, _ := tr.RequestPath("/apis/apiextensions.k8s.io/v1/customresourcedefinitions")
	if !p.Context().CRD {
		t.Error("CRD collection not recognised")
	}
	p, _ = tr.RequestPath("/apis/cluster.x-k8s.io/v1beta2/machines")
	if p.Context().CRD {
		t.Error("machines taken for CRDs")
	}
}

func TestResponsePath(t *testing.T) {
	for in, want := range map[string]string{
		"/apis/cluster.hypershift.openshift.io/v1beta2/namespaces/ns/machines/m":                           "/apis/cluster.x-k8s.io/v1beta2/namespaces/ns/machines/m",
		"/apis/cluster.x-k8s.io/v1beta2/machines":                                                          "/apis/cluster.x-k8s.io.platform.invalid/v1beta2/machines",
		"/openapi/v3/apis/ipam.cluster.hypershift.openshift.io/v1beta2?hash=AB":                            "/openapi/v3/apis/ipam.cluster.x-k8s.io/v1beta2?hash=AB",
		"/apis/apiextensions.k8s.io/v1/customresourcedefinitions/machines.cluster.hypershift.openshift.io": "/apis/apiextensions.k8s.io/v1/customresourcedefinitions/machines.cluster.x-k8s.io",
		"/apis/apps/v1/deployments":                                                                        "/apis/apps/v1/deployments",
		"/api/v1/pods":                                                                                     "/api/v1/pods",
		"/openapi/v3/apis/apps/v1":                                                                         "/openapi/v3/apis/apps/v1",
		"":                                                                                                 "",
	} {
		if got := tr.ResponsePath(in); got != want {
			t.Errorf("ResponsePath(%q) = %q, want %q", in, got, want)
		}
	}
}

func TestRequestQuery(t *testing.T) {
	crds, _ := tr.RequestPath("/apis/apiextensions.k8s.io/v1/customresourcedefinitions")
	events, _ := tr.RequestPath("/api/v1/namespaces/ns/events")
	newEvents, _ := tr.RequestPath("/apis/events.k8s.io/v1/events")
	machines, _ := tr.RequestPath("/apis/cluster.x-k8s.io/v1beta2/machines")
	cases := []struct {
		p        Path
		in, want string
	}{
		{crds, "fieldSelector=metadata.name%3Dmachines.cluster.x-k8s.io&watch=true",
			"fieldSelector=metadata.name%3Dmachines.cluster.hypershift.openshift.io&watch=true"},
		{crds, "fieldSelector=metadata.name=machines.cluster.x-k8s.io", "fieldSelector=metadata.name%3Dmachines.cluster.hypershift.openshift.io"},
		{crds, "fieldSelector=metadata.name%3D%3Dmachines.cluster.x-k8s.io.platform.invalid",
			"fieldSelector=metadata.name%3D%3Dmachines.cluster.x-k8s.io"},
		{crds, "fieldSelector=metadata.name%21%3Dhostedclusters.hypershift.openshift.io", "fieldSelector=metadata.name%21%3Dhostedclusters.hypershift.openshift.io"},
		{events, "fieldSelector=involvedObject.kind%3DMachine%2CinvolvedObject.apiVersion%3Dcluster.x-k8s.io%2Fv1beta2&limit=500",
			"fieldSelector=involvedObject.kind%3DMachine%2CinvolvedObject.apiVersion%3Dcluster.hypershift.openshift.io%2Fv1beta2&limit=500"},
		{newEvents, "fieldSelector=regarding.apiVersion%3Dcluster.x-k8s.io%2Fv1beta2", "fieldSelector=regarding.apiVersion%3Dcluster.hypershift.openshift.io%2Fv1beta2"},
		// Selectors, continue tokens and resource versions are never touched.
		{machines, "labelSelector=cluster.x-k8s.io%2Fcluster-name%3Dhc1&fieldSelector=metadata.name%3Dcluster.x-k8s.io&continue=abc&resourceVersion=5",
			"labelSelector=cluster.x-k8s.io%2Fcluster-name%3Dhc1&fieldSelector=metadata.name%3Dcluster.x-k8s.io&continue=abc&resourceVersion=5"},
		{crds, "labelSelector=cluster.x-k8s.io%2Fprovider&continue=eyJjbHVzdGVyLngtazhzLmlvIjoxfQ", "labelSelector=cluster.x-k8s.io%2Fprovider&continue=eyJjbHVzdGVyLngtazhzLmlvIjoxfQ"},
		{events, "fieldSelector=involvedObject.name%3Dcluster.x-k8s.io%2Fv1", "fieldSelector=involvedObject.name%3Dcluster.x-k8s.io%2Fv1"},
		{crds, "", ""},
	}
	for _, c := range cases {
		got, err := tr.RequestQuery(c.p, c.in)
		if err != nil {
			t.Errorf("%q: %v", c.in, err)
			continue
		}
		if got != c.want {
			t.Errorf("RequestQuery(%s, %q)\n got %q\nwant %q", c.p.Resource, c.in, got, c.want)
		}
	}
	if _, err := tr.RequestQuery(crds, "fieldSelector=%zz"); ReasonOf(err) != ReasonInvalidQuery {
		t.Errorf("bad escape: %v", err)
	}
}

func TestFieldSelectorEscapes(t *testing.T) {
	got, err := tr.requestFieldSelector(`metadata.name=a\,b.cluster.x-k8s.io,metadata.name=machines.cluster.x-k8s.io`, true)
	if err != nil {
		t.Fatal(err)
	}
	if want := `metadata.name=a\,b.cluster.hypershift.openshift.io,metadata.name=machines.cluster.hypershift.openshift.io`; got != want {
		t.Errorf("got %q, want %q", got, want)
	}
}
