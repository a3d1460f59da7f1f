package health_test

import (
	"context"
	"encoding/json"
	"io"
	"net"
	"net/http"
	"net/url"
	"os"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	"k8s.io/client-go/rest"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/dcm-sp/acm-cluster-sp/internal/devtest/sp/sphub"
	"github.com/dcm-sp/acm-cluster-sp/internal/devtest/testwait"
	"github.com/dcm-sp/acm-cluster-sp/internal/sp/app"
	"github.com/dcm-sp/acm-cluster-sp/internal/sp/config"
	"github.com/dcm-sp/acm-cluster-sp/pkg/api"
)

// These tests break the hub (CRDs removed, a hanging and a stopped API server endpoint), so they have a hub of
// their own. The SP reaches the API server through a loopback proxy that can hang or refuse.
var hub *sphub.Hub

func TestMain(m *testing.M) {
	os.Exit(sphub.RunTests(m, sphub.Options{}, func(h *sphub.Hub) func() { hub = h; return nil }))
}

type sp struct {
	url  string
	a    *app.App
	stop func()
}

// requestTimeout bounds the test SP's API requests.
const requestTimeout = 2 * time.Second

// checkTimeout is each health check's timeout here: longer than the answer bound health() enforces, so a handler
// that waited on a check against the hanging hub could not pass.
const checkTimeout = 5 * time.Second

// startSP runs an SP whose hub connection goes through a pausable loopback proxy.
func startSP(t *testing.T, px *proxy) *sp {
	t.Helper()
	cfg := config.Defaults()
	cfg.Namespace, cfg.AgentNamespace, cfg.DefaultInfraEnvName = "clusters", "hardware-inventory", "production-infraenv"
	cfg.ListenAddress = "127.0.0.1:0"
	psf, err := sphub.WritePullSecret(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	cfg.PullSecretFile = psf
	cfg.Auth = config.AuthNone
	cfg.ProviderName = "sp-health"
	cfg.NATSURL = hub.NATSURL
	cfg.LeaseDuration = 2 * time.Second
	cfg.RequestTimeout = requestTimeout
	restCfg := rest.CopyConfig(hub.Config)
	restCfg.Host = "https://" + px.addr
	a, err := app.New(&cfg, app.Options{RestConfig: restCfg, HealthInterval: 200 * time.Millisecond, HealthCheckTimeout: checkTimeout})
	if err != nil {
		t.Fatal(err)
	}
	if err := a.Listen(); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { _ = a.Run(ctx); close(done) }()
	s := &sp{url: "http://" + a.Addr(), a: a, stop: func() { cancel(); <-done }}
	t.Cleanup(s.stop)
	waitHealth(t, s, 30*time.Second, func(h api.Health) bool { return h.Status == "healthy" })
	return s
}

// health GETs a health path and checks it answers 200 within 3 s, inside DCM's 5 s poll timeout. The document is
// served from the checks' last results, so even a hung hub answers in milliseconds; the bound leaves room for a CI
// machine under -race and heavy load (1.6 s seen), while a handler that waited on a check (checkTimeout) fails.
func (s *sp) health(t *testing.T, path string) (api.Health, time.Duration) {
	t.Helper()
	c := &http.Client{Timeout: 5 * time.Second}
	start := time.Now()
	resp, err := c.Get(s.url + path)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	took := time.Since(start)
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("%s: %d", path, resp.StatusCode)
	}
	if took > 3*time.Second {
		t.Fatalf("%s took %v (must answer within 3s, from the last results)", path, took)
	}
	var h api.Health
	if err := json.NewDecoder(resp.Body).Decode(&h); err != nil {
		t.Fatal(err)
	}
	return h, took
}

func (s *sp) readyz(t *testing.T) int {
	resp, err := http.Get(s.url + "/readyz")
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	return resp.StatusCode
}

func waitHealth(t *testing.T, s *sp, within time.Duration, cond func(api.Health) bool) api.Health {
	t.Helper()
	var h api.Health
	if !testwait.Poll(within, func() bool {
		h, _ = s.health(t, "/api/v1alpha1/clusters/health")
		return cond(h)
	}) {
		t.Fatalf("health not as expected after %v: %+v", within, h)
	}
	return h
}

func check(h api.Health, name string) api.HealthCheck {
	for _, c := range h.Checks {
		if c.Name == name {
			return c
		}
	}
	return api.HealthCheck{}
}

