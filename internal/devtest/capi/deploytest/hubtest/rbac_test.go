// Package hubtest runs each component of deploy/capi-private but the migrator (deploytest/migratetest) on the test
// hub as the ServiceAccount the install gives it, with the install's RBAC, and counts the 403s.
package hubtest

import (
	"context"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"strings"
	"testing"
	"time"

	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
	authorizationv1 "k8s.io/api/authorization/v1"
	coordinationv1 "k8s.io/api/coordination/v1"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	schedulingv1 "k8s.io/api/scheduling/v1"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/dcm-sp/acm-cluster-sp/internal/capiprivate/crds"
	"github.com/dcm-sp/acm-cluster-sp/internal/capiprivate/inject"
	"github.com/dcm-sp/acm-cluster-sp/internal/capiprivate/rbacmirror"
	"github.com/dcm-sp/acm-cluster-sp/internal/capiprivate/webhook"
	"github.com/dcm-sp/acm-cluster-sp/internal/devtest/capi/capihub"
	"github.com/dcm-sp/acm-cluster-sp/internal/devtest/capi/deploytest"
	"github.com/dcm-sp/acm-cluster-sp/internal/devtest/capi/injecttest"
	"github.com/dcm-sp/acm-cluster-sp/internal/devtest/manifesttest"
	"github.com/dcm-sp/acm-cluster-sp/internal/devtest/testwait"
)

var env *capihub.Env

func TestMain(m *testing.M) {
	os.Exit(capihub.MainWith(m, &env, capihub.Options{ServiceAccounts: true}))
}

// installRBAC installs the rendered base's namespace, ServiceAccounts and RBAC, and HyperShift's PriorityClasses
// (the recorded Pods name them).
func installRBAC(t *testing.T) {
	t.Helper()
	n, err := deploytest.ApplyRBAC(t.Context(), env.Client, manifesttest.Render(t, deploytest.Dir))
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("applied %d RBAC objects of %s", n, deploytest.Dir)
	for _, name := range []string{"hypershift-control-plane", "hypershift-operator"} {
		pc := &schedulingv1.PriorityClass{ObjectMeta: metav1.ObjectMeta{Name: name}, Value: 100000000}
		if err := env.Client.Create(t.Context(), pc); client.IgnoreAlreadyExists(err) != nil {
			t.Fatal(err)
		}
	}
}

func as(t *testing.T, sa string) *deploytest.Identity {
	t.Helper()
	id, err := deploytest.As(t.Context(), env.Config, sa)
	if err != nil {
		t.Fatal(err)
	}
	return id
}

func listen(t *testing.T) net.Listener {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	return l
}

// run runs f until the test ends (it must return when ctx is done).
func run(t *testing.T, what string, f func(ctx context.Context) error) {
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- f(ctx) }()
	t.Cleanup(func() {
		cancel()
		if err := <-done; err != nil && ctx.Err() == nil {
			t.Errorf("%s: %v", what, err)
		}
	})
}

func waitFor(t *testing.T, within time.Duration, what string, cond func() bool) {
	t.Helper()
	if !testwait.Poll(within, cond) {
		t.Fatalf("%s: not within %s", what, within)
	}
}

func get(url string) (int, string) {
	resp, err := http.Get(url) //nolint:noctx // loopback metrics in a test
	if err != nil {
		return 0, err.Error()
	}
	defer resp.Body.Close()
	body, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, string(body)
}

