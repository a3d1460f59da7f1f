package hubtest

import (
	"bufio"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"os"
	"strings"
	"testing"
	"time"

	rbacv1 "k8s.io/api/rbac/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"

	"github.com/dcm-sp/acm-cluster-sp/internal/capiprivate/proxy"
	"github.com/dcm-sp/acm-cluster-sp/internal/devtest/capi/capihub"
)

// auditEvent is what the tests read of kube-apiserver's audit log.
type auditEvent struct {
	Stage      string   `json:"stage"`
	RequestURI string   `json:"requestURI"`
	UserAgent  string   `json:"userAgent"`
	SourceIPs  []string `json:"sourceIPs"`
	User       struct {
		Username string `json:"username"`
	} `json:"user"`
	ImpersonatedUser *struct {
		Username string `json:"username"`
	} `json:"impersonatedUser"`
	ResponseStatus struct {
		Code int `json:"code"`
	} `json:"responseStatus"`
}

// audit returns the audit events whose user agent is ua.
func audit(t *testing.T, ua string) []auditEvent {
	t.Helper()
	f, err := os.Open(env.AuditLog)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	var out []auditEvent
	sc := bufio.NewScanner(f)
	sc.Buffer(make([]byte, 1<<20), 16<<20)
	for sc.Scan() {
		if !strings.Contains(sc.Text(), ua) {
			continue
		}
		var ev auditEvent
		if err := json.Unmarshal(sc.Bytes(), &ev); err == nil && ev.UserAgent == ua {
			out = append(out, ev)
		}
	}
	return out
}

func waitAudit(t *testing.T, ua string) []auditEvent {
	t.Helper()
	var evs []auditEvent
	waitFor(t, 30*time.Second, "audit events of "+ua, func() (bool, error) {
		evs = audit(t, ua)
		return len(evs) > 0, nil
	})
	return evs
}

func uniqueAgent(prefix string) string {
	b := make([]byte, 6)
	_, _ = rand.Read(b)
	return prefix + "-" + hex.EncodeToString(b)
}

