// Package toolscheck tests hack/tools.sh's cache checks against stub binaries, so a defect that only a fresh
// machine would meet (the checks deciding whether the cache is complete) shows in every `make test`, without the
// cold build CI's warm cache never pays.
package toolscheck

import (
	"bytes"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
)

const (
	k8sVersion  = "v1.34.10"
	etcdVersion = "v3.6.16"
)

// tail is what real binaries print after their version line (kubectl prints a Kustomize line; etcd prints its Git
// SHA, Go version and arch), made long enough to overflow a pipe: a check that stops reading at its first match
// then kills the stub with SIGPIPE on every run instead of one run in six.
var tail = strings.Repeat("more version detail that a check must read to the end or not pipe at all\n", 2000)

// stubs writes the four hub binaries as shell scripts printing what the real ones print (plus tail) and returns
// their directory. versions overrides a binary's version.
func stubs(t *testing.T, versions map[string]string) string {
	t.Helper()
	dir := t.TempDir()
	v := func(name, def string) string {
		if s, ok := versions[name]; ok {
			return s
		}
		return def
	}
	tailFile := filepath.Join(dir, "tail.txt")
	if err := os.WriteFile(tailFile, []byte(tail), 0o644); err != nil {
		t.Fatal(err)
	}
	scripts := map[string]string{
		"kube-apiserver":          fmt.Sprintf("echo 'Kubernetes %s'", v("kube-apiserver", k8sVersion)),
		"kube-controller-manager": fmt.Sprintf("echo 'Kubernetes %s'", v("kube-controller-manager", k8sVersion)),
		"kubectl":                 fmt.Sprintf("echo 'Client Version: %s'; echo 'Kustomize Version: v5.7.1'; cat %q", v("kubectl", k8sVersion), tailFile),
		"etcd":                    fmt.Sprintf("echo 'etcd Version: %s'; echo 'Git SHA: GitNotFound'; cat %q", strings.TrimPrefix(v("etcd", etcdVersion), "v"), tailFile),
	}
	for name, body := range scripts {
		if err := os.WriteFile(filepath.Join(dir, name), []byte("#!/bin/sh\n"+body+"\n"), 0o755); err != nil {
			t.Fatal(err)
		}
	}
	if err := os.WriteFile(filepath.Join(dir, ".complete"), nil, 0o644); err != nil {
		t.Fatal(err)
	}
	return dir
}

// check runs `hack/tools.sh --check` on dir and returns its exit code, stdout and stderr.
func check(t *testing.T, dir string) (int, string, string) {
	t.Helper()
	cmd := exec.Command("bash", "../tools.sh", "--check")
	cmd.Env = append(os.Environ(), "KUBEBUILDER_ASSETS="+dir, "K8S_VERSION="+k8sVersion, "ETCD_VERSION="+etcdVersion,
		"ACM_SP_CACHE="+t.TempDir())
	var out, errb bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &errb
	err := cmd.Run()
	code := 0
	if ee, ok := err.(*exec.ExitError); ok {
		code = ee.ExitCode()
	} else if err != nil {
		t.Fatal(err)
	}
	return code, out.String(), errb.String()
}

// A complete cache is recognised every time, although two binaries print far more than their version line.
func TestCompleteCacheIsRecognised(t *testing.T) {
	dir := stubs(t, nil)
	for i := range 50 {
		code, out, errs := check(t, dir)
		if code != 0 || strings.TrimSpace(out) != dir {
			t.Fatalf("run %d: exit %d, stdout %q, stderr %q; want exit 0 and the directory", i, code, out, errs)
		}
	}
}

// A binary of another version, a missing binary or a missing completion mark makes the cache incomplete, and the
// check names the binary.
func TestIncompleteCacheIsRejected(t *testing.T) {
	for _, tc := range []struct {
		name   string
		setup  func(t *testing.T) string
		naming string
	}{
		{"kubectl of another version", func(t *testing.T) string { return stubs(t, map[string]string{"kubectl": "v1.34.1"}) }, "kubectl"},
		{"etcd of another version", func(t *testing.T) string { return stubs(t, map[string]string{"etcd": "v3.6.1"}) }, "etcd"},
		{"apiserver of another version", func(t *testing.T) string { return stubs(t, map[string]string{"kube-apiserver": "v1.34.9"}) }, "apiserver"},
		{"kcm missing", func(t *testing.T) string {
			d := stubs(t, nil)
			if err := os.Remove(filepath.Join(d, "kube-controller-manager")); err != nil {
				t.Fatal(err)
			}
			return d
		}, "kcm"},
		{"no completion mark", func(t *testing.T) string {
			d := stubs(t, nil)
			if err := os.Remove(filepath.Join(d, ".complete")); err != nil {
				t.Fatal(err)
			}
			return d
		}, ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			code, out, errs := check(t, tc.setup(t))
			if code != 1 || out != "" {
				t.Fatalf("exit %d, stdout %q; want exit 1 and nothing on stdout (stderr %q)", code, out, errs)
			}
			if tc.naming != "" && !strings.Contains(errs, tc.naming+": missing or not the pinned version") {
				t.Fatalf("stderr %q does not name %s", errs, tc.naming)
			}
		})
	}
}

// No script the build runs pipes a command into `grep -q` (or `head`, which stops reading likewise): under
// pipefail the writer's SIGPIPE fails the pipeline at random.
func TestNoEarlyExitingReaderInPipelines(t *testing.T) {
	files, err := filepath.Glob("../*.sh")
	if err != nil {
		t.Fatal(err)
	}
	files = append(files, "../../.ci/run", "../../Makefile")
	for _, f := range files {
		b, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		for i, line := range strings.Split(string(b), "\n") {
			code, _, _ := strings.Cut(line, " #")
			if strings.HasPrefix(strings.TrimSpace(code), "#") {
				continue
			}
			for _, bad := range []string{"| grep -q", "|grep -q", "| grep -m", "| head", "|head"} {
				if strings.Contains(code, bad) {
					t.Errorf("%s:%d pipes into an early-exiting reader (%q): capture the output first\n\t%s", f, i+1, bad, line)
				}
			}
		}
	}
}