// Each component of deploy/capi-private runs its own code on the hub as the ServiceAccount the install gives it,
// with the install's RBAC, and is never answered 403: the conversion webhook (reading CRDs to convert, called by
// kube-apiserver), `crds install` (applying the private CRDs, probing the webhook), the injector (its certificate
// controller's Lease and loopback Secrets, its admission of a component's Pods) and the RBAC mirror (twins of a
// HyperShift Role and its binding, on its Lease). The migrator is in migratetest.
func TestComponentsRunAsTheirServiceAccounts(t *testing.T) {
	installRBAC(t)
	ids := map[string]*deploytest.Identity{}
	for _, sa := range []string{deploytest.WebhookSA, deploytest.CRDsSA, deploytest.InjectSA, deploytest.RBACMirrorSA} {
		ids[sa] = as(t, sa)
	}
	t.Run("webhook and crds install", func(t *testing.T) { webhookAndCRDs(t, ids[deploytest.WebhookSA], ids[deploytest.CRDsSA]) })
	t.Run("injector", func(t *testing.T) { injector(t, ids[deploytest.InjectSA]) })
	t.Run("rbac-mirror", func(t *testing.T) { mirror(t, ids[deploytest.RBACMirrorSA]) })
	for _, sa := range []string{deploytest.WebhookSA, deploytest.CRDsSA, deploytest.InjectSA, deploytest.RBACMirrorSA} {
		id := ids[sa]
		t.Logf("%s: %d requests answered, %d forbidden", sa, id.Forbidden.Requests(), len(id.Forbidden.List()))
		if f := id.Forbidden.List(); len(f) > 0 {
			t.Errorf("%s was answered 403: %v", sa, f)
		}
		if id.Forbidden.Requests() == 0 {
			t.Errorf("%s made no request", sa)
		}
	}
}

// webhookAndCRDs runs the conversion webhook as its ServiceAccount, then `crds install` as its own, pointing the
// private CRDs at that webhook: Install's probe is a conversion kube-apiserver asks the webhook for, whose answer
// needs the CRD of the probe's infrastructure ref.
func webhookAndCRDs(t *testing.T, wh, installer *deploytest.Identity) {
	l, ml := listen(t), listen(t)
	run(t, "webhook", func(ctx context.Context) error {
		return webhook.Run(ctx, webhook.Options{Config: wh.Config, CertFile: env.WebhookCertFile, KeyFile: env.WebhookKeyFile,
			Listener: l, MetricsListener: ml})
	})
	metrics := "http://" + ml.Addr().String()
	waitFor(t, time.Minute, "webhook ready", func() bool { code, _ := get(metrics + "/readyz"); return code == http.StatusOK })

	scheme := runtime.NewScheme()
	if err := apiextensionsv1.AddToScheme(scheme); err != nil {
		t.Fatal(err)
	}
	c, err := client.New(installer.Config, client.Options{Scheme: scheme})
	if err != nil {
		t.Fatal(err)
	}
	cc := apiextensionsv1.WebhookClientConfig{URL: ptr.To("https://" + l.Addr().String() + webhook.ConvertPath), CABundle: env.WebhookCA}
	t.Cleanup(func() { // give the CRDs back to capihub's webhook
		if err := crds.Install(context.Background(), env.Client, crds.InstallOptions{ClientConfig: env.WebhookClientConfig()}); err != nil {
			t.Errorf("restoring the CRDs: %v", err)
		}
	})
	if err := crds.Install(t.Context(), c, crds.InstallOptions{ClientConfig: cc, ProbeNamespace: deploytest.Namespace}); err != nil {
		t.Fatalf("crds install as %s: %v (403s %v; webhook's %v)", installer.SA, err, installer.Forbidden.List(), wh.Forbidden.List())
	}
	// kube-apiserver takes a moment to use a CRD's new conversion config: Install's probe may have been answered by
	// the webhook the CRDs named before. Probe again, as the installer, until this webhook has converted one.
	var body string
	converted := testwait.Poll(time.Minute, func() bool {
		if err := crds.Probe(t.Context(), c, deploytest.Namespace); err != nil {
			t.Logf("probe: %v", err)
		}
		_, body = get(metrics + "/metrics")
		return strings.Contains(body, `capi_private_webhook_conversions_total{from="v1beta2",kind="Machine",result="success",to="v1beta1"}`)
	})
	if !converted {
		t.Errorf("the webhook converted no Machine within a minute:\n%s", grep(body, "capi_private_webhook_"))
	}
}

func grep(s, prefix string) string {
	var out []string
	for _, line := range strings.Split(s, "\n") {
		if strings.HasPrefix(line, prefix) {
			out = append(out, line)
		}
	}
	return strings.Join(out, "\n")
}

