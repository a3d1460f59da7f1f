package inject

import (
	"strings"
	"testing"

	"github.com/dcm-sp/acm-cluster-sp/internal/capiprivate/migrate/plan"
)

func TestRouteOf(t *testing.T) {
	hcp := map[string]string{HostedControlPlaneLabel: "true"}
	switched := map[string]string{HostedControlPlaneLabel: "true", MarkerLabel: MarkerValue}
	owner := func(a map[string]string) []Owner { return []Owner{{Namespace: "clusters", Name: "a", Annotations: a}} }
	private := map[string]string{plan.PrivateTypesAnnotation: "true"}
	cases := []struct {
		name   string
		labels map[string]string
		owners []Owner
		want   Route
		reason string
	}{
		{"born private (classified)", hcp, owner(private), Proxied, "private types"},
		{"new, not classified yet", hcp, owner(nil), Unknown, "not classified yet"},
		{"legacy", hcp, owner(map[string]string{plan.ScopeAnnotation: plan.ScopeLegacy}), Direct, `scope "legacy"`},
		{"legacy, the marker left behind", switched, owner(map[string]string{plan.ScopeAnnotation: plan.ScopeLegacy}), Direct, `scope "legacy"`},
		{"rolled back (legacy again, failed marker)", switched, owner(map[string]string{plan.ScopeAnnotation: plan.ScopeLegacy, plan.FailedAnnotation: "external-writer", plan.PrivateTypesAnnotation: "true"}), Direct, "legacy"},
		{"another team's scope", hcp, owner(map[string]string{plan.ScopeAnnotation: "team-b", plan.PrivateTypesAnnotation: "true"}), Direct, `scope "team-b"`},
		{"locked, not switched", hcp, owner(map[string]string{plan.ScopeAnnotation: plan.ScopeMigrating}), Direct, "not switched yet"},
		{"locked, switched", switched, owner(map[string]string{plan.ScopeAnnotation: plan.ScopeMigrating}), Proxied, "switched"},
		{"committed", switched, owner(map[string]string{plan.PrivateTypesAnnotation: "true", plan.InProgressAnnotation: "true"}), Proxied, "private types"},
		{"no HostedCluster (yet)", hcp, nil, Unknown, "no HostedCluster"},
		{"two HostedClusters", hcp, []Owner{{Namespace: "a-b", Name: "c"}, {Namespace: "a", Name: "b-c"}}, Unknown, "a-b/c, a/b-c"},
		{"not a hosted control plane namespace", map[string]string{MarkerLabel: MarkerValue}, owner(private), Direct, "not a hosted control plane namespace"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			got := RouteOf("clusters-a", c.labels, c.owners)
			if got.Route != c.want || !strings.Contains(got.Reason, c.reason) {
				t.Fatalf("%+v, want %s (%q)", got, c.want, c.reason)
			}
		})
	}
}
