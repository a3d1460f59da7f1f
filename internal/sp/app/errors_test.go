package app

import (
	"context"
	"fmt"
	"maps"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	hyperv1 "github.com/openshift/hypershift/api/hypershift/v1beta1"
	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"k8s.io/utils/ptr"
	clusterv1 "open-cluster-management.io/api/cluster/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/dcm-sp/acm-cluster-sp/internal/devtest/sp/faultproxy"
	"github.com/dcm-sp/acm-cluster-sp/internal/sp/clusters"
	"github.com/dcm-sp/acm-cluster-sp/internal/sp/meta"
	"github.com/dcm-sp/acm-cluster-sp/internal/sp/provision"
	"github.com/dcm-sp/acm-cluster-sp/internal/sp/render"
	"github.com/dcm-sp/acm-cluster-sp/pkg/api"
)

// Every error class answers with an RFC 7807 problem+json body naming the cause.
func TestErrorClasses(t *testing.T) {
	t.Parallel()
	sp := shared(t)
	base := sp.URL + "/api/v1alpha1/clusters"
	ok := kubevirtBody(uniqueName("err"), 1)
	cases := []struct {
		name        string
		method, url string
		ctype       string
		body        string
		want        int
		detail      string
	}{
		{"malformed JSON", "POST", base, "application/json", `{"spec": {`, 400, "not valid JSON"},
		{"not an object", "POST", base, "application/json", `[1]`, 400, "JSON object"},
		{"missing fields", "POST", base, "application/json", `{"spec":{}}`, 400, "spec.metadata.name: is required"},
		{"bad field", "POST", base, "application/json", `{"spec":{"version":"1.30","metadata":{"name":"x"},"nodes":{"workers":{"count":0}}}}`, 400, "spec.nodes.workers.count: must be at least 1"},
		{"wrong content type", "POST", base, "text/plain", ok, 415, "application/json"},
		{"no content type", "POST", base, "", ok, 415, "application/json"},
		{"body over 1 MiB", "POST", base, "application/json", `{"spec":{"x":"` + strings.Repeat("a", 1<<20) + `"}}`, 413, "exceeds"},
		{"invalid id", "POST", base + "?id=Bad_ID", "application/json", ok, 400, `"id"`},
		{"reserved id", "POST", base + "?id=health", "application/json", ok, 400, "reserved"},
		{"version not a version", "POST", base, "application/json", `{"version":"latest","metadata":{"name":"vx"}}`, 400, "version"},
		{"unknown version", "POST", base, "application/json", `{"version":"1.40","metadata":{"name":"vx"}}`, 422, "Kubernetes 1.40"},
		{"missing patch", "POST", base, "application/json", `{"version":"4.17.4","metadata":{"name":"vx"}}`, 422, "available 4.17 patches: 4.17.29, 4.17.12, 4.17.3"},
		{"release candidate only", "POST", base, "application/json", `{"version":"4.21","metadata":{"name":"vx"}}`, 422, "OpenShift 4.21"},
		{"unsupported platform", "POST", base, "application/json", `{"version":"1.30","metadata":{"name":"vx"},"providerHints":{"acm":{"platform":"aws"}}}`, 422, `platform "aws" is not supported`},
		{"provisioning type", "POST", base, "application/json", `{"version":"1.30","metadata":{"name":"vx"},"provider_hints":{"acm":{"provisioning_type":"hive"}}}`, 422, "hive"},
		{"too few agents", "POST", base, "application/json", `{"version":"1.30","metadata":{"name":"bm-many"},"nodes":{"workers":{"count":50}},"provider_hints":{"acm":{"platform":"baremetal","base_domain":"example.com","infra_env":"production-infraenv"}}}`, 422, "need 50 eligible Agents in InfraEnv production-infraenv"},
		{"agents too small", "POST", base, "application/json", `{"version":"1.30","metadata":{"name":"bm-big"},"nodes":{"workers":{"count":1,"cpu":512}},"provider_hints":{"acm":{"platform":"baremetal","base_domain":"example.com","infra_env":"production-infraenv"}}}`, 422, "too few CPUs"},
		{"unknown infraenv", "POST", base, "application/json", `{"version":"1.30","metadata":{"name":"bm-x"},"provider_hints":{"acm":{"platform":"baremetal","base_domain":"example.com","infra_env":"nowhere"}}}`, 422, "InfraEnv nowhere not found"},
		{"baremetal without domain", "POST", base, "application/json", `{"version":"1.30","metadata":{"name":"bm-y"},"provider_hints":{"acm":{"platform":"baremetal","infra_env":"production-infraenv"}}}`, 400, "base_domain"},
		{"get unknown", "GET", base + "/no-such-cluster", "", "", 404, "cluster no-such-cluster not found"},
		{"get bad id", "GET", base + "/Bad_Id", "", "", 400, "clusterId"},
		{"delete unknown", "DELETE", base + "/no-such-cluster", "", "", 404, "not found"},
		{"page size zero", "GET", base + "?max_page_size=0", "", "", 400, "max_page_size"},
		{"page size not a number", "GET", base + "?max_page_size=ten", "", "", 400, "max_page_size"},
		{"tampered token", "GET", base + "?page_token=bm90LWEtdG9rZW4", "", "", 400, "page_token"},
		{"unknown route", "GET", sp.URL + "/api/v1alpha1/nodes", "", "", 404, "no route"},
		{"unknown method", "PUT", base, "application/json", ok, 405, "PUT"},
		{"patch item as JSON", "PATCH", base + "/x", "application/json", "{}", 415, "application/merge-patch+json"},
		{"patch item of no cluster", "PATCH", base + "/x", "application/merge-patch+json", `{"spec":{}}`, 404, "cluster x not found"},
		// JSON syntax is checked by the generated server, before the handler; then the cluster is looked up before the
		// body is decoded: an unknown id is 404 whatever the (well-formed) body.
		{"patch with malformed JSON", "PATCH", base + "/x", "application/merge-patch+json", `{"spec":`, 400, "request body is not valid JSON"},
		{"patch item of no cluster, body no patch", "PATCH", base + "/x", "application/merge-patch+json", `[1]`, 404, "cluster x not found"},
		// Bad input is a clear 400 naming the field, never a 500.
		{"memory overflow", "POST", base, "application/json", sized("memory", "99999999TB"), 400, "spec.nodes.workers.memory"},
		{"memory 1e400", "POST", base, "application/json", sized("memory", "1e400"), 400, "spec.nodes.workers.memory"},
		{"storage 10^22 exabytes", "POST", base, "application/json", sized("storage", "9999999999999999999999E"), 400, "spec.nodes.workers.storage"},
		{"memory in millibytes", "POST", base, "application/json", sized("memory", "1m"), 400, "spec.nodes.workers.memory"},
		{"unknown field", "POST", base, "application/json", `{"spec":{"version":"1.30","metadata":{"name":"uf"},"pullSecret":"eyJ9"}}`, 400, "spec.pullSecret: unknown field"},
		{"base domain not a domain", "POST", base, "application/json", `{"version":"1.30","metadata":{"name":"bd"},"provider_hints":{"acm":{"base_domain":"10.0.0.1"}}}`, 400, "base_domain"},
		{"malformed query", "GET", base + "?page_token=%zz", "", "", 400, "malformed query string"},
		{"undecodable page token", "GET", base + "?page_token=%25%25%25", "", "", 400, "page_token"},
		{"two page sizes", "GET", base + "?max_page_size=1&max_page_size=2", "", "", 400, "max_page_size"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			code, h, body := do(t, c.method, c.url, c.ctype, []byte(c.body))
			assertProblem(t, code, h, body, c.want, c.detail)
		})
	}
}