// injector runs the injector as its ServiceAccount, leader-elected in capi-private as deployed (its cache reads
// Namespaces and HostedClusters), registered for marked namespaces: it writes a marked namespace's loopback Secret
// and admits (injects) the private operator's Pod there.
func injector(t *testing.T, id *deploytest.Identity) {
	ctx := t.Context()
	cfg := inject.DefaultConfig("quay.io/dcm-sp/capi-private:test")
	sel, err := labels.Parse(inject.DefaultOperatorSelector)
	if err != nil {
		t.Fatal(err)
	}
	cfg.OperatorSelector = sel
	ns := env.NewNamespace(t, "hcp-inject")
	in, err := injecttest.StartInjector(ctx, env.Client, injecttest.InjectorOptions{
		Registration: "deploytest-inject", Kube: id.Config, CertFile: env.WebhookCertFile, KeyFile: env.WebhookKeyFile,
		CA: env.WebhookCA, Config: cfg, LeaderElectionNamespace: deploytest.Namespace,
		NamespaceLabels: map[string]string{"capi-private-deploytest": ns},
	})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		_ = in.Stop()
		_ = env.Client.Delete(context.Background(), &admissionregistrationv1.MutatingWebhookConfiguration{ObjectMeta: metav1.ObjectMeta{Name: "deploytest-inject"}})
	})
	// The private operator's Pod in its marked namespace (the components' namespaces are decided by their
	// HostedCluster, which this test does not need).
	f, err := injecttest.Load(injecttest.Operator, ns)
	if err != nil {
		t.Fatal(err)
	}
	if err := env.Client.Create(ctx, f.ServiceAccount); client.IgnoreAlreadyExists(err) != nil {
		t.Fatal(err)
	}
	n := &corev1.Namespace{}
	if err := env.Client.Get(ctx, client.ObjectKey{Name: ns}, n); err != nil {
		t.Fatal(err)
	}
	n.Labels[inject.MarkerLabel], n.Labels["capi-private-deploytest"] = inject.MarkerValue, ns
	if err := env.Client.Update(ctx, n); err != nil {
		t.Fatal(err)
	}
	waitFor(t, 2*time.Minute, "the loopback Secret written by the leader", func() bool {
		return env.Client.Get(ctx, client.ObjectKey{Namespace: ns, Name: inject.LoopbackSecret}, &corev1.Secret{}) == nil
	})
	lease := &coordinationv1.Lease{}
	if err := env.Client.Get(ctx, client.ObjectKey{Namespace: deploytest.Namespace, Name: inject.LeaderElectionID}, lease); err != nil {
		t.Fatalf("the injector's Lease: %v", err)
	}
	if err := injecttest.WaitEffective(ctx, env.Client, injecttest.Operator, ns, in.Exited()); err != nil {
		t.Fatal(err)
	}
	pod := f.Pod("operator-deploytest")
	if err := env.Client.Create(ctx, pod); err != nil {
		t.Fatal(err)
	}
	if !inject.PodInjected(pod) {
		t.Errorf("the operator Pod was not injected: %+v", pod.Spec.InitContainers)
	}
}

