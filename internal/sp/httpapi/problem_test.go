package httpapi

import (
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/prometheus/client_golang/prometheus"
	"k8s.io/client-go/rest"

	"github.com/dcm-sp/acm-cluster-sp/internal/sp/clusters"
	"github.com/dcm-sp/acm-cluster-sp/internal/sp/hub"
	"github.com/dcm-sp/acm-cluster-sp/internal/sp/provision"
	"github.com/dcm-sp/acm-cluster-sp/pkg/api"
)

// The RFC 9457 type URI of each problem code is DCM's: the code in lower case with hyphens under
// https://dcm-project.github.io/problems/ — the same slug for the same case.
func TestProblemTypeURI(t *testing.T) {
	want := map[string]string{
		"INVALID_ARGUMENT": "invalid-argument", "UNAUTHENTICATED": "unauthenticated", "PERMISSION_DENIED": "permission-denied",
		"NOT_FOUND": "not-found", "METHOD_NOT_ALLOWED": "method-not-allowed", "ALREADY_EXISTS": "already-exists",
		"FAILED_PRECONDITION": "failed-precondition", "PAYLOAD_TOO_LARGE": "payload-too-large",
		"UNSUPPORTED_MEDIA_TYPE": "unsupported-media-type", "UNPROCESSABLE_ENTITY": "unprocessable-entity",
		"INTERNAL": "internal", "UNAVAILABLE": "unavailable", "DEADLINE_EXCEEDED": "deadline-exceeded",
		clusters.ReasonAborted: "aborted",
	}
	for _, kind := range problemKinds {
		if _, ok := want[kind[0]]; !ok {
			t.Errorf("code %s has no expected slug", kind[0])
		}
	}
	for code, slug := range want {
		if got := ProblemTypeURI(code); got != "https://dcm-project.github.io/problems/"+slug {
			t.Errorf("%s → %s", code, got)
		}
	}
}

// problemsHandler is the HTTP surface over a hub that is never reached, with or without type URIs.
func problemsHandler(t *testing.T, uris bool) http.Handler {
	t.Helper()
	h, err := hub.New(&rest.Config{Host: "https://127.0.0.1:1"}, hub.Options{Namespace: "clusters"})
	if err != nil {
		t.Fatal(err)
	}
	svc := provision.New(provision.Ports{Client: h.Client, Index: h.Index(), Catalog: h, Site: h}, provision.Config{Spec: clusters.SpecContext{Namespace: "clusters", DefaultPlatform: "kubevirt"},
		Platforms: func() []string { return []string{"kubevirt"} }}, nil)
	handler, err := NewServer(svc, noHealth{}, fuzzGuard{}, Options{ProblemTypeURIs: uris}).Handler(prometheus.NewRegistry())
	if err != nil {
		t.Fatal(err)
	}
	return handler
}

// With problemTypes uris every problem — from routing, validation, the domain and the middleware — carries the
// URI of the code it carries by default; the rest of the document is unchanged.
func TestProblemTypesSwitch(t *testing.T) {
	requests := []struct {
		method, path, contentType, body, key string
		code                                 int
		typ                                  string
	}{
		{"GET", "/no/such/route", "", "", "", 404, "NOT_FOUND"},
		{"PUT", "/api/v1alpha1/clusters", "application/json", "{}", "", 405, "METHOD_NOT_ALLOWED"},
		{"POST", "/api/v1alpha1/clusters?id=Bad_ID", "application/json", `{"version":"1.30","metadata":{"name":"a"}}`, "", 400, "INVALID_ARGUMENT"},
		{"POST", "/api/v1alpha1/clusters", "text/plain", "x", "", 415, "UNSUPPORTED_MEDIA_TYPE"},
		{"POST", "/api/v1alpha1/clusters", "application/json", `{"version":"1.30","metadata":{"name":"a"}}`, "key with spaces", 400, "INVALID_ARGUMENT"},
		{"GET", "/api/v1alpha1/clusters/a", "", "", "", 503, "UNAVAILABLE"}, // caches never sync: a domain error
	}
	codes, uris := problemsHandler(t, false), problemsHandler(t, true)
	for _, r := range requests {
		for _, h := range []struct {
			handler http.Handler
			want    string
		}{{codes, r.typ}, {uris, ProblemTypeURI(r.typ)}} {
			req := httptest.NewRequest(r.method, r.path, strings.NewReader(r.body))
			if r.contentType != "" {
				req.Header.Set("Content-Type", r.contentType)
			}
			if r.key != "" {
				req.Header.Set("Idempotency-Key", r.key)
			}
			rec := httptest.NewRecorder()
			h.handler.ServeHTTP(rec, req)
			var p api.Problem
			if err := json.Unmarshal(rec.Body.Bytes(), &p); err != nil || rec.Code != r.code || p.Type != h.want || p.Title == "" || p.Detail == nil {
				t.Errorf("%s %s: %d %s, want %d type %s", r.method, r.path, rec.Code, rec.Body, r.code, h.want)
			}
		}
	}
}
