package app

import (
	"context"
	"crypto/tls"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/spf13/pflag"
	authenticationv1 "k8s.io/api/authentication/v1"
	authorizationv1 "k8s.io/api/authorization/v1"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/dcm-sp/acm-cluster-sp/internal/devtest/manifesttest"
	"github.com/dcm-sp/acm-cluster-sp/internal/devtest/sp/sphub"
	"github.com/dcm-sp/acm-cluster-sp/internal/devtest/testpki"
	"github.com/dcm-sp/acm-cluster-sp/internal/devtest/testwait"
	"github.com/dcm-sp/acm-cluster-sp/internal/sp/config"
	"github.com/dcm-sp/acm-cluster-sp/pkg/api"
)

// renderManifests renders dir of the repository as the install would.
func renderManifests(t *testing.T, dir string) []*unstructured.Unstructured {
	return manifesttest.Render(t, dir)
}

// applyAll server-side applies objects as the hub's admin.
func applyAll(t *testing.T, objs []*unstructured.Unstructured) {
	t.Helper()
	for _, o := range objs {
		if err := testHub.Client.Apply(context.Background(), client.ApplyConfigurationFromUnstructured(o.DeepCopy()), client.FieldOwner("acm-cluster-sp-deploy-test"), client.ForceOwnership); err != nil {
			t.Fatalf("applying %s %s: %v", o.GetKind(), o.GetName(), err)
		}
	}
}

// deployedSP is the SP as deploy/ installs it: its ServiceAccount's identity (a TokenRequest token), the configuration
// file of its ConfigMap, the RBAC of its manifests.
type deployedSP struct {
	*testSP
	forbidden *manifesttest.Forbidden
	user      caller // a platform user with acm-cluster-sp-user and acm-cluster-sp-kubeconfig-reader
	registry  *sphub.Registry
	cfg       config.Config
}

