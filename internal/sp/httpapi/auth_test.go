package httpapi

import (
	"context"
	"net/http"
	"net/http/httptest"
	"testing"

	"github.com/prometheus/client_golang/prometheus"
	"k8s.io/apiserver/pkg/authentication/user"

	"github.com/dcm-sp/acm-cluster-sp/internal/sp/security"
)

// denyAll authenticates nobody and allows nothing: whatever reaches a handler through it was served without
// credentials.
type denyAll struct{}

func (denyAll) Authenticate(*http.Request) (user.Info, error) {
	return nil, security.ErrUnauthenticated
}
func (denyAll) Authorize(context.Context, user.Info, security.Action) (bool, error) {
	return false, nil
}
func (denyAll) AuthorizePath(context.Context, user.Info, string, string) (bool, error) {
	return false, nil
}

// Only GET and HEAD of the exact open routes skip authentication. Any other method on them, and any spelling of
// their path that the router reads differently (an escaped letter), is authenticated like every API call.
func TestOnlyReadsOfTheExactOpenRoutesAreOpen(t *testing.T) {
	h, err := NewServer(nil, noHealth{}, denyAll{}, Options{}).Handler(prometheus.NewRegistry())
	if err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct {
		method, target string
		open           bool
	}{
		{http.MethodGet, "/health", true},
		{http.MethodGet, "/api/v1alpha1/health", true},
		{http.MethodGet, "/api/v1alpha1/clusters/health", true},
		{http.MethodGet, "/livez", true},
		{http.MethodGet, "/readyz", true},
		{http.MethodHead, "/livez", true},
		{http.MethodDelete, "/api/v1alpha1/clusters/health", false},
		{http.MethodPatch, "/api/v1alpha1/clusters/health", false},
		{http.MethodPost, "/api/v1alpha1/clusters/health", false},
		{http.MethodPut, "/health", false},
		{http.MethodPost, "/livez", false},
		{http.MethodDelete, "/readyz", false},
		{http.MethodOptions, "/api/v1alpha1/health", false},
		{"PROPFIND", "/health", false},
		{http.MethodGet, "/api/v1alpha1/clusters/%68ealth", false}, // decodes to the open path; routed as {clusterId}
		{http.MethodDelete, "/api/v1alpha1/clusters/%68ealth", false},
		{http.MethodGet, "/health/", false},
		{http.MethodGet, "//health", false},
	} {
		rec := httptest.NewRecorder()
		h.ServeHTTP(rec, httptest.NewRequest(c.method, c.target, nil))
		if got := rec.Code != http.StatusUnauthorized; got != c.open {
			t.Errorf("%s %s without credentials: %d %s (want open=%v)", c.method, c.target, rec.Code, rec.Body, c.open)
		}
	}
}
