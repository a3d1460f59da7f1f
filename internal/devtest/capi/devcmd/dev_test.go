package devcmd

import (
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"k8s.io/apimachinery/pkg/util/wait"

	"github.com/dcm-sp/acm-cluster-sp/internal/devtest/capi/capihub"
	"github.com/dcm-sp/acm-cluster-sp/internal/devtest/localhub"
	"github.com/dcm-sp/acm-cluster-sp/internal/devtest/testlog"
)

func TestEnvLines(t *testing.T) {
	e := Env{HubKubeconfig: "/d/hub", ProxyURL: "https://127.0.0.1:3", ProxyKubeconfig: "/d/proxy", ProxyMetricsURL: "http://127.0.0.1:1/metrics", Namespace: "clusters-demo",
		LedgerMetricsURL: "http://127.0.0.1:2/metrics", LedgerConfigMap: "capi-private-dev/ledger"}
	want := "HUB_KUBECONFIG=/d/hub\nLEDGER_CONFIGMAP=capi-private-dev/ledger\nLEDGER_METRICS_URL=http://127.0.0.1:2/metrics\n" +
		"NAMESPACE=clusters-demo\nPROXY_KUBECONFIG=/d/proxy\nPROXY_METRICS_URL=http://127.0.0.1:1/metrics\nPROXY_URL=https://127.0.0.1:3\n"
	if got := e.Lines(); got != want {
		t.Errorf("Lines:\n%s\nwant\n%s", got, want)
	}
}

