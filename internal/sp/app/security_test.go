package app

import (
	"bytes"
	"context"
	"crypto/tls"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"strings"
	"testing"
	"time"

	authenticationv1 "k8s.io/api/authentication/v1"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/utils/ptr"

	"github.com/dcm-sp/acm-cluster-sp/internal/devtest/testlog"
	"github.com/dcm-sp/acm-cluster-sp/internal/devtest/testpki"
	"github.com/dcm-sp/acm-cluster-sp/internal/sp/clusters"
	"github.com/dcm-sp/acm-cluster-sp/internal/sp/config"
	"github.com/dcm-sp/acm-cluster-sp/pkg/api"
)

const authGroup = "clusters.acm-cluster-sp.dcm.io"

// rbacFixture creates, in namespace ns of the hub, ServiceAccounts and the RBAC the security tests grant them.
type rbacFixture struct {
	ns string
	cs *kubernetes.Clientset
}

func newRBAC(t *testing.T, ns string) *rbacFixture {
	t.Helper()
	cs, err := kubernetes.NewForConfig(testHub.Config)
	if err != nil {
		t.Fatal(err)
	}
	return &rbacFixture{ns: ns, cs: cs}
}

// role creates a namespaced Role on clusters (or a subresource) of the SP's authorization group.
func (f *rbacFixture) role(t *testing.T, name string, resources, verbs, names []string) {
	t.Helper()
	r := &rbacv1.Role{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: f.ns},
		Rules: []rbacv1.PolicyRule{{APIGroups: []string{authGroup}, Resources: resources, Verbs: verbs, ResourceNames: names}}}
	if _, err := f.cs.RbacV1().Roles(f.ns).Create(context.Background(), r, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
}

// bind binds a Role to a subject (a ServiceAccount name, "User:<name>" or "Group:<name>").
func (f *rbacFixture) bind(t *testing.T, role, subject string) {
	t.Helper()
	subj := rbacv1.Subject{Kind: "ServiceAccount", Name: subject, Namespace: f.ns}
	if kind, name, ok := strings.Cut(subject, ":"); ok {
		subj = rbacv1.Subject{Kind: kind, Name: name, APIGroup: rbacv1.GroupName}
	}
	b := &rbacv1.RoleBinding{ObjectMeta: metav1.ObjectMeta{Name: role + "-" + strings.NewReplacer(":", "-").Replace(strings.ToLower(subject)), Namespace: f.ns},
		RoleRef: rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "Role", Name: role}, Subjects: []rbacv1.Subject{subj}}
	if _, err := f.cs.RbacV1().RoleBindings(f.ns).Create(context.Background(), b, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
}

// token creates a ServiceAccount (if needed) and mints a token for it with the TokenRequest API (for the hub's own
// audience, or for the audiences given, as kubectl create token --audience does).
func (f *rbacFixture) token(t *testing.T, sa string, audiences ...string) string {
	t.Helper()
	ctx := context.Background()
	_, err := f.cs.CoreV1().ServiceAccounts(f.ns).Create(ctx, &corev1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{Name: sa}}, metav1.CreateOptions{})
	if err != nil && !strings.Contains(err.Error(), "already exists") {
		t.Fatal(err)
	}
	tr, err := f.cs.CoreV1().ServiceAccounts(f.ns).CreateToken(ctx, sa,
		&authenticationv1.TokenRequest{Spec: authenticationv1.TokenRequestSpec{ExpirationSeconds: ptr.To[int64](600), Audiences: audiences}}, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	return tr.Status.Token
}

// caller sends requests to one SP with one identity.
type caller struct {
	base  string
	token string
	http  *http.Client
	key   string // the Idempotency-Key of every request ("": none)
}

