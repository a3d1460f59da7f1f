package hubtest

import (
	"context"
	"crypto/tls"
	"net"
	"net/http"
	"net/url"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"
	"k8s.io/utils/ptr"
	clusterv1 "sigs.k8s.io/cluster-api/api/core/v1beta2"
	capiwebhooks "sigs.k8s.io/cluster-api/webhooks"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/healthz"
	metricsserver "sigs.k8s.io/controller-runtime/pkg/metrics/server"

	"github.com/dcm-sp/acm-cluster-sp/internal/capiprivate/proxy"
	"github.com/dcm-sp/acm-cluster-sp/internal/devtest/testpki"
)

// muxServer is a controller-runtime webhook.Server that only collects handlers: the test serves its mux on a
// listener it holds.
type muxServer struct {
	once sync.Once
	mux  *http.ServeMux
}

func (s *muxServer) init()                    { s.once.Do(func() { s.mux = http.NewServeMux() }) }
func (s *muxServer) NeedLeaderElection() bool { return false }
func (s *muxServer) Register(path string, hook http.Handler) {
	s.init()
	s.mux.Handle(path, hook)
}
func (s *muxServer) Start(ctx context.Context) error { <-ctx.Done(); return nil }
func (s *muxServer) StartedChecker() healthz.Checker { return healthz.Ping }
func (s *muxServer) WebhookMux() *http.ServeMux      { s.init(); return s.mux }

// serveTLS serves h over HTTPS on a loopback listener it keeps, with a fresh CA; it returns the base URL and CA.
func serveTLS(t *testing.T, h http.Handler) (string, []byte) {
	t.Helper()
	ca := testpki.NewCA(t, "hubtest-webhook")
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	srv := &http.Server{Handler: h, ReadHeaderTimeout: 10 * time.Second,
		TLSConfig: &tls.Config{Certificates: []tls.Certificate{ca.Serving(t, "webhook").TLS(t)}, MinVersion: tls.VersionTLS12}}
	go func() { _ = srv.ServeTLS(l, "", "") }()
	t.Cleanup(func() { _ = srv.Close() })
	return "https://" + l.Addr().String(), ca.CertPEM
}

