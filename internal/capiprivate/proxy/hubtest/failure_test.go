package hubtest

import (
	"bufio"
	"bytes"
	"context"
	"crypto/tls"
	"io"
	"net"
	"net/http"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/rest"

	"github.com/dcm-sp/acm-cluster-sp/internal/capiprivate/proxy"
	"github.com/dcm-sp/acm-cluster-sp/internal/devtest/testpki"
)

// gate is a TCP relay to kube-apiserver on a loopback listener it keeps: while down, it closes each new
// connection at once (kube-apiserver unreachable for the proxy).
type gate struct {
	l        net.Listener
	down     atomic.Bool
	refused  atomic.Int64
	upstream string
}

func newGate(t *testing.T) *gate {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	g := &gate{l: l, upstream: strings.TrimPrefix(hubURL(), "https://")}
	var wg sync.WaitGroup
	wg.Go(func() {
		for {
			c, err := l.Accept()
			if err != nil {
				return
			}
			if g.down.Load() {
				g.refused.Add(1)
				_ = c.Close()
				continue
			}
			wg.Go(func() {
				u, err := net.Dial("tcp", g.upstream)
				if err != nil {
					_ = c.Close()
					return
				}
				go func() { _, _ = io.Copy(u, c); _ = u.Close() }()
				_, _ = io.Copy(c, u)
				_ = c.Close()
			})
		}
	})
	t.Cleanup(func() { _ = l.Close() })
	return g
}

// kube-apiserver unreachable → 503 with Retry-After: 1, which client-go retries until it succeeds.
func TestS14UpstreamDownRetried(t *testing.T) {
	g := newGate(t)
	g.down.Store(true)
	up := &rest.Config{Host: "https://" + g.l.Addr().String(), TLSClientConfig: rest.TLSClientConfig{CAData: env.Config.CAData}}
	ps := startProxy(t, proxy.Options{Upstream: up})
	ns := env.NewNamespace(t, "s14")
	createMachines(t, ns, 1, 1)

	code, hdr, body := rawRequest(t, "GET", ps.URL+"/apis/cluster.x-k8s.io/v1beta2/namespaces/"+ns+"/machines/m-0000", env.AdminToken, nil)
	if code != 503 || hdr.Get("Retry-After") != "1" || !strings.Contains(string(body), `"reason":"ServiceUnavailable"`) {
		t.Fatalf("upstream down: %d Retry-After %q %s", code, hdr.Get("Retry-After"), body)
	}
	// client-go retries a 503 with Retry-After; kube-apiserver comes back after its first retry was refused.
	done := make(chan error, 1)
	go func() {
		_, err := ps.dynamic(t, env.AdminToken).Resource(gvr(stdCore, "v1beta2", "machines")).Namespace(ns).Get(context.Background(), "m-0000", metav1.GetOptions{})
		done <- err
	}()
	waitFor(t, 20*time.Second, "the client's first attempt to be refused", func() (bool, error) { return g.refused.Load() >= 2, nil })
	g.down.Store(false)
	select {
	case err := <-done:
		if err != nil {
			t.Fatalf("retried get: %v", err)
		}
	case <-time.After(30 * time.Second):
		t.Fatal("the client did not retry")
	}
	if n := ps.metric(t, "capi_private_proxy_requests_total", "code", "503", "path", "rejected"); n < 2 {
		t.Errorf("requests_total{503} %v", n)
	}
	if n := ps.metric(t, "capi_private_proxy_upstream_errors_total"); n < 2 {
		t.Errorf("upstream_errors_total %v", n)
	}
}

