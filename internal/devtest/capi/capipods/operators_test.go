package capipods

import (
	"os"
	"testing"

	hyperv1 "github.com/openshift/hypershift/api/hypershift/v1beta1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/yaml"
)

// TestScopeMatchesHyperShift checks the simulated operators' scoping against HyperShift's rule, recorded case by
// case in testdata/hypershift-scoping.yaml from support/util/util.go.
func TestScopeMatchesHyperShift(t *testing.T) {
	data, err := os.ReadFile("testdata/hypershift-scoping.yaml")
	if err != nil {
		t.Fatal(err)
	}
	var rec struct {
		Cases []struct {
			Name   string            `json:"name"`
			Env    map[string]string `json:"env"`
			Scope  string            `json:"scope"`
			Passes bool              `json:"passes"`
		} `json:"cases"`
	}
	if err := yaml.UnmarshalStrict(data, &rec); err != nil {
		t.Fatal(err)
	}
	if len(rec.Cases) < 10 {
		t.Fatalf("%d cases recorded", len(rec.Cases))
	}
	for _, c := range rec.Cases {
		if got := ScopeMatches(c.Env, c.Scope); got != c.Passes {
			t.Errorf("%s: ScopeMatches(%v, %q) = %v, want %v", c.Name, c.Env, c.Scope, got, c.Passes)
		}
	}
	// The operators the migration runs: the legacy one and the default (private) one never both take a
	// HostedCluster, and neither takes the lock.
	for _, scope := range []string{"", "legacy", "capi-private-migrating", "team-a"} {
		if ScopeMatches(LegacyOperatorEnv, scope) && ScopeMatches(PrivateOperatorEnv, scope) {
			t.Errorf("scope %q: both operators", scope)
		}
	}
	if ScopeMatches(LegacyOperatorEnv, "capi-private-migrating") || ScopeMatches(PrivateOperatorEnv, "capi-private-migrating") {
		t.Error("an operator takes the lock")
	}
}

// TestHostedClusterOf checks, on the hub, how an event's object leads to its HostedCluster as HyperShift's lookup
// does: itself, the cluster annotation, the nodePool annotation first; none or unreadable → "" (which the default
// operator takes).
func TestHostedClusterOf(t *testing.T) {
	ctx := t.Context()
	ns := env.NewNamespace(t, "scope")
	c := harness.Client
	hc := LegacyHostedCluster(ns, "scoped", 0, 0)
	hc.Annotations = map[string]string{ScopeAnnotation: "legacy"}
	if err := c.Create(ctx, hc.hostedCluster()); err != nil {
		t.Fatal(err)
	}
	cm := func(ann map[string]string) client.Object {
		return &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "x", Annotations: ann}}
	}
	for _, tc := range []struct {
		name string
		obj  client.Object
		want string
	}{
		{"the HostedCluster", &hyperv1.HostedCluster{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "scoped", Annotations: map[string]string{ScopeAnnotation: "legacy"}}}, "legacy"},
		{"the cluster annotation", cm(map[string]string{HostedClusterAnnotation: ns + "/scoped"}), "legacy"},
		// The nodePool annotation wins over the cluster annotation; a NodePool that cannot be read gives "" (this hub
		// serves no NodePools, so the positive NodePool cases are not exercised here).
		{"a NodePool that cannot be read", cm(map[string]string{NodePoolAnnotation: ns + "/none", HostedClusterAnnotation: ns + "/scoped"}), ""},
		{"a HostedCluster that does not exist", cm(map[string]string{HostedClusterAnnotation: ns + "/none"}), ""},
		{"no annotation", cm(nil), ""},
	} {
		got := ""
		if h := hostedClusterOf(ctx, c, tc.obj); h != nil {
			got = h.Annotations[ScopeAnnotation]
		}
		if got != tc.want {
			t.Errorf("%s: scope %q, want %q", tc.name, got, tc.want)
		}
	}
}
