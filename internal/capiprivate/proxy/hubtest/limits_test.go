package hubtest

import (
	"bufio"
	"crypto/tls"
	"crypto/x509"
	"fmt"
	"net"
	"net/http"
	"net/url"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/watch"

	"github.com/dcm-sp/acm-cluster-sp/internal/capiprivate/proxy"
)

// stalledUpload opens a connection to the proxy and sends a Machine create whose body announces length bytes but
// stops after its first byte.
func stalledUpload(t *testing.T, ps *proxyServer, ns string, length int) net.Conn {
	t.Helper()
	c, err := net.Dial("tcp", strings.TrimPrefix(ps.URL, "http://"))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = c.Close() })
	fmt.Fprintf(c, "POST /apis/cluster.x-k8s.io/v1beta2/namespaces/%s/machines HTTP/1.1\r\nHost: proxy\r\nAuthorization: Bearer %s\r\n"+
		"Content-Type: application/json\r\nContent-Length: %d\r\n\r\n{", ns, env.AdminToken, length)
	return c
}

// answer reads the status of the response on c, failing when none comes within 5 s.
func answer(t *testing.T, c net.Conn, what string) int {
	t.Helper()
	_ = c.SetReadDeadline(time.Now().Add(5 * time.Second))
	resp, err := http.ReadResponse(bufio.NewReader(c), nil)
	if err != nil {
		t.Fatalf("%s: no answer within 5 s: %v", what, err)
	}
	_ = resp.Body.Close()
	return resp.StatusCode
}

