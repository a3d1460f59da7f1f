package security_test

import (
	"errors"
	"net/http"
	"net/http/httptest"
	"slices"
	"strings"
	"testing"

	"k8s.io/apiserver/pkg/authentication/user"

	"github.com/dcm-sp/acm-cluster-sp/internal/devtest/testpki"
	"github.com/dcm-sp/acm-cluster-sp/internal/sp/security"
)

const (
	authGroup = "clusters.acm-cluster-sp.dcm.io"
	spNS      = "sp-ns"
	spAud     = "https://acm-cluster-sp.sp-ns.svc"
)

// guard builds a ModeKubernetes Guard against the review hub (fresh caches each time).
func guard(t *testing.T, h *reviewHub, o security.Options) *security.Guard {
	t.Helper()
	o.Mode, o.Hub, o.APIGroup, o.Namespace = security.ModeKubernetes, h.config(), authGroup, spNS
	g, err := security.New(o)
	if err != nil {
		t.Fatal(err)
	}
	return g
}

// request is an API request with the given Authorization header ("" none).
func request(authz string) *http.Request {
	r := httptest.NewRequest(http.MethodGet, "/api/v1alpha1/clusters", nil)
	if authz != "" {
		r.Header.Set("Authorization", authz)
	}
	return r
}

// hubWithTokens knows alice's and carol's tokens for the hub, bob's bound to the SP's audience and eve's bound to
// another service.
func hubWithTokens(t *testing.T) *reviewHub {
	h := newReviewHub(t)
	h.addToken("alice-token", "alice", []string{"team-a"})
	h.addToken("carol-token", "carol", nil)
	h.addToken("bob-token", "system:serviceaccount:dcm:bob", []string{"system:serviceaccounts"}, spAud)
	h.addToken("eve-token", "eve", nil, "https://vault.example")
	return h
}

// Who a request is, by its credentials and the Guard's options, and which TokenReviews that took (the audiences each
// asked for; "-" none). A rejected credential is ErrUnauthenticated (401); a bad token is never downgraded to
// anonymous; with audiences only a token bound to the SP is accepted, and with AcceptHubTokens a token for the hub too.
func TestAuthenticateByToken(t *testing.T) {
	for _, c := range []struct {
		name      string
		anonymous bool
		audiences []string
		acceptHub bool
		authz     string
		user      string // "" ErrUnauthenticated
		groups    []string
		reviews   []string
	}{
		{name: "hub token", authz: "Bearer alice-token", user: "alice", groups: []string{"team-a", user.AllAuthenticated}, reviews: []string{"-"}},
		{name: "unknown token", authz: "Bearer forged", reviews: []string{"-"}},
		{name: "no credentials", reviews: nil},
		{name: "not a bearer scheme", authz: "Basic YWxpY2U6cHc=", reviews: nil},
		{name: "empty bearer", authz: "Bearer ", reviews: nil},
		{name: "no credentials, anonymous on", anonymous: true, user: user.Anonymous, groups: []string{user.AllUnauthenticated}},
		{name: "unknown token, anonymous on: not anonymous", anonymous: true, authz: "Bearer forged", reviews: []string{"-"}},
		{name: "token bound to the SP without audiences configured", authz: "Bearer bob-token", reviews: []string{"-"}},
		{name: "audiences: token bound to the SP", audiences: []string{spAud}, authz: "Bearer bob-token",
			user: "system:serviceaccount:dcm:bob", groups: []string{"system:serviceaccounts", user.AllAuthenticated}, reviews: []string{spAud}},
		{name: "audiences: hub token refused", audiences: []string{spAud}, authz: "Bearer alice-token", reviews: []string{spAud}},
		{name: "audiences: token of another service", audiences: []string{spAud}, authz: "Bearer eve-token", reviews: []string{spAud}},
		{name: "audiences: no credentials, anonymous on", audiences: []string{spAud}, anonymous: true, user: user.Anonymous, groups: []string{user.AllUnauthenticated}},
		{name: "audiences: unknown token, anonymous on", audiences: []string{spAud}, anonymous: true, authz: "Bearer forged", reviews: []string{spAud}},
		{name: "audiences and hub tokens: token bound to the SP", audiences: []string{spAud}, acceptHub: true, authz: "Bearer bob-token",
			user: "system:serviceaccount:dcm:bob", groups: []string{"system:serviceaccounts", user.AllAuthenticated}, reviews: []string{spAud}},
		{name: "audiences and hub tokens: hub token", audiences: []string{spAud}, acceptHub: true, authz: "Bearer alice-token",
			user: "alice", groups: []string{"team-a", user.AllAuthenticated}, reviews: []string{spAud, "-"}},
		{name: "audiences and hub tokens: token of another service", audiences: []string{spAud}, acceptHub: true, authz: "Bearer eve-token", reviews: []string{spAud, "-"}},
		{name: "audiences and hub tokens: no credentials, anonymous on", audiences: []string{spAud}, acceptHub: true, anonymous: true, user: user.Anonymous, groups: []string{user.AllUnauthenticated}},
		{name: "audiences and hub tokens: unknown token, anonymous on", audiences: []string{spAud}, acceptHub: true, anonymous: true, authz: "Bearer forged", reviews: []string{spAud, "-"}},
	} {
		t.Run(c.name, func(t *testing.T) {
			h := hubWithTokens(t)
			g := guard(t, h, security.Options{Anonymous: c.anonymous, APIAudiences: c.audiences, AcceptHubTokens: c.acceptHub})
			r := request(c.authz)
			u, err := g.Authenticate(r)
			switch {
			case c.user == "" && !errors.Is(err, security.ErrUnauthenticated):
				t.Fatalf("got %v, %v; want ErrUnauthenticated", u, err)
			case c.user != "" && (err != nil || u.GetName() != c.user || !slices.Equal(u.GetGroups(), c.groups)):
				t.Fatalf("got %v, %v; want %s %v", u, err, c.user, c.groups)
			}
			if tok := strings.TrimSpace(strings.TrimPrefix(c.authz, "Bearer ")); err != nil && tok != "" && strings.Contains(err.Error(), tok) {
				t.Fatalf("the error shows the credential: %v", err)
			}
			var asked []string
			for _, tr := range h.tokenReviews() {
				asked = append(asked, strings.Join(tr.Audiences, ",")+map[bool]string{true: "-"}[len(tr.Audiences) == 0])
			}
			if !slices.Equal(asked, c.reviews) {
				t.Fatalf("TokenReviews asked for audiences %q, want %q", asked, c.reviews)
			}
			if c.user != "" && c.authz != "" && r.Header.Get("Authorization") != "" {
				t.Fatal("the bearer token stays on an authenticated request (handlers must never see it)")
			}
		})
	}
}

