package webhook_test

import (
	"bufio"
	"bytes"
	"context"
	"crypto/tls"
	"crypto/x509"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/metadata"
	"k8s.io/client-go/rest"

	"github.com/dcm-sp/acm-cluster-sp/internal/capiprivate/webhook"
	"github.com/dcm-sp/acm-cluster-sp/internal/devtest/testwait"
)

// offline is a webhook with limits and its own registry. New installs its getter process-wide: the test
// environment's comes back when the test ends.
func offline(t *testing.T, limits webhook.Limits) (*webhook.Webhook, *prometheus.Registry) {
	t.Helper()
	reg := prometheus.NewRegistry()
	w, err := webhook.New(&rest.Config{Host: "https://127.0.0.1:1"}, reg, limits)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(env.Webhook.Install)
	return w, reg
}

// reviewBody is a ConversionReview of objs (raw JSON objects) to desired.
func reviewBody(t *testing.T, desired string, objs ...string) []byte {
	t.Helper()
	review := apiextensionsv1.ConversionReview{Request: &apiextensionsv1.ConversionRequest{UID: "u1", DesiredAPIVersion: desired}}
	review.APIVersion, review.Kind = "apiextensions.k8s.io/v1", "ConversionReview"
	for _, o := range objs {
		review.Request.Objects = append(review.Request.Objects, runtime.RawExtension{Raw: []byte(o)})
	}
	body, err := json.Marshal(review)
	if err != nil {
		t.Fatal(err)
	}
	return body
}

func post(h http.Handler, body io.Reader) *httptest.ResponseRecorder {
	rec := httptest.NewRecorder()
	h.ServeHTTP(rec, httptest.NewRequest(http.MethodPost, webhook.ConvertPath, body))
	return rec
}

// A ConversionReview above MaxRequestBytes is refused with 413 without being read whole; one below is answered.
func TestConvertBodyIsCapped(t *testing.T) {
	w, reg := offline(t, webhook.Limits{MaxRequestBytes: 4 << 10})
	machine := `{"apiVersion":"cluster.hypershift.openshift.io/v1beta2","kind":"MachineDrainRule","metadata":{"name":"d","namespace":"ns"},"spec":{"drain":{"behavior":"Skip"}}}`
	if rec := post(w.Handler(), bytes.NewReader(reviewBody(t, webhook.CoreGroup+"/v1beta1", machine))); rec.Code != http.StatusOK {
		t.Fatalf("small review: %d %s", rec.Code, rec.Body)
	}
	// A 16 MiB body: the handler must stop reading at the cap.
	var read atomic.Int64
	endless := &countingReader{r: io.MultiReader(bytes.NewReader(reviewBody(t, webhook.CoreGroup+"/v1beta1")[:40]),
		io.LimitReader(zeros{}, 16<<20)), n: &read}
	rec := post(w.Handler(), endless)
	if rec.Code != http.StatusRequestEntityTooLarge {
		t.Errorf("oversized review: %d %s, want 413", rec.Code, rec.Body)
	}
	if n := read.Load(); n > 64<<10 {
		t.Errorf("read %d bytes of an oversized body, want at most the cap plus a buffer", n)
	}
	if n := gathered(t, reg, "capi_private_webhook_requests_rejected_total", "reason", "too_large"); n != 1 {
		t.Errorf("requests_rejected_total{reason=too_large} %v, want 1", n)
	}
}

type zeros struct{}

func (zeros) Read(p []byte) (int, error) {
	for i := range p {
		p[i] = ' '
	}
	return len(p), nil
}

type countingReader struct {
	r io.Reader
	n *atomic.Int64
}

func (c *countingReader) Read(p []byte) (int, error) {
	n, err := c.r.Read(p)
	c.n.Add(int64(n))
	return n, err
}

