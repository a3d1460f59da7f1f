package security_test

import (
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/dcm-sp/acm-cluster-sp/internal/sp/httpapi"
	"github.com/dcm-sp/acm-cluster-sp/internal/sp/security"
	"github.com/dcm-sp/acm-cluster-sp/pkg/api"
)

// serve is the API with g as its guard.
func serve(t *testing.T, g *security.Guard) http.Handler {
	t.Helper()
	h, err := httpapi.NewServer(nil, noHealth{}, g, httpapi.Options{}).Handler(prometheus.NewRegistry())
	if err != nil {
		t.Fatal(err)
	}
	return h
}

type noHealth struct{}

func (noHealth) Report() api.Health { return api.Health{Status: api.HealthStatusHealthy} }
func (noHealth) Ready() bool        { return true }

// The Guard's verdicts as the API answers them: RFC 7807 problem documents that say what is missing and never
// show the credential. Only refusals are exercised, so no request reaches the clusters service.
func TestRefusalsAreProblemDocuments(t *testing.T) {
	h := hubWithTokens(t)
	h.setAllow(rbac)
	srv := serve(t, guard(t, h, security.Options{}))
	noTR := newReviewHub(t)
	noTR.failWith(http.StatusForbidden)
	noSAR := hubWithTokens(t)
	noSAR.failAccessWith(http.StatusForbidden)
	for _, c := range []struct {
		name, method, path, token string
		handler                   http.Handler
		status                    int
		typ, detail, header       string
	}{
		{"no credentials", http.MethodGet, "/api/v1alpha1/clusters", "", srv, 401, "UNAUTHENTICATED", "authentication required", "WWW-Authenticate: Bearer"},
		{"unknown token", http.MethodDelete, "/api/v1alpha1/clusters/c1", "forged-secret-value", srv, 401, "UNAUTHENTICATED", "authentication required", "WWW-Authenticate: Bearer"},
		{"token of another service", http.MethodGet, "/api/v1alpha1/clusters", "eve-token", srv, 401, "UNAUTHENTICATED", "authentication required", "WWW-Authenticate: Bearer"},
		{"denied delete", http.MethodDelete, "/api/v1alpha1/clusters/c1", "alice-token", srv, 403, "PERMISSION_DENIED", "user alice may not delete clusters/c1", ""},
		{"no opinion on patch", http.MethodPatch, "/api/v1alpha1/clusters/c1", "alice-token", srv, 403, "PERMISSION_DENIED", "user alice may not patch clusters/c1", ""},
		{"nothing granted", http.MethodGet, "/api/v1alpha1/clusters", "carol-token", srv, 403, "PERMISSION_DENIED", "user carol may not list clusters", ""},
		{"metrics not granted", http.MethodGet, "/metrics", "carol-token", srv, 403, "PERMISSION_DENIED", "user carol may not get /metrics", ""},
		{"hub refuses TokenReviews", http.MethodGet, "/api/v1alpha1/clusters", "alice-token", serve(t, guard(t, noTR, security.Options{})),
			503, "UNAVAILABLE", "authentication could not be checked", "Retry-After: 1"},
		{"hub refuses SubjectAccessReviews", http.MethodGet, "/api/v1alpha1/clusters", "alice-token", serve(t, guard(t, noSAR, security.Options{})),
			503, "UNAVAILABLE", "authorization could not be checked", "Retry-After: 1"},
	} {
		t.Run(c.name, func(t *testing.T) {
			r := httptest.NewRequest(c.method, c.path, nil)
			if c.token != "" {
				r.Header.Set("Authorization", "Bearer "+c.token)
			}
			w := httptest.NewRecorder()
			c.handler.ServeHTTP(w, r)
			var p struct {
				Type, Title, Detail, Instance string
				Status                        int
			}
			if err := json.Unmarshal(w.Body.Bytes(), &p); err != nil {
				t.Fatalf("%d %s: %v", w.Code, w.Body, err)
			}
			if w.Code != c.status || w.Header().Get("Content-Type") != "application/problem+json" || p.Status != c.status ||
				p.Type != c.typ || p.Title != http.StatusText(c.status) || p.Instance != c.path || !strings.Contains(p.Detail, c.detail) {
				t.Fatalf("%d %s %s, want %d %s with detail %q", w.Code, w.Header().Get("Content-Type"), w.Body, c.status, c.typ, c.detail)
			}
			if name, value, ok := strings.Cut(c.header, ": "); ok && w.Header().Get(name) != value {
				t.Fatalf("%s: %q, want %q", name, w.Header().Get(name), value)
			}
			if c.token != "" && (strings.Contains(w.Body.String(), c.token) || strings.Contains(strings.Join(w.Header().Values("WWW-Authenticate"), " "), c.token)) {
				t.Fatalf("the answer shows the token: %v %s", w.Header(), w.Body)
			}
		})
	}
}