func sized(key, value string) string {
	return fmt.Sprintf(`{"spec":{"version":"1.30","metadata":{"name":"sz"},"nodes":{"workers":{"count":1,%q:%q}}}}`, key, value)
}

// A rendered object the hub refuses as Invalid — here by a platform team's ValidatingAdmissionPolicy — is a 422
// carrying the hub's reason, not a 500, and leaves nothing behind.
func TestHubRejectionIs422(t *testing.T) {
	t.Parallel()
	sp := shared(t)
	ctx := context.Background()
	policy := &admissionregistrationv1.ValidatingAdmissionPolicy{
		ObjectMeta: metav1.ObjectMeta{Name: "no-vap-denied-clusters"},
		Spec: admissionregistrationv1.ValidatingAdmissionPolicySpec{
			FailurePolicy: ptr.To(admissionregistrationv1.Fail),
			MatchConstraints: &admissionregistrationv1.MatchResources{ResourceRules: []admissionregistrationv1.NamedRuleWithOperations{{
				RuleWithOperations: admissionregistrationv1.RuleWithOperations{Operations: []admissionregistrationv1.OperationType{admissionregistrationv1.Create},
					Rule: admissionregistrationv1.Rule{APIGroups: []string{"hypershift.openshift.io"}, APIVersions: []string{"*"}, Resources: []string{"hostedclusters"}}}}}},
			Validations: []admissionregistrationv1.Validation{{Expression: "!object.metadata.name.startsWith('vap-denied')", Message: "cluster names starting with vap-denied are reserved by policy"}},
		},
	}
	binding := &admissionregistrationv1.ValidatingAdmissionPolicyBinding{
		ObjectMeta: metav1.ObjectMeta{Name: "no-vap-denied-clusters"},
		Spec:       admissionregistrationv1.ValidatingAdmissionPolicyBindingSpec{PolicyName: policy.Name, ValidationActions: []admissionregistrationv1.ValidationAction{admissionregistrationv1.Deny}},
	}
	cs, err := kubernetes.NewForConfig(testHub.Config)
	if err != nil {
		t.Fatal(err)
	}
	vaps := cs.AdmissionregistrationV1()
	if _, err := vaps.ValidatingAdmissionPolicies().Create(ctx, policy, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	if _, err := vaps.ValidatingAdmissionPolicyBindings().Create(ctx, binding, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		_ = vaps.ValidatingAdmissionPolicyBindings().Delete(context.Background(), binding.Name, metav1.DeleteOptions{})
		_ = vaps.ValidatingAdmissionPolicies().Delete(context.Background(), policy.Name, metav1.DeleteOptions{})
	})
	// The policy takes effect asynchronously: retry (with a new name each time) until the hub enforces it.
	var code int
	var h http.Header
	var body []byte
	var name, id string
	waitFor(t, 30*time.Second, "the admission policy enforced", func() bool {
		name = uniqueName("vap-denied")
		id = "inst-" + name
		code, h, body = do(t, http.MethodPost, sp.URL+"/api/v1alpha1/clusters?id="+id, "application/json", []byte(kubevirtBody(name, 1)))
		if code == http.StatusCreated {
			if c, _, _ := do(t, http.MethodDelete, sp.URL+"/api/v1alpha1/clusters/"+id, "", nil); c != http.StatusNoContent {
				t.Fatalf("delete before the policy took effect: %d", c)
			}
		}
		return code != http.StatusCreated
	})
	assertProblem(t, code, h, body, http.StatusUnprocessableEntity, "cluster names starting with vap-denied are reserved by policy")
	waitFor(t, 60*time.Second, "rollback", func() bool { return len(leftovers(t, id, name)) == 0 })
}