// A request body that stops arriving is answered 408 after BodyReadTimeout, so a slow client cannot hold the
// proxy's buffer; a watch (no request body) lives on past that deadline.
func TestProxyBodyReadDeadline(t *testing.T) {
	ctx := t.Context()
	ps := startProxy(t, proxy.Options{BodyReadTimeout: 300 * time.Millisecond})
	ns := env.NewNamespace(t, "body-deadline")
	machines := ps.dynamic(t, env.AdminToken).Resource(gvr(stdCore, "v1beta2", "machines")).Namespace(ns)
	w, err := machines.Watch(ctx, metav1.ListOptions{})
	if err != nil {
		t.Fatal(err)
	}
	defer w.Stop()

	c := stalledUpload(t, ps, ns, 1000)
	if code := answer(t, c, "stalled body"); code != http.StatusRequestTimeout {
		t.Errorf("stalled body answered %d, want 408", code)
	}
	if n := ps.metric(t, "capi_private_proxy_rejected_total", "reason", proxy.RejectBodyTimeout); n != 1 {
		t.Errorf("rejected_total{reason=%s} %v, want 1", proxy.RejectBodyTimeout, n)
	}
	// The deadline has passed for the watch too (it started first): it still delivers.
	if _, err := machines.Create(ctx, kinds[2].object("v1beta2", ns, "after-deadline"), metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	got := collect(t, w, 1, nil)
	if got[0].typ != string(watch.Added) || got[0].name != "after-deadline" {
		t.Errorf("watch after the body deadline: %v", got)
	}
}

// Request bodies buffered before kube-apiserver has seen the caller's token share a budget: while two stalled
// uploads hold it, a third request is refused with 503 and Retry-After (not buffered), and once one ends the next
// request passes. What the budget holds is the gauge capi_private_proxy_request_bytes_buffered.
func TestProxyBufferedBodiesAreBounded(t *testing.T) {
	ps := startProxy(t, proxy.Options{BodyReadTimeout: time.Minute, MaxRequestBody: 1 << 20, MaxBufferedBytes: 2 << 20})
	ns := env.NewNamespace(t, "body-budget")
	url := ps.URL + "/apis/cluster.x-k8s.io/v1beta2/namespaces/" + ns + "/machines"
	body := func(name string) []byte {
		b, err := kinds[2].object("v1beta2", ns, name).MarshalJSON()
		if err != nil {
			t.Fatal(err)
		}
		return b
	}
	// Bigger than the cap: refused at once from its Content-Length, nothing read.
	big := stalledUpload(t, ps, ns, 2<<20)
	if code := answer(t, big, "oversized Content-Length"); code != http.StatusRequestEntityTooLarge {
		t.Errorf("oversized Content-Length answered %d, want 413", code)
	}

	first := stalledUpload(t, ps, ns, 1<<20)
	stalledUpload(t, ps, ns, 1<<20)
	// Both uploads must hold their share before the third request is sent: one sent earlier could take the space
	// the second upload needs, and the second upload would be the one refused.
	held := func() float64 { return ps.metric(t, "capi_private_proxy_request_bytes_buffered") }
	waitFor(t, 30*time.Second, "two stalled uploads holding the budget", func() (bool, error) {
		return held() == 2<<20, fmt.Errorf("%v bytes held", held())
	})
	code, hdr, _ := rawRequest(t, "POST", url, env.AdminToken, body("refused"), "Content-Type", "application/json")
	if code != http.StatusServiceUnavailable {
		t.Fatalf("a request while two stalled uploads hold the budget answered %d, want 503", code)
	}
	if hdr.Get("Retry-After") == "" {
		t.Errorf("503 without Retry-After")
	}
	if n := ps.metric(t, "capi_private_proxy_rejected_total", "reason", proxy.RejectBufferFull); n != 1 {
		t.Errorf("rejected_total{reason=%s} %v, want 1", proxy.RejectBufferFull, n)
	}
	if n := held(); n != 2<<20 {
		t.Errorf("after the refusal %v bytes held, want the uploads' %d", n, 2<<20)
	}
	_ = first.Close()
	waitFor(t, 10*time.Second, "a request passing once a stalled upload ended", func() (bool, error) {
		code, _, _ = rawRequest(t, "POST", url, env.AdminToken, body("passes"), "Content-Type", "application/json")
		return code == http.StatusCreated, fmt.Errorf("answered %d", code)
	})
	// The passing request returns its share once its answer is written, which the client may see first.
	waitFor(t, 10*time.Second, "only the stalled upload left holding the budget", func() (bool, error) {
		return held() == 1<<20, fmt.Errorf("%v bytes held", held())
	})
}

// The admission side bounds a review's body the same way: a stalled review is answered 408 after its
// deadline and never forwarded.
func TestAdmissionBodyReadDeadline(t *testing.T) {
	var calls atomic.Int64
	upstream, upstreamCA := serveTLS(t, http.HandlerFunc(func(http.ResponseWriter, *http.Request) { calls.Add(1) }))
	u, _ := url.Parse(upstream)
	pool := x509.NewCertPool()
	pool.AppendCertsFromPEM(upstreamCA)
	tr := &http.Transport{TLSClientConfig: &tls.Config{RootCAs: pool, MinVersion: tls.VersionTLS12}}
	adm, err := proxy.NewAdmission(proxy.AdmissionOptions{Upstream: u, Transport: tr, BodyReadTimeout: 300 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	admURL, admCA := serveTLS(t, adm)
	pool = x509.NewCertPool()
	pool.AppendCertsFromPEM(admCA)
	c, err := tls.Dial("tcp", strings.TrimPrefix(admURL, "https://"), &tls.Config{RootCAs: pool, MinVersion: tls.VersionTLS12})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = c.Close() })
	fmt.Fprintf(c, "POST %s HTTP/1.1\r\nHost: webhook\r\nContent-Type: application/json\r\nContent-Length: 1000\r\n\r\n{", proxy.DefaultAdmissionPaths[0])
	if code := answer(t, c, "stalled review"); code != http.StatusRequestTimeout {
		t.Errorf("stalled review answered %d, want 408", code)
	}
	if n := calls.Load(); n != 0 {
		t.Errorf("%d stalled reviews forwarded", n)
	}
}
