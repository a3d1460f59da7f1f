package httpapi

import (
	"fmt"
	"net/http"
	"net/http/httptest"
	"testing"

	"github.com/go-chi/chi/v5"

	"github.com/dcm-sp/acm-cluster-sp/pkg/api"
)

// Parameters are checked against the document whether or not a request was seen before: a valid request is
// remembered, and answered alike the next time; an invalid one is refused every time and never remembered; an
// operation with header parameters (PATCH's If-Match) is never remembered.
func TestValidatorRemembersValidRequestsOnly(t *testing.T) {
	spec, err := api.GetSwagger()
	if err != nil {
		t.Fatal(err)
	}
	v, err := newValidator(spec)
	if err != nil {
		t.Fatal(err)
	}
	h := chi.NewRouter()
	ok := func(w http.ResponseWriter, _ *http.Request) { w.WriteHeader(http.StatusOK) }
	h.With(v.middleware).Get("/api/v1alpha1/clusters", ok)
	h.With(v.middleware).Get("/api/v1alpha1/clusters/{clusterId}", ok)
	h.With(v.middleware).Delete("/api/v1alpha1/clusters/{clusterId}", ok)
	for _, tc := range []struct {
		method, url string
		code        int
		remembered  bool
	}{
		{"GET", "/api/v1alpha1/clusters/c1", 200, true},
		{"GET", "/api/v1alpha1/clusters?max_page_size=5", 200, true},
		{"GET", "/api/v1alpha1/clusters/Not_An_Id", 400, false},
		{"GET", "/api/v1alpha1/clusters?max_page_size=0", 400, false},
		{"GET", "/api/v1alpha1/clusters?max_page_size=x", 400, false},
		{"DELETE", "/api/v1alpha1/clusters/c1", 200, false},
	} {
		for round := range 2 {
			rec := httptest.NewRecorder()
			h.ServeHTTP(rec, httptest.NewRequest(tc.method, tc.url, nil))
			if rec.Code != tc.code {
				t.Errorf("%s %s (round %d): %d %s, want %d", tc.method, tc.url, round, rec.Code, rec.Body, tc.code)
			}
		}
		if got := v.validated.count(tc.method, tc.url); (got == 1) != tc.remembered || got > 1 {
			t.Errorf("%s %s remembered %d times, want remembered %v", tc.method, tc.url, got, tc.remembered)
		}
	}
}

// The requests remembered are bounded: past maxValidated the memory starts again.
func TestValidatedBounded(t *testing.T) {
	var s validated
	for i := range maxValidated + 10 {
		s.add(validKey{path: fmt.Sprint(i)})
	}
	if n := len(s.keys); n != 10 {
		t.Errorf("%d remembered, want the 10 added since the memory was full", n)
	}
	if !s.has(validKey{path: fmt.Sprint(maxValidated + 9)}) || s.has(validKey{path: "0"}) {
		t.Error("the newest is not remembered, or the oldest still is")
	}
}

// count is how many remembered requests have method and the path and query of url.
func (s *validated) count(method, url string) int {
	r := httptest.NewRequest(method, url, nil)
	s.mu.RLock()
	defer s.mu.RUnlock()
	n := 0
	for k := range s.keys {
		if k.route.Method == method && k.path == r.URL.EscapedPath() && k.query == r.URL.RawQuery {
			n++
		}
	}
	return n
}