// TestDev runs `dev` end to end (its own hub) and uses it the way its output says: kubectl through the proxy sees
// the demo cluster's Machines in the standard groups and not the platform's; kubectl directly sees them stored
// private, and the platform's Machine in the standard CRD; the env file names it all.
func TestDev(t *testing.T) {
	dir := t.TempDir()
	envFile := filepath.Join(dir, "dev.env")
	ctx, cancel := context.WithCancel(context.Background())
	started := make(chan Env, 1)
	done := make(chan error, 1)
	var stdout, stderr testlog.Buffer
	begin := time.Now()
	go func() {
		done <- Run(ctx, Options{StateDir: filepath.Join(dir, "state"), EnvFile: envFile, LegacyClusters: 1, Migrate: true,
			Started: func(e Env) { started <- e }}, &stdout, &stderr)
	}()
	var e Env
	select {
	case e = <-started:
	case err := <-done:
		t.Fatalf("dev exited: %v\n%s\n%s", err, stdout.String(), stderr.String())
	case <-time.After(6 * time.Minute):
		t.Fatalf("dev not running after 6 minutes:\n%s", stdout.String())
	}
	t.Logf("dev running after %s", time.Since(begin).Round(time.Millisecond))
	defer func() {
		cancel()
		if err := <-done; err != nil {
			t.Errorf("dev: %v", err)
		}
		if !strings.Contains(stdout.String(), "stopping…") {
			t.Errorf("no stop message:\n%s", stdout.String())
		}
	}()

	data, err := os.ReadFile(envFile)
	if err != nil || string(data) != e.Lines() {
		t.Fatalf("env file %q (err %v), want %q", data, err, e.Lines())
	}
	out := stdout.String()
	for _, want := range []string{"capi-private dev is running", e.ProxyKubeconfig, e.HubKubeconfig, "get clusters,machinedeployments,machinesets,machines -A", "creates=4 deletes=0 live=4",
		"Sidecar injection", "clusters-demo/capi-provider-recorded", "availability-prober,token-minter", "hypershift/operator-recorded", "RBAC mirror: 7 twins"} {
		if !strings.Contains(out, want) {
			t.Errorf("output lacks %q:\n%s", want, out)
		}
	}

	kubectl := func(kubeconfig string, args ...string) []string {
		t.Helper()
		cmd := exec.Command(filepath.Join(localhub.DefaultBinDir(), "kubectl"), append([]string{"--kubeconfig", kubeconfig}, args...)...)
		b, err := cmd.CombinedOutput()
		if err != nil {
			t.Fatalf("kubectl %v: %v\n%s", args, err, b)
		}
		lines := strings.Fields(string(b))
		slices.Sort(lines)
		return lines
	}
	proxied := kubectl(e.ProxyKubeconfig, "get", "machines.cluster.x-k8s.io", "-A", "-o", "jsonpath={range .items[*]}{.metadata.namespace}/{.status.phase}{\"\\n\"}{end}")
	if !slices.Equal(proxied, []string{"clusters-demo/Running", "clusters-demo/Running"}) {
		t.Errorf("Machines through the proxy: %v", proxied)
	}
	stored := kubectl(e.HubKubeconfig, "get", "machines.cluster.hypershift.openshift.io", "-A", "-o", "jsonpath={range .items[*]}{.metadata.namespace}{\"\\n\"}{end}")
	if !slices.Equal(stored, []string{"clusters-demo", "clusters-demo"}) {
		t.Errorf("private Machines stored: %v", stored)
	}
	standard := kubectl(e.HubKubeconfig, "get", "machines.cluster.x-k8s.io", "-A", "-o", "jsonpath={range .items[*]}{.metadata.namespace}/{.metadata.name}{\"\\n\"}{end}")
	if len(standard) != 3 || !slices.Contains(standard, capihub.PlatformNamespace+"/"+capihub.PlatformMachine) {
		t.Errorf("standard Machines stored (the platform's and the legacy cluster's 2): %v", standard)
	}
	ledger := kubectl(e.HubKubeconfig, "get", "configmap", "-n", LedgerNamespace, LedgerConfigMap, "-o", "jsonpath={.data.creates}")
	if !slices.Equal(ledger, []string{"4"}) {
		t.Errorf("ledger ConfigMap creates %v", ledger)
	}
	sidecar := kubectl(e.HubKubeconfig, "get", "pod", "-n", e.Namespace, "cluster-api-recorded", "-o", "jsonpath={.spec.initContainers[0].name}/{.spec.initContainers[0].restartPolicy}")
	if !slices.Equal(sidecar, []string{"capi-private-proxy/Always"}) {
		t.Errorf("the recorded cluster-api Pod's first init container: %v, want the proxy sidecar", sidecar)
	}

	// --migrate: the legacy cluster migrates (default windows: 15 s quiet, 30 s green), with no instance churn.
	var state, machines, counts []string
	// kubectl is a process per call: poll every 2 s, not at testwait's pace.
	if err := wait.PollUntilContextTimeout(t.Context(), 2*time.Second, 4*time.Minute, true, func(context.Context) (bool, error) {
		state = kubectl(e.HubKubeconfig, "get", "hostedcluster", "-n", HostedClusterNamespace, "legacy-1", "-o",
			`jsonpath={.metadata.annotations.hypershift\.openshift\.io/private-capi-types}/{.metadata.annotations.hypershift\.openshift\.io/migration-in-progress}`)
		machines = kubectl(e.HubKubeconfig, "get", "machines.cluster.x-k8s.io", "-A", "-o", "jsonpath={range .items[*]}{.metadata.name}{\"\\n\"}{end}")
		counts = kubectl(e.HubKubeconfig, "get", "configmap", "-n", LedgerNamespace, LedgerConfigMap, "-o", "jsonpath={.data.creates}/{.data.deletes}")
		return slices.Equal(state, []string{"true/"}) && slices.Equal(machines, []string{capihub.PlatformMachine}), nil
	}); err != nil {
		t.Fatalf("legacy-1 not migrated: annotations %v, standard Machines %v", state, machines)
	}
	if !slices.Equal(counts, []string{"4/0"}) {
		t.Errorf("ledger creates/deletes after the migration %v, want 4/0", counts)
	}
}