// Metric labels come from fixed sets: an invented HTTP method is "other", an unknown path "unmatched".
func TestMetricLabelsBounded(t *testing.T) {
	t.Parallel()
	sp := shared(t)
	for _, m := range []string{"BREW", "PROPFIND-" + uniqueName("x")} {
		req, _ := http.NewRequest(m, sp.URL+"/api/v1alpha1/"+uniqueName("nowhere"), nil)
		resp, err := testHTTP.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
	}
	mfs, err := sp.App.Registry.Gather()
	if err != nil {
		t.Fatal(err)
	}
	for _, mf := range mfs {
		if mf.GetName() != "acm_sp_http_requests_total" {
			continue
		}
		for _, m := range mf.GetMetric() {
			for _, l := range m.GetLabel() {
				if l.GetName() == "method" && strings.HasPrefix(l.GetValue(), "PROPFIND") || l.GetValue() == "BREW" || strings.Contains(l.GetValue(), "nowhere") {
					t.Fatalf("unbounded label %s=%s", l.GetName(), l.GetValue())
				}
			}
		}
	}
}

// A page size above 100 is clamped, not refused.
func TestPageSizeClamped(t *testing.T) {
	t.Parallel()
	sp := shared(t)
	resp, err := sp.Client.ListClustersWithResponse(context.Background(), &api.ListClustersParams{MaxPageSize: ptr.To[int32](1000)})
	if err != nil || resp.StatusCode() != http.StatusOK {
		t.Fatalf("%v %d %s", err, resp.StatusCode(), resp.Body)
	}
}