// Metric labels come from the private scheme: a review naming unknown kinds or versions is counted under the
// fixed label "other", so a caller cannot create series at will.
func TestMetricLabelsAreBounded(t *testing.T) {
	w, reg := offline(t, webhook.Limits{})
	for i := range 5 {
		evil := fmt.Sprintf(`{"apiVersion":"evil%d.example.com/v%d","kind":"Evil%d","metadata":{"name":"x"}}`, i, i, i)
		post(w.Handler(), bytes.NewReader(reviewBody(t, fmt.Sprintf("evil%d.example.com/v9%d", i, i), evil)))
	}
	post(w.Handler(), strings.NewReader(`{"request":{"desiredAPIVersion":"a/b","objects":[{"kind":"Nope","apiVersion":"c/d"}]}}`))
	families, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	for _, f := range families {
		for _, m := range f.GetMetric() {
			for _, l := range m.GetLabel() {
				if strings.Contains(strings.ToLower(l.GetValue()), "evil") || strings.Contains(l.GetValue(), "Nope") || l.GetValue() == "b" || l.GetValue() == "d" {
					t.Errorf("%s has a caller-chosen label %s=%q", f.GetName(), l.GetName(), l.GetValue())
				}
			}
		}
	}
	other := []string{"kind", "other", "from", "other", "to", "other", "result", "failure"}
	if n := gathered(t, reg, "capi_private_webhook_conversions_total", other...); n != 6 {
		t.Errorf("conversions_total{other} %v, want 6", n)
	}
	// A known kind keeps its labels.
	rule := `{"apiVersion":"cluster.hypershift.openshift.io/v1beta2","kind":"MachineDrainRule","metadata":{"name":"d","namespace":"ns"},"spec":{"drain":{"behavior":"Skip"}}}`
	post(w.Handler(), bytes.NewReader(reviewBody(t, webhook.CoreGroup+"/v1beta1", rule)))
	if n := gathered(t, reg, "capi_private_webhook_conversions_total", "kind", "MachineDrainRule", "from", "v1beta2", "to", "v1beta1", "result", "success"); n != 1 {
		t.Errorf("conversions_total{MachineDrainRule} %v, want 1", n)
	}
}

// A client that sends headers and then stalls the body is cut off after ReadTimeout, and one that sends
// nothing after ReadHeaderTimeout: neither holds a connection open.
func TestSlowClientsAreCutOff(t *testing.T) {
	w, _ := offline(t, webhook.Limits{})
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(t.Context())
	done := make(chan error, 1)
	go func() {
		done <- webhook.ServeTLS(ctx, l, env.WebhookCertFile, env.WebhookKeyFile, w.Handler(),
			webhook.Limits{ReadTimeout: 300 * time.Millisecond, ReadHeaderTimeout: 200 * time.Millisecond, IdleTimeout: 300 * time.Millisecond})
	}()
	t.Cleanup(func() { cancel(); <-done })
	pool := x509.NewCertPool()
	pool.AppendCertsFromPEM(env.WebhookCA)
	dial := func() *tls.Conn {
		c, err := tls.Dial("tcp", l.Addr().String(), &tls.Config{RootCAs: pool, MinVersion: tls.VersionTLS12, ServerName: "127.0.0.1"})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { _ = c.Close() })
		return c
	}
	// The server had 10 times its timeout to act: the connection must be answered or closed by then.
	closedWithin := func(c *tls.Conn, what string) {
		t.Helper()
		_ = c.SetReadDeadline(time.Now().Add(5 * time.Second))
		resp, err := http.ReadResponse(bufio.NewReader(c), nil)
		if ne, ok := err.(net.Error); ok && ne.Timeout() {
			t.Errorf("%s: the connection is still open after 5 s", what)
			return
		}
		if err == nil {
			_ = resp.Body.Close()
			if resp.StatusCode < 400 {
				t.Errorf("%s: answered %d", what, resp.StatusCode)
			}
		}
	}

	stalled := dial()
	fmt.Fprintf(stalled, "POST %s HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: application/json\r\nContent-Length: 1000\r\n\r\n{\"kind\":", webhook.ConvertPath)
	closedWithin(stalled, "stalled body")

	silent := dial()
	fmt.Fprint(silent, "POST "+webhook.ConvertPath+" HTTP/1.1\r\nHost: 127.0.0.1\r\n")
	closedWithin(silent, "stalled headers")
}

// countingTransport counts GETs of CRDs by name.
type countingTransport struct {
	rt   http.RoundTripper
	gets atomic.Int64
}

func (c *countingTransport) RoundTrip(r *http.Request) (*http.Response, error) {
	if r.Method == http.MethodGet && strings.Contains(r.URL.Path, "/customresourcedefinitions/") {
		c.gets.Add(1)
	}
	return c.rt.RoundTrip(r)
}