// The tests run in this order; the last one takes the SP's API server endpoint away for good.
func TestHealth(t *testing.T) {
	u, err := url.Parse(hub.Config.Host)
	if err != nil {
		t.Fatal(err)
	}
	px := startProxy(t, u.Host)
	s := startSP(t, px)

	t.Run("healthy on the local hub", func(t *testing.T) {
		// The Agent API is discovered, and its cache filled, after the SP is ready: wait for the hub's inventory.
		waitHealth(t, s, 30*time.Second, func(h api.Health) bool {
			return strings.Contains(check(h, "baremetal").Message, "10 Agents")
		})
		var bodies []string
		for _, path := range []string{"/health", "/api/v1alpha1/health", "/api/v1alpha1/clusters/health"} {
			h, _ := s.health(t, path)
			if h.Status != "healthy" || h.Version == "" || strings.Contains(h.Version, "$Format") {
				t.Fatalf("%s: %+v", path, h)
			}
			for _, name := range []string{"hub", "hypershift", "kubevirt", "baremetal", "nats", "events"} {
				c := check(h, name)
				if c.Status != "healthy" || c.Message == "" || c.AgeSeconds == nil {
					t.Fatalf("%s check %q: %+v", path, name, c)
				}
			}
			if !strings.Contains(check(h, "baremetal").Message, "1 InfraEnvs, 10 Agents in hardware-inventory") {
				t.Errorf("baremetal message %q", check(h, "baremetal").Message)
			}
			h.Uptime, h.Checks = 0, nil
			b, _ := json.Marshal(h)
			bodies = append(bodies, string(b))
		}
		if bodies[0] != bodies[1] || bodies[1] != bodies[2] {
			t.Fatalf("the three health paths differ: %v", bodies)
		}
		if s.readyz(t) != http.StatusOK {
			t.Fatal("/readyz not 200 while healthy")
		}
	})

	t.Run("a removed CRD makes it unhealthy", func(t *testing.T) {
		for _, c := range []struct{ crd, check, msg string }{
			{"virtualmachines.kubevirt.io", "kubevirt", "kubevirt.io/v1 is not served"},
			{"agents.agent-install.openshift.io", "baremetal", "agent-install.openshift.io/v1beta1 is not served"},
			{"nodepools.hypershift.openshift.io", "hypershift", "not served"},
		} {
			deleteCRD(t, c.crd)
			h := waitHealth(t, s, 20*time.Second, func(h api.Health) bool { return check(h, c.check).Status == "unhealthy" })
			if h.Status != "unhealthy" || !strings.Contains(check(h, c.check).Message, c.msg) {
				t.Fatalf("after deleting %s: %+v", c.crd, h)
			}
			// A degraded hub is what the health document says; the replica still serves (reads, health polls).
			if s.readyz(t) != http.StatusOK {
				t.Fatalf("/readyz not 200 after deleting %s: a degraded hub must not take the replica out of service", c.crd)
			}
			// Put it back: healthy again.
			if err := sphub.InstallCRDs(context.Background(), hub.Client); err != nil {
				t.Fatal(err)
			}
			waitHealth(t, s, 20*time.Second, func(h api.Health) bool { return h.Status == "healthy" })
		}
	})

	t.Run("a hanging hub: answers from the last results, then unhealthy", func(t *testing.T) {
		px.pause()
		h := waitHealth(t, s, 20*time.Second, func(h api.Health) bool { return check(h, "hub").Status == "unhealthy" })
		if h.Status != "unhealthy" {
			t.Fatalf("%+v", h)
		}
		t.Logf("hub check while hanging: %q", check(h, "hub").Message)
		if s.readyz(t) != http.StatusOK {
			t.Fatal("/readyz not 200 while the hub hangs: the caches still serve reads")
		}
		// A request that needs the hub answers 504 within requestTimeout instead of hanging with it.
		start := time.Now()
		body := `{"version":"1.30","metadata":{"name":"hang-1"},"nodes":{"workers":{"count":1}}}`
		resp, err := (&http.Client{Timeout: 30 * time.Second}).Post(s.url+"/api/v1alpha1/clusters", "application/json", strings.NewReader(body))
		if err != nil {
			t.Fatal(err)
		}
		raw, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		took := time.Since(start)
		if (resp.StatusCode != http.StatusGatewayTimeout && resp.StatusCode != http.StatusServiceUnavailable) ||
			resp.Header.Get("Content-Type") != "application/problem+json" || took > requestTimeout+3*time.Second {
			t.Fatalf("create against a hanging hub: %d after %v: %s", resp.StatusCode, took, raw)
		}
		t.Logf("create against a hanging hub: %d after %v", resp.StatusCode, took.Round(10*time.Millisecond))
		px.resume()
		waitHealth(t, s, 30*time.Second, func(h api.Health) bool { return h.Status == "healthy" })
	})

	t.Run("the API server stopped: answers from the last results, unhealthy", func(t *testing.T) {
		px.stop() // the SP's API server endpoint now refuses connections
		h := waitHealth(t, s, 20*time.Second, func(h api.Health) bool { return check(h, "hub").Status == "unhealthy" })
		if !strings.Contains(check(h, "hub").Message, "unreachable") && !strings.Contains(check(h, "hub").Message, "no answer") {
			t.Fatalf("hub check message %q", check(h, "hub").Message)
		}
		if s.readyz(t) != http.StatusOK {
			t.Fatal("/readyz not 200 with the API server stopped: the caches still serve reads")
		}
		// The endpoints answer anyone: none of them names the hub's address.
		host, port, _ := net.SplitHostPort(px.addr)
		for _, path := range []string{"/health", "/api/v1alpha1/health", "/api/v1alpha1/clusters/health", "/readyz"} {
			resp, err := http.Get(s.url + path)
			if err != nil {
				t.Fatal(err)
			}
			body, _ := io.ReadAll(resp.Body)
			resp.Body.Close()
			for _, leak := range []string{px.addr, host, ":" + port, "https://"} {
				if strings.Contains(string(body), leak) {
					t.Errorf("%s shows %q to an unauthenticated caller: %s", path, leak, body)
				}
			}
		}
		// The lease cannot be renewed: the replica steps down, but keeps serving (health, and reads from its caches).
		testwait.For(t, 15*time.Second, "stepping down without an API server", func() bool { return !s.a.Leading() })
		if h, _ := s.health(t, "/health"); h.Status != "unhealthy" {
			t.Fatalf("after stepping down: %+v", h)
		}
	})
}