// mirror runs the RBAC mirror as its ServiceAccount, leader-elected in capi-private: HyperShift's cluster-api Role
// in a control plane namespace gets its twin, and so does its binding.
func mirror(t *testing.T, id *deploytest.Identity) {
	ctx := t.Context()
	ml := listen(t)
	run(t, "rbac-mirror", func(ctx context.Context) error {
		return rbacmirror.Run(ctx, rbacmirror.RunOptions{Kube: id.Config, LeaderElection: true, LeaderElectionNamespace: deploytest.Namespace,
			MetricsListener: ml, SkipNameValidation: true})
	})
	ns := env.NewNamespace(t, "hcp-mirror")
	n := &corev1.Namespace{}
	if err := env.Client.Get(ctx, client.ObjectKey{Name: ns}, n); err != nil {
		t.Fatal(err)
	}
	sel, _ := labels.Parse(rbacmirror.DefaultNamespaceSelector)
	reqs, _ := sel.Requirements()
	for _, r := range reqs {
		n.Labels[r.Key()] = r.Values().List()[0]
	}
	if err := env.Client.Update(ctx, n); err != nil {
		t.Fatal(err)
	}
	f, err := injecttest.Load("cluster-api", ns)
	if err != nil {
		t.Fatal(err)
	}
	if f.Role == nil || f.RoleBinding == nil {
		t.Fatal("the recorded cluster-api component has no Role and RoleBinding")
	}
	if err := f.CreateRBAC(ctx, env.Client); err != nil { // as HyperShift writes them
		t.Fatal(err)
	}
	// HyperShift's operator ClusterRole grants every verb on the standard groups: its twin is the most a twin grants,
	// and the mirror, holding no escalate or bind, may write and bind it only because it holds that itself.
	op, err := injecttest.Load(injecttest.Operator, ns)
	if err != nil {
		t.Fatal(err)
	}
	if op.ClusterRole == nil || op.ClusterRoleBinding == nil {
		t.Fatal("the recorded operator has no ClusterRole and ClusterRoleBinding")
	}
	for _, o := range []client.Object{op.ClusterRole, op.ClusterRoleBinding} {
		if err := env.Client.Create(ctx, o); client.IgnoreAlreadyExists(err) != nil {
			t.Fatal(err)
		}
	}
	waitFor(t, 2*time.Minute, "the twins of "+f.Role.Name+" and of the operator's ClusterRole", func() bool {
		return env.Client.Get(ctx, client.ObjectKey{Namespace: ns, Name: rbacmirror.TwinName(f.Role.Name)}, &rbacv1.Role{}) == nil &&
			env.Client.Get(ctx, client.ObjectKey{Namespace: ns, Name: rbacmirror.TwinName(f.RoleBinding.Name)}, &rbacv1.RoleBinding{}) == nil &&
			env.Client.Get(ctx, client.ObjectKey{Name: rbacmirror.TwinName(op.ClusterRole.Name)}, &rbacv1.ClusterRole{}) == nil &&
			env.Client.Get(ctx, client.ObjectKey{Name: rbacmirror.TwinName(op.ClusterRoleBinding.Name)}, &rbacv1.ClusterRoleBinding{}) == nil
	})
	if err := env.Client.Get(ctx, client.ObjectKey{Namespace: deploytest.Namespace, Name: rbacmirror.LeaderElectionID}, &coordinationv1.Lease{}); err != nil {
		t.Errorf("the mirror's Lease: %v", err)
	}
}

