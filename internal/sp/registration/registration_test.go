package registration

import (
	"context"
	"crypto/tls"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"

	"github.com/dcm-sp/acm-cluster-sp/internal/devtest/sp/faultproxy"
	"github.com/dcm-sp/acm-cluster-sp/internal/devtest/sp/sphub"
	"github.com/dcm-sp/acm-cluster-sp/internal/devtest/testpki"
	"github.com/dcm-sp/acm-cluster-sp/internal/devtest/testwait"
)

// caps is a capability source the tests change on the fly.
type caps struct {
	mu    sync.Mutex
	c     Capabilities
	reads int // how often the registrar asked (each time it compares and decides)
}

func (c *caps) get(context.Context) Capabilities {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.reads++
	return c.c
}
func (c *caps) set(v Capabilities) { c.mu.Lock(); c.c = v; c.mu.Unlock() }
func (c *caps) count() int         { c.mu.Lock(); defer c.mu.Unlock(); return c.reads }

func start(t *testing.T, url string, src *caps, mod func(*Options)) (*Registrar, *prometheus.Registry) {
	t.Helper()
	reg := prometheus.NewRegistry()
	o := Options{
		RegistryURL: url, Name: "acm-cluster-sp", DisplayName: "ACM Cluster Service Provider (HyperShift)",
		Endpoint: "http://127.0.0.1:8080/api/v1alpha1/clusters", Capabilities: src.get,
		MinBackoff: 20 * time.Millisecond, MaxBackoff: 200 * time.Millisecond, Registry: reg,
	}
	if mod != nil {
		mod(&o)
	}
	r, err := New(o)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { _ = r.Start(ctx); close(done) }()
	t.Cleanup(func() { cancel(); <-done })
	return r, reg
}

func waitFor(t *testing.T, what string, cond func() bool) {
	t.Helper()
	testwait.For(t, 10*time.Second, what, cond)
}

func registered(r *Registrar) bool {
	ok, msg := r.Status()
	return ok && strings.HasPrefix(msg, "registered")
}