// Fields that belong to the resource (status, id, kubeconfig…) are ignored when a client sends them back.
func TestReadOnlyFieldsIgnored(t *testing.T) {
	t.Parallel()
	sp := shared(t)
	name := uniqueName("ro")
	body := fmt.Sprintf(`{"spec":{"version":"1.30","metadata":{"name":%q},"status":"READY","id":"forged","kubeconfig":"Zm9yZ2Vk","api_endpoint":"https://evil"}}`, name)
	code, c, raw := sp.create(t, "", body)
	if code != http.StatusCreated || !justCreated(c.Status) || c.Id == "forged" || ptr.Deref(c.Kubeconfig, "") != "" || strings.Contains(string(raw), "forged") {
		t.Fatalf("%d %s", code, raw)
	}
}

// A failure after the first object exists rolls back everything this request created: here a NodePool of the
// same name, made by someone else, collides after the Secrets and the HostedCluster were created.
func TestCreateRollsBack(t *testing.T) {
	t.Parallel()
	sp := shared(t)
	name := uniqueName("rb")
	squatter := &hyperv1.NodePool{
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: "clusters"},
		Spec: hyperv1.NodePoolSpec{ClusterName: "someone-else", Replicas: ptr.To[int32](1), Release: hyperv1.Release{Image: "quay.io/openshift-release-dev/ocp-release:4.17.12-multi"},
			Management: hyperv1.NodePoolManagement{UpgradeType: hyperv1.UpgradeTypeReplace}, Platform: hyperv1.NodePoolPlatform{Type: hyperv1.NonePlatform}},
	}
	if err := testHub.Client.Create(context.Background(), squatter); err != nil {
		t.Fatal(err)
	}
	id := "inst-" + name
	code, h, body := do(t, http.MethodPost, sp.URL+"/api/v1alpha1/clusters?id="+id, "application/json", []byte(kubevirtBody(name, 1)))
	assertProblem(t, code, h, body, http.StatusConflict, name)
	waitFor(t, 90*time.Second, "rollback", func() bool { // 10 s ran out under make stress
		left := leftovers(t, id, name)
		return len(left) == 0
	})
	if code, _ := sp.get(t, id); code != http.StatusNotFound {
		t.Fatalf("GET after rollback: %d", code)
	}
}