// startDeployed runs the SP as ServiceAccount sa of namespace acm-cluster-sp, with the deployed configuration. With
// stopOnForbidden it stops waiting for readiness at the first 403 (ready then reports false).
func startDeployed(t *testing.T, objs []*unstructured.Unstructured, sa string, stopOnForbidden bool) (*deployedSP, bool) {
	t.Helper()
	ctx := context.Background()
	cs, err := kubernetes.NewForConfig(testHub.Config)
	if err != nil {
		t.Fatal(err)
	}
	tr, err := cs.CoreV1().ServiceAccounts("acm-cluster-sp").CreateToken(ctx, sa,
		&authenticationv1.TokenRequest{Spec: authenticationv1.TokenRequestSpec{ExpirationSeconds: ptr.To[int64](3600)}}, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	// As on a fresh install: no Lease yet (creating it is part of what the RBAC must allow).
	if err := cs.CoordinationV1().Leases("acm-cluster-sp").Delete(ctx, "acm-cluster-sp-leader", metav1.DeleteOptions{}); err != nil && !apierrors.IsNotFound(err) {
		t.Fatal(err)
	}
	rec := &manifesttest.Forbidden{}
	saCfg := &rest.Config{Host: testHub.Config.Host, TLSClientConfig: rest.TLSClientConfig{CAData: testHub.Config.CAData},
		BearerToken: tr.Status.Token, QPS: 100, Burst: 200, WrapTransport: rec.Wrap}

	var fileContent string
	env := map[string]string{}
	for _, o := range objs {
		if o.GetKind() == "ConfigMap" && strings.HasPrefix(o.GetName(), "acm-cluster-sp-config") {
			fileContent, _, _ = unstructured.NestedString(o.Object, "data", "config.yaml")
		}
		if o.GetKind() == "Deployment" {
			containers, _, _ := unstructured.NestedSlice(o.Object, "spec", "template", "spec", "containers")
			vars, _, _ := unstructured.NestedSlice(containers[0].(map[string]any), "env")
			for _, v := range vars {
				if name, _ := v.(map[string]any)["name"].(string); strings.HasPrefix(name, "SP_") {
					env[name], _ = v.(map[string]any)["value"].(string)
				}
			}
		}
	}
	dir := t.TempDir()
	file := filepath.Join(dir, "config.yaml")
	if err := os.WriteFile(file, []byte(fileContent), 0o600); err != nil {
		t.Fatal(err)
	}
	httpClient := &http.Client{Timeout: 30 * time.Second}
	if env["SP_TLS_CERT_FILE"] != "" {
		// The platform's serving certificate (the service CA, cert-manager): one from a test CA, in the same place.
		ca := testpki.NewCA(t, "deployed-serving-ca")
		pair := ca.Serving(t, "acm-cluster-sp")
		env["SP_TLS_CERT_FILE"], env["SP_TLS_KEY_FILE"] = testpki.WriteFile(t, dir, "tls.crt", pair.CertPEM), testpki.WriteFile(t, dir, "tls.key", pair.KeyPEM)
		httpClient.Transport = &http.Transport{TLSClientConfig: &tls.Config{RootCAs: ca.Pool(), MinVersion: tls.VersionTLS12}}
	}
	reg, err := sphub.StartRegistry("127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { reg.Close() })
	// The deployed file and the Deployment's environment, with what differs on the local hub set as the Deployment's
	// environment would.
	for k, v := range map[string]string{
		"SP_CONFIG": file, "SP_LISTEN_ADDRESS": "127.0.0.1:0", "SP_NATS_URL": testHub.NATSURL,
		"SP_REGISTRATION_URL": reg.URL, "SP_API_HOST": "http://127.0.0.1:1", "SP_DEFAULT_INFRA_ENV_NAME": "production-infraenv",
		"SP_LEASE_DURATION": "3s",
	} {
		env[k] = v
	}
	loader := config.Bind(pflag.NewFlagSet("deployed", pflag.ContinueOnError))
	cfg, err := loader.Load(func(k string) string { return env[k] })
	if err != nil {
		t.Fatal(err)
	}
	var abort func() bool
	if stopOnForbidden {
		abort = func() bool { return len(rec.List()) > 0 }
	}
	sp, ready := launchSPUntil(t, *cfg, Options{RestConfig: saCfg}, abort)
	t.Cleanup(sp.stop)
	userToken := newRBAC(t, "acm-cluster-sp").tokenBoundTo(t, "platform-user", "clusters", "acm-cluster-sp-user", "acm-cluster-sp-day2", "acm-cluster-sp-kubeconfig-reader")
	return &deployedSP{testSP: sp, forbidden: rec, registry: reg, cfg: *cfg,
		user: caller{base: sp.URL, token: userToken, http: httpClient}}, ready
}

// tokenBoundTo creates a ServiceAccount in f's namespace bound to Roles of namespace ns, and returns its token.
func (f *rbacFixture) tokenBoundTo(t *testing.T, sa, ns string, roles ...string) string {
	t.Helper()
	tok := f.token(t, sa)
	for _, r := range roles {
		b := &rbacv1.RoleBinding{ObjectMeta: metav1.ObjectMeta{Name: r + "-" + sa, Namespace: ns},
			RoleRef:  rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "Role", Name: r},
			Subjects: []rbacv1.Subject{{Kind: "ServiceAccount", Name: sa, Namespace: f.ns}}}
		if _, err := f.cs.RbacV1().RoleBindings(ns).Create(context.Background(), b, metav1.CreateOptions{}); err != nil && !apierrors.IsAlreadyExists(err) {
			t.Fatal(err)
		}
	}
	return tok
}

// lifecycle is the SP's whole job, driven as a user would and checked as DCM would: both platforms created, READY,
// read with and without the kubeconfig, scaled (day-2), listed, status events on NATS, registration, health, deleted with DELETED
// and nothing left. It returns the first thing that went wrong; stop ends it early (a 403 was seen).
func (d *deployedSP) lifecycle(t *testing.T, stop func() bool) error {
	t.Helper()
	bodies := map[string]string{}
	for _, p := range []string{"kubevirt", "baremetal"} {
		name := uniqueName("rbac-" + p[:2])
		id := "inst-" + name
		bodies[id] = name
		body := kubevirtBody(name, 1)
		if p == "baremetal" {
			body = fmt.Sprintf(`{"spec":{"version":"4.17","metadata":{"name":%q},"nodes":{"workers":{"count":1,"cpu":8}},"provider_hints":{"acm":{"platform":"baremetal","base_domain":"example.com","agent_labels":{"location":"datacenter-1"}}}}}`, name)
		}
		code, _, raw := d.user.do(t, http.MethodPost, "/api/v1alpha1/clusters?id="+id, body)
		if code != http.StatusCreated {
			return fmt.Errorf("create %s: %d %s", p, code, raw)
		}
	}
	reader, err := sphub.NewEventReader(context.Background(), testHub.NATSURL, "dcm.cluster")
	if err != nil {
		return err
	}
	defer reader.Close()
	stopped := func() bool { return stop != nil && stop() }
	wait := func(what string, cond func() bool) error {
		if !testwait.Poll(90*time.Second, func() bool { return stopped() || cond() }) {
			return errors.New("timed out: " + what)
		}
		if stopped() {
			return errors.New("stopped: " + what)
		}
		return nil
	}
	statusOf := func(id string) string {
		code, _, raw := d.user.do(t, http.MethodGet, "/api/v1alpha1/clusters/"+id, "")
		if code == http.StatusNotFound {
			return "DELETED"
		}
		var c api.Cluster
		_ = json.Unmarshal(raw, &c)
		return string(c.Status)
	}
	for id := range bodies {
		if err := wait(id+" READY", func() bool { return statusOf(id) == "READY" }); err != nil {
			return err
		}
		code, _, raw := d.user.do(t, http.MethodGet, "/api/v1alpha1/clusters/"+id, "")
		var c api.Cluster
		if json.Unmarshal(raw, &c) != nil || code != http.StatusOK || c.Kubeconfig == nil || *c.Kubeconfig == "" {
			return fmt.Errorf("GET %s: %d, no kubeconfig: %s", id, code, raw)
		}
	}
	// Day-2: scale the KubeVirt cluster to 2 workers (the record on the HostedCluster, the NodePool patched by the
	// leader) and back to READY. (The bare-metal one keeps its Agent: the seeded ones are shared by the package.)
	for id := range bodies {
		if !strings.Contains(id, "rbac-ku") {
			continue
		}
		if code, _, raw := d.user.do(t, http.MethodPatch, "/api/v1alpha1/clusters/"+id, `{"spec":{"nodes":{"workers":{"count":2}}}}`); code != http.StatusOK {
			return fmt.Errorf("scale %s: %d %s", id, code, raw)
		}
		if err := wait(id+" scaled to 2 and READY", func() bool {
			code, _, raw := d.user.do(t, http.MethodGet, "/api/v1alpha1/clusters/"+id, "")
			var c api.Cluster
			return code == http.StatusOK && json.Unmarshal(raw, &c) == nil && c.Status == "READY" && c.Nodes.Workers.Ready == 2
		}); err != nil {
			return err
		}
	}
	if code, _, raw := d.user.do(t, http.MethodGet, "/api/v1alpha1/clusters", ""); code != http.StatusOK {
		return fmt.Errorf("LIST: %d %s", code, raw)
	}
	if !d.App.Leading() {
		return errors.New("not leading")
	}
	if err := wait("registered", func() bool { ok, msg := d.App.Registrar.Status(); return ok && strings.Contains(msg, "registered as") }); err != nil {
		return err
	}
	if h := d.App.Health.Report(); h.Status != api.HealthStatusHealthy {
		return fmt.Errorf("health %+v", h)
	}
	for id := range bodies {
		if code, _, raw := d.user.do(t, http.MethodDelete, "/api/v1alpha1/clusters/"+id, ""); code != http.StatusNoContent {
			return fmt.Errorf("delete %s: %d %s", id, code, raw)
		}
	}
	events := map[string]bool{}
	if err := wait("READY and DELETED events of both clusters", func() bool {
		// The stream holds every test's events on this subject: read all that are there, not one per poll.
		for {
			ev, ok, _ := reader.Next(100 * time.Millisecond)
			if !ok {
				break
			}
			var data struct{ ID, Status string }
			_ = ev.DataAs(&data)
			events[data.ID+" "+data.Status] = true
		}
		for id := range bodies {
			if !events[id+" READY"] || !events[id+" DELETED"] {
				return false
			}
		}
		return true
	}); err != nil {
		return err
	}
	for id, name := range bodies {
		if err := wait("nothing left of "+id, func() bool { return len(leftoversIn(t, "clusters", id, name)) == 0 }); err != nil {
			return fmt.Errorf("%w: %v", err, leftoversIn(t, "clusters", id, name))
		}
	}
	return nil
}

// The manifests of deploy/ installed on the hub, and the whole lifecycle run as the ServiceAccount they create:
// the RBAC grants everything the SP calls (a single 403 fails the test).
func TestDeployedRBACRunsTheLifecycle(t *testing.T) {
	objs := renderManifests(t, "deploy")
	applyAll(t, objs)
	ensurePullSecret(t)
	d, ready := startDeployed(t, objs, "acm-cluster-sp", false)
	if !ready {
		t.Fatalf("not ready as the deployed ServiceAccount: %+v (403s: %v)", d.App.Health.Report(), d.forbidden.List())
	}
	if err := d.lifecycle(t, nil); err != nil {
		t.Fatalf("lifecycle as the deployed ServiceAccount: %v (403s: %v)", err, d.forbidden.List())
	}
	if f := d.forbidden.List(); len(f) > 0 {
		t.Fatalf("the SP made calls its RBAC forbids: %v", f)
	}
}

func ensurePullSecret(t *testing.T) {
	t.Helper()
	sec := &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Name: "acm-cluster-sp-pull-secret", Namespace: "clusters"}, Type: corev1.SecretTypeDockerConfigJson,
		Data: map[string][]byte{corev1.DockerConfigJsonKey: []byte(sphub.DevPullSecret)}}
	if err := testHub.Client.Create(context.Background(), sec); err != nil && !apierrors.IsAlreadyExists(err) {
		t.Fatal(err)
	}
}

