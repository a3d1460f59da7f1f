// Package capihub is capi-private's test harness (docs/capi-private.md), on loopback only and with no
// fake API: a real kube-apiserver and etcd (internal/devtest/localhub) with token authentication, audit logging and
// OwnerReferencesPermissionEnforcement; a real kube-controller-manager running the garbage collector, the
// namespace controller and the deployment and ReplicaSet controllers (Pods of Deployments are created through the
// API server and its admission webhooks; no scheduler or kubelet runs: capipods's kubelet stand-in runs what the
// Pods would); the platform's standard CAPI CRDs (v1beta2 only) with a few platform objects, the standard
// infrastructure provider CRDs, CAP-Agent's CRDs (a group never renamed), HostedCluster and HostedControlPlane,
// and the private CRDs, converted by the conversion webhook, which runs in-process over HTTPS.
//
// It is test and dev machinery: import it only from tests (and the dev command), never from a production path.
package capihub

import (
	"context"
	"crypto/rand"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/wait"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"
	clientcmdapi "k8s.io/client-go/tools/clientcmd/api"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/dcm-sp/acm-cluster-sp/internal/capiprivate/crds"
	"github.com/dcm-sp/acm-cluster-sp/internal/capiprivate/crds/upstream"
	"github.com/dcm-sp/acm-cluster-sp/internal/capiprivate/webhook"
	"github.com/dcm-sp/acm-cluster-sp/internal/devtest/localhub"
	"github.com/dcm-sp/acm-cluster-sp/internal/devtest/testlog"
)

// Users of the static token file (--token-auth-file). Each Env gets fresh random tokens.
const (
	// AdminUser is in system:masters.
	AdminUser = "capi-private-admin"
	// LimitedUser is only authenticated: RBAC grants it nothing until a test does.
	LimitedUser = "capi-private-limited"
	// WebhookUser is the conversion webhook's identity: get, list and watch on CRDs (its apiVersion getter reads them),
	// nothing else.
	WebhookUser = "capi-private-webhook"
)

// The platform's objects: standard CAPI objects the proxy must never show or change.
const (
	PlatformNamespace = "openshift-cluster-api"
	PlatformCluster   = "platform"
	PlatformMachine   = "platform-worker-0"
	// PlatformSecret is owned by PlatformMachine (controller ref cluster.x-k8s.io/v1beta2).
	PlatformSecret = "platform-worker-0-bootstrap"
)

// FieldManager writes everything capihub installs except the private CRDs (crds.Install writes those, as
// crds.FieldManager).
const FieldManager = "capi-private-testenv"

// Controllers run by the kube-controller-manager: the garbage collector, the namespace controller, and the
// deployment and ReplicaSet controllers (a deleted Pod of a Deployment is replaced through the API server, as in a
// cluster).
var controllers = []string{"garbage-collector-controller", "namespace-controller", "deployment-controller", "replicaset-controller"}

// serviceAccountControllers also run with Options.ServiceAccounts.
var serviceAccountControllers = []string{"serviceaccount-controller", "root-ca-certificate-publisher-controller"}

// Options configure Start.
type Options struct {
	// BinDir holds kube-apiserver, etcd, kubectl and kube-controller-manager (default localhub.DefaultBinDir()).
	BinDir string
	// ControllerManagerOutput receives kube-controller-manager's log (default: kept in memory, see Env.ControllerManager).
	ControllerManagerOutput io.Writer
	// ServiceAccounts runs kube-apiserver's ServiceAccount admission plugin (envtest disables it: every Pod then
	// gets its projected kube-api-access volume, and its service account must exist), and kube-controller-manager's
	// service-account controller (a "default" one in every namespace) and root CA publisher (kube-root-ca.crt).
	ServiceAccounts bool
}

// Timings of Start, for reports.
type Timings struct {
	Hub, Webhook, CRDs, ControllerManager, Total time.Duration
}

func (t Timings) String() string {
	return fmt.Sprintf("hub %s, webhook %s, CRDs %s, kube-controller-manager (GC observed working) %s, total %s",
		t.Hub.Round(time.Millisecond), t.Webhook.Round(time.Millisecond), t.CRDs.Round(time.Millisecond),
		t.ControllerManager.Round(time.Millisecond), t.Total.Round(time.Millisecond))
}

