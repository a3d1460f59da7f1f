package clusters

import (
	"os/exec"
	"strings"
	"testing"
)

// pure are the domain and the pure packages it stands on: none may reach infrastructure.
var pure = []string{"clusters", "platform", "render", "status", "versions", "operation", "meta", "inventory"}

// forbidden are the infrastructure packages (prefixes of import paths): the SP's adapters and configuration, HTTP,
// request decoding (wire), Kubernetes clients and messaging. API types (HyperShift, Kubernetes, apimachinery) are
// data and allowed.
var forbidden = []string{
	"github.com/dcm-sp/acm-cluster-sp/internal/sp/wire",
	"github.com/dcm-sp/acm-cluster-sp/internal/sp/hub",
	"github.com/dcm-sp/acm-cluster-sp/internal/sp/config",
	"github.com/dcm-sp/acm-cluster-sp/internal/sp/httpapi",
	"github.com/dcm-sp/acm-cluster-sp/internal/sp/provision",
	"github.com/dcm-sp/acm-cluster-sp/internal/sp/app",
	"github.com/dcm-sp/acm-cluster-sp/internal/sp/cli",
	"github.com/dcm-sp/acm-cluster-sp/internal/sp/reconcile",
	"github.com/dcm-sp/acm-cluster-sp/internal/sp/events",
	"github.com/dcm-sp/acm-cluster-sp/internal/sp/registration",
	"github.com/dcm-sp/acm-cluster-sp/internal/sp/health",
	"github.com/dcm-sp/acm-cluster-sp/internal/sp/security",
	"github.com/dcm-sp/acm-cluster-sp/internal/devtest",
	"sigs.k8s.io/controller-runtime",
	"k8s.io/client-go",
	"github.com/nats-io",
	"github.com/cloudevents",
}

// forbiddenDirect may not be imported by a pure package itself. net/http is reached through apimachinery's API
// types (allowed), so only a direct import is refused.
var forbiddenDirect = []string{"net/http"}

// The domain imports no infrastructure, directly or not (go list -deps), and no HTTP.
func TestDomainImportsNoInfrastructure(t *testing.T) {
	if testing.Short() {
		t.Skip("runs go list")
	}
	var pkgs []string
	for _, p := range pure {
		pkgs = append(pkgs, "github.com/dcm-sp/acm-cluster-sp/internal/sp/"+p)
	}
	for _, dep := range goList(t, append([]string{"-deps"}, pkgs...)...) {
		if f := matches(dep, forbidden); f != "" {
			t.Errorf("%s is reached from the domain %v", dep, pure)
		}
	}
	for _, dep := range goList(t, append([]string{"-f", `{{join .Imports "\n"}}`}, pkgs...)...) {
		if f := matches(dep, forbiddenDirect); f != "" {
			t.Errorf("%s is imported by the domain %v", dep, pure)
		}
	}
}

func goList(t *testing.T, args ...string) []string {
	t.Helper()
	out, err := exec.Command("go", append([]string{"list"}, args...)...).Output()
	if err != nil {
		t.Fatalf("go list %v: %v", args, err)
	}
	return strings.Fields(string(out))
}

// matches returns the entry of set that path is or lies under ("" when none).
func matches(path string, set []string) string {
	for _, f := range set {
		if path == f || strings.HasPrefix(path, f+"/") {
			return f
		}
	}
	return ""
}
