// Package hubtest holds the proxy's integration tests and benchmarks on the real hub (CRUD at every version, patches
// and server-side apply, watches, discovery, keys never renamed, content types, auth, isolation of the platform's
// objects, failures, the admission side, and the figures of `make bench-capi`): one capihub for the package, in-process
// proxies per test, and the capi-private binary as a subprocess where a test kills or measures the proxy process.
package hubtest

import (
	"bytes"
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	dto "github.com/prometheus/client_model/go"
	"github.com/prometheus/common/expfmt"
	"github.com/prometheus/common/model"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/rest"

	"github.com/dcm-sp/acm-cluster-sp/internal/capiprivate/groups"
	"github.com/dcm-sp/acm-cluster-sp/internal/capiprivate/proxy"
	"github.com/dcm-sp/acm-cluster-sp/internal/devtest/capi/capihub"
	"github.com/dcm-sp/acm-cluster-sp/internal/devtest/testlog"
	"github.com/dcm-sp/acm-cluster-sp/internal/devtest/testpki"
)

var env *capihub.Env

func TestMain(m *testing.M) {
	code := capihub.Main(m, &env)
	printBenchTable()
	if binDir != "" {
		_ = os.RemoveAll(binDir)
	}
	os.Exit(code)
}

// Groups.
const (
	stdCore   = "cluster.x-k8s.io"
	privCore  = "cluster.hypershift.openshift.io"
	stdInfra  = "infrastructure.cluster.x-k8s.io"
	privInfra = "infrastructure.cluster.hypershift.openshift.io"
	stdIPAM   = "ipam.cluster.x-k8s.io"
	stdAddons = "addons.cluster.x-k8s.io"
)

// proxyServer is an in-process proxy on a loopback listener it keeps for its lifetime.
type proxyServer struct {
	URL string
	P   *proxy.Proxy
	Reg *prometheus.Registry
	CA  []byte // PEM of the serving CA when served over TLS
	srv *http.Server
}

// startProxy serves a proxy (passthrough unless opts say otherwise) until the test ends.
func startProxy(t testing.TB, opts proxy.Options) *proxyServer {
	t.Helper()
	return serveProxy(t, opts, false)
}

// startProxyTLS serves a proxy over HTTPS (a throw-away CA, no client certificates requested, as proxy.Run). A
// kubeconfig-based client (kubectl, clientcmd, controller-runtime) sends its token only to an https server.
func startProxyTLS(t testing.TB, opts proxy.Options) *proxyServer {
	t.Helper()
	return serveProxy(t, opts, true)
}

func serveProxy(t testing.TB, opts proxy.Options, useTLS bool) *proxyServer {
	t.Helper()
	if opts.Upstream == nil {
		opts.Upstream = env.Config
	}
	reg := prometheus.NewRegistry()
	opts.Registerer = reg
	p, err := proxy.New(opts)
	if err != nil {
		t.Fatal(err)
	}
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	ps := &proxyServer{URL: "http://" + l.Addr().String(), P: p, Reg: reg,
		srv: &http.Server{Handler: p, ReadHeaderTimeout: 10 * time.Second}}
	if useTLS {
		ca := testpki.NewCA(t, "proxy-ca")
		ps.CA = ca.CertPEM
		ps.URL = "https://" + l.Addr().String()
		ps.srv.TLSConfig = &tls.Config{Certificates: []tls.Certificate{ca.Serving(t, "proxy").TLS(t)},
			ClientAuth: tls.NoClientCert, NextProtos: []string{"h2", "http/1.1"}, MinVersion: tls.VersionTLS12}
		l = tls.NewListener(l, ps.srv.TLSConfig)
	}
	done := make(chan struct{})
	go func() { _ = ps.srv.Serve(l); close(done) }()
	t.Cleanup(func() {
		p.StopWatches()
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		_ = ps.srv.Shutdown(ctx)
		<-done
	})
	return ps
}

// config is a client config through the proxy with a bearer token.
func (ps *proxyServer) config(token string) *rest.Config {
	return &rest.Config{Host: ps.URL, BearerToken: token, QPS: -1, TLSClientConfig: rest.TLSClientConfig{CAData: ps.CA}}
}

func (ps *proxyServer) dynamic(t testing.TB, token string) dynamic.Interface {
	t.Helper()
	c, err := dynamic.NewForConfig(ps.config(token))
	if err != nil {
		t.Fatal(err)
	}
	return c
}

// metric returns the value of a counter, gauge or histogram count with exactly these label values (0 if absent).
func metric(t testing.TB, g prometheus.Gatherer, name string, labels ...string) float64 {
	t.Helper()
	mfs, err := g.Gather()
	if err != nil {
		t.Fatal(err)
	}
	want := map[string]string{}
	for i := 0; i+1 < len(labels); i += 2 {
		want[labels[i]] = labels[i+1]
	}
	total := 0.0
	for _, mf := range mfs {
		if mf.GetName() != name {
			continue
		}
		for _, m := range mf.GetMetric() {
			if !labelsMatch(m.GetLabel(), want) {
				continue
			}
			switch {
			case m.Counter != nil:
				total += m.Counter.GetValue()
			case m.Gauge != nil:
				total += m.Gauge.GetValue()
			case m.Histogram != nil:
				total += float64(m.Histogram.GetSampleCount())
			}
		}
	}
	return total
}

