package hubtest

import (
	"encoding/json"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	apidiscoveryv2 "k8s.io/api/apidiscovery/v2"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"
	clientcmdapi "k8s.io/client-go/tools/clientcmd/api"
	"sigs.k8s.io/controller-runtime/pkg/client/apiutil"

	"github.com/dcm-sp/acm-cluster-sp/internal/capiprivate/proxy"
	"github.com/dcm-sp/acm-cluster-sp/internal/devtest/capi/capihub"
	"github.com/dcm-sp/acm-cluster-sp/internal/devtest/localhub"
)

const aggregatedAccept = "application/json;g=apidiscovery.k8s.io;v=v2;as=APIGroupDiscoveryList,application/json;g=apidiscovery.k8s.io;v=v2beta1;as=APIGroupDiscoveryList,application/json"

// Discovery through the proxy shows exactly one cluster.x-k8s.io, with the private CRDs' versions, in v1 and
// aggregated discovery, where the platform's entry was; ETags round-trip to 304; private and escaped paths 404.
func TestS5Discovery(t *testing.T) {
	ps := startProxy(t, proxy.Options{})
	tok := env.AdminToken

	// v1 discovery, upstream and through the proxy.
	_, _, up := rawRequest(t, "GET", hubURL()+"/apis", tok, nil, "Accept", "application/json")
	code, _, body := rawRequest(t, "GET", ps.URL+"/apis", tok, nil, "Accept", "application/json")
	if code != 200 {
		t.Fatalf("/apis: %d %s", code, body)
	}
	var upList, list metav1.APIGroupList
	if err := json.Unmarshal(up, &upList); err != nil {
		t.Fatal(err)
	}
	if err := json.Unmarshal(body, &list); err != nil {
		t.Fatal(err)
	}
	names := func(l metav1.APIGroupList) []string {
		var out []string
		for _, g := range l.Groups {
			out = append(out, g.Name)
		}
		return out
	}
	for _, std := range []string{stdCore, stdInfra, stdIPAM, stdAddons} {
		if n := count(names(list), std); n != 1 {
			t.Errorf("%s appears %d times", std, n)
		}
		if n := count(names(list), privateOf(std)); n != 0 {
			t.Errorf("private %s visible", privateOf(std))
		}
	}
	// The order a client sees: upstream's, private entries removed, each platform entry standing for its private twin.
	var want []string
	for _, g := range names(upList) {
		if !strings.HasSuffix(g, "cluster.hypershift.openshift.io") {
			want = append(want, g)
		}
	}
	if !slices.Equal(names(list), want) {
		t.Errorf("group order\n got %v\nwant %v", names(list), want)
	}
	core := list.Groups[slices.Index(names(list), stdCore)]
	if got := versionsOf(core); !slices.Equal(got, []string{"v1beta2", "v1beta1"}) || core.PreferredVersion.GroupVersion != stdCore+"/v1beta2" {
		t.Errorf("cluster.x-k8s.io versions %v, preferred %s (the private CRD serves v1beta2, v1beta1; the platform's only v1beta2)", got, core.PreferredVersion.GroupVersion)
	}
	if n := ps.metric(t, "capi_private_proxy_objects_filtered_total", "kind", "discovery"); n != 4 {
		t.Errorf("filtered discovery entries %v, want 4 (one platform entry per mapped group)", n)
	}

	// Aggregated discovery, ETag and If-None-Match.
	code, hdr, body := rawRequest(t, "GET", ps.URL+"/apis", tok, nil, "Accept", aggregatedAccept)
	if code != 200 || !strings.Contains(hdr.Get("Content-Type"), "as=APIGroupDiscoveryList") {
		t.Fatalf("aggregated: %d %s", code, hdr.Get("Content-Type"))
	}
	var agg apidiscoveryv2.APIGroupDiscoveryList
	if err := json.Unmarshal(body, &agg); err != nil {
		t.Fatal(err)
	}
	var aggNames []string
	for _, g := range agg.Items {
		aggNames = append(aggNames, g.Name)
		if g.Name == stdCore {
			var vs []string
			for _, v := range g.Versions {
				vs = append(vs, v.Version)
				for _, r := range v.Resources {
					if r.ResponseKind != nil && r.ResponseKind.Group != stdCore {
						t.Errorf("%s responseKind group %q", r.Resource, r.ResponseKind.Group)
					}
				}
			}
			if !slices.Equal(vs, []string{"v1beta2", "v1beta1"}) {
				t.Errorf("aggregated cluster.x-k8s.io versions %v", vs)
			}
		}
	}
	if count(aggNames, stdCore) != 1 || count(aggNames, privCore) != 0 {
		t.Errorf("aggregated groups %v", aggNames)
	}
	etag := hdr.Get("Etag")
	if !strings.HasSuffix(strings.Trim(etag, `"`), "-"+hashOf()) {
		t.Errorf("ETag %q lacks the mapping hash", etag)
	}
	code, hdr, _ = rawRequest(t, "GET", ps.URL+"/apis", tok, nil, "Accept", aggregatedAccept, "If-None-Match", etag)
	if code != http.StatusNotModified || hdr.Get("Etag") != etag {
		t.Errorf("If-None-Match: %d, ETag %q", code, hdr.Get("Etag"))
	}

	// Group-version documents.
	code, _, body = rawRequest(t, "GET", ps.URL+"/apis/cluster.x-k8s.io/v1beta1", tok, nil)
	var rl metav1.APIResourceList
	if err := json.Unmarshal(body, &rl); code != 200 || err != nil || rl.GroupVersion != stdCore+"/v1beta1" {
		t.Fatalf("/apis/cluster.x-k8s.io/v1beta1: %d %s", code, body)
	}

	// Hidden: private and escaped groups, private and platform CRD names.
	for _, p := range []string{"/apis/cluster.hypershift.openshift.io/v1beta2/machines", "/apis/cluster.hypershift.openshift.io",
		"/apis/cluster.x-k8s.io.platform.invalid/v1beta2/namespaces/openshift-cluster-api/machines",
		"/apis/apiextensions.k8s.io/v1/customresourcedefinitions/machines.cluster.hypershift.openshift.io",
		"/apis/apiextensions.k8s.io/v1/customresourcedefinitions/machines.cluster.x-k8s.io.platform.invalid",
		"/openapi/v3/apis/cluster.hypershift.openshift.io/v1beta2"} {
		if code, _, body := rawRequest(t, "GET", ps.URL+p, tok, nil); code != 404 {
			t.Errorf("GET %s: %d %s, want 404", p, code, body)
		}
	}
	if n := ps.metric(t, "capi_private_proxy_rejected_total", "reason", "hidden"); n != 6 {
		t.Errorf("rejected hidden %v, want 6", n)
	}

	// A CRD by its standard name is the private CRD, renamed.
	code, _, body = rawRequest(t, "GET", ps.URL+"/apis/apiextensions.k8s.io/v1/customresourcedefinitions/machines.cluster.x-k8s.io", tok, nil)
	var crd struct {
		Metadata struct {
			Name   string            `json:"name"`
			Labels map[string]string `json:"labels"`
		} `json:"metadata"`
		Spec struct {
			Group    string `json:"group"`
			Versions []struct {
				Name string `json:"name"`
			} `json:"versions"`
		} `json:"spec"`
	}
	if err := json.Unmarshal(body, &crd); code != 200 || err != nil {
		t.Fatalf("CRD: %d %s", code, body)
	}
	if crd.Metadata.Name != "machines.cluster.x-k8s.io" || crd.Spec.Group != stdCore || len(crd.Spec.Versions) != 2 ||
		crd.Metadata.Labels["hypershift.openshift.io/private-capi"] != "true" {
		t.Errorf("CRD %s group %s versions %d labels %v", crd.Metadata.Name, crd.Spec.Group, len(crd.Spec.Versions), crd.Metadata.Labels)
	}

	// OpenAPI v3: the index names the standard group only, its document resolves.
	code, _, body = rawRequest(t, "GET", ps.URL+"/openapi/v3", tok, nil)
	var index struct {
		Paths map[string]struct {
			URL string `json:"serverRelativeURL"`
		} `json:"paths"`
	}
	if err := json.Unmarshal(body, &index); code != 200 || err != nil {
		t.Fatalf("openapi index: %d %s", code, body)
	}
	entry, ok := index.Paths["apis/cluster.x-k8s.io/v1beta2"]
	if !ok || !strings.HasPrefix(entry.URL, "/openapi/v3/apis/cluster.x-k8s.io/v1beta2?hash=") {
		t.Fatalf("openapi index entry %+v", entry)
	}
	for k := range index.Paths {
		if strings.Contains(k, "hypershift.openshift.io/") && strings.Contains(k, "cluster.") {
			t.Errorf("openapi index key %s", k)
		}
	}
	code, _, body = rawRequest(t, "GET", ps.URL+entry.URL, tok, nil)
	if code != 200 || !strings.Contains(string(body), `"io.x-k8s.cluster.v1beta2.Machine"`) || strings.Contains(string(body), "io.openshift.hypershift.cluster") {
		t.Errorf("openapi document: %d, %d bytes", code, len(body))
	}

	// controller-runtime's dynamic RESTMapper through the proxy.
	cfg := ps.config(tok)
	hc, err := rest.HTTPClientFor(cfg)
	if err != nil {
		t.Fatal(err)
	}
	mapper, err := apiutil.NewDynamicRESTMapper(cfg, hc)
	if err != nil {
		t.Fatal(err)
	}
	for _, gk := range []schema.GroupKind{{Group: stdCore, Kind: "Machine"}, {Group: stdInfra, Kind: "KubevirtMachine"}, {Group: stdIPAM, Kind: "IPAddress"}} {
		m, err := mapper.RESTMapping(gk)
		if err != nil {
			t.Errorf("RESTMapping %s: %v", gk, err)
			continue
		}
		if m.Resource.Group != gk.Group {
			t.Errorf("RESTMapping %s: %s", gk, m.Resource)
		}
	}
}

