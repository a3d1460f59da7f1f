package cli

import (
	"strings"
	"testing"
)

// inject and rbac-mirror refuse bad flags before anything listens or reads a kubeconfig.
func TestInjectFlags(t *testing.T) {
	for _, c := range []struct {
		args []string
		want string
	}{
		{[]string{"inject"}, "--proxy-image is required"},
		{[]string{"inject", "--proxy-image", "i", "--reroute", "cluster-api"}, "COMPONENT=CONTAINER"},
		{[]string{"inject", "--proxy-image", "i", "--operator-selector", "a in ("}, "--operator-selector"},
		{[]string{"inject", "--proxy-image", "i", "--proxy-port", "16441"}, "two different ports"},
		{[]string{"inject", "--proxy-image", "i", "--proxy-memory-limit", "lots"}, "memory"},
		{[]string{"rbac-mirror", "--namespace-selector", "a in ("}, "--namespace-selector"},
	} {
		code, _, stderr := run(t, c.args...)
		if code != 1 || !strings.Contains(stderr, c.want) {
			t.Errorf("%v: exit %d, stderr %q, want %q", c.args, code, stderr, c.want)
		}
	}
}
