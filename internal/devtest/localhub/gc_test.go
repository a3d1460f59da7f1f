package localhub

import (
	"os"
	"syscall"
	"testing"
	"time"
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

// ProcessCPU reads a process's CPU time as the kernel counts it: this process's, after it has spun for 200 ms of
// CPU, agrees with getrusage within a few of the clock's ticks.
func TestProcessCPU(t *testing.T) {
	used := func() time.Duration {
		var ru syscall.Rusage
		if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
			t.Fatal(err)
		}
		return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
	}
	began, deadline := used(), time.Now().Add(30*time.Second)
	for used()-began < 200*time.Millisecond && time.Now().Before(deadline) {
	}
	before := used()
	got, err := ProcessCPU(os.Getpid())
	after := used()
	if err != nil || got < before-30*time.Millisecond || got > after+10*time.Millisecond {
		t.Errorf("ProcessCPU %v (%v), getrusage %v before and %v after", got, err, before, after)
	}
}