// Env is a running test environment.
type Env struct {
	// Hub is kube-apiserver + etcd.
	Hub *localhub.Hub
	// Config is an admin (client certificate, system:masters) config without client-side rate limit; Client uses
	// it, with client-go's scheme plus apiextensions.k8s.io/v1 (work with CAPI objects as unstructured).
	Config *rest.Config
	Client client.Client
	// Dir holds the token file, the audit policy and log, the webhook's key pair. Removed by Stop.
	Dir string
	// AuditLog is kube-apiserver's audit log (JSON lines, level Metadata for every request).
	AuditLog string
	// Tokens of AdminUser, LimitedUser and WebhookUser.
	AdminToken, LimitedToken, WebhookToken string
	// ControllerManager runs the garbage collector, the namespace controller and the workload controllers.
	ControllerManager *localhub.ControllerManager
	// Webhook is the in-process conversion webhook, reading CRDs as WebhookUser; Metrics is its registry.
	Webhook *webhook.Webhook
	Metrics *prometheus.Registry
	// WebhookURL is the private CRDs' conversion clientConfig url (https://127.0.0.1:<port>/convert), and
	// WebhookCA its caBundle (PEM). WebhookCertFile and WebhookKeyFile are the webhook's key pair (for 127.0.0.1).
	WebhookURL                      string
	WebhookCA                       []byte
	WebhookCertFile, WebhookKeyFile string
	Timings                         Timings

	webhookDown atomic.Bool
	cancel      context.CancelFunc
	served      chan error

	// releaseCtx ends the finalizer releases of deleted namespaces (DeleteNamespace); releases counts them.
	releaseCtx    context.Context
	releaseCancel context.CancelFunc
	releases      sync.WaitGroup
}

// Start starts the environment; ctx bounds the start only. Call Stop when done, also after an error.
func Start(ctx context.Context, opts Options) (env *Env, err error) {
	begin := time.Now()
	e := &Env{served: make(chan error, 1)}
	e.releaseCtx, e.releaseCancel = context.WithCancel(context.Background())
	defer func() {
		if err != nil {
			_ = e.Stop()
		}
	}()
	if e.Dir, err = os.MkdirTemp("", "capi-private-testenv-"); err != nil {
		return nil, err
	}
	if err := e.writeAuthFiles(); err != nil {
		return nil, err
	}

	t := time.Now()
	flags := map[string][]string{
		"token-auth-file":          {filepath.Join(e.Dir, "tokens.csv")},
		"audit-policy-file":        {filepath.Join(e.Dir, "audit-policy.yaml")},
		"audit-log-path":           {e.AuditLog},
		"enable-admission-plugins": {"OwnerReferencesPermissionEnforcement"},
	}
	if opts.ServiceAccounts {
		flags["disable-admission-plugins"] = nil // not passed: the default plugins, ServiceAccount among them
	}
	base, err := standardBase()
	if err != nil {
		return nil, err
	}
	e.Hub, err = localhub.Start(localhub.Options{BinDir: opts.BinDir, APIServerFlags: flags, Base: base})
	if err != nil {
		return nil, err
	}
	e.Config = rest.CopyConfig(e.Hub.Config)
	e.Config.QPS = -1 // no client-side rate limit: tests wait on conditions
	scheme := runtime.NewScheme()
	if err := clientgoscheme.AddToScheme(scheme); err != nil {
		return nil, err
	}
	if err := apiextensionsv1.AddToScheme(scheme); err != nil {
		return nil, err
	}
	if e.Client, err = client.New(e.Config, client.Options{Scheme: scheme}); err != nil {
		return nil, err
	}
	e.Timings.Hub = time.Since(t)

	t = time.Now()
	if err := e.startWebhook(ctx); err != nil {
		return nil, err
	}
	e.Timings.Webhook = time.Since(t)

	t = time.Now()
	if err := e.installCRDs(ctx); err != nil {
		return nil, err
	}
	if err := e.createPlatformObjects(ctx); err != nil {
		return nil, err
	}
	e.Timings.CRDs = time.Since(t)

	// After the CRDs: the garbage collector reads discovery at start (then every 30 s).
	t = time.Now()
	if err := e.startControllerManager(ctx, opts); err != nil {
		return nil, err
	}
	e.Timings.ControllerManager = time.Since(t)
	e.Timings.Total = time.Since(begin)
	return e, nil
}