// A bare-metal create refused after it reserved an Agent rolls back on the real hub too: every write to an Agent
// other than the first one reserved is refused (403, as RBAC or an admission webhook would), and the answer is an
// error with nothing of the instance left — no object, no Agent still labelled for it, and nothing remembered.
func TestCreateBareMetalRollsBackItsAgents(t *testing.T) {
	t.Parallel()
	cfg := testConfig("faults")
	cfg.ProviderName = "sp-bm-rollback"
	px, err := faultproxy.Start(testHub.Config)
	if err != nil {
		t.Fatal(err)
	}
	defer px.Close()
	first := "" // the Agent reserved first: its writes (the reservation, then the rollback's release) pass
	px.SetRule(func(r faultproxy.Request) faultproxy.Verdict {
		if !r.Write || !strings.Contains(r.Path, "/agents/") {
			return faultproxy.Pass
		}
		if first == "" {
			first = r.Path
		}
		if r.Path == first {
			return faultproxy.Pass
		}
		return faultproxy.Refuse403
	})
	// Another replica holds the lease: no reconcile of this replica races the rollback (a leader's reconciler that
	// converged the cluster meanwhile could recreate the ManagedCluster; its orphan sweep removes that later).
	defer holdLease(t, cfg)()
	sp := startSP(t, cfg, Options{RestConfig: px.Config()})
	name := uniqueName("bmrb")
	id := "inst-" + name
	body := baremetalBody(name, agentPool(t, 2), 2)
	code, _, raw := do(t, http.MethodPost, sp.URL+"/api/v1alpha1/clusters?id="+id, "application/json", []byte(body))
	if code < 400 {
		t.Fatalf("a create whose second Agent reservation was refused: %d %s", code, raw)
	}
	if px.Faults() == 0 {
		t.Fatalf("no Agent reservation was refused (first Agent written: %q)", first)
	}
	waitFor(t, 30*time.Second, "the rollback of the objects and of the Agent reservation", func() bool {
		return len(leftoversIn(t, "faults", id, name)) == 0 && len(reservedAgents(t, id)) == 0
	})
	// Nor in the replica's memory: what the create ensured and expected is forgotten with it.
	waitFor(t, 30*time.Second, "the rolled-back instance forgotten", func() bool { return sp.App.Service.Remembered() == 0 })
}

// A platform that is not enabled on this SP is a 422 naming what is supported.
func TestPlatformNotEnabled(t *testing.T) {
	t.Parallel()
	cfg := testConfig("restricted")
	cfg.ProviderName = "sp-kubevirt-only"
	cfg.EnabledPlatforms = []string{string(clusters.KubeVirt)}
	sp := startSP(t, cfg, Options{})
	body := `{"version":"1.30","metadata":{"name":"bm-off"},"provider_hints":{"acm":{"platform":"baremetal","base_domain":"example.com","infra_env":"production-infraenv"}}}`
	code, h, raw := do(t, http.MethodPost, sp.URL+"/api/v1alpha1/clusters", "application/json", []byte(body))
	assertProblem(t, code, h, raw, http.StatusUnprocessableEntity, `platform "baremetal" is not available on this provider (supported: kubevirt)`)
}

// An unexpected failure is a 500 whose body says nothing about the internals (here: the configured pull secret
// Secret does not exist, and its name must not leak).
func TestInternalErrorNotLeaked(t *testing.T) {
	t.Parallel()
	cfg := testConfig("restricted")
	cfg.PullSecretFile, cfg.PullSecretName = "", "secret-that-does-not-exist"
	cfg.ProviderName = "sp-internal"
	sp := startSP(t, cfg, Options{})
	code, h, raw := do(t, http.MethodPost, sp.URL+"/api/v1alpha1/clusters?id=inst-500", "application/json", []byte(kubevirtBody(uniqueName("five"), 1)))
	p := assertProblem(t, code, h, raw, http.StatusInternalServerError, "internal error")
	if strings.Contains(string(raw), "secret-that-does-not-exist") || *p.Detail != "internal error" {
		t.Fatalf("internals leaked: %s", raw)
	}
	var secrets corev1.SecretList
	_ = testHub.Client.List(context.Background(), &secrets, client.InNamespace("restricted"), client.MatchingLabels{meta.LabelInstanceID: "inst-500"})
	if len(secrets.Items) != 0 {
		t.Fatalf("failed create left %d Secrets", len(secrets.Items))
	}
}

