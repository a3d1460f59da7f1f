package httpapi

import (
	"bytes"
	"context"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"net/url"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"k8s.io/apiserver/pkg/authentication/user"
	"k8s.io/client-go/rest"

	"github.com/dcm-sp/acm-cluster-sp/internal/sp/clusters"
	"github.com/dcm-sp/acm-cluster-sp/internal/sp/hub"
	"github.com/dcm-sp/acm-cluster-sp/internal/sp/provision"
	"github.com/dcm-sp/acm-cluster-sp/internal/sp/security"
	"github.com/dcm-sp/acm-cluster-sp/pkg/api"
)

// Every operation of the OpenAPI document is either open (a health endpoint, security: []) or has an authorization
// verb: adding an operation forces a decision about who may call it.
func TestEveryOperationHasAnAuthorizationRule(t *testing.T) {
	spec, err := api.GetSwagger()
	if err != nil {
		t.Fatal(err)
	}
	for path, item := range spec.Paths.Map() {
		for method, op := range item.Operations() {
			open := op.Security != nil && len(*op.Security) == 0
			switch {
			case open && !openPaths[path]:
				t.Errorf("%s %s declares no security but is not an open path", method, path)
			case !open && openPaths[path]:
				t.Errorf("%s %s is served without credentials but declares security", method, path)
			case !open && routeVerbs[path][method] == "":
				t.Errorf("%s %s has no authorization verb in routeVerbs", method, path)
			}
		}
	}
}

// fuzzGuard lets every request through to the decoder.
type fuzzGuard struct{}

func (fuzzGuard) Authenticate(*http.Request) (user.Info, error) { return security.Unauthenticated, nil }
func (fuzzGuard) Authorize(context.Context, user.Info, security.Action) (bool, error) {
	return true, nil
}
func (fuzzGuard) AuthorizePath(context.Context, user.Info, string, string) (bool, error) {
	return true, nil
}

type noHealth struct{}

func (noHealth) Report() api.Health { return api.Health{Status: api.HealthStatusUnhealthy} }
func (noHealth) Ready() bool        { return false }

// fuzzHandler is the whole HTTP surface over a hub that is never reached: requests that get past validation end
// as 503 (caches not synced), everything else must be a 4xx problem.
func fuzzHandler(t testing.TB) http.Handler {
	h, err := hub.New(&rest.Config{Host: "https://127.0.0.1:1"}, hub.Options{Namespace: "clusters"})
	if err != nil {
		t.Fatal(err)
	}
	svc := provision.New(provision.Ports{Client: h.Client, Index: h.Index(), Catalog: h, Site: h}, provision.Config{
		Spec:      clusters.SpecContext{Namespace: "clusters", DefaultPlatform: "kubevirt", AgentNamespace: "hardware-inventory"},
		Platforms: func() []string { return []string{"kubevirt", "baremetal"} },
	}, nil)
	handler, err := NewServer(svc, noHealth{}, fuzzGuard{}, Options{}).Handler(prometheus.NewRegistry())
	if err != nil {
		t.Fatal(err)
	}
	return handler
}

// checkAnswer asserts what every answer of the API must be for arbitrary input: no 500, and every error a complete
// problem document.
func checkAnswer(t *testing.T, rec *httptest.ResponseRecorder, what string) {
	if rec.Code >= 500 && rec.Code != http.StatusServiceUnavailable {
		t.Fatalf("%s: %d %s", what, rec.Code, rec.Body)
	}
	if rec.Code < 400 {
		return
	}
	if ct := rec.Header().Get("Content-Type"); ct != "application/problem+json" {
		t.Fatalf("%s: %d with Content-Type %q", what, rec.Code, ct)
	}
	var p api.Problem
	if err := json.Unmarshal(rec.Body.Bytes(), &p); err != nil || p.Type == "" || p.Title == "" || p.Status == nil || int(*p.Status) != rec.Code || p.Detail == nil {
		t.Fatalf("%s: incomplete problem %s", what, rec.Body)
	}
}

// FuzzAPI drives the create decoder (body and ?id=) and the list paging parameters with arbitrary bytes.
func FuzzAPI(f *testing.F) {
	for _, name := range []string{"dcm-kubevirt.json", "agent-kubevirt.json", "design-kubevirt.json", "design-baremetal.json"} {
		data, err := os.ReadFile(filepath.Join("..", "..", "..", "api", "v1alpha1", "examples", name))
		if err != nil {
			f.Fatal(err)
		}
		f.Add(data, "inst-1", "")
	}
	for _, seed := range []struct{ body, id, token string }{
		{`{"spec":{"version":"1.30","metadata":{"name":"c"},"nodes":{"workers":{"memory":"1e400"}}}}`, "", "bm90LWEtdG9rZW4"},
		{`{"version":"1.30","metadata":{"name":"c"},"nodes":{"workers":{"count":1e308,"storage":"9999999999999999999999E"}}}`, "Bad_ID", "%zz"},
		{`{"spec":{"spec":{"spec":{}}}}`, "health", "MTcwMDAwMDAwMDAwMDAwMDAwMC94qqqqqg"},
		{`[`, "", "===="},
		{`{"version":"4.17","metadata":{"name":"x"},"provider_hints":{"acm":{"platform":"baremetal","agent_labels":{"a":1}}}}`, "a-b", ""},
	} {
		f.Add([]byte(seed.body), seed.id, seed.token)
	}
	handler := fuzzHandler(f)
	f.Fuzz(func(t *testing.T, body []byte, id, token string) {
		began := time.Now()
		defer func() {
			// No input may cost a request seconds of CPU (huge quantity exponents once did).
			if d := time.Since(began); d > 2*time.Second {
				t.Fatalf("input took %v: %q %q %q", d, body, id, token)
			}
		}()
		q := url.Values{}
		if id != "" {
			q.Set("id", id)
		}
		req := httptest.NewRequest(http.MethodPost, "/api/v1alpha1/clusters?"+q.Encode(), bytes.NewReader(body))
		req.Header.Set("Content-Type", "application/json")
		rec := httptest.NewRecorder()
		handler.ServeHTTP(rec, req)
		checkAnswer(t, rec, "create")
		if rec.Code == http.StatusCreated || rec.Code == http.StatusOK {
			t.Fatalf("create succeeded without a hub: %s", rec.Body)
		}

		// The token raw in the query (malformed escapes included) and properly escaped.
		for _, raw := range []string{"page_token=" + token, "max_page_size=7&page_token=" + url.QueryEscape(token)} {
			if _, err := url.ParseRequestURI("/x?" + raw); err != nil || strings.ContainsAny(raw, " #") {
				continue // not a request line a client can send
			}
			rec := httptest.NewRecorder()
			handler.ServeHTTP(rec, httptest.NewRequest(http.MethodGet, "/api/v1alpha1/clusters?"+raw, nil))
			checkAnswer(t, rec, "list "+raw)
		}
		if _, err := clusters.DecodePageToken(token); err == nil {
			k, _ := clusters.DecodePageToken(token)
			if again, err := clusters.DecodePageToken(clusters.EncodePageToken(k)); err != nil || again != k {
				t.Fatalf("token %q decodes to %+v, which does not round-trip", token, k)
			}
		}
	})
}