func randomToken() string {
	b := make([]byte, 24)
	_, _ = rand.Read(b)
	return hex.EncodeToString(b)
}

func (e *Env) writeAuthFiles() error {
	e.AdminToken, e.LimitedToken, e.WebhookToken = randomToken(), randomToken(), randomToken()
	tokens := fmt.Sprintf("%s,%s,%s,\"system:masters\"\n%s,%s,%s\n%s,%s,%s\n",
		e.AdminToken, AdminUser, AdminUser, e.LimitedToken, LimitedUser, LimitedUser, e.WebhookToken, WebhookUser, WebhookUser)
	// Every request at level Metadata: who did what, without bodies.
	policy := "apiVersion: audit.k8s.io/v1\nkind: Policy\nomitStages: [RequestReceived]\nrules:\n- level: Metadata\n"
	e.AuditLog = filepath.Join(e.Dir, "audit.log")
	if err := os.WriteFile(filepath.Join(e.Dir, "tokens.csv"), []byte(tokens), 0o600); err != nil {
		return err
	}
	return os.WriteFile(filepath.Join(e.Dir, "audit-policy.yaml"), []byte(policy), 0o600)
}

// TokenConfig is a config that authenticates with a bearer token (e.g. LimitedToken).
func (e *Env) TokenConfig(token string) *rest.Config {
	return &rest.Config{
		Host:            e.Config.Host,
		TLSClientConfig: rest.TLSClientConfig{CAData: e.Config.CAData},
		BearerToken:     token,
		QPS:             -1, // no client-side rate limit: tests wait on conditions
	}
}

// Kubeconfig is a kubeconfig file's content for a bearer token.
func (e *Env) Kubeconfig(user, token string) ([]byte, error) {
	cfg := clientcmdapi.NewConfig()
	cfg.Clusters["hub"] = &clientcmdapi.Cluster{Server: e.Config.Host, CertificateAuthorityData: e.Config.CAData}
	cfg.AuthInfos[user] = &clientcmdapi.AuthInfo{Token: token}
	cfg.Contexts["hub"] = &clientcmdapi.Context{Cluster: "hub", AuthInfo: user}
	cfg.CurrentContext = "hub"
	return clientcmd.Write(*cfg)
}

func (e *Env) startWebhook(ctx context.Context) error {
	// The webhook's RBAC: get, list and watch on CRDs.
	role := &rbacv1.ClusterRole{
		ObjectMeta: metav1.ObjectMeta{Name: WebhookUser},
		Rules: []rbacv1.PolicyRule{{
			APIGroups: []string{apiextensionsv1.GroupName}, Resources: []string{"customresourcedefinitions"},
			Verbs: []string{"get", "list", "watch"},
		}},
	}
	binding := &rbacv1.ClusterRoleBinding{
		ObjectMeta: metav1.ObjectMeta{Name: WebhookUser},
		RoleRef:    rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "ClusterRole", Name: WebhookUser},
		Subjects:   []rbacv1.Subject{{APIGroup: rbacv1.GroupName, Kind: rbacv1.UserKind, Name: WebhookUser}},
	}
	for _, o := range []client.Object{role, binding} {
		if err := e.Client.Create(ctx, o); err != nil {
			return fmt.Errorf("creating %T %s: %w", o, o.GetName(), err)
		}
	}

	cert, err := newServingCert()
	if err != nil {
		return err
	}
	e.WebhookCertFile, e.WebhookKeyFile = filepath.Join(e.Dir, "webhook.crt"), filepath.Join(e.Dir, "webhook.key")
	if err := os.WriteFile(e.WebhookCertFile, cert.Cert, 0o600); err != nil {
		return err
	}
	if err := os.WriteFile(e.WebhookKeyFile, cert.Key, 0o600); err != nil {
		return err
	}
	e.WebhookCA = cert.CA

	e.Metrics = prometheus.NewRegistry()
	if e.Webhook, err = webhook.New(e.TokenConfig(e.WebhookToken), e.Metrics, webhook.Limits{}); err != nil {
		return err
	}
	// The listener stays open for the whole run; "down" is simulated by the gate (see SetWebhookDown).
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return err
	}
	e.WebhookURL = "https://" + l.Addr().String() + webhook.ConvertPath
	runCtx, cancel := context.WithCancel(context.Background())
	e.cancel = cancel
	e.Webhook.Start(runCtx)
	go func() {
		e.served <- webhook.ServeTLS(runCtx, l, e.WebhookCertFile, e.WebhookKeyFile, e.gate(e.Webhook.Handler()), webhook.Limits{})
	}()
	return e.Webhook.WaitReady(ctx)
}

