package plan

import "testing"

func TestControlPlaneNamespace(t *testing.T) {
	for _, c := range []struct{ ns, name, want string }{
		{"clusters", "demo", "clusters-demo"},
		{"clusters", "demo.example", "clusters-demo-example"}, // HyperShift makes the name's dots dashes
		{"team-a", "b", "team-a-b"},
	} {
		if got := ControlPlaneNamespace(c.ns, c.name); got != c.want {
			t.Errorf("ControlPlaneNamespace(%q, %q) = %q, want %q", c.ns, c.name, got, c.want)
		}
	}
}
