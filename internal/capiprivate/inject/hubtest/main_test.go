// Package hubtest runs the sidecar injector, the RBAC mirror and the proxy against the real kube-apiserver of
// capi-private's test hub (capihub, with ServiceAccount admission): the webhook is registered on the API server,
// Pods are created from HyperShift's recorded Deployments, and the upstream CAPI controllers run with clients built
// from what an injected Pod's containers see.
package hubtest

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"os"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/go-logr/logr"
	"github.com/go-logr/stdr"
	authorizationv1 "k8s.io/api/authorization/v1"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	schedulingv1 "k8s.io/api/scheduling/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/rest"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/dcm-sp/acm-cluster-sp/internal/capiprivate/inject"
	"github.com/dcm-sp/acm-cluster-sp/internal/capiprivate/migrate/plan"
	"github.com/dcm-sp/acm-cluster-sp/internal/devtest/capi/capihub"
	"github.com/dcm-sp/acm-cluster-sp/internal/devtest/capi/capipods"
	"github.com/dcm-sp/acm-cluster-sp/internal/devtest/capi/injecttest"
)

var (
	env *capihub.Env
	// main is the injector most tests use; clockOffset shifts its certificate controller's clock.
	main        *injector
	clockOffset atomic.Int64
	// injectorConfig is the identity the injectors run as: exactly inject.Rules().
	injectorConfig *rest.Config
)

// TestLabel keeps each injector's registration to its own namespaces: every test namespace carries it.
const TestLabel = "capi-private-test/injector"

func TestMain(m *testing.M) {
	os.Exit(capihub.MainWith(m, &env, capihub.Options{ServiceAccounts: true}, setup))
}

// setup runs once the hub is up: HyperShift's PriorityClasses (the Pods name them), the injector's identity and
// the main injector.
func setup(ctx context.Context, e *capihub.Env) (func(), error) {
	env = e
	for _, pc := range []string{"hypershift-control-plane", "hypershift-operator"} {
		if err := e.Client.Create(ctx, &schedulingv1.PriorityClass{ObjectMeta: metav1.ObjectMeta{Name: pc}, Value: 100000000}); err != nil {
			return nil, err
		}
	}
	cfg, err := identity(ctx, "capi-private-inject", inject.Rules())
	if err != nil {
		return nil, err
	}
	if err := keyRole(ctx, "capi-private-inject"); err != nil {
		return nil, err
	}
	injectorConfig = cfg
	main, err = startInjector(ctx, "main", func() time.Time { return time.Now().Add(time.Duration(clockOffset.Load())) })
	if err != nil {
		return nil, err
	}
	return func() { _ = main.Stop() }, nil
}

// identity makes a client-certificate user bound to a ClusterRole of rules.
func identity(ctx context.Context, name string, rules []rbacv1.PolicyRule) (*rest.Config, error) {
	_, cfg, err := env.Hub.AddUser(name)
	if err != nil {
		return nil, err
	}
	role := &rbacv1.ClusterRole{ObjectMeta: metav1.ObjectMeta{Name: name}, Rules: rules}
	binding := &rbacv1.ClusterRoleBinding{
		ObjectMeta: metav1.ObjectMeta{Name: name},
		RoleRef:    rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "ClusterRole", Name: name},
		Subjects:   []rbacv1.Subject{{APIGroup: rbacv1.GroupName, Kind: rbacv1.UserKind, Name: name}},
	}
	for _, o := range []client.Object{role, binding} {
		if err := env.Client.Create(ctx, o); err != nil {
			return nil, err
		}
	}
	cfg.QPS = -1
	// kube-apiserver's RBAC authorizer learns the binding from its own informer: wait until it allows the first
	// rule, or a controller started at once is refused and backs off for many seconds.
	r := rules[0]
	ctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	for {
		sar := &authorizationv1.SubjectAccessReview{Spec: authorizationv1.SubjectAccessReviewSpec{User: name,
			ResourceAttributes: &authorizationv1.ResourceAttributes{Verb: r.Verbs[0], Group: r.APIGroups[0], Resource: r.Resources[0]}}}
		if err := env.Client.Create(ctx, sar); err == nil && sar.Status.Allowed {
			return cfg, nil
		}
		select {
		case <-ctx.Done():
			return nil, fmt.Errorf("RBAC of %s never took effect", name)
		case <-time.After(50 * time.Millisecond):
		}
	}
}

// injector is an in-process `capi-private inject` registered for namespaces labelled TestLabel=name.
type injector struct {
	*injecttest.Injector
	name string
}

// startInjector runs inject.Run as injectorConfig, registers it for namespaces labelled TestLabel=name, and waits
// until kube-apiserver sends it Pods.
func startInjector(ctx context.Context, name string, now func() time.Time, configure ...func(*inject.Config)) (*injector, error) {
	cfg := inject.DefaultConfig("registry.example/capi-private:test")
	for _, f := range configure {
		f(&cfg)
	}
	in, err := injecttest.StartInjector(ctx, env.Client, injecttest.InjectorOptions{
		Registration: "capi-private-inject-" + name, Kube: injectorConfig, Config: cfg, Now: now,
		CertFile: env.WebhookCertFile, KeyFile: env.WebhookKeyFile, CA: env.WebhookCA,
		NamespaceLabels: map[string]string{TestLabel: name},
	})
	if err != nil {
		return nil, err
	}
	ns, err := createNamespace(ctx, "probe-"+name, name, true)
	if err == nil {
		f, _ := injecttest.Load("cluster-api", ns)
		err = env.Client.Create(ctx, f.ServiceAccount)
	}
	if err == nil {
		wctx, cancel := context.WithTimeout(ctx, time.Minute)
		defer cancel()
		err = injecttest.WaitEffective(wctx, env.Client, "cluster-api", ns, in.Exited())
	}
	if err != nil {
		_ = in.Stop()
		return nil, err
	}
	return &injector{Injector: in, name: name}, nil
}