// gate answers like a webhook that is down (the connection is closed without an answer, or 503 on HTTP/2) while
// SetWebhookDown(true) is in effect.
func (e *Env) gate(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if !e.webhookDown.Load() {
			next.ServeHTTP(w, r)
			return
		}
		if hj, ok := w.(http.Hijacker); ok {
			if conn, _, err := hj.Hijack(); err == nil {
				_ = conn.Close()
				return
			}
		}
		http.Error(w, "webhook down (capihub)", http.StatusServiceUnavailable)
	})
}

// SetWebhookDown makes the conversion webhook unavailable (true) or available again (false).
func (e *Env) SetWebhookDown(down bool) { e.webhookDown.Store(down) }

// WebhookClientConfig is the private CRDs' conversion clientConfig: WebhookURL with WebhookCA.
func (e *Env) WebhookClientConfig() apiextensionsv1.WebhookClientConfig {
	return apiextensionsv1.WebhookClientConfig{URL: ptr.To(e.WebhookURL), CABundle: e.WebhookCA}
}

// StandardCRDs are the CRDs capihub installs besides the private ones: the platform set, every vendored
// infrastructure provider in its standard group (CAPK, CAPA, CAPZ, CAPG, CAPIBM, CAPO: where legacy objects
// live), CAP-Agent's (never renamed), HostedCluster and HostedControlPlane.
func StandardCRDs() ([]*unstructured.Unstructured, error) {
	var all []*unstructured.Unstructured
	for _, set := range []func() ([]*unstructured.Unstructured, error){upstream.Platform, upstream.StandardInfrastructure, AgentCRDs, upstream.HyperShift} {
		crds, err := set()
		if err != nil {
			return nil, err
		}
		all = append(all, crds...)
	}
	return all, nil
}

// standardBase is the hub every Env starts from: the StandardCRDs, applied and Established (a cluster has them before
// capi-private is installed). The base is built once and cached by localhub; its Key is the CRDs' content.
func standardBase() (*localhub.Base, error) {
	standard, err := StandardCRDs()
	if err != nil {
		return nil, err
	}
	h := sha256.New()
	for _, crd := range standard {
		data, err := crd.MarshalJSON()
		if err != nil {
			return nil, err
		}
		h.Write(data)
	}
	return &localhub.Base{
		Key: "capihub standard CRDs " + hex.EncodeToString(h.Sum(nil)),
		Build: func(ctx context.Context, cfg *rest.Config) error {
			c, err := crds.NewClient(cfg)
			if err != nil {
				return err
			}
			pending, err := crds.Apply(ctx, c, standard, FieldManager)
			if err != nil {
				return err
			}
			return crds.WaitEstablished(ctx, c, pending)
		},
	}, nil
}

// installCRDs installs the private CRDs as capi-private does (the standard ones come with the hub's base).
func (e *Env) installCRDs(ctx context.Context) error {
	return crds.Install(ctx, e.Client, crds.InstallOptions{ClientConfig: e.WebhookClientConfig()})
}

// Platform GVKs (the standard group, v1beta2).
func platformObject(kind, name string, spec map[string]any) *unstructured.Unstructured {
	return &unstructured.Unstructured{Object: map[string]any{
		"apiVersion": "cluster.x-k8s.io/v1beta2", "kind": kind,
		"metadata": map[string]any{"name": name, "namespace": PlatformNamespace},
		"spec":     spec,
	}}
}