// Fail closed. A request body that does not parse → 400 (counted). An upstream that answers non-JSON naming a
// mapped group → 502; a watch frame that does not translate → an ERROR event, then the end of the stream; a list
// that breaks mid-item → an aborted response, never truncated JSON that parses.
func TestS14FailClosed(t *testing.T) {
	ps := startProxy(t, proxy.Options{})
	code, _, body := rawRequest(t, "POST", ps.URL+"/apis/cluster.x-k8s.io/v1beta2/namespaces/default/machines", env.AdminToken,
		[]byte(`{"apiVersion":"cluster.x-k8s.io/v1beta2","kind":"Machine",`), "Content-Type", "application/json")
	if code != 400 {
		t.Errorf("bad body: %d %s", code, body)
	}
	if n := ps.metric(t, "capi_private_proxy_translation_errors_total", "direction", "request", "reason", "invalid_json"); n != 1 {
		t.Errorf("translation_errors{request,invalid_json} %v", n)
	}

	// A misbehaving upstream (the only fake in these tests: kube-apiserver never sends such bytes).
	ca := testpki.NewCA(t, "bad-upstream")
	mux := http.NewServeMux()
	mux.HandleFunc("/apis/cluster.hypershift.openshift.io/v1beta2/namespaces/ns/machines/text", func(w http.ResponseWriter, _ *http.Request) {
		w.Header().Set("Content-Type", "text/plain")
		_, _ = w.Write([]byte("machine cluster.hypershift.openshift.io/v1beta2 m"))
	})
	mux.HandleFunc("/apis/cluster.hypershift.openshift.io/v1beta2/namespaces/ns/machines", func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		if r.URL.Query().Get("watch") == "true" {
			_, _ = w.Write([]byte(`{"type":"ADDED","object":{"apiVersion":"cluster.hypershift.openshift.io/v1beta2","kind":"Machine","metadata":{"name":"a"}}}` + "\n"))
			w.(http.Flusher).Flush()
			_, _ = w.Write([]byte(`{"type":"ADDED","object":{"apiVersion":"cluster.hypershift.openshift.io/v1beta2","kind":"Machine","metadata":{"name":tru}}}` + "\n"))
			_, _ = w.Write([]byte(`{"type":"ADDED","object":{"apiVersion":"cluster.hypershift.openshift.io/v1beta2","kind":"Machine","metadata":{"name":"c"}}}` + "\n"))
			return
		}
		// A list larger than the proxy buffers, whose last item is broken.
		_, _ = w.Write([]byte(`{"kind":"MachineList","apiVersion":"cluster.hypershift.openshift.io/v1beta2","metadata":{},"items":[`))
		item := `{"apiVersion":"cluster.hypershift.openshift.io/v1beta2","kind":"Machine","metadata":{"name":"x","annotations":{"a":"` + strings.Repeat("y", 4096) + `"}}},`
		for range 200 {
			_, _ = w.Write([]byte(item))
		}
		_, _ = w.Write([]byte(`{"apiVersion":"cluster.hypershift.openshift.io/v1beta2","kind":tru}]}`))
	})
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	srv := &http.Server{Handler: mux, TLSConfig: &tls.Config{Certificates: []tls.Certificate{ca.Serving(t, "bad").TLS(t)}, NextProtos: []string{"h2", "http/1.1"}}}
	go func() { _ = srv.ServeTLS(l, "", "") }()
	t.Cleanup(func() { _ = srv.Close() })
	bad := startProxy(t, proxy.Options{Upstream: &rest.Config{Host: "https://" + l.Addr().String(), TLSClientConfig: rest.TLSClientConfig{CAData: ca.CertPEM}}})

	code, _, body = rawRequest(t, "GET", bad.URL+"/apis/cluster.x-k8s.io/v1beta2/namespaces/ns/machines/text", "t", nil)
	if code != 502 || strings.Contains(string(body), "machine cluster.hypershift") {
		t.Errorf("non-JSON upstream: %d %s", code, body)
	}
	code, frames := rawWatch(t, bad.URL+"/apis/cluster.x-k8s.io/v1beta2/namespaces/ns/machines?watch=true", "t", func(map[string]any) bool { return false })
	if code != 200 || len(frames) != 2 || frames[0]["type"] != "ADDED" || frames[1]["type"] != "ERROR" ||
		frames[0]["object"].(map[string]any)["apiVersion"] != "cluster.x-k8s.io/v1beta2" || frames[1]["object"].(map[string]any)["code"] != float64(500) {
		t.Errorf("bad watch frame: %d %v", code, frames)
	}
	req, _ := http.NewRequest("GET", bad.URL+"/apis/cluster.x-k8s.io/v1beta2/namespaces/ns/machines", nil)
	req.Header.Set("Authorization", "Bearer t")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	n, rerr := io.Copy(io.Discard, bufio.NewReader(resp.Body))
	_ = resp.Body.Close()
	if resp.StatusCode != 200 || rerr == nil {
		t.Errorf("broken list: %d, read %d bytes, error %v: want a broken stream", resp.StatusCode, n, rerr)
	}
	for _, reason := range []string{"unsupported_media_type", "invalid_json"} {
		if bad.metric(t, "capi_private_proxy_translation_errors_total", "direction", "response", "reason", reason) == 0 {
			t.Errorf("translation_errors{response,%s} not counted", reason)
		}
	}
	if n := bad.metric(t, "capi_private_proxy_watch_events_total", "type", "ERROR"); n != 1 {
		t.Errorf("watch_events_total{ERROR} %v", n)
	}
}