// counter reads one sample of the injector's metrics (0 if absent).
func (in *injector) counter(t testing.TB, series string) float64 {
	t.Helper()
	return scrape(t, in.MetricsURL+"/metrics", series)
}

// scrape reads one sample of the Prometheus text at url (0 when absent).
func scrape(t testing.TB, url, sample string) float64 {
	t.Helper()
	resp, err := http.Get(url) //nolint:noctx // loopback metrics in a test
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	body, _ := io.ReadAll(resp.Body)
	for _, line := range strings.Split(string(body), "\n") {
		if v, ok := strings.CutPrefix(line, sample+" "); ok {
			f, _ := strconv.ParseFloat(v, 64)
			return f
		}
	}
	return 0
}

var nsCounter atomic.Int64

// createNamespace makes a namespace for injector's registration. A proxied one is the control plane namespace of a
// private HostedCluster (created in its own namespace, with the classifier's mark, as a fixture: the classifier's
// own work is TestBornPrivate's), labelled as HyperShift labels it, and marked as the private operator's namespace
// is (the operator's Pods are injected there too). Any other is a plain namespace, which the webhooks never select.
func createNamespace(ctx context.Context, prefix, injector string, proxied bool) (string, error) {
	name := fmt.Sprintf("%s-%d", prefix, nsCounter.Add(1))
	if !proxied {
		return name, env.Client.Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: name, Labels: map[string]string{TestLabel: injector}}})
	}
	hc := capipods.HostedClusterSpec{Namespace: name, Name: "hc", Annotations: map[string]string{plan.PrivateTypesAnnotation: "true"}}
	if err := createHostedCluster(ctx, hc); err != nil {
		return "", err
	}
	cp := hc.ControlPlaneNamespace()
	return cp, env.Client.Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: cp, Labels: map[string]string{
		TestLabel: injector, capipods.HostedControlPlaneLabel: "true", inject.MarkerLabel: inject.MarkerValue,
	}}})
}

// createHostedCluster creates the HostedCluster of spec alone, and its namespace.
func createHostedCluster(ctx context.Context, spec capipods.HostedClusterSpec) error {
	if err := env.Client.Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: spec.Namespace}}); client.IgnoreAlreadyExists(err) != nil {
		return err
	}
	raw, err := runtime.DefaultUnstructuredConverter.ToUnstructured(spec.HostedCluster())
	if err != nil {
		return err
	}
	u := &unstructured.Unstructured{Object: raw}
	u.SetGroupVersionKind(inject.HostedClusterKind)
	return env.Client.Create(ctx, u)
}

func namespace(t testing.TB, prefix, injector string, marked bool) string {
	t.Helper()
	name, err := createNamespace(context.Background(), prefix, injector, marked)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		env.DeleteNamespace(name)
		if hcNamespace, ok := strings.CutSuffix(name, "-hc"); ok {
			env.DeleteNamespace(hcNamespace)
		}
	})
	return name
}

// createPod creates component's Pod (from its recorded Deployment) and its ServiceAccount in ns and returns the
// Pod as stored.
func createPod(t testing.TB, component, ns, name string) (*corev1.Pod, error) {
	t.Helper()
	return createPodAs(t, component, ns, ns, name)
}

// createPodAs is createPod with the objects rendered for namespace renderedFor (HyperShift writes the namespace
// into labels and arguments) but created in ns.
func createPodAs(t testing.TB, component, renderedFor, ns, name string) (*corev1.Pod, error) {
	t.Helper()
	f, err := injecttest.Load(component, renderedFor)
	if err != nil {
		t.Fatal(err)
	}
	f.ServiceAccount.Namespace = ns
	if err := env.Client.Create(context.Background(), f.ServiceAccount); err != nil && !apierrors.IsAlreadyExists(err) {
		t.Fatal(err)
	}
	pod := f.Pod(name)
	pod.Namespace = ns
	return pod, env.Client.Create(context.Background(), pod)
}

// logger is the managers' log: stderr with CAPI_TESTENV_VERBOSE, else discarded.
func logger() logr.Logger {
	if os.Getenv("CAPI_TESTENV_VERBOSE") == "" {
		return logr.Discard()
	}
	verbosity.Do(func() { stdr.SetVerbosity(4) })
	return stdr.New(nil)
}

var verbosity sync.Once

// keyRole grants user inject.KeyRules() in the injector's own namespace (created here, as the install creates it).
func keyRole(ctx context.Context, user string) error {
	ns := inject.DefaultKeyNamespace
	if err := env.Client.Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}}); client.IgnoreAlreadyExists(err) != nil {
		return err
	}
	role := &rbacv1.Role{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: user + "-keys"}, Rules: inject.KeyRules()}
	binding := &rbacv1.RoleBinding{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: user + "-keys"},
		RoleRef:    rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "Role", Name: role.Name},
		Subjects:   []rbacv1.Subject{{APIGroup: rbacv1.GroupName, Kind: rbacv1.UserKind, Name: user}},
	}
	for _, o := range []client.Object{role, binding} {
		if err := env.Client.Create(ctx, o); err != nil {
			return err
		}
	}
	return nil
}