func (e *Env) createPlatformObjects(ctx context.Context) error {
	if err := e.Client.Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: PlatformNamespace}}); err != nil {
		return err
	}
	cluster := platformObject("Cluster", PlatformCluster, map[string]any{
		"infrastructureRef": map[string]any{"apiGroup": "infrastructure.cluster.x-k8s.io", "kind": "KubevirtCluster", "name": PlatformCluster},
	})
	machine := platformObject("Machine", PlatformMachine, map[string]any{
		"clusterName":       PlatformCluster,
		"bootstrap":         map[string]any{"dataSecretName": PlatformSecret},
		"infrastructureRef": map[string]any{"apiGroup": "infrastructure.cluster.x-k8s.io", "kind": "KubevirtMachine", "name": PlatformMachine},
	})
	machine.SetLabels(map[string]string{"cluster.x-k8s.io/cluster-name": PlatformCluster})
	for _, o := range []*unstructured.Unstructured{cluster, machine} {
		if err := e.Client.Create(ctx, o); err != nil {
			return fmt.Errorf("creating platform %s: %w", o.GetKind(), err)
		}
	}
	secret := &corev1.Secret{
		ObjectMeta: metav1.ObjectMeta{
			Name: PlatformSecret, Namespace: PlatformNamespace,
			Labels: map[string]string{"cluster.x-k8s.io/cluster-name": PlatformCluster},
			OwnerReferences: []metav1.OwnerReference{{
				APIVersion: "cluster.x-k8s.io/v1beta2", Kind: "Machine", Name: PlatformMachine, UID: machine.GetUID(),
				Controller: ptr.To(true),
			}},
		},
		StringData: map[string]string{"value": "platform bootstrap data"},
	}
	return e.Client.Create(ctx, secret)
}

func (e *Env) startControllerManager(ctx context.Context, opts Options) error {
	kubeconfig, err := e.Kubeconfig(AdminUser, e.AdminToken)
	if err != nil {
		return err
	}
	ctrls := controllers
	if opts.ServiceAccounts {
		ctrls = append(slices.Clone(controllers), serviceAccountControllers...)
	}
	e.ControllerManager, err = localhub.StartControllerManager(localhub.ControllerManagerOptions{
		BinDir: opts.BinDir, Kubeconfig: kubeconfig, Controllers: ctrls, Output: opts.ControllerManagerOutput,
	})
	if err != nil {
		return err
	}
	return e.waitGarbageCollector(ctx)
}

// waitGarbageCollector waits until the garbage collector deletes a ConfigMap whose owner does not exist.
func (e *Env) waitGarbageCollector(ctx context.Context) error {
	probe := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{
		Name: "testenv-gc-probe", Namespace: metav1.NamespaceDefault,
		OwnerReferences: []metav1.OwnerReference{{
			APIVersion: "v1", Kind: "ConfigMap", Name: "testenv-gc-probe-owner", UID: types.UID("00000000-0000-0000-0000-000000000001"),
		}},
	}}
	if err := e.Client.Create(ctx, probe); err != nil {
		return err
	}
	err := wait.PollUntilContextCancel(ctx, 100*time.Millisecond, true, func(ctx context.Context) (bool, error) {
		select {
		case <-e.ControllerManager.Exited():
			return false, errors.New("kube-controller-manager exited")
		default:
		}
		err := e.Client.Get(ctx, client.ObjectKeyFromObject(probe), &corev1.ConfigMap{})
		return apierrors.IsNotFound(err), nil
	})
	if err != nil {
		return fmt.Errorf("waiting for the garbage collector to delete an orphan: %w\nkube-controller-manager log:\n%s", err, testlog.LastLines(e.ControllerManager.Log(), 30))
	}
	return nil
}

// Stop stops kube-controller-manager, the webhook, kube-apiserver and etcd, and removes Dir.
func (e *Env) Stop() error {
	if e == nil {
		return nil
	}
	var errs []error
	if e.releaseCancel != nil {
		e.releaseCancel()
		e.releases.Wait()
	}
	if err := e.ControllerManager.Stop(); err != nil {
		errs = append(errs, err)
	}
	if e.cancel != nil {
		e.cancel()
		if err := <-e.served; err != nil {
			errs = append(errs, fmt.Errorf("webhook: %w", err))
		}
	}
	if err := e.Hub.Stop(); err != nil {
		errs = append(errs, err)
	}
	if e.Dir != "" {
		errs = append(errs, os.RemoveAll(e.Dir))
	}
	return errors.Join(errs...)
}