func deleteCRD(t *testing.T, name string) {
	t.Helper()
	crd := &apiextensionsv1.CustomResourceDefinition{}
	crd.Name = name
	if err := hub.Client.Delete(context.Background(), crd); err != nil {
		t.Fatal(err)
	}
	testwait.For(t, 30*time.Second, "CRD "+name+" gone", func() bool {
		return hub.Client.Get(context.Background(), client.ObjectKey{Name: name}, crd) != nil
	})
}

// proxy forwards TCP on loopback and can stall every connection (a hub that hangs rather than refuses).
type proxy struct {
	addr, upstream string
	l              net.Listener
	paused         atomic.Bool
	mu             sync.Mutex
	conns          []net.Conn
}

func startProxy(t *testing.T, upstream string) *proxy {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	p := &proxy{addr: l.Addr().String(), upstream: upstream, l: l}
	go p.serve()
	t.Cleanup(func() { l.Close(); p.closeAll() })
	return p
}

func (p *proxy) serve() {
	for {
		c, err := p.l.Accept()
		if err != nil {
			return
		}
		go p.handle(c)
	}
}

func (p *proxy) handle(c net.Conn) {
	up, err := net.Dial("tcp", p.upstream)
	if err != nil {
		c.Close()
		return
	}
	p.mu.Lock()
	p.conns = append(p.conns, c, up)
	p.mu.Unlock()
	go p.copy(up, c)
	p.copy(c, up)
}

// copy forwards until either side closes; while paused, bytes are held back (the peer sees a hang).
func (p *proxy) copy(dst, src net.Conn) {
	defer dst.Close()
	defer src.Close()
	buf := make([]byte, 32*1024)
	for {
		n, err := src.Read(buf)
		for p.paused.Load() {
			time.Sleep(20 * time.Millisecond)
		}
		if n > 0 {
			if _, werr := dst.Write(buf[:n]); werr != nil {
				return
			}
		}
		if err != nil {
			return
		}
	}
}

func (p *proxy) pause() { p.paused.Store(true) }

// stop closes the listener and every connection: the endpoint refuses connections, as a stopped server does.
func (p *proxy) stop() {
	p.l.Close()
	p.closeAll()
}

// resume lets traffic flow again; connections that hung are closed so clients reconnect cleanly.
func (p *proxy) resume() {
	p.closeAll()
	p.paused.Store(false)
}

func (p *proxy) closeAll() {
	p.mu.Lock()
	defer p.mu.Unlock()
	for _, c := range p.conns {
		c.Close()
	}
	p.conns = nil
}