// rbacRule locates one rule of the deployed Roles and ClusterRoles.
type rbacRule struct {
	kind, namespace, name string
	index                 int
	rule                  rbacv1.PolicyRule
}

func (r rbacRule) String() string {
	return fmt.Sprintf("%s %s/%s rule %d %v %v %v", r.kind, r.namespace, r.name, r.index, r.rule.APIGroups, r.rule.Resources, r.rule.Verbs)
}

// spRules lists the rules granted to the SP's ServiceAccount (its Roles and ClusterRole, not the user roles).
func spRules(t *testing.T, objs []*unstructured.Unstructured) []rbacRule {
	t.Helper()
	bound := map[string]bool{}
	for _, o := range objs {
		if o.GetKind() != "RoleBinding" && o.GetKind() != "ClusterRoleBinding" {
			continue
		}
		var b rbacv1.RoleBinding
		_ = runtime.DefaultUnstructuredConverter.FromUnstructured(o.Object, &b)
		for _, s := range b.Subjects {
			if s.Kind == "ServiceAccount" && s.Name == "acm-cluster-sp" {
				bound[b.RoleRef.Kind+"/"+o.GetNamespace()+"/"+b.RoleRef.Name] = true
			}
		}
	}
	var out []rbacRule
	for _, o := range objs {
		if (o.GetKind() != "Role" && o.GetKind() != "ClusterRole") || !bound[o.GetKind()+"/"+o.GetNamespace()+"/"+o.GetName()] {
			continue
		}
		var r rbacv1.ClusterRole
		_ = runtime.DefaultUnstructuredConverter.FromUnstructured(o.Object, &r)
		for i, rule := range r.Rules {
			out = append(out, rbacRule{kind: o.GetKind(), namespace: o.GetNamespace(), name: o.GetName(), index: i, rule: rule})
		}
	}
	return out
}

