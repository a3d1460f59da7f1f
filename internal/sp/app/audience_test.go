package app

import (
	"net/http"
	"testing"
	"time"

	"github.com/dcm-sp/acm-cluster-sp/internal/sp/config"
)

// With apiAudiences, a token bound to this service (kubectl create token --audience acm-cluster-sp) is accepted —
// a token a man in the middle could not replay against the hub — and, only with acceptHubTokens, tokens for the
// hub itself. A token for any other audience never is.
func TestAuthAudiences(t *testing.T) {
	const ns, audience = "secure", "acm-cluster-sp-test"
	f := newRBAC(t, ns)
	f.role(t, "aud-reader", []string{"clusters"}, []string{"get", "list"}, nil)
	tokens := map[string]string{}
	for sa, auds := range map[string][]string{"aud-bound": {audience}, "aud-hub": nil, "aud-other": {"some-other-service"}} {
		f.bind(t, "aud-reader", sa)
		tokens[sa] = f.token(t, sa, auds...)
	}
	for _, acceptHub := range []bool{false, true} {
		cfg := testConfig(ns)
		cfg.ProviderName = map[bool]string{false: "sp-aud-strict", true: "sp-aud-hub"}[acceptHub]
		cfg.Auth, cfg.APIAudiences, cfg.AcceptHubTokens = config.AuthKubernetes, []string{audience}, acceptHub
		sp := startSP(t, cfg, Options{})
		list := func(token string) int {
			code, _, _ := caller{base: sp.URL, token: token, http: &http.Client{Timeout: 30 * time.Second}}.do(t, http.MethodGet, "/api/v1alpha1/clusters", "")
			return code
		}
		hub := http.StatusUnauthorized
		if acceptHub {
			hub = http.StatusOK
		}
		for _, c := range []struct {
			who   string
			token string
			want  int
		}{
			{"a token bound to this service's audience", tokens["aud-bound"], http.StatusOK},
			{"a token for the hub", tokens["aud-hub"], hub},
			{"a token for another audience", tokens["aud-other"], http.StatusUnauthorized},
			{"no token", "", http.StatusUnauthorized},
			{"not a token", "not-a-token", http.StatusUnauthorized},
		} {
			if got := list(c.token); got != c.want {
				t.Errorf("acceptHubTokens %v: %s: %d, want %d", acceptHub, c.who, got, c.want)
			}
		}
		sp.stop()
	}
}
