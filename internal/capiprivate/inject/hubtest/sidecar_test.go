package hubtest

import (
	"bufio"
	"context"
	"crypto/tls"
	"fmt"
	"net"
	"net/http"
	"os"
	"strings"
	"testing"
	"time"

	authenticationv1 "k8s.io/api/authentication/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/dcm-sp/acm-cluster-sp/internal/capiprivate/inject"
	"github.com/dcm-sp/acm-cluster-sp/internal/capiprivate/proxy"
	"github.com/dcm-sp/acm-cluster-sp/internal/devtest/capi/injecttest"
	"github.com/dcm-sp/acm-cluster-sp/internal/devtest/testwait"
)

// podSet is the Pods of one namespace and what serves them: an injector registered for the namespace, configured
// with the ports of two loopback listeners the test holds, and one sidecar proxy on them. On a cluster each Pod has
// its own sidecar on the same port in its own network namespace; here the Pods of one namespace share one (the
// proxy is stateless and forwards each caller's own token), and each namespace gets its own ports, because each
// namespace's sidecars serve that namespace's loopback certificate.
type podSet struct {
	name        string
	in          *injector
	api, health net.Listener
	proxy       chan error
	stopProxy   context.CancelFunc
}

// newPodSet starts the injector of a new pod set named name.
func newPodSet(t *testing.T, ctx context.Context, name string) *podSet {
	t.Helper()
	ps := &podSet{name: name, proxy: make(chan error, 1)}
	var err error
	if ps.api, err = net.Listen("tcp", "127.0.0.1:0"); err != nil {
		t.Fatal(err)
	}
	if ps.health, err = net.Listen("tcp", "127.0.0.1:0"); err != nil {
		t.Fatal(err)
	}
	ps.in, err = startInjector(ctx, name, time.Now, func(c *inject.Config) {
		c.Port, c.HealthPort = int32(ps.api.Addr().(*net.TCPAddr).Port), int32(ps.health.Addr().(*net.TCPAddr).Port)
	})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = ps.in.Stop(); deleteRegistration(t, ps.in) })
	return ps
}

func (ps *podSet) metricsURL() string { return "http://" + ps.health.Addr().String() + "/metrics" }

// startSidecar runs `capi-private proxy` as p's sidecar container is specified: the listen addresses of its
// arguments (checked against the set's listeners), its TLS files as the kubelet mounted them, kube-apiserver from
// its own in-cluster view.
func (ps *podSet) startSidecar(t *testing.T, p *pod) {
	t.Helper()
	sc := p.obj.Spec.InitContainers[0]
	flags := map[string]string{}
	for _, a := range sc.Args[1:] {
		k, v, _ := strings.Cut(strings.TrimPrefix(a, "--"), "=")
		flags[k] = v
	}
	if flags["listen"] != ps.api.Addr().String() || flags["metrics-listen"] != fmt.Sprintf(":%d", ps.health.Addr().(*net.TCPAddr).Port) {
		t.Fatalf("sidecar args %v do not name the listeners the injector was configured with", sc.Args)
	}
	// What the command does in the container (proxy.InClusterCA), read through the container's view of its env and
	// mounts: no token is mounted to read.
	if p.sidecar.Path(proxy.InClusterDir+"/token") != "" {
		if _, err := os.Stat(p.sidecar.Path(proxy.InClusterDir + "/token")); err == nil {
			t.Fatal("the sidecar has a service-account token mounted")
		}
	}
	upstream, err := proxy.InClusterCA(func(k string) string { return p.sidecar.Env[k] }, p.sidecar.Path)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	ps.stopProxy = cancel
	go func() {
		ps.proxy <- proxy.Run(ctx, proxy.RunOptions{
			Options: proxy.Options{Upstream: upstream, Auth: proxy.AuthPassthrough}, MetricsAuth: proxy.MetricsAuth(flags["metrics-auth"]),
			Listener: ps.api, MetricsListener: ps.health, ShutdownTimeout: 5 * time.Second,
			TLSCertFile: p.sidecar.Path(flags["tls-cert-file"]), TLSKeyFile: p.sidecar.Path(flags["tls-private-key-file"]),
		})
	}()
	t.Cleanup(func() { cancel(); <-ps.proxy })
	testwait.For(t, 30*time.Second, "the sidecar's /readyz", func() bool {
		resp, err := http.Get("http://" + ps.health.Addr().String() + "/readyz")
		if err == nil {
			resp.Body.Close()
		}
		return err == nil && resp.StatusCode == http.StatusOK
	})
}

