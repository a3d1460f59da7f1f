package devcmd

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"syscall"
	"testing"
	"time"

	"k8s.io/client-go/tools/clientcmd"

	"github.com/dcm-sp/acm-cluster-sp/internal/devtest/sp/sphub"
	"github.com/dcm-sp/acm-cluster-sp/internal/devtest/testlog"
	"github.com/dcm-sp/acm-cluster-sp/internal/sp/cli"
	"github.com/dcm-sp/acm-cluster-sp/pkg/api"
)

// startDev runs `acm-cluster-sp dev` in this process and returns the environment it writes once ready and its log.
func startDev(t *testing.T) (map[string]string, *testlog.Buffer) {
	t.Helper()
	envFile := filepath.Join(t.TempDir(), "dev.env")
	ctx, cancel := context.WithCancel(context.Background())
	var out, errs testlog.Buffer
	done := make(chan int, 1)
	go func() {
		done <- cli.Main(ctx, []string{"dev", "--env-file", envFile, "--ready-after", "3s", "--listen-address", "127.0.0.1:0", "--status-debounce", "200ms"}, &out, &errs, New)
	}()
	t.Cleanup(func() {
		cancel()
		select {
		case <-done:
		case <-time.After(60 * time.Second):
			t.Error("dev did not stop within 60s of Ctrl-C")
		}
	})
	deadline := time.Now().Add(3 * time.Minute)
	for {
		if data, err := os.ReadFile(envFile); err == nil {
			env := map[string]string{}
			sc := bufio.NewScanner(bytes.NewReader(data))
			for sc.Scan() {
				if k, v, ok := strings.Cut(sc.Text(), "="); ok {
					env[k] = v
				}
			}
			for _, k := range []string{"SP_URL", "NATS_URL", "STATUS_SUBJECT", "KUBECONFIG"} {
				if env[k] == "" {
					t.Fatalf("env file lacks %s: %s", k, data)
				}
			}
			if !strings.Contains(out.String(), "Press Ctrl-C to stop.") {
				t.Fatalf("dev output:\n%s", out.String())
			}
			return env, &errs
		}
		select {
		case code := <-done:
			t.Fatalf("dev exited with %d:\n%s\n%s", code, out.String(), errs.String())
		case <-time.After(200 * time.Millisecond):
		}
		if time.Now().After(deadline) {
			t.Fatalf("dev not ready after 3 minutes:\n%s\n%s", out.String(), errs.String())
		}
	}
}

// run runs one client command against the dev instance.
func run(t *testing.T, server string, args ...string) (string, string, int) {
	t.Helper()
	var out, errs bytes.Buffer
	full := append([]string{"clusters", "--server", server}, args...)
	code := cli.Main(context.Background(), full, &out, &errs)
	return out.String(), errs.String(), code
}