// labelsMatch: every wanted label has the value (a subset match).
func labelsMatch(have []*dto.LabelPair, want map[string]string) bool {
	for k, v := range want {
		found := false
		for _, l := range have {
			if l.GetName() == k && l.GetValue() == v {
				found = true
			}
		}
		if !found {
			return false
		}
	}
	return true
}

func (ps *proxyServer) metric(t testing.TB, name string, labels ...string) float64 {
	t.Helper()
	return metric(t, ps.Reg, name, labels...)
}

// waitFor polls cond until it holds or the timeout passes.
func waitFor(t testing.TB, timeout time.Duration, what string, cond func() (bool, error)) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), timeout)
	defer cancel()
	var last error
	err := wait.PollUntilContextCancel(ctx, 20*time.Millisecond, true, func(context.Context) (bool, error) {
		ok, err := cond()
		last = err
		return ok, nil
	})
	if err != nil {
		t.Fatalf("waiting for %s: %v (last error: %v)", what, err, last)
	}
}

// direct is a dynamic client straight to kube-apiserver as admin: the stored view.
func direct(t testing.TB) dynamic.Interface {
	t.Helper()
	c, err := dynamic.NewForConfig(env.Config)
	if err != nil {
		t.Fatal(err)
	}
	return c
}

func gvr(group, version, resource string) schema.GroupVersionResource {
	return schema.GroupVersionResource{Group: group, Version: version, Resource: resource}
}

func privateOf(std string) string {
	switch std {
	case stdCore:
		return privCore
	case stdInfra:
		return privInfra
	}
	return strings.TrimSuffix(std, "cluster.x-k8s.io") + "cluster.hypershift.openshift.io"
}

// rawRequest sends one request and returns status, headers and body.
func rawRequest(t testing.TB, method, url, token string, body []byte, header ...string) (int, http.Header, []byte) {
	t.Helper()
	var r io.Reader
	if body != nil {
		r = bytes.NewReader(body)
	}
	req, err := http.NewRequest(method, url, r)
	if err != nil {
		t.Fatal(err)
	}
	if token != "" {
		req.Header.Set("Authorization", "Bearer "+token)
	}
	for i := 0; i+1 < len(header); i += 2 {
		req.Header.Add(header[i], header[i+1])
	}
	resp, err := httpClient(t).Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatal(err)
	}
	return resp.StatusCode, resp.Header, b
}

func nested(t testing.TB, o *unstructured.Unstructured, path ...string) string {
	t.Helper()
	v, found, err := unstructured.NestedString(o.Object, path...)
	if err != nil || !found {
		t.Fatalf("%s %s: %v missing (%v)", o.GetKind(), o.GetName(), path, err)
	}
	return v
}

// The capi-private binary, built once on demand for the subprocess tests.
var (
	binOnce sync.Once
	binDir  string
	binPath string
	binErr  error
)

func capiPrivateBinary(t testing.TB) string {
	t.Helper()
	binOnce.Do(func() {
		if binDir, binErr = os.MkdirTemp("", "capi-private-bin-"); binErr != nil {
			return
		}
		_, file, _, _ := runtime.Caller(0)
		root := filepath.Join(filepath.Dir(file), "..", "..", "..", "..")
		binPath = filepath.Join(binDir, "capi-private")
		cmd := exec.Command("go", "build", "-o", binPath, "./cmd/capi-private")
		cmd.Dir = root
		if out, err := cmd.CombinedOutput(); err != nil {
			binErr = fmt.Errorf("go build: %v\n%s", err, out)
		}
	})
	if binErr != nil {
		t.Fatal(binErr)
	}
	return binPath
}

// proxyProcess is `capi-private proxy` as a subprocess. Its listening sockets belong to the test, which hands
// them to each incarnation (--listen-fd, --metrics-listen-fd): they stay open across kills and restarts, so
// connections made while no process runs wait in the backlog for the next one.
type proxyProcess struct {
	t          testing.TB
	l, ml      *net.TCPListener
	URL        string
	MetricsURL string
	kubeconfig string
	args       []string
	cmd        *exec.Cmd
	out        *testlog.Buffer
	exited     chan struct{}
}