// Verdicts are cached for TokenCacheTTL: a token reviewed once, accepted or rejected, is not reviewed again at
// once, so a flood of requests (or of bad tokens) is not a flood of TokenReviews.
func TestTokenReviewsAreCached(t *testing.T) {
	h := hubWithTokens(t)
	g := guard(t, h, security.Options{})
	for range 3 {
		if _, err := g.Authenticate(request("Bearer alice-token")); err != nil {
			t.Fatal(err)
		}
		if _, err := g.Authenticate(request("Bearer forged")); !errors.Is(err, security.ErrUnauthenticated) {
			t.Fatalf("forged token: %v", err)
		}
	}
	if n := len(h.tokenReviews()); n != 2 {
		t.Fatalf("%d TokenReviews for two tokens asked three times each, want 2", n)
	}
}

// A hub that cannot be asked is not a rejected credential: the error says authentication is unavailable (503), never
// shows the token, and is not cached. Refusals of the SP itself are not retried; a failing hub is, with the library's
// backoff (5 tries).
func TestAuthenticationUnavailable(t *testing.T) {
	t.Parallel() // its retries take seconds: overlapped with the other outage test
	t.Run("hub refuses the SP", func(t *testing.T) {
		h := hubWithTokens(t)
		h.failWith(http.StatusForbidden)
		g := guard(t, h, security.Options{Anonymous: true})
		for range 2 {
			assertUnavailable(t, g, "alice-token")
		}
		if n := len(h.tokenReviews()); n != 2 {
			t.Fatalf("%d TokenReviews, want one per request (no retry of a refusal, no caching of an error)", n)
		}
	})
	t.Run("hub refuses the SP, with audiences", func(t *testing.T) {
		h := hubWithTokens(t)
		h.failWith(http.StatusForbidden)
		assertUnavailable(t, guard(t, h, security.Options{APIAudiences: []string{spAud}}), "bob-token")
	})
	t.Run("the review says the token could not be checked", func(t *testing.T) {
		h := hubWithTokens(t)
		h.cannotCheck("the token issuer's keys could not be fetched")
		assertUnavailable(t, guard(t, h, security.Options{}), "alice-token")
	})
	t.Run("hub failing: retried", func(t *testing.T) {
		t.Parallel()
		h := hubWithTokens(t)
		h.failWith(http.StatusInternalServerError)
		assertUnavailable(t, guard(t, h, security.Options{}), "alice-token")
		if n := len(h.tokenReviews()); n != 5 {
			t.Fatalf("%d TokenReviews, want 5 (the retry backoff's steps)", n)
		}
	})
}

func assertUnavailable(t *testing.T, g *security.Guard, tok string) {
	t.Helper()
	u, err := g.Authenticate(request("Bearer " + tok))
	if err == nil || errors.Is(err, security.ErrUnauthenticated) || !strings.Contains(err.Error(), "authentication unavailable") {
		t.Fatalf("got %v, %v; want authentication unavailable", u, err)
	}
	if strings.Contains(err.Error(), tok) {
		t.Fatalf("the error shows the token: %v", err)
	}
}

// A client certificate signed by clientCAFile is a credential (CN the user, O the groups), checked without asking
// the hub; one from another CA is a rejected credential, not an outage.
func TestClientCertificates(t *testing.T) {
	ca := testpki.NewCA(t, "client-ca")
	caFile := testpki.WriteFile(t, t.TempDir(), "ca.crt", ca.CertPEM)
	for _, audiences := range [][]string{nil, {spAud}} {
		h := newReviewHub(t)
		g := guard(t, h, security.Options{ClientCAFile: caFile, APIAudiences: audiences})
		if g.ClientCA() == nil {
			t.Fatal("no client CA for the TLS handshake")
		}
		u, err := g.Authenticate(security.WithCert(t, ca.Client(t, "cert-user", "cert-group").CertPEM))
		if err != nil || u.GetName() != "cert-user" || !slices.Equal(u.GetGroups(), []string{"cert-group", user.AllAuthenticated}) {
			t.Fatalf("audiences %v: %v, %v", audiences, u, err)
		}
		rogue := testpki.NewCA(t, "rogue").Client(t, "cert-user")
		if u, err := g.Authenticate(security.WithCert(t, rogue.CertPEM)); !errors.Is(err, security.ErrUnauthenticated) {
			t.Fatalf("audiences %v: a certificate of another CA gave %v, %v", audiences, u, err)
		}
		if n := len(h.tokenReviews()); n != 0 {
			t.Fatalf("%d TokenReviews for client certificates", n)
		}
	}
}
