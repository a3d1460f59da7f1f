package security_test

import (
	"context"
	"net/http"
	"reflect"
	"strings"
	"testing"

	authorizationv1 "k8s.io/api/authorization/v1"
	"k8s.io/apiserver/pkg/authentication/user"

	"github.com/dcm-sp/acm-cluster-sp/internal/sp/security"
)

var alice = &user.DefaultInfo{Name: "alice", UID: "uid-alice", Groups: []string{"team-a", user.AllAuthenticated}}

// rbac allows alice to get, list and create clusters, and to get /metrics; it says nothing about anything else
// except deleting, which it denies outright.
func rbac(s authorizationv1.SubjectAccessReviewSpec) authorizationv1.SubjectAccessReviewStatus {
	if s.User != "alice" {
		return authorizationv1.SubjectAccessReviewStatus{}
	}
	if a := s.NonResourceAttributes; a != nil {
		return authorizationv1.SubjectAccessReviewStatus{Allowed: a.Path == "/metrics" && a.Verb == "get"}
	}
	a := s.ResourceAttributes
	switch {
	case a.Verb == "delete":
		return authorizationv1.SubjectAccessReviewStatus{Denied: true, Reason: "deletes are reserved"}
	case a.Subresource != "":
		return authorizationv1.SubjectAccessReviewStatus{}
	}
	return authorizationv1.SubjectAccessReviewStatus{Allowed: a.Verb == "get" || a.Verb == "list" || a.Verb == "create"}
}

// What the hub is asked for an action on clusters: the SP's group, version and namespace, resource "clusters", the
// action's verb, subresource and instance id, and the caller's identity. Only an explicit allow allows.
func TestAuthorizeAsksTheHubsRBAC(t *testing.T) {
	for _, c := range []struct {
		name    string
		action  security.Action
		allowed bool
	}{
		{name: "list", action: security.Action{Verb: "list"}, allowed: true},
		{name: "get one", action: security.Action{Verb: "get", Name: "c1"}, allowed: true},
		{name: "create with an id", action: security.Action{Verb: "create", Name: "c1"}, allowed: true},
		{name: "patch: no opinion is not allowed", action: security.Action{Verb: "patch", Name: "c1"}},
		{name: "delete: denied", action: security.Action{Verb: "delete", Name: "c1"}},
		{name: "the kubeconfig is its own permission", action: security.Action{Verb: "get", Subresource: security.SubresourceKubecfg, Name: "c1"}},
	} {
		t.Run(c.name, func(t *testing.T) {
			h := newReviewHub(t)
			h.setAllow(rbac)
			g := guard(t, h, security.Options{})
			ok, err := g.Authorize(context.Background(), alice, c.action)
			if err != nil || ok != c.allowed {
				t.Fatalf("allowed %v, %v; want %v", ok, err, c.allowed)
			}
			sars := h.accessReviews()
			want := authorizationv1.SubjectAccessReviewSpec{User: "alice", UID: "uid-alice", Groups: alice.Groups,
				ResourceAttributes: &authorizationv1.ResourceAttributes{Namespace: spNS, Verb: c.action.Verb, Group: authGroup,
					Version: security.APIVersion, Resource: security.Resource, Subresource: c.action.Subresource, Name: c.action.Name}}
			if len(sars) != 1 || !reflect.DeepEqual(sars[0], want) {
				t.Fatalf("SubjectAccessReviews %+v, want one: %+v", sars, want)
			}
		})
	}
}

// Decisions are cached (AllowCacheTTL, DenyCacheTTL): the same question is not asked twice at once.
func TestAuthorizationsAreCached(t *testing.T) {
	h := newReviewHub(t)
	h.setAllow(rbac)
	g := guard(t, h, security.Options{})
	for range 3 {
		for _, a := range []security.Action{{Verb: "list"}, {Verb: "delete", Name: "c1"}} {
			if _, err := g.Authorize(context.Background(), alice, a); err != nil {
				t.Fatal(err)
			}
		}
	}
	if n := len(h.accessReviews()); n != 2 {
		t.Fatalf("%d SubjectAccessReviews for two questions asked three times each, want 2", n)
	}
}