func count(s []string, v string) int {
	n := 0
	for _, x := range s {
		if x == v {
			n++
		}
	}
	return n
}

func versionsOf(g metav1.APIGroup) []string {
	var out []string
	for _, v := range g.Versions {
		out = append(out, v.Version)
	}
	return out
}

func hashOf() string { return groupsHash }

// kubectl runs kubectl with a kubeconfig for server and token, a private cache dir, and returns its output.
func kubectl(t *testing.T, ps *proxyServer, token string, args ...string) (string, error) {
	t.Helper()
	dir := t.TempDir()
	cfg := clientcmdapi.NewConfig()
	cfg.Clusters["c"] = &clientcmdapi.Cluster{Server: ps.URL, CertificateAuthorityData: ps.CA}
	cfg.AuthInfos["u"] = &clientcmdapi.AuthInfo{Token: token}
	cfg.Contexts["c"] = &clientcmdapi.Context{Cluster: "c", AuthInfo: "u"}
	cfg.CurrentContext = "c"
	kc := filepath.Join(dir, "kubeconfig")
	if err := clientcmd.WriteToFile(*cfg, kc); err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command(filepath.Join(localhub.DefaultBinDir(), "kubectl"), append([]string{"--kubeconfig", kc, "--cache-dir", filepath.Join(dir, "cache")}, args...)...)
	cmd.Env = append(os.Environ(), "HOME="+dir)
	out, err := cmd.CombinedOutput()
	return string(out), err
}