func TestRegistersSnakeCaseWithCapabilities(t *testing.T) {
	spm, err := sphub.StartRegistry("127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer spm.Close()
	src := &caps{c: Capabilities{Platforms: []string{"baremetal", "kubevirt"}, KubernetesVersions: []string{"1.30", "1.31"}}}
	r, reg := start(t, spm.URL, src, nil)
	waitFor(t, "registered", func() bool { return registered(r) })

	p, ok := spm.Get("acm-cluster-sp")
	if !ok || p.ServiceType != "cluster" || p.SchemaVersion != "v1alpha1" || p.Endpoint != "http://127.0.0.1:8080/api/v1alpha1/clusters" ||
		p.DisplayName != "ACM Cluster Service Provider (HyperShift)" || strings.Join(p.Operations, ",") != "CREATE,DELETE,READ,UPDATE" {
		t.Fatalf("registered %+v", p)
	}
	if got := p.Metadata["kubernetesSupportedVersions"]; !equalList(got, "1.30", "1.31") ||
		!equalList(p.Metadata["supportedPlatforms"], "baremetal", "kubevirt") || !equalList(p.Metadata["supportedProvisioningTypes"], "hypershift") {
		t.Fatalf("metadata %v", p.Metadata)
	}
	id := p.ID
	if testutil.ToFloat64(r.m.state) != 1 || testutil.ToFloat64(r.m.lastSuccess) == 0 {
		t.Fatal("metrics not updated")
	}
	_ = reg

	// A new capability set re-registers at once (200, same id).
	src.set(Capabilities{Platforms: []string{"baremetal", "kubevirt"}, KubernetesVersions: []string{"1.30", "1.31", "1.32"}})
	r.Trigger()
	waitFor(t, "re-registered", func() bool {
		p, _ := spm.Get("acm-cluster-sp")
		return equalList(p.Metadata["kubernetesSupportedVersions"], "1.30", "1.31", "1.32")
	})
	if p, _ := spm.Get("acm-cluster-sp"); p.ID != id || p.Status != "updated" {
		t.Fatalf("re-registration changed the id or status: %+v", p)
	}
	// An unchanged capability set does not call the registry again. The registrar reads the capabilities once per
	// decision; after two triggered reads the first one's decision is certainly done.
	n, reads := len(spm.Requests()), src.count()
	for i := 1; i <= 2; i++ {
		r.Trigger()
		waitFor(t, "the registrar to compare again", func() bool { return src.count() >= reads+i })
	}
	if len(spm.Requests()) != n {
		t.Fatal("re-registered without a change")
	}
}

func TestRetriesThroughServerErrors(t *testing.T) {
	spm, err := sphub.StartRegistry("127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer spm.Close()
	spm.FailNext(3, 503)
	r, _ := start(t, spm.URL, &caps{}, nil)
	waitFor(t, "registered after three 503s", func() bool { return registered(r) })
	if got := testutil.ToFloat64(r.m.attempts.WithLabelValues("server-error")); got != 3 {
		t.Fatalf("%v server-error attempts, want 3", got)
	}
	// Capabilities may be empty: still registered, with empty lists.
	if p, _ := spm.Get("acm-cluster-sp"); !equalList(p.Metadata["kubernetesSupportedVersions"]) {
		t.Fatalf("metadata %v", p.Metadata)
	}
}

func TestRegistersWhenTheRegistryComesUp(t *testing.T) {
	// The registry's address is a forwarder kept open, with nothing behind it until the registry starts.
	fwd, err := faultproxy.NewTCP("")
	if err != nil {
		t.Fatal(err)
	}
	defer fwd.Close()
	r, _ := start(t, "http://"+fwd.Addr+"/api/v1alpha1", &caps{}, nil)
	waitFor(t, "network failures recorded", func() bool { return testutil.ToFloat64(r.m.attempts.WithLabelValues("network")) >= 2 })
	if ok, msg := r.Status(); ok || !strings.Contains(msg, "not registered") {
		t.Fatalf("status while down: %v %q", ok, msg)
	}
	spm, err := sphub.StartRegistry("127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer spm.Close()
	fwd.SetUpstream(strings.TrimPrefix(strings.TrimSuffix(spm.URL, "/api/v1alpha1"), "http://"))
	waitFor(t, "registered once the registry is up", func() bool { return registered(r) })
}

// A 4xx (here: the name is registered under another id) is logged and retried at the longest interval, forever.
func TestClientErrorsKeepRetrying(t *testing.T) {
	spm, err := sphub.StartRegistry("127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer spm.Close()
	spm.Put(sphub.Provider{ID: "someone-else", Name: "acm-cluster-sp", ServiceType: "cluster", SchemaVersion: "v1alpha1", Endpoint: "x"})
	r, _ := start(t, spm.URL, &caps{}, func(o *Options) { o.ProviderID = "acm-sp-1" })
	waitFor(t, "several rejected attempts", func() bool { return testutil.ToFloat64(r.m.attempts.WithLabelValues("rejected")) >= 3 })
	ok, msg := r.Status()
	// The health message names the answer, never the registry's URL or body (health is unauthenticated); the
	// registry's detail goes to the log.
	if ok || !strings.Contains(msg, "409 Conflict") || strings.Contains(msg, "127.0.0.1") {
		t.Fatalf("status %v %q: want the registry's answer without its address", ok, msg)
	}
	// Fixing the registry side lets it through without a restart.
	spm.Put(sphub.Provider{ID: "acm-sp-1", Name: "acm-cluster-sp", ServiceType: "cluster", SchemaVersion: "v1alpha1", Endpoint: "x"})
	waitFor(t, "registered after the conflict was resolved", func() bool { return registered(r) })
}

// The stand-in refuses camelCase bodies the way SPM does; the SP's snake_case body passes it (previous tests).
func TestRegistryStandInRejectsCamelCase(t *testing.T) {
	spm, err := sphub.StartRegistry("127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer spm.Close()
	resp, err := httpPost(spm.URL+"/providers", `{"name":"x","serviceType":"cluster","schemaVersion":"v1alpha1","endpoint":"http://x"}`)
	if err != nil || resp != 400 {
		t.Fatalf("camelCase body: %d %v", resp, err)
	}
}

func equalList(v any, want ...string) bool {
	list, ok := v.([]any)
	if !ok || len(list) != len(want) {
		return false
	}
	for i, x := range list {
		if x != want[i] {
			return false
		}
	}
	return true
}

func httpPost(url, body string) (int, error) {
	resp, err := http.Post(url, "application/json", strings.NewReader(body))
	if err != nil {
		return 0, err
	}
	resp.Body.Close()
	return resp.StatusCode, nil
}

// The registry client sends the token file's content as a bearer token (client-go's cached file token source, which
// re-reads it every minute as projected tokens rotate), verifies the registry with the CA file, and never follows a
// redirect to another host (the token would go with it).
func TestClientCredentials(t *testing.T) {
	ca := testpki.NewCA(t, "registry-ca")
	serving := ca.Serving(t, "registry")
	var mu sync.Mutex
	var seen []string
	elsewhere := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		mu.Lock()
		seen = append(seen, "elsewhere:"+r.Header.Get("Authorization"))
		mu.Unlock()
	}))
	defer elsewhere.Close()
	registry := httptest.NewUnstartedServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		mu.Lock()
		seen = append(seen, r.URL.Path+":"+r.Header.Get("Authorization"))
		mu.Unlock()
		if r.URL.Path == "/moved" {
			http.Redirect(w, r, elsewhere.URL+"/steal", http.StatusTemporaryRedirect)
			return
		}
		w.WriteHeader(http.StatusOK)
	}))
	registry.TLS = &tls.Config{Certificates: []tls.Certificate{serving.TLS(t)}, MinVersion: tls.VersionTLS12}
	registry.StartTLS()
	defer registry.Close()

	dir := t.TempDir()
	tokenFile := testpki.WriteFile(t, dir, "token", []byte("first-token\n"))
	caFile := testpki.WriteFile(t, dir, "ca.crt", ca.CertPEM)
	c, err := NewHTTPClient(tokenFile, caFile)
	if err != nil {
		t.Fatal(err)
	}
	get := func(path string) error {
		resp, err := c.Get(registry.URL + path)
		if err == nil {
			resp.Body.Close()
		}
		return err
	}
	if err := get("/ok"); err != nil {
		t.Fatal(err)
	}
	if err := get("/moved"); err == nil || !strings.Contains(err.Error(), "another host") {
		t.Fatalf("redirect to another host followed: %v", err)
	}
	mu.Lock()
	defer mu.Unlock()
	if seen[0] != "/ok:Bearer first-token" || seen[1] != "/moved:Bearer first-token" {
		t.Fatalf("requests %v", seen)
	}
	for _, s := range seen {
		if strings.HasPrefix(s, "elsewhere:") {
			t.Fatalf("the other host was called: %v", seen)
		}
	}
	// Without the CA the registry's certificate is not trusted.
	plain, _ := NewHTTPClient(tokenFile, "")
	if _, err := plain.Get(registry.URL + "/ok"); err == nil {
		t.Fatal("an untrusted registry certificate was accepted")
	}
}