// Before the caches have synced, the API answers 503 (not 500, not an empty list).
func TestUnavailableBeforeSync(t *testing.T) {
	t.Parallel()
	cfg := testConfig("restricted")
	cfg.ProviderName = "sp-unsynced"
	a, err := New(&cfg, Options{RestConfig: testHub.Config, Log: testLogger()})
	if err != nil {
		t.Fatal(err)
	}
	h, err := a.server.Handler(a.Registry)
	if err != nil {
		t.Fatal(err)
	}
	srv := httptest.NewServer(h) // the hub access was never started
	defer srv.Close()
	for _, path := range []string{"/api/v1alpha1/clusters", "/api/v1alpha1/clusters/x"} {
		code, hdr, body := do(t, http.MethodGet, srv.URL+path, "", nil)
		assertProblem(t, code, hdr, body, http.StatusServiceUnavailable, "not synced")
	}
	if code, _, _ := do(t, http.MethodGet, srv.URL+"/readyz", "", nil); code != http.StatusServiceUnavailable {
		t.Fatalf("/readyz %d before sync", code)
	}
}

// An SP started while its hub is unreachable comes up: it is alive, not ready, and its health says why.
func TestStartsWithoutHub(t *testing.T) {
	t.Parallel()
	const dead = "127.0.0.1:1" // a privileged port nothing here listens on: connections are refused
	cfg := testConfig("restricted")
	cfg.ProviderName = "sp-nohub"
	restCfg := rest.CopyConfig(testHub.Config)
	restCfg.Host = "https://" + dead
	a, err := New(&cfg, Options{RestConfig: restCfg, Log: testLogger(), HealthInterval: 100 * time.Millisecond})
	if err != nil {
		t.Fatalf("New with an unreachable hub: %v", err)
	}
	if err := a.Listen(); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- a.Run(ctx) }()
	defer func() { cancel(); <-done }()
	url := "http://" + a.Addr()
	waitFor(t, 60*time.Second, "hub check reports the unreachable API server", func() bool {
		for _, c := range a.Health.Report().Checks {
			if c.Name == "hub" {
				return strings.Contains(c.Message, "unreachable")
			}
		}
		return false
	})
	if code, _, _ := do(t, http.MethodGet, url+"/livez", "", nil); code != http.StatusOK {
		t.Fatalf("/livez %d", code)
	}
	if code, _, _ := do(t, http.MethodGet, url+"/readyz", "", nil); code != http.StatusServiceUnavailable {
		t.Fatalf("/readyz %d", code)
	}
	code, h, body := do(t, http.MethodGet, url+"/api/v1alpha1/clusters", "", nil)
	assertProblem(t, code, h, body, http.StatusServiceUnavailable, "not synced")
}

// A broken kubeconfig is reported by name, never by content.
func TestKubeconfigErrorsDoNotQuoteTheFile(t *testing.T) {
	dir := t.TempDir()
	secret := "token: super-secret-token-value\n  this is: [not yaml"
	path := filepath.Join(dir, "hub.kubeconfig")
	if err := os.WriteFile(path, []byte(secret), 0o600); err != nil {
		t.Fatal(err)
	}
	cfg := testConfig("restricted")
	cfg.HubKubeconfig = path
	_, err := New(&cfg, Options{})
	if err == nil || strings.Contains(err.Error(), "super-secret") || !strings.Contains(err.Error(), "hubKubeconfig") {
		t.Fatalf("error %v", err)
	}
	cfg.HubKubeconfig = filepath.Join(dir, "missing")
	if _, err := New(&cfg, Options{}); err == nil || !strings.Contains(err.Error(), "cannot read") {
		t.Fatalf("missing file: %v", err)
	}
}