// The caller reaches RBAC and audit through the proxy. A limited token gets 403 until a Role written through
// the proxy (standard group, stored private) grants it; audit names the caller and the impersonated user; a
// client-certificate kubeconfig gets 401 and never reaches kube-apiserver.
func TestS9Auth(t *testing.T) {
	ctx := t.Context()
	ps := startProxyTLS(t, proxy.Options{})
	ns := env.NewNamespace(t, "s9")
	createMachines(t, ns, 2, 1)

	limitedCfg := ps.config(env.LimitedToken)
	limitedCfg.UserAgent = uniqueAgent("hubtest-s9-limited")
	limited, err := dynamic.NewForConfig(limitedCfg)
	if err != nil {
		t.Fatal(err)
	}
	machines := gvr(stdCore, "v1beta2", "machines")
	_, err = limited.Resource(machines).Namespace(ns).List(ctx, metav1.ListOptions{})
	if !apierrors.IsForbidden(err) {
		t.Fatalf("limited list: %v, want Forbidden", err)
	}
	if msg := err.Error(); !strings.Contains(msg, `"cluster.x-k8s.io"`) || strings.Contains(msg, "hypershift") {
		t.Errorf("403 message not in the client's view: %s", msg)
	}
	if n := ps.metric(t, "capi_private_proxy_requests_total", "verb", "list", "code", "403", "resource", "unknown"); n != 1 {
		t.Errorf("requests_total{list,403} %v", n)
	}
	evs := waitAudit(t, limitedCfg.UserAgent)
	if evs[0].User.Username != capihub.LimitedUser || evs[0].ResponseStatus.Code != 403 ||
		!strings.HasPrefix(evs[0].RequestURI, "/apis/cluster.hypershift.openshift.io/v1beta2/namespaces/"+ns+"/machines") {
		t.Errorf("audit %+v", evs[0])
	}

	// A Role and binding written through the proxy, as admin.
	admin, err := kubernetes.NewForConfig(ps.config(env.AdminToken))
	if err != nil {
		t.Fatal(err)
	}
	role := &rbacv1.Role{ObjectMeta: metav1.ObjectMeta{Name: "machines-reader", Namespace: ns},
		Rules: []rbacv1.PolicyRule{{APIGroups: []string{stdCore}, Resources: []string{"machines"}, Verbs: []string{"get", "list", "watch"}}}}
	if _, err := admin.RbacV1().Roles(ns).Create(ctx, role, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	binding := &rbacv1.RoleBinding{ObjectMeta: metav1.ObjectMeta{Name: "machines-reader", Namespace: ns},
		RoleRef:  rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "Role", Name: "machines-reader"},
		Subjects: []rbacv1.Subject{{APIGroup: rbacv1.GroupName, Kind: rbacv1.UserKind, Name: capihub.LimitedUser}}}
	if _, err := admin.RbacV1().RoleBindings(ns).Create(ctx, binding, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	stored, err := kubernetes.NewForConfigOrDie(env.Config).RbacV1().Roles(ns).Get(ctx, "machines-reader", metav1.GetOptions{})
	if err != nil || stored.Rules[0].APIGroups[0] != privCore {
		t.Fatalf("stored Role %+v %v", stored, err)
	}
	waitFor(t, 30*time.Second, "the limited user to list Machines", func() (bool, error) {
		l, err := limited.Resource(machines).Namespace(ns).List(ctx, metav1.ListOptions{})
		return err == nil && len(l.Items) == 2, err
	})

	// Impersonation passes through and is authorized upstream.
	impCfg := ps.config(env.AdminToken)
	impCfg.UserAgent = uniqueAgent("hubtest-s9-impersonate")
	impCfg.Impersonate = rest.ImpersonationConfig{UserName: capihub.LimitedUser}
	imp, err := dynamic.NewForConfig(impCfg)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := imp.Resource(machines).Namespace(ns).Get(ctx, "m-0000", metav1.GetOptions{}); err != nil {
		t.Fatal(err)
	}
	if _, err := imp.Resource(gvr("", "v1", "secrets")).Namespace(ns).List(ctx, metav1.ListOptions{}); !apierrors.IsForbidden(err) {
		t.Errorf("impersonated secret list: %v, want Forbidden", err)
	}
	evs = waitAudit(t, impCfg.UserAgent)
	if evs[0].User.Username != capihub.AdminUser || evs[0].ImpersonatedUser == nil || evs[0].ImpersonatedUser.Username != capihub.LimitedUser {
		t.Errorf("impersonation audit %+v", evs[0])
	}

	// A client certificate (the hub's admin certificate, system:masters) through the proxy: 401, not forwarded.
	certCfg := &rest.Config{Host: ps.URL, UserAgent: uniqueAgent("hubtest-s9-cert"), TLSClientConfig: rest.TLSClientConfig{
		CAData: ps.CA, CertData: env.Config.CertData, KeyData: env.Config.KeyData}}
	certClient, err := dynamic.NewForConfig(certCfg)
	if err != nil {
		t.Fatal(err)
	}
	_, err = certClient.Resource(machines).Namespace(ns).List(ctx, metav1.ListOptions{})
	if !apierrors.IsUnauthorized(err) || !strings.Contains(err.Error(), proxy.NoBearerTokenMessage) {
		t.Fatalf("client-certificate list: %v, want 401 %q", err, proxy.NoBearerTokenMessage)
	}
	if n := ps.metric(t, "capi_private_proxy_rejected_total", "reason", proxy.RejectNoBearerToken); n != 1 {
		t.Errorf("rejected no_bearer_token %v", n)
	}
	// Nothing reached kube-apiserver: a later marker request is audited, the certificate request is not.
	marker := uniqueAgent("hubtest-s9-marker")
	markCfg := rest.CopyConfig(env.Config)
	markCfg.UserAgent = marker
	if _, err := kubernetes.NewForConfigOrDie(markCfg).CoreV1().Namespaces().Get(ctx, ns, metav1.GetOptions{}); err != nil {
		t.Fatal(err)
	}
	waitAudit(t, marker)
	if evs := audit(t, certCfg.UserAgent); len(evs) != 0 {
		t.Errorf("the client-certificate request reached kube-apiserver: %+v", evs)
	}
}

// Own-identity mode uses the proxy's kubeconfig (here a token file) and refuses requests carrying
// credentials or impersonation; audit names the proxy's identity.
func TestS9OwnIdentity(t *testing.T) {
	ctx := t.Context()
	tokenFile := t.TempDir() + "/token"
	if err := os.WriteFile(tokenFile, []byte(env.AdminToken), 0o600); err != nil {
		t.Fatal(err)
	}
	up := &rest.Config{Host: env.Config.Host, BearerTokenFile: tokenFile, TLSClientConfig: rest.TLSClientConfig{CAData: env.Config.CAData}}
	ps := startProxy(t, proxy.Options{Upstream: up, Auth: proxy.AuthOwnIdentity})
	ns := env.NewNamespace(t, "own")
	createMachines(t, ns, 1, 1)

	ua := uniqueAgent("hubtest-own")
	anon, err := dynamic.NewForConfig(&rest.Config{Host: ps.URL, UserAgent: ua, QPS: -1})
	if err != nil {
		t.Fatal(err)
	}
	m, err := anon.Resource(gvr(stdCore, "v1beta2", "machines")).Namespace(ns).Get(ctx, "m-0000", metav1.GetOptions{})
	if err != nil || m.GetAPIVersion() != stdCore+"/v1beta2" {
		t.Fatalf("own-identity get: %v", err)
	}
	if evs := waitAudit(t, ua); evs[0].User.Username != capihub.AdminUser {
		t.Errorf("audit user %q, want the proxy's identity %q", evs[0].User.Username, capihub.AdminUser)
	}
	for _, h := range [][]string{{"Authorization", "Bearer " + env.LimitedToken}, {"Impersonate-User", "someone"}, {"Impersonate-Group", "system:masters"}} {
		code, _, body := rawRequest(t, "GET", ps.URL+"/apis/cluster.x-k8s.io/v1beta2/namespaces/"+ns+"/machines", "", nil, h...)
		if code != 400 || !strings.Contains(string(body), "own identity") {
			t.Errorf("%s: %d %s, want 400", h[0], code, body)
		}
	}
	if n := ps.metric(t, "capi_private_proxy_rejected_total", "reason", proxy.RejectOwnIdentityCredentials); n != 3 {
		t.Errorf("rejected own_identity_credentials %v", n)
	}
}