// without returns the manifests with one rule removed.
func without(objs []*unstructured.Unstructured, drop rbacRule) []*unstructured.Unstructured {
	out := make([]*unstructured.Unstructured, 0, len(objs))
	for _, o := range objs {
		o = o.DeepCopy()
		if o.GetKind() == drop.kind && o.GetNamespace() == drop.namespace && o.GetName() == drop.name {
			rules, _, _ := unstructured.NestedSlice(o.Object, "rules")
			rules = append(rules[:drop.index:drop.index], rules[drop.index+1:]...)
			_ = unstructured.SetNestedSlice(o.Object, rules, "rules")
		}
		out = append(out, o)
	}
	return out
}

// canSA asks the hub whether the SP's ServiceAccount may use every verb of a rule on its first resource (RBAC
// changes take effect asynchronously). A verb another rule also grants (get on hostedclusters is granted in the
// clusters' namespace and, by name, cluster-wide) stays allowed: the rule counts as removed once any verb is not.
func canSA(t *testing.T, r rbacRule) bool {
	t.Helper()
	cs, _ := kubernetes.NewForConfig(testHub.Config)
	res, sub, _ := strings.Cut(r.rule.Resources[0], "/")
	name := ""
	if len(r.rule.ResourceNames) > 0 {
		name = r.rule.ResourceNames[0]
	}
	for _, verb := range r.rule.Verbs {
		sar := &authorizationv1.SubjectAccessReview{Spec: authorizationv1.SubjectAccessReviewSpec{
			User: "system:serviceaccount:acm-cluster-sp:acm-cluster-sp", Groups: []string{"system:serviceaccounts", "system:authenticated"},
			ResourceAttributes: &authorizationv1.ResourceAttributes{Namespace: r.namespace, Group: r.rule.APIGroups[0], Resource: res, Subresource: sub, Verb: verb, Name: name}}}
		got, err := cs.AuthorizationV1().SubjectAccessReviews().Create(context.Background(), sar, metav1.CreateOptions{})
		if err != nil {
			t.Fatal(err)
		}
		if !got.Status.Allowed {
			return false
		}
	}
	return true
}

