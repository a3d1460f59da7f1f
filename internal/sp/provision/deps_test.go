package provision

import (
	"os/exec"
	"strings"
	"testing"
)

// The services reach the hub only through their ports: neither the hub adapter nor a client-go cache.
func TestServicesImportNoHubAdapter(t *testing.T) {
	if testing.Short() {
		t.Skip("runs go list")
	}
	out, err := exec.Command("go", "list", "-deps", "github.com/dcm-sp/acm-cluster-sp/internal/sp/provision").Output()
	if err != nil {
		t.Fatalf("go list: %v", err)
	}
	for _, dep := range strings.Fields(string(out)) {
		if dep == "github.com/dcm-sp/acm-cluster-sp/internal/sp/hub" || strings.HasPrefix(dep, "sigs.k8s.io/controller-runtime/pkg/cache") {
			t.Errorf("provision reaches %s", dep)
		}
	}
}