// A client that goes away ends its watch upstream too (kube-apiserver's long-running request gauge falls
// back), and Run shuts down gracefully: open watches end, health and metrics were served.
func TestS14CancellationAndShutdown(t *testing.T) {
	ns := env.NewNamespace(t, "cancel")
	ps := startProxy(t, proxy.Options{})
	hubWatches := func() float64 {
		return metric(t, scrapeHub(t), "apiserver_longrunning_requests", "verb", "WATCH", "group", privCore, "resource", "machines", "scope", "namespace")
	}
	before := hubWatches()
	ctx, cancel := context.WithCancel(t.Context())
	res := ps.dynamic(t, env.AdminToken).Resource(gvr(stdCore, "v1beta2", "machines")).Namespace(ns)
	for range 3 {
		if _, err := res.Watch(ctx, metav1.ListOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	waitFor(t, 20*time.Second, "3 watches on kube-apiserver", func() (bool, error) { return hubWatches() == before+3, nil })
	cancel()
	waitFor(t, 20*time.Second, "the watches to end on kube-apiserver", func() (bool, error) { return hubWatches() == before, nil })
	waitFor(t, 10*time.Second, "watches_active 0", func() (bool, error) { return ps.metric(t, "capi_private_proxy_watches_active") == 0, nil })

	// Run: serve, answer health, end a watch at shutdown, return.
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	ml, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	runCtx, stop := context.WithCancel(context.Background())
	ran := make(chan error, 1)
	go func() {
		ran <- proxy.Run(runCtx, proxy.RunOptions{Options: proxy.Options{Upstream: env.Config}, Listener: l, MetricsListener: ml})
	}()
	for _, p := range []string{"/healthz", "/readyz"} {
		waitFor(t, 10*time.Second, p, func() (bool, error) {
			resp, err := http.Get("http://" + ml.Addr().String() + p)
			if err != nil {
				return false, err
			}
			_ = resp.Body.Close()
			return resp.StatusCode == 200, nil
		})
	}
	wreq, _ := http.NewRequest("GET", "http://"+l.Addr().String()+"/apis/cluster.x-k8s.io/v1beta2/namespaces/"+ns+"/machines?watch=true", nil)
	wreq.Header.Set("Authorization", "Bearer "+env.AdminToken)
	wresp, err := http.DefaultClient.Do(wreq)
	if err != nil || wresp.StatusCode != 200 {
		t.Fatalf("watch through Run: %v", err)
	}
	if n := metric(t, scrapeURL(t, "http://"+ml.Addr().String()+"/metrics"), "capi_private_proxy_watches_active"); n != 1 {
		t.Errorf("Run's /metrics watches_active %v", n)
	}
	stop()
	ended := make(chan error, 1)
	go func() { _, err := io.Copy(io.Discard, wresp.Body); ended <- err }()
	select {
	case err := <-ended:
		if err != nil {
			t.Errorf("the watch ended with %v, want a clean end", err)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("the watch outlived the shutdown")
	}
	select {
	case err := <-ran:
		if err != nil {
			t.Errorf("Run: %v", err)
		}
	case <-time.After(20 * time.Second):
		t.Fatal("Run did not return")
	}
}

// scrapeHub reads kube-apiserver's /metrics as admin.
func scrapeHub(t *testing.T) prometheus.Gatherer {
	t.Helper()
	code, _, body := rawRequest(t, "GET", hubURL()+"/metrics", env.AdminToken, nil)
	if code != 200 {
		t.Fatalf("hub metrics: %d", code)
	}
	return parseMetrics(t, bytes.NewReader(body))
}
