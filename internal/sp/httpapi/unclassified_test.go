package httpapi

import (
	"context"
	"encoding/json"
	"errors"
	"net/http"
	"net/http/httptest"
	"os/exec"
	"strings"
	"testing"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/dcm-sp/acm-cluster-sp/internal/sp/clusters"
	"github.com/dcm-sp/acm-cluster-sp/pkg/api"
)

// failing is a service whose every call fails with err.
type failing struct{ err error }

func (f failing) Create(context.Context, string, string, []byte) (*clusters.Cluster, bool, error) {
	return nil, false, f.err
}
func (f failing) Get(context.Context, string) (*clusters.Cluster, error) { return nil, f.err }
func (f failing) List(context.Context, *int, string) ([]*clusters.Cluster, string, error) {
	return nil, "", f.err
}
func (f failing) Delete(context.Context, string, string) error { return f.err }
func (f failing) Update(context.Context, string, []byte, string) (*clusters.Cluster, error) {
	return nil, f.err
}
func (f failing) Kubeconfig(context.Context, *clusters.Cluster) ([]byte, error) { return nil, f.err }

// An error without a domain kind is classified by Options.Unclassified (the application passes the hub's
// classification), else it is a 500 whose details stay in the log; a domain error is never passed to it.
func TestUnclassifiedErrors(t *testing.T) {
	raw := errors.New("dial tcp 10.0.0.1:6443: connect: connection refused")
	unavailable := func(err error) *clusters.Error {
		return &clusters.Error{Kind: clusters.KindUnavailable, Message: "the request failed: the hub is unavailable; retry", Err: err}
	}
	cases := []struct {
		name     string
		err      error
		classify func(error) *clusters.Error
		code     int
		detail   string
	}{
		{"classified by the application", raw, unavailable, 503, "the request failed: the hub is unavailable; retry"},
		{"wrapped", errors.Join(errors.New("reading"), raw), unavailable, 503, "the hub is unavailable"},
		{"no classifier", raw, nil, 500, "internal error"},
		{"a domain error is answered as it is", clusters.NotFound("cluster a not found"), unavailable, 404, "cluster a not found"},
		{"a deadline without a kind", context.DeadlineExceeded, nil, 504, "did not finish within its deadline"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			h, err := NewServer(failing{c.err}, noHealth{}, fuzzGuard{}, Options{Unclassified: c.classify}).Handler(prometheus.NewRegistry())
			if err != nil {
				t.Fatal(err)
			}
			rec := httptest.NewRecorder()
			h.ServeHTTP(rec, httptest.NewRequest(http.MethodGet, "/api/v1alpha1/clusters/a", nil))
			var p api.Problem
			if err := json.Unmarshal(rec.Body.Bytes(), &p); err != nil || rec.Code != c.code || p.Detail == nil || !strings.Contains(*p.Detail, c.detail) {
				t.Fatalf("%d %s, want %d with %q", rec.Code, rec.Body, c.code, c.detail)
			}
			if strings.Contains(rec.Body.String(), "10.0.0.1") {
				t.Fatalf("the cause leaked: %s", rec.Body)
			}
		})
	}
}

// The API layer knows the domain, not the hub: no hub client, no provisioning service, no configuration.
func TestImportsNoAdapters(t *testing.T) {
	if testing.Short() {
		t.Skip("runs go list")
	}
	out, err := exec.Command("go", "list", "-deps", "github.com/dcm-sp/acm-cluster-sp/internal/sp/httpapi").Output()
	if err != nil {
		t.Fatal(err)
	}
	for _, dep := range strings.Fields(string(out)) {
		for _, bad := range []string{"hub", "provision", "config", "app", "wire"} {
			if dep == "github.com/dcm-sp/acm-cluster-sp/internal/sp/"+bad {
				t.Errorf("httpapi reaches %s", dep)
			}
		}
	}
}