// scrape GETs the sidecar's /metrics with token ("" for none).
func (ps *podSet) scrape(t *testing.T, token string) *http.Response {
	t.Helper()
	req, err := http.NewRequest(http.MethodGet, ps.metricsURL(), nil)
	if err != nil {
		t.Fatal(err)
	}
	if token != "" {
		req.Header.Set("Authorization", "Bearer "+token)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	return resp
}

// checkMetricsAuth: the sidecar's /metrics, on the Pod's address, answers only a token kube-apiserver says may
// get /metrics (the admin's); no token is 401, a ServiceAccount's without that grant 403, a forged one 401. Its
// probes stay open.
func (ps *podSet) checkMetricsAuth(t *testing.T, ns string) {
	t.Helper()
	sa := &corev1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "metrics-nobody"}}
	if err := env.Client.Create(context.Background(), sa); client.IgnoreAlreadyExists(err) != nil {
		t.Fatal(err)
	}
	tr := &authenticationv1.TokenRequest{Spec: authenticationv1.TokenRequestSpec{ExpirationSeconds: ptr.To[int64](600)}}
	if err := env.Client.SubResource("token").Create(context.Background(), sa, tr); err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct {
		who, token string
		want       int
	}{{"no token", "", http.StatusUnauthorized}, {"a forged token", "not-a-token", http.StatusUnauthorized},
		{"a ServiceAccount without get /metrics", tr.Status.Token, http.StatusForbidden}, {"the admin", env.AdminToken, http.StatusOK}} {
		resp := ps.scrape(t, c.token)
		_ = resp.Body.Close()
		if resp.StatusCode != c.want {
			t.Errorf("/metrics as %s: %d, want %d", c.who, resp.StatusCode, c.want)
		}
	}
	resp, err := http.Get("http://" + ps.health.Addr().String() + "/healthz")
	if err != nil || resp.StatusCode != http.StatusOK {
		t.Errorf("/healthz without a token: %v %v", err, resp)
	}
	if err == nil {
		_ = resp.Body.Close()
	}
}

// requests sums the sidecar's capi_private_proxy_requests_total samples: those answered 403, and all.
func (ps *podSet) requests(t *testing.T) (forbidden, all float64) {
	t.Helper()
	resp := ps.scrape(t, env.AdminToken)
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("the sidecar's /metrics as the admin: %s", resp.Status)
	}
	sc := bufio.NewScanner(resp.Body)
	for sc.Scan() {
		line := sc.Text()
		if !strings.HasPrefix(line, "capi_private_proxy_requests_total{") {
			continue
		}
		var v float64
		_, _ = fmt.Sscan(line[strings.LastIndex(line, " ")+1:], &v)
		all += v
		if strings.Contains(line, `code="403"`) {
			forbidden += v
		}
	}
	return forbidden, all
}

// checkReload renews the namespace's serving key pair (the controller issues a new one from the same CA when the
// Secret's key is gone), lets the kubelet refresh p's sidecar files, and waits until the sidecar presents the new
// certificate: the proxy reloads its key pair without a restart.
func (ps *podSet) checkReload(t *testing.T, ctx context.Context, k *injecttest.Kubelet, p *pod) {
	t.Helper()
	s := loopbackSecret(t, p.obj.Namespace, "", servesLoopback)
	old := s.Data[inject.CertKey]
	// Break the kept certificates (the namespace's Secret only projects them) and make the controller look.
	kept := &corev1.Secret{}
	if err := env.Client.Get(ctx, types.NamespacedName{Namespace: inject.DefaultKeyNamespace, Name: inject.CAKeySecret(p.obj.Namespace)}, kept); err != nil {
		t.Fatal(err)
	}
	delete(kept.Data, inject.KeyKey)
	if err := env.Client.Update(ctx, kept); err != nil {
		t.Fatal(err)
	}
	touch(t, p.obj.Namespace)
	renewed := loopbackSecret(t, p.obj.Namespace, "a new serving key pair", func(s *corev1.Secret) bool {
		return servesLoopback(s) && string(s.Data[inject.CertKey]) != string(old)
	})
	if _, err := k.Container(ctx, p.obj, inject.SidecarName); err != nil {
		t.Fatal(err)
	}
	pair, _ := tls.X509KeyPair(renewed.Data[inject.CertKey], renewed.Data[inject.KeyKey])
	testwait.For(t, 30*time.Second, "the sidecar serving the renewed certificate", func() bool {
		conn, err := tls.Dial("tcp", ps.api.Addr().String(), &tls.Config{InsecureSkipVerify: true}) //nolint:gosec // only reads the presented certificate
		if err != nil {
			return false
		}
		defer conn.Close()
		return string(conn.ConnectionState().PeerCertificates[0].Raw) == string(pair.Certificate[0])
	})
}