// CAPI's own webhooks (sigs.k8s.io/cluster-api/webhooks, unmodified, speaking the standard groups) guard the
// private CRDs through the proxy's admission side: kube-apiserver sends AdmissionReviews about private objects,
// the proxy translates them for CAPI and translates CAPI's answers back. A MachineDeployment created through the
// proxy at v1beta1 is defaulted by CAPI's defaulter; an invalid Cluster is refused with CAPI's message.
func TestAdmissionWebhooksOnPrivateCRDs(t *testing.T) {
	ctx := t.Context()
	ps := startProxy(t, proxy.Options{})

	// CAPI's webhooks, registered through a manager whose client reads through the proxy.
	scheme := runtime.NewScheme()
	_ = clientgoscheme.AddToScheme(scheme)
	_ = clusterv1.AddToScheme(scheme)
	hooks := &muxServer{}
	mgr, err := ctrl.NewManager(ps.config(env.AdminToken), ctrl.Options{Scheme: scheme, WebhookServer: hooks,
		Metrics: metricsserver.Options{BindAddress: "0"}, HealthProbeBindAddress: "0"})
	if err != nil {
		t.Fatal(err)
	}
	if err := (&capiwebhooks.MachineDeployment{}).SetupWebhookWithManager(mgr); err != nil {
		t.Fatal(err)
	}
	if err := (&capiwebhooks.Cluster{Client: mgr.GetAPIReader()}).SetupWebhookWithManager(mgr); err != nil {
		t.Fatal(err)
	}
	var capiCalls atomic.Int64
	capiURL, capiCA := serveTLS(t, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		capiCalls.Add(1)
		hooks.WebhookMux().ServeHTTP(w, r)
	}))

	// The proxy's admission side in front of it.
	pool := testpki.NewCA(t, "unused").Pool()
	pool.AppendCertsFromPEM(capiCA)
	tr := http.DefaultTransport.(*http.Transport).Clone()
	tr.TLSClientConfig = &tls.Config{RootCAs: pool, MinVersion: tls.VersionTLS12}
	u, _ := url.Parse(capiURL)
	adm, err := proxy.NewAdmission(proxy.AdmissionOptions{Upstream: u, Transport: tr, Metrics: ps.P.Metrics()})
	if err != nil {
		t.Fatal(err)
	}
	admURL, admCA := serveTLS(t, adm)

	ns := env.NewNamespace(t, "admission")
	if err := env.Client.Patch(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}}, rawPatch(`{"metadata":{"labels":{"hubtest-admission":"`+ns+`"}}}`)); err != nil {
		t.Fatal(err)
	}
	sel := &metav1.LabelSelector{MatchLabels: map[string]string{"hubtest-admission": ns}}
	rule := func(resource string) []admissionregistrationv1.RuleWithOperations {
		return []admissionregistrationv1.RuleWithOperations{{
			Operations: []admissionregistrationv1.OperationType{admissionregistrationv1.Create, admissionregistrationv1.Update},
			Rule:       admissionregistrationv1.Rule{APIGroups: []string{privCore}, APIVersions: []string{"v1beta2"}, Resources: []string{resource}},
		}}
	}
	cc := func(path string) admissionregistrationv1.WebhookClientConfig {
		return admissionregistrationv1.WebhookClientConfig{URL: ptr.To(admURL + path), CABundle: admCA}
	}
	none := admissionregistrationv1.SideEffectClassNone
	fail := admissionregistrationv1.Fail
	equivalent := admissionregistrationv1.Equivalent
	mutating := &admissionregistrationv1.MutatingWebhookConfiguration{ObjectMeta: metav1.ObjectMeta{Name: ns + "-capi"},
		Webhooks: []admissionregistrationv1.MutatingWebhook{{
			Name: "default.machinedeployment.cluster.hypershift.openshift.io", ClientConfig: cc("/mutate-cluster-x-k8s-io-v1beta2-machinedeployment"),
			Rules: rule("machinedeployments"), NamespaceSelector: sel, SideEffects: &none, FailurePolicy: &fail, MatchPolicy: &equivalent,
			AdmissionReviewVersions: []string{"v1"},
		}}}
	validating := &admissionregistrationv1.ValidatingWebhookConfiguration{ObjectMeta: metav1.ObjectMeta{Name: ns + "-capi"},
		Webhooks: []admissionregistrationv1.ValidatingWebhook{{
			Name: "validation.cluster.cluster.hypershift.openshift.io", ClientConfig: cc("/validate-cluster-x-k8s-io-v1beta2-cluster"),
			Rules: rule("clusters"), NamespaceSelector: sel, SideEffects: &none, FailurePolicy: &fail, MatchPolicy: &equivalent,
			AdmissionReviewVersions: []string{"v1"},
		}}}
	if err := env.Client.Create(ctx, mutating); err != nil {
		t.Fatal(err)
	}
	if err := env.Client.Create(ctx, validating); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		_ = env.Client.Delete(context.Background(), mutating)
		_ = env.Client.Delete(context.Background(), validating)
	})

	pc := ps.dynamic(t, env.AdminToken)
	clusters := pc.Resource(gvr(stdCore, "v1beta2", "clusters")).Namespace(ns)
	bad := kinds[0].object("v1beta2", ns, "bad")
	bad.Object["spec"].(map[string]any)["clusterNetwork"] = map[string]any{"pods": map[string]any{"cidrBlocks": []any{"10.0.0.0/33"}}}
	// kube-apiserver picks the configuration up within moments: wait until the invalid Cluster is refused.
	var refusal error
	waitFor(t, 30*time.Second, "CAPI's Cluster validation to refuse an invalid CIDR", func() (bool, error) {
		_, err := clusters.Create(ctx, bad, metav1.CreateOptions{DryRun: []string{metav1.DryRunAll}})
		refusal = err
		return err != nil, nil
	})
	if !apierrors.IsInvalid(refusal) && !apierrors.IsForbidden(refusal) || !strings.Contains(refusal.Error(), "spec.clusterNetwork.pods.cidrBlocks[0]") ||
		!strings.Contains(refusal.Error(), `Cluster.cluster.x-k8s.io "bad" is invalid`) {
		t.Fatalf("invalid Cluster: %v", refusal)
	}
	if strings.Contains(refusal.Error(), "hypershift") { // the webhook's name too is shown in the client's view
		t.Errorf("refusal names a private group: %v", refusal)
	}
	if _, err := clusters.Create(ctx, kinds[0].object("v1beta2", ns, "good"), metav1.CreateOptions{}); err != nil {
		t.Fatalf("valid Cluster: %v", err)
	}

	// A MachineDeployment at v1beta1 (converted for the webhook by matchPolicy Equivalent), without the fields the
	// defaulter sets.
	md := kinds[4].object("v1beta1", ns, "md")
	delete(md.Object["spec"].(map[string]any), "selector")
	md.Object["spec"].(map[string]any)["selector"] = map[string]any{}
	md.Object["spec"].(map[string]any)["template"].(map[string]any)["metadata"] = map[string]any{}
	md.SetLabels(map[string]string{"hubtest": "admission"})
	if _, err := pc.Resource(gvr(stdCore, "v1beta1", "machinedeployments")).Namespace(ns).Create(ctx, md, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	got, err := pc.Resource(gvr(stdCore, "v1beta2", "machinedeployments")).Namespace(ns).Get(ctx, "md", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if v := nested(t, got, "spec", "rollout", "strategy", "type"); v != "RollingUpdate" {
		t.Errorf("defaulted rollout strategy %q", v)
	}
	if got.GetLabels()["cluster.x-k8s.io/cluster-name"] != "c1" {
		t.Errorf("defaulted labels %v", got.GetLabels())
	}
	if v := nested(t, got, "spec", "selector", "matchLabels", "cluster.x-k8s.io/deployment-name"); v != "md" {
		t.Errorf("defaulted selector %q", v)
	}
	stored, err := direct(t).Resource(gvr(privCore, "v1beta2", "machinedeployments")).Namespace(ns).Get(ctx, "md", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if nested(t, stored, "spec", "template", "spec", "infrastructureRef", "apiGroup") != privInfra || stored.GetLabels()["cluster.x-k8s.io/cluster-name"] != "c1" {
		t.Errorf("stored MachineDeployment %v", stored.Object["spec"])
	}
	for _, dir := range []string{"request", "response"} {
		if ps.metric(t, "capi_private_proxy_objects_translated_total", "direction", dir) == 0 {
			t.Errorf("objects_translated_total{%s} 0", dir)
		}
	}

	// Only CAPI's webhook paths of the private groups are forwarded: anything else is 404 and never reaches the
	// webhook server (runtime.cluster.x-k8s.io is not renamed, so its webhook is not served here).
	pool = testpki.NewCA(t, "unused-too").Pool()
	pool.AppendCertsFromPEM(admCA)
	hc := &http.Client{Transport: &http.Transport{TLSClientConfig: &tls.Config{RootCAs: pool, MinVersion: tls.VersionTLS12}}}
	before := capiCalls.Load()
	for _, path := range []string{"/convert", "/metrics", "/mutate-runtime-cluster-x-k8s-io-v1beta2-extensionconfig", "/validate-cluster-x-k8s-io-v1beta2-cluster/x"} {
		resp, err := hc.Post(admURL+path, "application/json", strings.NewReader(`{"kind":"AdmissionReview"}`))
		if err != nil {
			t.Fatal(err)
		}
		_ = resp.Body.Close()
		if resp.StatusCode != http.StatusNotFound {
			t.Errorf("POST %s on the admission side: %d, want 404", path, resp.StatusCode)
		}
	}
	if n := capiCalls.Load() - before; n != 0 {
		t.Errorf("%d requests outside the allowed paths reached CAPI's webhook server", n)
	}
}

func rawPatch(p string) client.Patch { return client.RawPatch(types.MergePatchType, []byte(p)) }