// kubectl through a proxy kubeconfig: api-resources, get (the platform's Machine stays invisible), explain,
// apply --server-side with a conflict, get crd by its standard name. Over HTTPS: clientcmd sends a kubeconfig's
// credentials only to https servers (client_config.go: "only try to read the auth information if we are secure").
func TestS5Kubectl(t *testing.T) {
	ps := startProxyTLS(t, proxy.Options{})
	ns := env.NewNamespace(t, "s5")
	run := func(args ...string) string {
		t.Helper()
		out, err := kubectl(t, ps, env.AdminToken, args...)
		if err != nil {
			t.Fatalf("kubectl %s: %v\n%s", strings.Join(args, " "), err, out)
		}
		return out
	}

	out := run("api-resources", "--api-group", stdCore, "-o", "name")
	for _, r := range []string{"machines.cluster.x-k8s.io", "machinedeployments.cluster.x-k8s.io", "clusters.cluster.x-k8s.io"} {
		if !strings.Contains(out, r) {
			t.Errorf("api-resources lacks %s:\n%s", r, out)
		}
	}
	if out := run("api-resources"); strings.Contains(out, "hypershift.openshift.io/v1beta") && strings.Contains(out, "cluster.hypershift") {
		t.Errorf("api-resources shows a private group:\n%s", out)
	}

	manifest := filepath.Join(t.TempDir(), "machine.yaml")
	yaml := "apiVersion: cluster.x-k8s.io/v1beta2\nkind: Machine\nmetadata:\n  name: applied\n  namespace: " + ns + "\n  labels:\n    cluster.x-k8s.io/cluster-name: c1\nspec:\n  clusterName: c1\n  bootstrap:\n    dataSecretName: bootstrap\n  infrastructureRef:\n    apiGroup: infrastructure.cluster.x-k8s.io\n    kind: KubevirtMachine\n    name: applied\n"
	if err := os.WriteFile(manifest, []byte(yaml), 0o600); err != nil {
		t.Fatal(err)
	}
	if out := run("apply", "--server-side", "-f", manifest); !strings.Contains(out, "machine.cluster.x-k8s.io/applied serverside-applied") {
		t.Errorf("apply: %s", out)
	}
	// A second manager changing an owned field conflicts; --force-conflicts takes it.
	changed := strings.Replace(yaml, "dataSecretName: bootstrap", "dataSecretName: other", 1)
	if err := os.WriteFile(manifest, []byte(changed), 0o600); err != nil {
		t.Fatal(err)
	}
	if out, err := kubectl(t, ps, env.AdminToken, "apply", "--server-side", "--field-manager", "intruder", "-f", manifest); err == nil || !strings.Contains(out, "conflict") {
		t.Errorf("conflicting apply: %v\n%s", err, out)
	}
	run("apply", "--server-side", "--field-manager", "intruder", "--force-conflicts", "-f", manifest)

	out = run("get", "machines.cluster.x-k8s.io", "-A", "-o", "custom-columns=NS:.metadata.namespace,NAME:.metadata.name,API:.apiVersion,INFRA:.spec.infrastructureRef.apiGroup,SECRET:.spec.bootstrap.dataSecretName")
	found := false
	for _, line := range strings.Split(out, "\n") {
		found = found || slices.Equal(strings.Fields(line), []string{ns, "applied", "cluster.x-k8s.io/v1beta2", "infrastructure.cluster.x-k8s.io", "other"})
	}
	if !found {
		t.Errorf("get -A:\n%s", out)
	}
	if strings.Contains(out, capihub.PlatformMachine) {
		t.Errorf("the platform's Machine is visible:\n%s", out)
	}
	// The table form (kubectl's default output asks for as=Table).
	if out := run("get", "machines.cluster.x-k8s.io", "-n", ns); !strings.Contains(out, "applied") {
		t.Errorf("get (Table):\n%s", out)
	}
	if out := run("explain", "machines.cluster.x-k8s.io.spec.infrastructureRef"); !strings.Contains(out, "GROUP:      cluster.x-k8s.io") || !strings.Contains(out, "apiGroup") {
		t.Errorf("explain:\n%s", out)
	}
	if out := run("get", "crd", "machines.cluster.x-k8s.io", "-o", "jsonpath={.spec.group} {.metadata.labels.hypershift\\.openshift\\.io/private-capi}"); out != "cluster.x-k8s.io true" {
		t.Errorf("get crd: %q", out)
	}
	out = run("get", "crd", "-o", "name")
	if strings.Contains(out, "hypershift.openshift.io") && strings.Contains(out, "cluster.hypershift") || count(strings.Fields(out), "customresourcedefinition.apiextensions.k8s.io/machines.cluster.x-k8s.io") != 1 {
		t.Errorf("get crd:\n%s", out)
	}
	// Stored private.
	stored, err := direct(t).Resource(gvr(privCore, "v1beta2", "machines")).Namespace(ns).Get(t.Context(), "applied", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if got := nested(t, stored, "spec", "infrastructureRef", "apiGroup"); got != privInfra {
		t.Errorf("stored infrastructureRef.apiGroup %q", got)
	}
	for _, mf := range stored.GetManagedFields() {
		if !strings.HasPrefix(mf.APIVersion, privCore+"/") {
			t.Errorf("stored managedFields apiVersion %q", mf.APIVersion)
		}
	}
}