// Every rule of the SP's RBAC is needed: with any one removed, the SP's lifecycle meets a 403 (or fails).
func TestEveryDeployedRBACRuleIsNeeded(t *testing.T) {
	objs := renderManifests(t, "deploy")
	applyAll(t, objs)
	ensurePullSecret(t)
	rules := spRules(t, objs)
	if len(rules) < 10 {
		t.Fatalf("only %d rules found in the manifests", len(rules))
	}
	t.Cleanup(func() { applyAll(t, objs) })
	for _, r := range rules {
		t.Run(r.String(), func(t *testing.T) {
			applyAll(t, without(objs, r))
			waitFor(t, 30*time.Second, "the rule removed", func() bool { return !canSA(t, r) })
			defer func() {
				applyAll(t, objs)
				waitFor(t, 30*time.Second, "the rule restored", func() bool { return canSA(t, r) })
			}()
			d, ready := startDeployed(t, objs, "acm-cluster-sp", true)
			var err error
			if ready {
				err = d.lifecycle(t, func() bool { return len(d.forbidden.List()) > 0 })
			} else {
				err = errors.New("never ready")
			}
			f := d.forbidden.List()
			if err == nil && len(f) == 0 {
				t.Fatalf("the whole lifecycle ran without %s: the rule is not needed", r)
			}
			t.Logf("without it: %v (403s: %v)", err, f)
			d.stop()
		})
	}
}