// Reading /metrics is the non-resource path's get, as for the API server's own /metrics.
func TestAuthorizePath(t *testing.T) {
	h := newReviewHub(t)
	h.setAllow(rbac)
	g := guard(t, h, security.Options{})
	for _, c := range []struct {
		u       user.Info
		allowed bool
	}{{alice, true}, {&user.DefaultInfo{Name: "bob"}, false}} {
		ok, err := g.AuthorizePath(context.Background(), c.u, "get", "/metrics")
		if err != nil || ok != c.allowed {
			t.Fatalf("%s: allowed %v, %v; want %v", c.u.GetName(), ok, err, c.allowed)
		}
	}
	sar := h.accessReviews()[0]
	if sar.ResourceAttributes != nil || *sar.NonResourceAttributes != (authorizationv1.NonResourceAttributes{Path: "/metrics", Verb: "get"}) {
		t.Fatalf("asked %+v", sar)
	}
}

// A hub that cannot be asked, or answers both allowed and denied, allows nothing and says authorization is
// unavailable (503), for actions and paths alike. A failing hub is retried with the library's backoff (5 tries).
func TestAuthorizationUnavailable(t *testing.T) {
	t.Parallel() // its retries take seconds: overlapped with the other outage test
	check := func(t *testing.T, g *security.Guard) {
		t.Helper()
		ok, err := g.Authorize(context.Background(), alice, security.Action{Verb: "list"})
		if ok || err == nil || !strings.Contains(err.Error(), "authorization unavailable") {
			t.Fatalf("Authorize: %v, %v; want not allowed, unavailable", ok, err)
		}
		ok, err = g.AuthorizePath(context.Background(), alice, "get", "/metrics")
		if ok || err == nil || !strings.Contains(err.Error(), "authorization unavailable") {
			t.Fatalf("AuthorizePath: %v, %v; want not allowed, unavailable", ok, err)
		}
	}
	t.Run("hub refuses the SP", func(t *testing.T) {
		h := newReviewHub(t)
		h.failWith(http.StatusForbidden)
		check(t, guard(t, h, security.Options{}))
	})
	t.Run("contradictory answer", func(t *testing.T) {
		h := newReviewHub(t)
		h.setAllow(func(authorizationv1.SubjectAccessReviewSpec) authorizationv1.SubjectAccessReviewStatus {
			return authorizationv1.SubjectAccessReviewStatus{Allowed: true, Denied: true}
		})
		check(t, guard(t, h, security.Options{}))
	})
	t.Run("hub failing: retried", func(t *testing.T) {
		t.Parallel()
		h := newReviewHub(t)
		h.failWith(http.StatusInternalServerError)
		g := guard(t, h, security.Options{})
		if ok, err := g.Authorize(context.Background(), alice, security.Action{Verb: "list"}); ok || err == nil {
			t.Fatalf("Authorize: %v, %v", ok, err)
		}
		if n := len(h.accessReviews()); n != 5 {
			t.Fatalf("%d SubjectAccessReviews, want 5 (the retry backoff's steps)", n)
		}
	})
}

// Mode none (dev: the configuration allows it on a loopback address only, internal/sp/config) answers every request
// as one unauthenticated user allowed everything, without a hub.
func TestModeNone(t *testing.T) {
	g, err := security.New(security.Options{Mode: security.ModeNone})
	if err != nil {
		t.Fatal(err)
	}
	u, err := g.Authenticate(request("Bearer anything"))
	if err != nil || u != security.Unauthenticated {
		t.Fatalf("Authenticate: %v, %v", u, err)
	}
	ok, err := g.Authorize(context.Background(), u, security.Action{Verb: "delete", Name: "c1"})
	okPath, errPath := g.AuthorizePath(context.Background(), u, "get", "/metrics")
	if !ok || err != nil || !okPath || errPath != nil || g.ClientCA() != nil || g.Mode() != security.ModeNone || g.Options().Mode != security.ModeNone {
		t.Fatalf("Authorize %v %v, AuthorizePath %v %v, client CA %v", ok, err, okPath, errPath, g.ClientCA())
	}
	g.Run(context.Background()) // without a client CA: returns at once
}

// Options that cannot work are refused when the Guard is built.
func TestNewRefuses(t *testing.T) {
	for name, o := range map[string]security.Options{
		"auth mode":    {Mode: "oidc"},
		"clientCAFile": {Mode: security.ModeKubernetes, Hub: newReviewHub(t).config(), ClientCAFile: t.TempDir() + "/missing.crt"},
	} {
		if _, err := security.New(o); err == nil || !strings.Contains(err.Error(), name) {
			t.Errorf("%s: %v", name, err)
		}
	}
}
