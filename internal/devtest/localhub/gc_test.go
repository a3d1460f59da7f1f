package localhub

import (
	"os"
	"testing"
)

// The hub's processes (etcd, kube-apiserver, kube-controller-manager: each started through withHubGC) start with
// GOGC=hubGOGC, and nothing started after them inherits it (an SP process a benchmark measures runs with Go's
// default); a GOGC the user set wins.
func TestHubGC(t *testing.T) {
	t.Setenv("GOGC", "")
	_ = os.Unsetenv("GOGC")
	var during string
	if err := withHubGC(func() error { during = os.Getenv("GOGC"); return nil }); err != nil {
		t.Fatal(err)
	}
	if _, set := os.LookupEnv("GOGC"); during != hubGOGC || set {
		t.Errorf("GOGC during the start %q, set after: %v; want %q, unset", during, set, hubGOGC)
	}

	t.Setenv("GOGC", "150")
	if err := withHubGC(func() error { during = os.Getenv("GOGC"); return nil }); err != nil {
		t.Fatal(err)
	}
	if during != "150" || os.Getenv("GOGC") != "150" {
		t.Errorf("the user's GOGC=150: during the start %q, after %q", during, os.Getenv("GOGC"))
	}
}
