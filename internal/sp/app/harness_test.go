package app

import (
	"bytes"
	"context"
	"crypto/tls"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"os"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"

	"github.com/dcm-sp/acm-cluster-sp/internal/devtest/sp/simulator"
	"github.com/dcm-sp/acm-cluster-sp/internal/devtest/sp/sphub"
	"github.com/dcm-sp/acm-cluster-sp/internal/devtest/testwait"
	"github.com/dcm-sp/acm-cluster-sp/internal/sp/config"
	"github.com/dcm-sp/acm-cluster-sp/internal/sp/hubapi"
	"github.com/dcm-sp/acm-cluster-sp/pkg/api"
	"github.com/dcm-sp/acm-cluster-sp/pkg/client"
)

var testHub *sphub.Hub

// Namespaces: the simulator plays the operator in simNamespaces only; the others hold clusters nobody reconciles
// (pagination and benchmarks need objects, not a timeline).
var (
	simNamespaces   = []string{"clusters", "restricted", "faults", "events", "leader", "secure", "oldop", "shared", "flap"}
	noSimNamespaces = []string{"pages", "bench", "benchev"}
)

func TestMain(m *testing.M) {
	SetGlobalLoggers(testLogger())
	code := sphub.RunTests(m, sphub.Options{}, func(h *sphub.Hub) func() {
		testHub = h
		ctx := context.Background()
		var err error
		if pullSecretFile, err = sphub.WritePullSecret(h.StateDir); err != nil {
			fmt.Fprintln(os.Stderr, err)
			os.Exit(1)
		}
		for _, ns := range append(append([]string{}, simNamespaces...), noSimNamespaces...) {
			if err := sphub.EnsureNamespace(ctx, h.Client, ns); err != nil {
				fmt.Fprintln(os.Stderr, err)
				os.Exit(1)
			}
		}
		stopSim, err := simulator.Start(ctx, h.Config, simulator.Options{Timeline: simulator.TestTimeline(), Namespaces: simNamespaces,
			OlderOperatorNamespaces: []string{"oldop"}})
		if err != nil {
			fmt.Fprintln(os.Stderr, err)
			os.Exit(1)
		}
		return func() {
			if mainSP != nil {
				mainSP.stop()
			}
			stopSim()
		}
	})
	writeBenchReport()
	os.Exit(code)
}

func testLogger() *slog.Logger {
	if os.Getenv("DEVHUB_VERBOSE") != "" {
		return slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelDebug}))
	}
	return slog.New(slog.DiscardHandler)
}

// agentNamespace holds the hub's InfraEnv and Agents (the seeded ones and the tests' pools).
const agentNamespace = "hardware-inventory"

// pullSecretFile holds a syntactically valid dockerconfigjson for the local hub (written in TestMain).
var pullSecretFile string

// testConfig is the configuration the integration tests start from (namespace "clusters", both platforms, the
// seeded InfraEnv and Agents).
func testConfig(namespace string) config.Config {
	cfg := config.Defaults()
	cfg.Namespace = namespace
	cfg.AgentNamespace = agentNamespace
	cfg.ListenAddress = "127.0.0.1:0"
	cfg.PullSecretFile = pullSecretFile
	cfg.Auth = config.AuthNone
	cfg.ProviderName = "sp-" + namespace
	// A lease that a loaded machine renews in time (a 3 s one, renewed within 2 s, changed leaders mid-test under
	// the stress run); a stopped SP releases its lease, so the next replica still takes over at once. The tests
	// of lost leases set a short one.
	cfg.LeaseDuration = 10 * time.Second
	cfg.ResyncPeriod = time.Minute
	// A request's deadline sized for a loaded machine (the package's tests share one hub, beside the rest of the
	// suite): under load a create's hub writes took longer than the production default's 20 s. No test here
	// waits one out; a test of a deadline sets its own.
	cfg.RequestTimeout = time.Minute
	return cfg
}

// testHTTP is the tests' client: an SP that stops answering fails the request, naming it, long before the
// package's timeout would end the run without saying what it waited for.
var testHTTP = &http.Client{Timeout: 2 * time.Minute}

// testSP is one running SP.
type testSP struct {
	App    *App
	URL    string
	Client *client.ClientWithResponses
	stop   func()
}

// startSP runs an SP on the test hub until the test ends (or until stop).
func startSP(t testing.TB, cfg config.Config, o Options) *testSP {
	t.Helper()
	sp := launchSP(t, cfg, o)
	t.Cleanup(sp.stop)
	return sp
}