// TestWhatServiceAccountsMayNotDo: with the install's RBAC and admission policies, each component's ServiceAccount is
// refused what would make it as strong as cluster-admin. kube-apiserver's SubjectAccessReview (what `kubectl auth
// can-i --as` asks) denies what RBAC can say, and the real request, made with the component's own token, is
// answered 403 (by RBAC, or by an admission policy where RBAC cannot say it).
func TestWhatServiceAccountsMayNotDo(t *testing.T) {
	installRBAC(t)
	ctx := t.Context()
	tenant := env.NewNamespace(t, "tenant")
	hcp := env.NewNamespace(t, "hcp-policy")
	n := &corev1.Namespace{}
	if err := env.Client.Get(ctx, client.ObjectKey{Name: hcp}, n); err != nil {
		t.Fatal(err)
	}
	n.Labels[inject.HostedControlPlaneLabel] = "true"
	if err := env.Client.Update(ctx, n); err != nil {
		t.Fatal(err)
	}
	// What the migrator must not touch: a tenant's Pod, Secret and namespace; a control plane namespace's Secret's
	// data, a ConfigMap there, the namespace's other labels.
	tenantPod := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: tenant, Name: "workload"},
		Spec: corev1.PodSpec{AutomountServiceAccountToken: ptr.To(false), Containers: []corev1.Container{{Name: "c", Image: "registry.example/c:1"}}}}
	tenantSecret := &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: tenant, Name: "tenant-credentials"}, StringData: map[string]string{"k": "v"}}
	hcpSecret := &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: hcp, Name: "kubeconfig"}, StringData: map[string]string{"k": "v"}}
	hcpConfigMap := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: hcp, Name: "settings"}}
	// Another component's Secret in capi-private, where the injector keeps its certificates.
	ownSecret := &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: deploytest.Namespace, Name: "capi-private-webhook-tls"}, StringData: map[string]string{"k": "v"}}
	for _, o := range []client.Object{tenantPod, tenantSecret, hcpSecret, hcpConfigMap, ownSecret} {
		if err := env.Client.Create(ctx, o); err != nil {
			t.Fatal(err)
		}
	}
	capiCluster := func(name string) *unstructured.Unstructured {
		u := &unstructured.Unstructured{Object: map[string]any{"spec": map[string]any{"paused": false}}}
		u.SetAPIVersion("cluster.x-k8s.io/v1beta2")
		u.SetKind("Cluster")
		u.SetNamespace(tenant)
		u.SetName(name)
		return u
	}
	tenantCluster := capiCluster("platform")
	if err := env.Client.Create(ctx, tenantCluster.DeepCopy()); err != nil {
		t.Fatal(err)
	}

	create := func(o client.Object) attempt {
		return attempt{fmt.Sprintf("creating %T %s/%s", o, o.GetNamespace(), o.GetName()), func(c client.Client, dry bool) error {
			var co []client.CreateOption
			if dry {
				co = append(co, client.DryRunAll)
			}
			return c.Create(ctx, o.DeepCopyObject().(client.Object), co...)
		}}
	}
	patch := func(o client.Object, body string) attempt {
		return attempt{fmt.Sprintf("patching %T %s/%s with %s", o, o.GetNamespace(), o.GetName(), body), func(c client.Client, dry bool) error {
			var po []client.PatchOption
			if dry {
				po = append(po, client.DryRunAll)
			}
			return c.Patch(ctx, o.DeepCopyObject().(client.Object), client.RawPatch(types.MergePatchType, []byte(body)), po...)
		}}
	}
	remove := func(o client.Object) attempt {
		return attempt{fmt.Sprintf("deleting %T %s/%s", o, o.GetNamespace(), o.GetName()), func(c client.Client, dry bool) error {
			var do []client.DeleteOption
			if dry {
				do = append(do, client.DryRunAll)
			}
			return c.Delete(ctx, o.DeepCopyObject().(client.Object), do...)
		}}
	}
	bindClusterAdmin := func(sa string) client.Object {
		return &rbacv1.ClusterRoleBinding{ObjectMeta: metav1.ObjectMeta{Name: "forbidden-" + sa},
			RoleRef:  rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "ClusterRole", Name: "cluster-admin"},
			Subjects: []rbacv1.Subject{{Kind: rbacv1.ServiceAccountKind, Namespace: deploytest.Namespace, Name: sa}}}
	}
	secretsReader := func(sa string) client.Object {
		return &rbacv1.ClusterRole{ObjectMeta: metav1.ObjectMeta{Name: "forbidden-" + sa},
			Rules: []rbacv1.PolicyRule{{APIGroups: []string{""}, Resources: []string{"secrets"}, Verbs: []string{"get", "list"}}}}
	}
	secret := func(ns, name string, typ corev1.SecretType) client.Object {
		s := &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name}, Type: typ}
		if typ == corev1.SecretTypeServiceAccountToken {
			s.Annotations = map[string]string{corev1.ServiceAccountNameKey: "default"}
		}
		return s
	}
	owner := `{"metadata":{"ownerReferences":[{"apiVersion":"v1","kind":"ConfigMap","name":"x","uid":"00000000-0000-0000-0000-000000000001"}]}}`
	for _, c := range []struct {
		sa      string
		denied  []authorizationv1.ResourceAttributes
		refused []attempt // each answered 403
	}{
		{sa: deploytest.RBACMirrorSA,
			denied: []authorizationv1.ResourceAttributes{
				{Verb: "bind", Group: rbacv1.GroupName, Resource: "clusterroles", Name: "cluster-admin"},
				{Verb: "escalate", Group: rbacv1.GroupName, Resource: "clusterroles"},
				{Verb: "bind", Group: rbacv1.GroupName, Resource: "roles", Namespace: "kube-system"},
				{Verb: "escalate", Group: rbacv1.GroupName, Resource: "roles", Namespace: "kube-system"},
				{Verb: "get", Resource: "secrets", Namespace: "kube-system"},
			},
			refused: []attempt{create(bindClusterAdmin(deploytest.RBACMirrorSA)), create(secretsReader(deploytest.RBACMirrorSA))}},
		// RBAC cannot limit a create by name or namespace: the injector's Secret writes are limited by the install's
		// admission policy (its loopback Secret, Opaque, in a namespace whose Pods it injects).
		{sa: deploytest.InjectSA,
			denied: []authorizationv1.ResourceAttributes{
				{Verb: "get", Resource: "secrets", Namespace: tenant, Name: "tenant-credentials"},
				{Verb: "list", Resource: "secrets", Namespace: tenant},
				{Verb: "create", Group: rbacv1.GroupName, Resource: "clusterrolebindings"},
			},
			refused: []attempt{
				create(secret("kube-system", inject.LoopbackSecret, corev1.SecretTypeServiceAccountToken)),
				create(secret(hcp, inject.LoopbackSecret, corev1.SecretTypeServiceAccountToken)),
				create(secret(tenant, inject.LoopbackSecret, corev1.SecretTypeOpaque)),
				create(secret(hcp, "tenant-credentials", corev1.SecretTypeOpaque)),
				create(secret(deploytest.Namespace, "capi-private-webhook-other", corev1.SecretTypeOpaque)),
				remove(ownSecret),
			}},
		// The migrator patches only the Deployments it quiesces (RBAC by name), and writes only in control plane
		// namespaces, only what a migration changes (admission policy).
		{sa: deploytest.MigrateSA,
			denied: []authorizationv1.ResourceAttributes{
				{Verb: "patch", Group: "apps", Resource: "deployments", Namespace: hcp, Name: "kube-apiserver"},
				{Verb: "patch", Group: "apps", Resource: "deployments", Namespace: "kube-system", Name: "coredns"},
				{Verb: "create", Resource: "pods", Namespace: hcp},
				{Verb: "create", Group: rbacv1.GroupName, Resource: "clusterrolebindings"},
			},
			refused: []attempt{
				remove(tenantPod),
				patch(tenantSecret, owner),
				patch(namespaceObject(tenant), `{"metadata":{"labels":{"`+inject.MarkerLabel+`":"true"}}}`),
				patch(namespaceObject(hcp), `{"metadata":{"labels":{"`+inject.HostedControlPlaneLabel+`":null}}}`),
				patch(hcpSecret, `{"stringData":{"k":"forged"}}`),
				remove(hcpSecret),
				remove(hcpConfigMap),
				create(capiCluster("another")),
				patch(tenantCluster, `{"spec":{"paused":true}}`),
				remove(tenantCluster),
			}},
	} {
		t.Run(c.sa, func(t *testing.T) {
			for _, a := range c.denied {
				if allowed(t, c.sa, a) {
					t.Errorf("%s may %s %s/%s %q in %q", c.sa, a.Verb, a.Group, a.Resource, a.Name, a.Namespace)
				}
			}
			id := as(t, c.sa)
			cl, err := client.New(id.Config, client.Options{})
			if err != nil {
				t.Fatal(err)
			}
			for _, a := range c.refused {
				// An admission policy takes effect once kube-apiserver has read it: a dry run (admission without
				// the write) shows when, and writes nothing if the policy fails to refuse it.
				var err error
				if !testwait.Poll(30*time.Second, func() bool { err = a.do(cl, true); return apierrors.IsForbidden(err) }) {
					t.Errorf("%s %s (dry run): %v, want 403", c.sa, a.what, err)
					continue
				}
				if err := a.do(cl, false); !apierrors.IsForbidden(err) {
					t.Errorf("%s %s: %v, want 403", c.sa, a.what, err)
				}
			}
		})
	}
}