// Each leadership term runs the registrar afresh: a term compares the capabilities at once, registering only when
// due; its end leaves the health check saying the leader registers; a later term follows changes again.
func TestTermsStartAndStop(t *testing.T) {
	spm, err := sphub.StartRegistry("127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer spm.Close()
	src := &caps{c: Capabilities{Platforms: []string{"kubevirt"}, KubernetesVersions: []string{"1.31"}}}
	r, err := New(Options{RegistryURL: spm.URL, Name: "acm-cluster-sp", Endpoint: "http://127.0.0.1:8080/api/v1alpha1/clusters",
		Capabilities: src.get, MinBackoff: 20 * time.Millisecond, MaxBackoff: 200 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	stop := testwait.Background(t, 10*time.Second, r.Start)
	waitFor(t, "registered in the first term", func() bool { return registered(r) })
	stop()
	if ok, msg := r.Status(); !ok || msg != "registration runs on the leader replica" {
		t.Fatalf("after the term: %v %q", ok, msg)
	}
	n, reads := len(spm.Requests()), src.count()
	testwait.Background(t, 10*time.Second, r.Start)
	waitFor(t, "the second term to compare", func() bool { return src.count() > reads })
	r.Trigger() // one worker: once this second read is made, the first decision is done
	waitFor(t, "the second term to compare again", func() bool { return src.count() > reads+1 })
	if len(spm.Requests()) != n {
		t.Fatal("the second term re-registered an unchanged, fresh registration")
	}
	src.set(Capabilities{Platforms: []string{"kubevirt"}, KubernetesVersions: []string{"1.31", "1.32"}})
	r.Trigger()
	waitFor(t, "re-registered in the second term", func() bool {
		p, _ := spm.Get("acm-cluster-sp")
		return equalList(p.Metadata["kubernetesSupportedVersions"], "1.31", "1.32")
	})
}