func launchSP(t testing.TB, cfg config.Config, o Options) *testSP {
	t.Helper()
	sp, ready := launchSPUntil(t, cfg, o, nil)
	if !ready {
		sp.stop()
		t.Fatalf("SP not ready after 60s: %+v", sp.App.Health.Report())
	}
	return sp
}

// launchSPUntil starts an SP and waits until it is ready (true), or until abort says to stop waiting (false).
func launchSPUntil(t testing.TB, cfg config.Config, o Options, abort func() bool) (*testSP, bool) {
	t.Helper()
	if err := cfg.Validate(); err != nil {
		t.Fatal(err)
	}
	if o.RestConfig == nil {
		o.RestConfig = testHub.Config
	}
	if o.Log == nil {
		o.Log = testLogger()
	}
	if o.HealthInterval == 0 {
		o.HealthInterval = 200 * time.Millisecond
	}
	if o.HubStaleAfter == 0 {
		// Fast health refreshes, but a hub that answers slowly under load is not a lost hub: only the tests of a
		// lost hub shorten this.
		o.HubStaleAfter = 30 * time.Second
	}
	a, err := New(&cfg, o)
	if err != nil {
		t.Fatal(err)
	}
	if err := a.Listen(); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- a.Run(ctx) }()
	var once sync.Once
	sp := &testSP{App: a, URL: "http://" + a.Addr(), stop: func() { once.Do(func() { cancel(); <-done }) }}
	probe := &http.Client{Timeout: 5 * time.Second}
	if cfg.TLS() {
		// The readiness probe only: tests that use TLS verify the certificate themselves.
		sp.URL = "https://" + a.Addr()
		probe = &http.Client{Timeout: probe.Timeout, Transport: &http.Transport{TLSClientConfig: &tls.Config{InsecureSkipVerify: true}}} //nolint:gosec // probe only
	}
	sp.Client, err = client.NewClientWithResponses(sp.URL, client.WithHTTPClient(testHTTP))
	if err != nil {
		t.Fatal(err)
	}
	ready := func() bool {
		resp, err := probe.Get(sp.URL + "/readyz")
		if err != nil {
			return false
		}
		resp.Body.Close()
		return resp.StatusCode == http.StatusOK && len(a.Platforms.Available()) > 0
	}
	testwait.Poll(60*time.Second, func() bool { return ready() || abort != nil && abort() })
	return sp, ready()
}

var (
	mainOnce sync.Once
	mainSP   *testSP
)

// shared returns the SP on namespace "clusters" shared by the tests of this package.
func shared(t testing.TB) *testSP {
	mainOnce.Do(func() { mainSP = launchSP(t, testConfig("clusters"), Options{}) })
	if mainSP == nil {
		t.Fatal("shared SP did not start")
	}
	return mainSP
}