// startProxyProcess starts the binary with extra args and waits until it is ready.
func startProxyProcess(t testing.TB, args ...string) *proxyProcess {
	t.Helper()
	bin := capiPrivateBinary(t)
	kc, err := env.Kubeconfig(capihub.AdminUser, env.AdminToken)
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	kcPath := filepath.Join(dir, "upstream.kubeconfig")
	if err := os.WriteFile(kcPath, kc, 0o600); err != nil {
		t.Fatal(err)
	}
	listen := func() *net.TCPListener {
		l, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			t.Fatal(err)
		}
		return l.(*net.TCPListener)
	}
	pp := &proxyProcess{t: t, l: listen(), ml: listen(), kubeconfig: kcPath, args: args}
	pp.URL = "http://" + pp.l.Addr().String()
	pp.MetricsURL = "http://" + pp.ml.Addr().String()
	_ = bin
	pp.start()
	t.Cleanup(func() {
		pp.kill()
		_ = pp.l.Close()
		_ = pp.ml.Close()
	})
	return pp
}

// start runs a new incarnation on the same sockets and waits for /readyz.
func (pp *proxyProcess) start() {
	t := pp.t
	t.Helper()
	lf, err := pp.l.File()
	if err != nil {
		t.Fatal(err)
	}
	mf, err := pp.ml.File()
	if err != nil {
		t.Fatal(err)
	}
	args := append([]string{"proxy", "--upstream-kubeconfig", pp.kubeconfig, "--listen-fd", "3", "--metrics-listen-fd", "4"}, pp.args...)
	pp.cmd = exec.Command(capiPrivateBinary(t), args...)
	pp.cmd.ExtraFiles = []*os.File{lf, mf}
	pp.out = &testlog.Buffer{}
	pp.cmd.Stdout, pp.cmd.Stderr = pp.out, pp.out
	if err := pp.cmd.Start(); err != nil {
		t.Fatal(err)
	}
	_ = lf.Close()
	_ = mf.Close()
	pp.exited = make(chan struct{})
	go func(cmd *exec.Cmd, exited chan struct{}) { _ = cmd.Wait(); close(exited) }(pp.cmd, pp.exited)
	waitFor(t, 60*time.Second, "the proxy process to be ready", func() (bool, error) {
		select {
		case <-pp.exited:
			return false, fmt.Errorf("exited: %s", pp.out.String())
		default:
		}
		resp, err := http.Get(pp.MetricsURL + "/readyz")
		if err != nil {
			return false, err
		}
		_ = resp.Body.Close()
		return resp.StatusCode == http.StatusOK, nil
	})
}

// config is a client config through the process (plain HTTP, token in code: clientcmd would drop it).
func (pp *proxyProcess) config(token string) *rest.Config {
	return &rest.Config{Host: pp.URL, BearerToken: token, QPS: -1}
}

// kill sends SIGKILL (kill -9) and waits for the process to be gone.
func (pp *proxyProcess) kill() {
	if pp.cmd == nil || pp.cmd.Process == nil {
		return
	}
	_ = pp.cmd.Process.Kill()
	<-pp.exited
}

// terminate sends SIGTERM and waits for a graceful exit.
func (pp *proxyProcess) terminate() error {
	if err := pp.cmd.Process.Signal(os.Interrupt); err != nil {
		return err
	}
	select {
	case <-pp.exited:
	case <-time.After(30 * time.Second):
		return errors.New("no exit 30 s after SIGINT")
	}
	if !pp.cmd.ProcessState.Success() {
		return fmt.Errorf("exit %v: %s", pp.cmd.ProcessState, pp.out.String())
	}
	return nil
}

// scrape reads the process's /metrics.
func (pp *proxyProcess) scrape(t testing.TB) prometheus.Gatherer {
	t.Helper()
	return scrapeURL(t, pp.MetricsURL+"/metrics")
}

// scrapeURL parses a Prometheus text page into a Gatherer.
func scrapeURL(t testing.TB, url string) prometheus.Gatherer {
	t.Helper()
	resp, err := http.Get(url)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	return parseMetrics(t, resp.Body)
}

// parseMetrics parses a Prometheus text page into a Gatherer.
func parseMetrics(t testing.TB, r io.Reader) prometheus.Gatherer {
	t.Helper()
	p := expfmt.NewTextParser(model.UTF8Validation)
	mfs, err := p.TextToMetricFamilies(r)
	if err != nil {
		t.Fatal(err)
	}
	return prometheus.GathererFunc(func() ([]*dto.MetricFamily, error) {
		out := make([]*dto.MetricFamily, 0, len(mfs))
		for _, mf := range mfs {
			out = append(out, mf)
		}
		return out, nil
	})
}

var groupsHash = groups.Default.Hash()

var (
	hcOnce sync.Once
	hc     *http.Client
)

// httpClient trusts the hub's CA (for direct requests) and talks plain HTTP to in-process proxies.
func httpClient(_ testing.TB) *http.Client {
	hcOnce.Do(func() {
		tr, err := rest.TransportFor(&rest.Config{Host: env.Config.Host, TLSClientConfig: rest.TLSClientConfig{CAData: env.Config.CAData}})
		if err != nil {
			panic(err)
		}
		hc = &http.Client{Transport: tr}
	})
	return hc
}

// hubURL is kube-apiserver's base URL (no trailing slash).
func hubURL() string { return strings.TrimSuffix(env.Config.Host, "/") }

func numCPU() int { return runtime.GOMAXPROCS(0) }