// A lookup for a kind without a CRD is answered from a negative cache until its TTL passes (counted as
// result="negative"), and a CRD created meanwhile is found at once.
func TestNegativeLookupsAreCached(t *testing.T) {
	cfg := env.TokenConfig(env.WebhookToken)
	ct := &countingTransport{}
	cfg.Wrap(func(rt http.RoundTripper) http.RoundTripper { ct.rt = rt; return ct })
	mc, err := metadata.NewForConfig(cfg)
	if err != nil {
		t.Fatal(err)
	}
	var mu sync.Mutex
	results := map[string]int{}
	count := func(r string) { mu.Lock(); results[r]++; mu.Unlock() }
	g := webhook.NewAPIVersionGetter(mc, count)
	g.NegativeTTL = time.Hour
	ctx, cancel := context.WithCancel(t.Context())
	defer cancel()
	g.Start(ctx)
	waitSynced(t, g)

	gk := schema.GroupKind{Group: "widgets.example.com", Kind: "Widget"}
	for range 3 {
		if _, err := g.APIVersion(gk); err == nil {
			t.Fatal("a kind without a CRD resolved")
		}
	}
	if n := ct.gets.Load(); n != 1 {
		t.Errorf("%d live GETs for 3 lookups of a missing CRD, want 1", n)
	}
	mu.Lock()
	if results["negative"] != 2 || results["error"] != 1 {
		t.Errorf("lookup results %v, want 1 error and 2 negative", results)
	}
	mu.Unlock()

	// The CRD appears: the informer clears the negative entry, so the next lookup answers without waiting an hour.
	crd := &apiextensionsv1.CustomResourceDefinition{
		ObjectMeta: metav1.ObjectMeta{Name: "widgets.widgets.example.com", Labels: map[string]string{"cluster.x-k8s.io/v1beta1": "v1alpha3"}},
		Spec: apiextensionsv1.CustomResourceDefinitionSpec{Group: "widgets.example.com", Scope: apiextensionsv1.NamespaceScoped,
			Names: apiextensionsv1.CustomResourceDefinitionNames{Plural: "widgets", Singular: "widget", Kind: "Widget", ListKind: "WidgetList"},
			Versions: []apiextensionsv1.CustomResourceDefinitionVersion{{Name: "v1alpha3", Served: true, Storage: true,
				Schema: &apiextensionsv1.CustomResourceValidation{OpenAPIV3Schema: &apiextensionsv1.JSONSchemaProps{Type: "object"}}}}},
	}
	if err := env.Client.Create(t.Context(), crd); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = env.Client.Delete(context.Background(), crd) })
	var resolved string
	var lastErr error
	if !testwait.Poll(30*time.Second, func() bool {
		resolved, lastErr = g.APIVersion(gk)
		return lastErr == nil
	}) {
		t.Fatalf("the new CRD was not found within 30 s: %v", lastErr)
	}
	if resolved != "widgets.example.com/v1alpha3" {
		t.Errorf("resolved %q", resolved)
	}
	if n := ct.gets.Load(); n != 1 {
		t.Errorf("%d live GETs, want still 1 (the informer found the CRD)", n)
	}

	// With a short TTL, an entry expires and the next lookup goes live again.
	g2 := webhook.NewAPIVersionGetter(mc, count)
	g2.NegativeTTL = 100 * time.Millisecond
	g2.Start(ctx)
	waitSynced(t, g2)
	other := schema.GroupKind{Group: "widgets.example.com", Kind: "Sprocket"}
	before := ct.gets.Load()
	_, _ = g2.APIVersion(other)
	_, _ = g2.APIVersion(other)
	if n := ct.gets.Load() - before; n != 1 {
		t.Errorf("%d live GETs within the TTL, want 1", n)
	}
	testwait.For(t, 10*time.Second, "a live GET once the negative entry expired", func() bool {
		_, _ = g2.APIVersion(other)
		return ct.gets.Load()-before == 2
	})
}

func waitSynced(t *testing.T, g *webhook.APIVersionGetter) {
	t.Helper()
	testwait.For(t, 30*time.Second, "the CRD informer synced", g.HasSynced)
}

// gathered is the value of a counter in reg with these label values (a subset match).
func gathered(t *testing.T, reg prometheus.Gatherer, name string, labels ...string) float64 {
	t.Helper()
	families, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	total := 0.0
	for _, f := range families {
		if f.GetName() != name {
			continue
		}
	next:
		for _, m := range f.GetMetric() {
			for i := 0; i+1 < len(labels); i += 2 {
				found := false
				for _, l := range m.GetLabel() {
					found = found || l.GetName() == labels[i] && l.GetValue() == labels[i+1]
				}
				if !found {
					continue next
				}
			}
			total += m.GetCounter().GetValue()
		}
	}
	return total
}