// do sends a raw request and returns status, headers and body.
func do(t testing.TB, method, url, contentType string, body []byte) (int, http.Header, []byte) {
	t.Helper()
	req, err := http.NewRequest(method, url, bytes.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	if contentType != "" {
		req.Header.Set("Content-Type", contentType)
	}
	return send(t, req)
}

// send sends a prepared request and returns status, headers and body.
func send(t testing.TB, req *http.Request) (int, http.Header, []byte) {
	t.Helper()
	resp, err := testHTTP.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	data, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, resp.Header, data
}

// create posts a body (already JSON) with an optional ?id=.
func (sp *testSP) create(t testing.TB, id, body string) (int, api.Cluster, []byte) {
	t.Helper()
	url := sp.URL + "/api/v1alpha1/clusters"
	if id != "" {
		url += "?id=" + id
	}
	code, _, data := do(t, http.MethodPost, url, "application/json", []byte(body))
	var c api.Cluster
	if code < 300 {
		if err := json.Unmarshal(data, &c); err != nil {
			t.Fatalf("create response %s: %v", data, err)
		}
	}
	return code, c, data
}

func (sp *testSP) get(t testing.TB, id string) (int, api.Cluster) {
	t.Helper()
	resp, err := sp.Client.GetClusterWithResponse(context.Background(), id)
	if err != nil {
		t.Fatal(err)
	}
	if resp.JSON200 != nil {
		return resp.StatusCode(), *resp.JSON200
	}
	return resp.StatusCode(), api.Cluster{}
}

// waitStatus polls GET until the cluster has the status (404 counts as "DELETED"), recording what it saw.
func (sp *testSP) waitStatus(t testing.TB, id string, want string, within time.Duration) (api.Cluster, []string) {
	t.Helper()
	var seen []string
	var last api.Cluster
	reached := testwait.Poll(within, func() bool {
		code, c := sp.get(t, id)
		st := string(c.Status)
		if code == http.StatusNotFound {
			st = "DELETED"
		} else if code != http.StatusOK {
			t.Fatalf("GET %s: %d", id, code)
		}
		if len(seen) == 0 || seen[len(seen)-1] != st {
			seen = append(seen, st)
		}
		last = c
		return st == want
	})
	if !reached {
		t.Fatalf("cluster %s: status %s (%q) after %v, want %s; seen %v%s", id, last.Status, last.StatusMessage, within, want, seen, hubDiagnosis(id))
	}
	return last, seen
}

// justCreated tells whether a create's answer has the status of a cluster just made: PENDING, or PROVISIONING when
// the simulated operator reported progress before the answer was built (the answer shows what the hub reports, and
// on a loaded machine the operator can be quicker than the create's last writes).
func justCreated(s api.ClusterStatus) bool { return s == api.PENDING || s == api.PROVISIONING }

// assertProblem checks an RFC 7807 answer.
func assertProblem(t testing.TB, code int, header http.Header, body []byte, wantCode int, detailHas string) api.Problem {
	t.Helper()
	if code != wantCode {
		t.Fatalf("status %d, want %d: %s", code, wantCode, body)
	}
	if ct := header.Get("Content-Type"); ct != "application/problem+json" {
		t.Fatalf("Content-Type %q, want application/problem+json (body %s)", ct, body)
	}
	var p api.Problem
	if err := json.Unmarshal(body, &p); err != nil {
		t.Fatalf("problem body %s: %v", body, err)
	}
	if p.Type == "" || p.Title == "" || p.Status == nil || int(*p.Status) != wantCode || p.Instance == nil || p.Detail == nil {
		t.Fatalf("incomplete problem: %s", body)
	}
	if detailHas != "" && !strings.Contains(*p.Detail, detailHas) {
		t.Fatalf("problem detail %q does not contain %q", *p.Detail, detailHas)
	}
	return p
}

var names atomic.Int64

// uniqueName returns a cluster name unique on the hub (the package's tests run in parallel on one hub).
func uniqueName(prefix string) string {
	return fmt.Sprintf("%s-%d", prefix, names.Add(1))
}

// agentPool adds n discovered, approved Agents (16 cores, 64 GiB, 480 GiB) labelled location=<a pool of their
// own> to the hub's inventory for one test, removes them when it ends, and returns the pool's label value. The
// seeded Agents (location=datacenter-1) are shared by the whole package: a test that reserves Agents while others
// run in parallel brings its own.
func agentPool(t testing.TB, n int) string {
	t.Helper()
	pool := uniqueName("pool")
	for i := 1; i <= n; i++ {
		a := sphub.AgentSpec{Name: fmt.Sprintf("%s-%02d", pool, i), Namespace: agentNamespace, InfraEnv: "production-infraenv",
			Labels: map[string]string{"location": pool}, Approved: true, Role: "auto-assign", Validated: true, CPUs: 16, MemoryGiB: 64, DiskGiB: 480}
		if err := sphub.CreateAgent(context.Background(), testHub.Client, a); err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() {
			u := &unstructured.Unstructured{}
			u.SetGroupVersionKind(hubapi.AgentGVK)
			u.SetNamespace(agentNamespace)
			u.SetName(a.Name)
			_ = testHub.Client.Delete(context.Background(), u)
		})
	}
	return pool
}

// baremetalBody is a DCM-form create body of a 4.17 bare-metal cluster with workers 8-core workers on the Agents
// labelled location=pool.
func baremetalBody(name, pool string, workers int) string {
	return fmt.Sprintf(`{"spec":{"version":"4.17","metadata":{"name":%q},"nodes":{"workers":{"count":%d,"cpu":8}},"provider_hints":{"acm":{"platform":"baremetal","base_domain":"example.com","infra_env":"production-infraenv","agent_labels":{"location":%q}}}}}`, name, workers, pool)
}

// kubevirtBody is a small DCM-form create body.
func kubevirtBody(name string, workers int) string {
	return fmt.Sprintf(`{"spec":{"service_type":"cluster","version":"1.30","metadata":{"name":%q},"nodes":{"workers":{"count":%d,"cpu":4,"memory":"16GB","storage":"120GB"}},"provider_hints":{"acm":{"platform":"kubevirt"}}}}`, name, workers)
}