func TestEndToEnd(t *testing.T) {
	env, devLog := startDev(t)
	server := env["SP_URL"]
	events, err := sphub.NewEventReader(context.Background(), env["NATS_URL"], strings.Replace(env["STATUS_SUBJECT"], "*", "e2e-kv", 1))
	if err != nil {
		t.Fatal(err)
	}
	defer events.Close()

	// create → wait READY → kubeconfig → list → delete --wait
	if out, errs, code := run(t, server, "create", "--id", "e2e-kv", "--name", "e2e-kv", "--version", "1.30", "--workers", "2", "--cpu", "4", "--memory", "16GB"); code != 0 || !strings.Contains(out, "created: PENDING") {
		t.Fatalf("create: %d %s %s", code, out, errs)
	}
	out, errs, code := run(t, server, "wait", "e2e-kv", "--for", "READY", "--interval", "200ms", "--timeout", "2m")
	if code != 0 || !strings.Contains(out, "PROVISIONING") || !strings.Contains(out, "cluster e2e-kv is READY") {
		t.Fatalf("wait: %d\n%s\n%s", code, out, errs)
	}
	out, errs, code = run(t, server, "kubeconfig", "e2e-kv")
	kc, err := clientcmd.Load([]byte(out))
	if code != 0 || err != nil {
		t.Fatalf("kubeconfig: %d %v %s", code, err, errs)
	}
	if srv := kc.Clusters[kc.Contexts[kc.CurrentContext].Cluster].Server; !regexp.MustCompile(`^https://127\.[0-9.]+:6443$`).MatchString(srv) {
		t.Fatalf("kubeconfig server %q", srv)
	}
	out, _, code = run(t, server, "list", "-o", "json")
	var list []api.Cluster
	if err := json.Unmarshal([]byte(out), &list); code != 0 || err != nil || len(list) != 1 || list[0].Id != "e2e-kv" || list[0].Status != api.READY {
		t.Fatalf("list: %d %v %s", code, err, out)
	}
	if out, _, code = run(t, server, "list"); code != 0 || !strings.Contains(out, "e2e-kv") || !strings.HasPrefix(out, "ID ") {
		t.Fatalf("list table: %s", out)
	}
	out, errs, code = run(t, server, "delete", "e2e-kv", "--wait", "--timeout", "2m")
	if code != 0 || !strings.Contains(out, "cluster e2e-kv is DELETED") {
		t.Fatalf("delete --wait: %d\n%s\n%s", code, out, errs)
	}
	if _, errs, code = run(t, server, "get", "e2e-kv"); code == 0 || !strings.Contains(errs, "Not Found: cluster e2e-kv not found") {
		t.Fatalf("get after delete: %d %s", code, errs)
	}
	// The status events of that cluster, from the subject dev mode printed.
	var seq []string
	for deadline := time.Now().Add(20 * time.Second); time.Now().Before(deadline) && (len(seq) == 0 || seq[len(seq)-1] != "DELETED"); {
		ev, ok, err := events.Next(200 * time.Millisecond)
		if err != nil {
			t.Fatal(err)
		}
		if ok {
			var d struct{ Status string }
			_ = ev.DataAs(&d)
			if len(seq) == 0 || seq[len(seq)-1] != d.Status {
				seq = append(seq, d.Status)
			}
		}
	}
	if strings.Join(seq, ",") != "PENDING,PROVISIONING,READY,DELETING,DELETED" {
		t.Fatalf("events %v", seq)
	}

	// a baremetal cluster on the seeded Agents
	if out, errs, code := run(t, server, "create", "--id", "e2e-bm", "--name", "e2e-bm", "--version", "4.17", "--platform", "baremetal",
		"--base-domain", "example.com", "--infra-env", "production-infraenv", "--agent-label", "location=datacenter-1", "--workers", "2", "--cpu", "8"); code != 0 {
		t.Fatalf("baremetal create: %d %s %s", code, out, errs)
	}
	if out, errs, code := run(t, server, "wait", "e2e-bm", "--interval", "200ms", "--timeout", "2m"); code != 0 {
		t.Fatalf("baremetal wait: %d\n%s\n%s", code, out, errs)
	}
	if out, _, _ := run(t, server, "get", "e2e-bm", "-o", "yaml"); !strings.Contains(out, "platform: baremetal") || !strings.Contains(out, "status: READY") {
		t.Fatalf("baremetal get: %s", out)
	}

	// An error is printed as the problem's title and detail, with a non-zero exit code.
	if _, errs, code := run(t, server, "create", "--name", "e2e-bm", "--version", "1.30"); code == 0 || !strings.Contains(errs, "Conflict: cluster name \"e2e-bm\" is used by instance e2e-bm") {
		t.Fatalf("conflict: %d %s", code, errs)
	}

	t.Run("README Try it works as written", func(t *testing.T) { runReadme(t, server, devLog) })
	t.Run("README Day-2 works as written", func(t *testing.T) {
		out, _ := runReadmeBlock(t, server, devLog, "## Day-2")
		for _, want := range []string{"cluster day2-1 is READY", "cluster day2-1: scale 2 → 3 started (UPDATING)",
			"cluster day2-1: upgrade 4.17.29 → 4.18.22 started (UPDATING)", "Upgrading control plane to 4.18.22",
			"cluster day2-1: resize", `"UNPROCESSABLE_ENTITY"`, "valid targets", "\n422\n", "phase: done", "cluster day2-1 is DELETED"} {
			if !strings.Contains(out, want) {
				t.Errorf("README Day-2 output lacks %q:\n%s", want, out)
			}
		}
	})
}

// runReadme executes the README's "Try it" block with bash against the dev instance.
func runReadme(t *testing.T, server string, devLog *testlog.Buffer) {
	out, dir := runReadmeBlock(t, server, devLog, "## Try it")
	for _, want := range []string{"cluster demo-1 is READY", "cluster demo-bm is READY", `"id":"demo-2"`, `"results":[`, "\n204\n", "cluster demo-1 is DELETED", `"status":"healthy"`} {
		if !strings.Contains(string(out), want) {
			t.Errorf("README output lacks %q:\n%s", want, out)
		}
	}
	if _, err := clientcmd.LoadFromFile(filepath.Join(dir, "demo.kubeconfig")); err != nil {
		t.Errorf("demo.kubeconfig: %v", err)
	}
}

// runReadmeBlock executes the first sh block under a README heading with bash against the dev instance: the only
// substitutions are its address (the test listens on a free port instead of 8080) and the path of the binary.
func runReadmeBlock(t *testing.T, server string, devLog *testlog.Buffer, heading string) (string, string) {
	t.Helper()
	readme, err := os.ReadFile("../../../../README.md")
	if err != nil {
		t.Fatal(err)
	}
	section := string(readme)[strings.Index(string(readme), heading):]
	start := strings.Index(section, "```sh\n") + len("```sh\n")
	block := section[start : start+strings.Index(section[start:], "```")]
	if !strings.Contains(block, "clusters create") || !strings.Contains(block, "curl") {
		t.Fatalf("unexpected %s block:\n%s", heading, block)
	}
	dir := t.TempDir()
	bin := filepath.Join(dir, "bin", "acm-cluster-sp")
	build := exec.Command("go", "build", "-o", bin, "./cmd/acm-cluster-sp")
	build.Dir = "../../../.."
	if out, err := build.CombinedOutput(); err != nil {
		t.Fatalf("go build: %v\n%s", err, out)
	}
	script := strings.ReplaceAll(block, "http://127.0.0.1:8080", server)
	script = strings.ReplaceAll(script, "./bin/acm-cluster-sp clusters", "./bin/acm-cluster-sp clusters --server "+server)
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, "bash", "-euo", "pipefail", "-c", script)
	cmd.Dir = dir
	// The timeout ends the whole block: bash and the client it runs share a process group, killed together, and
	// the output is returned even if something else still holds the pipe.
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	cmd.Cancel = func() error { return syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL) }
	cmd.WaitDelay = 10 * time.Second
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("README %s failed: %v\n%s\ndev's log (last lines):\n%s", heading, err, out, testlog.LastLines(devLog.String(), 60))
	}
	return string(out), dir
}