// attempt is a request a component must be refused; do makes it with c (a dry run when dry).
type attempt struct {
	what string
	do   func(c client.Client, dry bool) error
}

func namespaceObject(name string) client.Object {
	n := &corev1.Namespace{}
	n.Name = name
	return n
}

// allowed asks kube-apiserver whether ServiceAccount sa of capi-private may do a, as `kubectl auth can-i --as` does.
func allowed(t *testing.T, sa string, a authorizationv1.ResourceAttributes) bool {
	t.Helper()
	return allowedIn(t, deploytest.Namespace, sa, a)
}

// allowedIn asks kube-apiserver whether ServiceAccount ns/sa may do a.
func allowedIn(t *testing.T, ns, sa string, a authorizationv1.ResourceAttributes) bool {
	t.Helper()
	r := &authorizationv1.SubjectAccessReview{Spec: authorizationv1.SubjectAccessReviewSpec{
		User:               "system:serviceaccount:" + ns + ":" + sa,
		Groups:             []string{"system:serviceaccounts", "system:serviceaccounts:" + ns, "system:authenticated"},
		ResourceAttributes: &a,
	}}
	if err := env.Client.Create(t.Context(), r); err != nil {
		t.Fatal(err)
	}
	return r.Status.Allowed
}

// TestCanITable is `kubectl auth can-i --as=system:serviceaccount:capi-private:<sa>` for the requests that would
// make a component as strong as cluster-admin, against the installed RBAC: every answer is the table's. A "yes"
// in a row that must not be done everywhere is narrowed by an admission policy (TestWhatServiceAccountsMayNotDo
// makes the real requests). The table is logged for the operations guide.
func TestCanITable(t *testing.T) {
	installRBAC(t)
	sas := []string{deploytest.WebhookSA, deploytest.InjectSA, deploytest.RBACMirrorSA, deploytest.MigrateSA, deploytest.CRDsSA}
	rows := []struct {
		what string
		a    authorizationv1.ResourceAttributes
		want string // one y or n per ServiceAccount of sas
	}{
		{"bind clusterroles/cluster-admin", authorizationv1.ResourceAttributes{Verb: "bind", Group: rbacv1.GroupName, Resource: "clusterroles", Name: "cluster-admin"}, "nnnnn"},
		{"escalate clusterroles", authorizationv1.ResourceAttributes{Verb: "escalate", Group: rbacv1.GroupName, Resource: "clusterroles"}, "nnnnn"},
		{"create clusterrolebindings", authorizationv1.ResourceAttributes{Verb: "create", Group: rbacv1.GroupName, Resource: "clusterrolebindings"}, "nnynn"},
		{"get secrets -n kube-system", authorizationv1.ResourceAttributes{Verb: "get", Resource: "secrets", Namespace: "kube-system"}, "nnnnn"},
		{"list secrets -A", authorizationv1.ResourceAttributes{Verb: "list", Resource: "secrets"}, "nnnyn"},
		{"create secrets -n kube-system (policy: only its loopback Secret)", authorizationv1.ResourceAttributes{Verb: "create", Resource: "secrets", Namespace: "kube-system"}, "nynnn"},
		{"update secrets -n capi-private (policy: only its kept certificates)", authorizationv1.ResourceAttributes{Verb: "update", Resource: "secrets", Namespace: deploytest.Namespace}, "nynnn"},
		{"list services -A", authorizationv1.ResourceAttributes{Verb: "list", Resource: "services"}, "nnnnn"},
		{"list '*.*' -A", authorizationv1.ResourceAttributes{Verb: "list", Group: "*", Resource: "*"}, "nnnnn"},
		{"patch deployments/coredns -n kube-system", authorizationv1.ResourceAttributes{Verb: "patch", Group: "apps", Resource: "deployments", Namespace: "kube-system", Name: "coredns"}, "nnnnn"},
		{"delete pods -n kube-system (policy: control plane namespaces only)", authorizationv1.ResourceAttributes{Verb: "delete", Resource: "pods", Namespace: "kube-system"}, "nnnyn"},
		{"patch namespaces (policy: control plane namespaces only)", authorizationv1.ResourceAttributes{Verb: "patch", Resource: "namespaces", Name: "kube-system"}, "nnnyn"},
		{"create pods -n kube-system", authorizationv1.ResourceAttributes{Verb: "create", Resource: "pods", Namespace: "kube-system"}, "nnnnn"},
	}
	var table strings.Builder
	table.WriteString("| request | " + strings.Join(sas, " | ") + " |\n|---|" + strings.Repeat("---|", len(sas)) + "\n")
	for _, r := range rows {
		table.WriteString("| " + r.what + " |")
		for i, sa := range sas {
			got := "n"
			if allowed(t, sa, r.a) {
				got = "y"
			}
			table.WriteString(" " + map[string]string{"y": "yes", "n": "no"}[got] + " |")
			if got != r.want[i:i+1] {
				t.Errorf("can-i %s as %s: %s, want %s", r.what, sa, got, r.want[i:i+1])
			}
		}
		table.WriteString("\n")
	}
	t.Logf("kubectl auth can-i per ServiceAccount:\n%s", table.String())
}