// A name the hub already gives to something the SP did not make — an unlabelled HostedCluster in its namespace, a
// ManagedCluster, ACM's cluster namespace of that name — is a 409 naming it, and the refused create writes
// nothing: no instance lock, no cluster, and the rival is left as it was.
func TestCreateNameTakenOnTheHub(t *testing.T) {
	t.Parallel()
	sp := shared(t)
	ctx := context.Background()
	for _, c := range []struct {
		what  string
		rival func(name string) client.Object
		want  string
		// theirs are what the leftovers may show of the rival itself: the ManagedCluster, or the control plane
		// namespace the rival's operator (here the simulator) makes in its own time.
		theirs func(name string) []string
	}{
		{"unlabelled HostedCluster", func(name string) client.Object {
			hc := render.Render(render.Input{ID: "rival", Provider: "rival", Name: name, Namespace: "clusters", InfraID: name,
				Platform: clusters.KubeVirt, SpecJSON: `{}`, ReleaseImage: "quay.io/openshift-release-dev/ocp-release:4.17.29-multi",
				ControllerAvailabilityPolicy: hyperv1.SingleReplica, WorkerCount: 1}).HostedCluster
			hc.Labels, hc.Annotations, hc.Finalizers = nil, nil, nil
			return hc
		}, "HostedCluster %s exists", func(name string) []string {
			return []string{"Namespace/" + provision.ControlPlaneNamespace("clusters", name)}
		}},
		{"ManagedCluster", func(name string) client.Object {
			return &clusterv1.ManagedCluster{ObjectMeta: metav1.ObjectMeta{Name: name}, Spec: clusterv1.ManagedClusterSpec{HubAcceptsClient: true}}
		}, "ManagedCluster %s exists", func(name string) []string { return []string{"ManagedCluster/" + name} }},
		{"ACM's cluster namespace", func(name string) client.Object {
			return &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: name}}
		}, "namespace %s exists", func(string) []string { return nil }},
	} {
		t.Run(c.what, func(t *testing.T) {
			name := uniqueName("taken")
			rival := c.rival(name)
			if err := testHub.Client.Create(ctx, rival); err != nil {
				t.Fatal(err)
			}
			t.Cleanup(func() { _ = testHub.Client.Delete(context.Background(), rival) })
			labels := maps.Clone(rival.GetLabels()) // as created (a Namespace gets its name label)
			id := "inst-" + name
			code, h, body := do(t, http.MethodPost, sp.URL+"/api/v1alpha1/clusters?id="+id, "application/json", []byte(kubevirtBody(name, 1)))
			assertProblem(t, code, h, body, http.StatusConflict, fmt.Sprintf(c.want, name))
			// Of what an instance may leave, only the rival's own objects may show.
			theirs := c.theirs(name)
			if left := slices.DeleteFunc(leftovers(t, id, name), func(o string) bool { return slices.Contains(theirs, o) }); len(left) != 0 {
				t.Fatalf("after the refused create: %v (besides the rival's %v)", left, theirs)
			}
			if code, _ := sp.get(t, id); code != http.StatusNotFound {
				t.Fatalf("GET of the refused instance: %d", code)
			}
			// Not adopted: the rival's labels are as they were.
			if err := testHub.Client.Get(ctx, client.ObjectKeyFromObject(rival), rival); err != nil || !maps.Equal(rival.GetLabels(), labels) {
				t.Fatalf("the rival: %v, labels %v, created with %v", err, rival.GetLabels(), labels)
			}
		})
	}
}

// A version the matrix knows but no ClusterImageSet of the hub provides (the hub has 4.14 to 4.20) is a 422 naming
// it, refused before any write.
func TestCreateVersionWithoutImageSet(t *testing.T) {
	t.Parallel()
	sp := shared(t)
	name := uniqueName("noimg")
	id := "inst-" + name
	body := fmt.Sprintf(`{"version":"4.21","metadata":{"name":%q},"provider_hints":{"acm":{"platform":"kubevirt"}}}`, name)
	code, h, raw := do(t, http.MethodPost, sp.URL+"/api/v1alpha1/clusters?id="+id, "application/json", []byte(body))
	assertProblem(t, code, h, raw, http.StatusUnprocessableEntity, "no ClusterImageSet for OpenShift 4.21")
	if left := leftovers(t, id, name); len(left) != 0 {
		t.Fatalf("the refused create wrote %v", left)
	}
}