func (c caller) do(t *testing.T, method, path, body string) (int, http.Header, []byte) {
	t.Helper()
	req, err := http.NewRequest(method, c.base+path, strings.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	if body != "" {
		req.Header.Set("Content-Type", "application/json")
		if method == http.MethodPatch {
			req.Header.Set("Content-Type", "application/merge-patch+json")
		}
	}
	if c.token != "" {
		req.Header.Set("Authorization", "Bearer "+c.token)
	}
	if c.key != "" {
		req.Header.Set("Idempotency-Key", c.key)
	}
	resp, err := c.http.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	data, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, resp.Header, data
}

func (c caller) cluster(t *testing.T, id string) (api.Cluster, http.Header) {
	t.Helper()
	code, h, body := c.do(t, http.MethodGet, "/api/v1alpha1/clusters/"+id, "")
	if code != http.StatusOK {
		t.Fatalf("GET %s: %d %s", id, code, body)
	}
	var out api.Cluster
	if err := json.Unmarshal(body, &out); err != nil {
		t.Fatal(err)
	}
	return out, h
}

func (c caller) list(t *testing.T) (api.ClusterList, []byte) {
	t.Helper()
	code, _, body := c.do(t, http.MethodGet, "/api/v1alpha1/clusters?max_page_size=100", "")
	if code != http.StatusOK {
		t.Fatalf("LIST: %d %s", code, body)
	}
	var out api.ClusterList
	if err := json.Unmarshal(body, &out); err != nil {
		t.Fatal(err)
	}
	return out, body
}

// The production security model on the local hub, with kube-apiserver's own TokenReview, SubjectAccessReview and
// RBAC, ServiceAccount tokens from the TokenRequest API, HTTPS, and client certificates from a configured CA.
func TestAuthKubernetes(t *testing.T) {
	const ns = "secure"
	f := newRBAC(t, ns)
	f.role(t, "cluster-reader", []string{"clusters"}, []string{"get", "list"}, nil)
	f.role(t, "cluster-admin", []string{"clusters"}, []string{"create", "get", "list", "delete"}, nil)
	f.role(t, "kubeconfig-one", []string{"clusters/kubeconfig"}, []string{"get"}, []string{"sec-ready-1"})
	f.bind(t, "cluster-reader", "reader")
	f.bind(t, "cluster-admin", "creator")
	f.bind(t, "kubeconfig-one", "creator")
	f.bind(t, "cluster-reader", "kc-one")
	f.bind(t, "kubeconfig-one", "kc-one")
	f.bind(t, "cluster-reader", "User:cert-user")
	f.role(t, "create-only", []string{"clusters"}, []string{"create"}, nil)
	f.role(t, "create-named", []string{"clusters"}, []string{"create", "get"}, []string{"sec-named"})
	f.bind(t, "create-only", "create-only")
	f.bind(t, "create-named", "create-named")
	mr := &rbacv1.ClusterRole{ObjectMeta: metav1.ObjectMeta{Name: "sp-metrics-reader"}, Rules: []rbacv1.PolicyRule{{NonResourceURLs: []string{"/metrics"}, Verbs: []string{"get"}}}}
	if _, err := f.cs.RbacV1().ClusterRoles().Create(context.Background(), mr, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	crb := &rbacv1.ClusterRoleBinding{ObjectMeta: metav1.ObjectMeta{Name: "sp-metrics-reader"}, RoleRef: rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "ClusterRole", Name: "sp-metrics-reader"},
		Subjects: []rbacv1.Subject{{Kind: "ServiceAccount", Name: "metrics", Namespace: ns}}}
	if _, err := f.cs.RbacV1().ClusterRoleBindings().Create(context.Background(), crb, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	tokens := map[string]string{}
	for _, sa := range []string{"reader", "creator", "kc-one", "metrics", "nobody", "create-only", "create-named"} {
		tokens[sa] = f.token(t, sa)
	}

	// HTTPS with a test CA; client certificates from another CA.
	dir := t.TempDir()
	serverCA, clientCA := testpki.NewCA(t, "sp-serving-ca"), testpki.NewCA(t, "sp-client-ca")
	serving := serverCA.Serving(t, "acm-cluster-sp")
	cfg := testConfig(ns)
	cfg.ProviderName = "sp-secure"
	cfg.Auth = config.AuthKubernetes
	cfg.TLSCertFile = testpki.WriteFile(t, dir, "tls.crt", serving.CertPEM)
	cfg.TLSKeyFile = testpki.WriteFile(t, dir, "tls.key", serving.KeyPEM)
	cfg.ClientCAFile = testpki.WriteFile(t, dir, "client-ca.crt", clientCA.CertPEM)
	logs := &testlog.Buffer{}
	sp := startSP(t, cfg, Options{Log: slog.New(slog.NewJSONHandler(logs, &slog.HandlerOptions{Level: slog.LevelDebug}))})
	base := sp.URL
	tlsClient := func(certs ...tls.Certificate) *http.Client {
		return &http.Client{Timeout: 30 * time.Second, Transport: &http.Transport{TLSClientConfig: &tls.Config{RootCAs: serverCA.Pool(), Certificates: certs, MinVersion: tls.VersionTLS12}}}
	}
	as := func(sa string) caller { return caller{base: base, token: tokens[sa], http: tlsClient()} }
	anonymous := caller{base: base, http: tlsClient()}

	t.Run("no credentials: 401 problem, health still open", func(t *testing.T) {
		for _, path := range []string{"/api/v1alpha1/clusters", "/api/v1alpha1/clusters/x", "/metrics", "/api/v1alpha1/nodes"} {
			code, h, body := anonymous.do(t, http.MethodGet, path, "")
			assertProblem(t, code, h, body, http.StatusUnauthorized, "authentication required")
			if h.Get("WWW-Authenticate") != "Bearer" {
				t.Fatalf("WWW-Authenticate %q", h.Get("WWW-Authenticate"))
			}
		}
		for _, path := range []string{"/health", "/api/v1alpha1/health", "/api/v1alpha1/clusters/health", "/livez", "/readyz"} {
			if code, _, body := anonymous.do(t, http.MethodGet, path, ""); code != http.StatusOK {
				t.Fatalf("%s without credentials: %d %s", path, code, body)
			}
		}
	})

	t.Run("garbage and revoked tokens: 401, never echoed", func(t *testing.T) {
		garbage := caller{base: base, token: "garbage-token-value", http: tlsClient()}
		code, h, body := garbage.do(t, http.MethodGet, "/api/v1alpha1/clusters", "")
		assertProblem(t, code, h, body, http.StatusUnauthorized, "")
		if strings.Contains(string(body), "garbage-token-value") {
			t.Fatalf("token echoed: %s", body)
		}
		// A token of a ServiceAccount that was deleted is rejected by the hub's TokenReview.
		doomed := f.token(t, "doomed")
		if err := f.cs.CoreV1().ServiceAccounts(ns).Delete(context.Background(), "doomed", metav1.DeleteOptions{}); err != nil {
			t.Fatal(err)
		}
		code, h, body = caller{base: base, token: doomed, http: tlsClient()}.do(t, http.MethodGet, "/api/v1alpha1/clusters", "")
		assertProblem(t, code, h, body, http.StatusUnauthorized, "")
	})

	t.Run("a token bound to get clusters: reads without kubeconfigs, no writes", func(t *testing.T) {
		code, h, body := as("reader").do(t, http.MethodPost, "/api/v1alpha1/clusters?id=sec-denied", kubevirtBody(uniqueName("denied"), 1))
		assertProblem(t, code, h, body, http.StatusForbidden, "user system:serviceaccount:secure:reader may not create clusters/sec-denied")
		code, h, body = as("nobody").do(t, http.MethodGet, "/api/v1alpha1/clusters", "")
		assertProblem(t, code, h, body, http.StatusForbidden, "may not list clusters")
		as("reader").list(t)
	})

	// Two clusters, created by a ServiceAccount allowed to create, brought to READY by the simulator.
	for _, id := range []string{"sec-ready-1", "sec-ready-2"} {
		code, _, body := as("creator").do(t, http.MethodPost, "/api/v1alpha1/clusters?id="+id, kubevirtBody(uniqueName(id), 1))
		if code != http.StatusCreated {
			t.Fatalf("create %s: %d %s", id, code, body)
		}
	}
	waitFor(t, 60*time.Second, "both clusters READY", func() bool {
		a, _ := as("reader").cluster(t, "sec-ready-1")
		b, _ := as("reader").cluster(t, "sec-ready-2")
		return a.Status == api.READY && b.Status == api.READY
	})

	t.Run("keyed creates: create authorized on the derived id, the answer of a replay only to who may read it", func(t *testing.T) {
		withKey := func(sa, key string) caller { c := as(sa); c.key = key; return c }
		key := "sec-key-" + uniqueName("k")
		id := clusters.KeyID(key)
		body := kubevirtBody(uniqueName("keyed"), 1)
		code, h, raw := withKey("create-named", key).do(t, http.MethodPost, "/api/v1alpha1/clusters", body)
		assertProblem(t, code, h, raw, http.StatusForbidden, "may not create clusters/"+id)
		if code, _, raw := withKey("create-only", key).do(t, http.MethodPost, "/api/v1alpha1/clusters", body); code != http.StatusCreated {
			t.Fatalf("keyed create by create-only: %d %s", code, raw)
		}
		// Without get: a replay, the key with another spec, and the key of a cluster being deleted all get the
		// same 403, which tells neither the cluster nor which of them it is.
		want := "user system:serviceaccount:secure:create-only may not get clusters/" + id
		code, h, raw = withKey("create-only", key).do(t, http.MethodPost, "/api/v1alpha1/clusters", body)
		assertProblem(t, code, h, raw, http.StatusForbidden, want)
		code, h, raw = withKey("create-only", key).do(t, http.MethodPost, "/api/v1alpha1/clusters", kubevirtBody(uniqueName("other"), 2))
		assertProblem(t, code, h, raw, http.StatusForbidden, want)
		if code, _, raw := withKey("creator", key).do(t, http.MethodPost, "/api/v1alpha1/clusters", body); code != http.StatusOK || !strings.Contains(string(raw), id) {
			t.Fatalf("keyed replay by a caller who may read it: %d %s, want 200 with the cluster", code, raw)
		}
		if code, _, raw := as("creator").do(t, http.MethodDelete, "/api/v1alpha1/clusters/"+id, ""); code != http.StatusNoContent {
			t.Fatalf("delete %s: %d %s", id, code, raw)
		}
		code, h, raw = withKey("create-only", key).do(t, http.MethodPost, "/api/v1alpha1/clusters", body)
		assertProblem(t, code, h, raw, http.StatusForbidden, want)
		if code, _, raw := withKey("creator", key).do(t, http.MethodPost, "/api/v1alpha1/clusters", body); code != http.StatusConflict {
			t.Fatalf("keyed replay of a deleted cluster by a caller who may read it: %d %s, want 409", code, raw)
		}
	})

	t.Run("kubeconfig only with get clusters/kubeconfig on that id", func(t *testing.T) {
		c, h := as("reader").cluster(t, "sec-ready-1")
		if c.Kubeconfig != nil || c.KubeconfigOmitted == nil || *c.KubeconfigOmitted != api.ClusterKubeconfigOmittedForbidden || h.Get("Cache-Control") == "no-store" {
			t.Fatalf("reader got kubeconfig=%v omitted=%v cache=%q", c.Kubeconfig != nil, c.KubeconfigOmitted, h.Get("Cache-Control"))
		}
		c, h = as("kc-one").cluster(t, "sec-ready-1")
		if c.Kubeconfig == nil || *c.Kubeconfig == "" || c.KubeconfigOmitted != nil || h.Get("Cache-Control") != "no-store" {
			t.Fatalf("kc-one on its cluster: kubeconfig=%v omitted=%v cache=%q", c.Kubeconfig != nil, c.KubeconfigOmitted, h.Get("Cache-Control"))
		}
		c, _ = as("kc-one").cluster(t, "sec-ready-2")
		if c.Kubeconfig != nil || c.KubeconfigOmitted == nil || *c.KubeconfigOmitted != api.ClusterKubeconfigOmittedForbidden {
			t.Fatalf("kc-one on another cluster got its kubeconfig")
		}
	})

	t.Run("LIST never carries kubeconfigs", func(t *testing.T) {
		for _, who := range []string{"reader", "kc-one", "creator"} {
			l, raw := as(who).list(t)
			seen := 0
			for _, c := range l.Results {
				if c.Id == "sec-ready-1" || c.Id == "sec-ready-2" {
					seen++
					if c.Kubeconfig != nil || c.KubeconfigOmitted == nil || *c.KubeconfigOmitted != api.ClusterKubeconfigOmittedList {
						t.Fatalf("%s: LIST entry %s carries a kubeconfig", who, c.Id)
					}
				}
			}
			if seen != 2 || strings.Contains(string(raw), `"kubeconfig":"`+"YX") {
				t.Fatalf("%s: LIST saw %d of the clusters: %s", who, seen, raw)
			}
		}
	})

	t.Run("a client certificate signed by clientCAFile", func(t *testing.T) {
		cert := clientCA.Client(t, "cert-user", "cert-group").TLS(t)
		byCert := caller{base: base, http: tlsClient(cert)}
		byCert.list(t)
		code, h, body := byCert.do(t, http.MethodDelete, "/api/v1alpha1/clusters/sec-ready-2", "")
		assertProblem(t, code, h, body, http.StatusForbidden, "user cert-user may not delete clusters/sec-ready-2")
		// A certificate from another CA is not a credential.
		other := testpki.NewCA(t, "rogue").Client(t, "cert-user").TLS(t)
		code, h, body = caller{base: base, http: tlsClient(other)}.do(t, http.MethodGet, "/api/v1alpha1/clusters", "")
		assertProblem(t, code, h, body, http.StatusUnauthorized, "")
	})

	t.Run("metrics need get on /metrics", func(t *testing.T) {
		code, h, body := as("reader").do(t, http.MethodGet, "/metrics", "")
		assertProblem(t, code, h, body, http.StatusForbidden, "/metrics")
		code, _, body = as("metrics").do(t, http.MethodGet, "/metrics", "")
		if code != http.StatusOK || !bytes.Contains(body, []byte("acm_sp_http_requests_total")) {
			t.Fatalf("metrics reader: %d", code)
		}
	})

	t.Run("deletes need delete", func(t *testing.T) {
		code, h, body := as("reader").do(t, http.MethodDelete, "/api/v1alpha1/clusters/sec-ready-1", "")
		assertProblem(t, code, h, body, http.StatusForbidden, "may not delete")
		for _, id := range []string{"sec-ready-1", "sec-ready-2"} {
			if code, _, body := as("creator").do(t, http.MethodDelete, "/api/v1alpha1/clusters/"+id, ""); code != http.StatusNoContent {
				t.Fatalf("delete %s: %d %s", id, code, body)
			}
		}
	})

	t.Run("audit lines name the caller, logs never hold a credential", func(t *testing.T) {
		out := logs.String()
		type line struct {
			Log, Action, User, ID, Remote, Result string
			Groups                                []string
		}
		found := map[string]bool{}
		for _, raw := range strings.Split(out, "\n") {
			var l line
			if json.Unmarshal([]byte(raw), &l) != nil || l.Log != "audit" {
				continue
			}
			if l.Remote == "" || len(l.Groups) == 0 {
				t.Fatalf("audit line without remote address or groups: %s", raw)
			}
			found[fmt.Sprintf("%s %s %s %s", l.Action, l.User, l.ID, l.Result)] = true
		}
		for _, want := range []string{
			"create system:serviceaccount:secure:creator sec-ready-1 created",
			"kubeconfig system:serviceaccount:secure:kc-one sec-ready-1 ",
			"delete system:serviceaccount:secure:creator sec-ready-2 accepted",
		} {
			if !found[want] {
				t.Errorf("no audit line %q in %v", want, found)
			}
		}
		for sa, tok := range tokens {
			if strings.Contains(out, tok) {
				t.Fatalf("the log holds %s's token", sa)
			}
		}
		if strings.Contains(out, "garbage-token-value") || strings.Contains(out, "apiVersion: v1\nclusters") {
			t.Fatal("the log holds a credential or a kubeconfig")
		}
	})
}

// Anonymous callers exist only when configured, and are then authorized like anyone else (system:anonymous).
func TestAuthAnonymous(t *testing.T) {
	const ns = "secure"
	f := newRBAC(t, ns)
	cfg := testConfig(ns)
	cfg.ProviderName = "sp-anon"
	cfg.Auth, cfg.AuthAnonymous = config.AuthKubernetes, true
	sp := startSP(t, cfg, Options{})
	anonymous := caller{base: sp.URL, http: &http.Client{Timeout: 30 * time.Second}}
	code, h, body := anonymous.do(t, http.MethodGet, "/api/v1alpha1/clusters", "")
	assertProblem(t, code, h, body, http.StatusForbidden, "user system:anonymous may not list clusters")

	f.role(t, "anonymous-dcm", []string{"clusters"}, []string{"create", "get", "list", "delete"}, nil)
	f.bind(t, "anonymous-dcm", "User:system:anonymous")
	// The denial above is cached for DenyCacheTTL (10 s): wait for the grant to be seen.
	waitFor(t, 30*time.Second, "anonymous list allowed", func() bool {
		code, _, _ := anonymous.do(t, http.MethodGet, "/api/v1alpha1/clusters", "")
		return code == http.StatusOK
	})
	// ...but the kubeconfig permission was not granted, and a bad token is not "anonymous".
	code, h, body = caller{base: sp.URL, token: "not-a-token", http: anonymous.http}.do(t, http.MethodGet, "/api/v1alpha1/clusters", "")
	assertProblem(t, code, h, body, http.StatusUnauthorized, "")
}

// The serving certificate replaced on disk (as cert-manager or the OpenShift service-CA rotate a mounted Secret) is
// what the next handshakes get, without a restart.
func TestServingCertificateReload(t *testing.T) {
	t.Parallel()
	ca := testpki.NewCA(t, "rotating-ca")
	first, second := ca.Serving(t, "first"), ca.Serving(t, "second")
	dir := t.TempDir()
	cfg := testConfig("restricted")
	cfg.ProviderName = "sp-tls"
	cfg.TLSCertFile = testpki.WriteFile(t, dir, "tls.crt", first.CertPEM)
	cfg.TLSKeyFile = testpki.WriteFile(t, dir, "tls.key", first.KeyPEM)
	sp := startSP(t, cfg, Options{})
	addr := strings.TrimPrefix(sp.URL, "https://")
	served := func() string {
		conn, err := tls.Dial("tcp", addr, &tls.Config{RootCAs: ca.Pool(), MinVersion: tls.VersionTLS12})
		if err != nil {
			t.Fatal(err)
		}
		defer conn.Close()
		return conn.ConnectionState().PeerCertificates[0].SerialNumber.String()
	}
	if got := served(); got != first.Serial.String() {
		t.Fatalf("serving serial %s, want %s", got, first.Serial)
	}
	if _, err := tls.Dial("tcp", addr, &tls.Config{RootCAs: ca.Pool(), MaxVersion: tls.VersionTLS11}); err == nil {
		t.Fatal("TLS 1.1 accepted")
	}
	testpki.ReplaceFile(t, dir, "tls.key", second.KeyPEM)
	testpki.ReplaceFile(t, dir, "tls.crt", second.CertPEM)
	began := time.Now()
	waitFor(t, 30*time.Second, "the new certificate served", func() bool { return served() == second.Serial.String() })
	t.Logf("new certificate served %v after the files were replaced", time.Since(began).Round(time.Millisecond))
}

// While NATS is down, neither /health nor the logs show natsURL's password (or the URL at all, on health).
func TestNATSPasswordNeverShown(t *testing.T) {
	t.Parallel()
	// A listener this test keeps open that is not NATS: every connection is closed at once.
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { l.Close() })
	go func() {
		for {
			c, err := l.Accept()
			if err != nil {
				return
			}
			c.Close()
		}
	}()
	cfg := testConfig("restricted")
	cfg.ProviderName = "sp-natspw"
	cfg.NATSURL = "nats://sp:hunter2-secret@" + l.Addr().String()
	logs := &testlog.Buffer{}
	sp := startSP(t, cfg, Options{Log: slog.New(slog.NewTextHandler(logs, &slog.HandlerOptions{Level: slog.LevelDebug}))})
	var nats api.HealthCheck
	waitFor(t, 60*time.Second, "the nats check reports the outage", func() bool {
		for _, c := range sp.App.Health.Report().Checks {
			if c.Name == "nats" {
				nats = c
			}
		}
		return nats.Status == api.HealthCheckStatusUnhealthy && nats.Message != "not checked yet"
	})
	_, _, body := do(t, http.MethodGet, sp.URL+"/api/v1alpha1/clusters/health", "", nil)
	for _, leak := range []string{"hunter2", l.Addr().String()} {
		if strings.Contains(string(body), leak) {
			t.Fatalf("health shows %q: %s", leak, body)
		}
	}
	if strings.Contains(logs.String(), "hunter2") {
		t.Fatalf("the logs show the NATS password")
	}
	t.Logf("nats check while down: %q", nats.Message)
}
