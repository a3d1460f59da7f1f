// Package devcmd is `capi-private dev`: everything on an embedded local hub, wired from capihub (the hub, the
// platform's standard CAPI, the private CRDs, the conversion webhook, kube-controller-manager's garbage collector),
// capipods (the upstream CAPI controllers, the ledger provider and the fake HyperShift operators as simulated pods)
// and the proxy. It is dev machinery: only cmd/capi-private-dev links it (make run-capi), never the production
// capi-private binary.
package devcmd

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"time"

	"github.com/go-logr/logr"
	"github.com/go-logr/stdr"
	hyperv1 "github.com/openshift/hypershift/api/hypershift/v1beta1"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/promhttp"
	"github.com/spf13/cobra"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/tools/clientcmd"
	clientcmdapi "k8s.io/client-go/tools/clientcmd/api"
	"k8s.io/klog/v2"
	ctrllog "sigs.k8s.io/controller-runtime/pkg/log"

	migratecontroller "github.com/dcm-sp/acm-cluster-sp/internal/capiprivate/migrate/controller"
	"github.com/dcm-sp/acm-cluster-sp/internal/devtest/capi/capihub"
	"github.com/dcm-sp/acm-cluster-sp/internal/devtest/capi/capipods"
	"github.com/dcm-sp/acm-cluster-sp/internal/devtest/capi/installtest"
	"github.com/dcm-sp/acm-cluster-sp/internal/devtest/localhub"
)

// The annotations dev's fake operators select HostedClusters by: the private one reconciles those the classifier
// marked private-capi-types, the legacy one those it gave scope: legacy. (A simplification: HyperShift's private operator
// takes every HostedCluster without a scope; see docs/capi-private-migration.md, section "Two operators through
// HyperShift's own scoping".)
const (
	PrivateTypesAnnotation = "hypershift.openshift.io/private-capi-types"
	ScopeAnnotation        = "hypershift.openshift.io/scope"
)

// Names of what dev creates.
const (
	// HostedClusterNamespace holds the HostedClusters; each one's control plane lives in <namespace>-<name>.
	HostedClusterNamespace = "clusters"
	DemoCluster            = "demo"
	// LedgerNamespace/LedgerConfigMap mirror the ledger's counters.
	LedgerNamespace = "capi-private-dev"
	LedgerConfigMap = "ledger"
)

// Options configure Run.
type Options struct {
	// StateDir receives the kubeconfigs (default: a new temporary directory, removed on exit).
	StateDir string
	// EnvFile, if set, gets HUB_KUBECONFIG=, PROXY_KUBECONFIG=, PROXY_METRICS_URL=, NAMESPACE= (and PROXY_URL=, LEDGER_*)
	// once the demo cluster's Machines run.
	EnvFile string
	// Machines is the demo MachineDeployment's replicas (default 2).
	Machines int
	// LegacyClusters adds that many legacy hosted clusters (1 MachineDeployment × Machines each, standard groups,
	// pods Direct, annotated scope: legacy): what `migrate` starts from.
	LegacyClusters int
	// Migrate runs `capi-private migrate` (classifier and migrator) in-process once the clusters run, with the
	// reference's default windows, so the legacy clusters can be watched migrating one by one.
	Migrate bool
	// Verbose logs every manager, client-go and kube-controller-manager.
	Verbose bool
	// BinDir holds the hub's binaries (default localhub.DefaultBinDir()).
	BinDir string
	// Started, if set, is called once everything runs (tests).
	Started func(Env)
}

// Env is what dev serves, as written to the env file.
type Env struct {
	HubKubeconfig, ProxyURL, ProxyKubeconfig, ProxyMetricsURL, Namespace, LedgerMetricsURL, LedgerConfigMap string
}

// Lines renders the env file (KEY=value, sorted).
func (e Env) Lines() string {
	kv := map[string]string{
		"HUB_KUBECONFIG":     e.HubKubeconfig,
		"PROXY_URL":          e.ProxyURL,
		"PROXY_KUBECONFIG":   e.ProxyKubeconfig,
		"PROXY_METRICS_URL":  e.ProxyMetricsURL,
		"NAMESPACE":          e.Namespace,
		"LEDGER_METRICS_URL": e.LedgerMetricsURL,
		"LEDGER_CONFIGMAP":   e.LedgerConfigMap,
	}
	keys := make([]string, 0, len(kv))
	for k := range kv {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	var b strings.Builder
	for _, k := range keys {
		fmt.Fprintf(&b, "%s=%s\n", k, kv[k])
	}
	return b.String()
}

// New is the `dev` command.
func New() *cobra.Command {
	var o Options
	cmd := &cobra.Command{
		Use:   "dev",
		Short: "Everything on an embedded local hub: the platform's CAPI, the private CRDs, webhook, proxy, upstream CAPI and a demo cluster",
		Long: `dev starts a local hub (kube-apiserver and etcd, kube-controller-manager with only the garbage collector
and the namespace controller), installs the platform's standard CAPI CRDs (v1.14.2, v1beta2 only) with a few
platform objects, the standard CAPK, HostedCluster and HostedControlPlane CRDs and the private CRDs, starts the
conversion webhook and the capi-private proxy, and runs the upstream CAPI controllers (v1.13.4) and the ledger
infrastructure provider through the proxy, as simulated pods of the Deployments of a demo hosted cluster with a
MachineDeployment of --machines Machines. Everything listens on 127.0.0.1 only. Ctrl-C stops it all.`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			return Run(cmd.Context(), o, cmd.OutOrStdout(), cmd.ErrOrStderr())
		},
	}
	cmd.Flags().StringVar(&o.StateDir, "state-dir", "", "where the kubeconfigs go (default: a new temporary directory, removed on exit)")
	cmd.Flags().StringVar(&o.EnvFile, "env-file", "", "write HUB_KUBECONFIG=, PROXY_KUBECONFIG=, PROXY_METRICS_URL= and NAMESPACE= lines to this file once the demo cluster runs")
	cmd.Flags().IntVar(&o.Machines, "machines", 2, "Machines of the demo cluster's MachineDeployment")
	cmd.Flags().IntVar(&o.LegacyClusters, "legacy-clusters", 0, "also create this many legacy hosted clusters (standard groups, pods Direct, scope: legacy)")
	cmd.Flags().BoolVar(&o.Migrate, "migrate", false, "also run the migrator (capi-private migrate) in-process once everything runs: watch it with `capi-private migrate status`")
	cmd.Flags().BoolVarP(&o.Verbose, "verbose", "v", false, "log every manager, client-go and kube-controller-manager")
	return cmd
}

// Run runs dev until ctx ends.
func Run(ctx context.Context, o Options, stdout, stderr io.Writer) (err error) {
	if o.Machines == 0 {
		o.Machines = 2
	}
	log := logr.Discard()
	envOpts := capihub.Options{BinDir: o.BinDir, ServiceAccounts: true} // Pods get kube-api-access, as on a cluster
	if o.Verbose {
		log = stdr.New(nil)
		envOpts.ControllerManagerOutput = stderr
	} else {
		klog.SetLogger(logr.Discard())
	}
	ctrllog.SetLogger(log)
	began := time.Now()

	fmt.Fprintf(stdout, "starting the local hub (kube-apiserver %s, etcd %s, kube-controller-manager: garbage collector and namespace controller), the CRDs and the conversion webhook…\n",
		localhub.KubernetesVersion, localhub.EtcdVersion)
	startCtx, cancel := context.WithTimeout(ctx, 5*time.Minute)
	defer cancel()
	env, err := capihub.Start(startCtx, envOpts)
	if err != nil {
		return err
	}
	var stops []func() error
	defer func() {
		fmt.Fprintln(stdout, "stopping…")
		slices.Reverse(stops)
		for _, stop := range stops {
			if e := stop(); e != nil && !errors.Is(e, context.Canceled) {
				fmt.Fprintln(stderr, "error while stopping:", e)
			}
		}
		if e := env.Stop(); e != nil {
			fmt.Fprintln(stderr, "error stopping the hub:", e)
		}
	}()
	fmt.Fprintln(stdout, "  ", env.Timings)

	dir := o.StateDir
	if dir == "" {
		if dir, err = os.MkdirTemp("", "capi-private-dev-"); err != nil {
			return err
		}
		stops = append(stops, func() error { return os.RemoveAll(dir) })
	} else if err := os.MkdirAll(dir, 0o700); err != nil {
		return err
	}

	// The proxy serves HTTPS with the webhook's key pair (issued for 127.0.0.1): kubectl sends tokens only to https.
	px, err := capipods.StartProxy(startCtx, capipods.ProxyOptions{
		Upstream: env.Config, CertFile: env.WebhookCertFile, KeyFile: env.WebhookKeyFile, CA: env.WebhookCA,
	})
	if err != nil {
		return err
	}
	stops = append(stops, px.Stop)

	hubKubeconfig, err := env.Kubeconfig(capihub.AdminUser, env.AdminToken)
	if err != nil {
		return err
	}
	proxyKubeconfig, err := Kubeconfig("capi-private-proxy", px.URL, env.WebhookCA, capihub.AdminUser, env.AdminToken)
	if err != nil {
		return err
	}
	e := Env{
		HubKubeconfig: filepath.Join(dir, "hub.kubeconfig"), ProxyURL: px.URL, ProxyKubeconfig: filepath.Join(dir, "proxy.kubeconfig"),
		ProxyMetricsURL: px.MetricsURL, Namespace: hyperNamespace(DemoCluster),
		LedgerConfigMap: LedgerNamespace + "/" + LedgerConfigMap,
	}
	if err := os.WriteFile(e.HubKubeconfig, hubKubeconfig, 0o600); err != nil {
		return err
	}
	if err := os.WriteFile(e.ProxyKubeconfig, proxyKubeconfig, 0o600); err != nil {
		return err
	}

	h, err := capipods.New(startCtx, capipods.Options{
		Direct: env.TokenConfig(env.AdminToken), Proxied: px.Config(env.AdminToken), WorkloadKubeconfig: hubKubeconfig, Log: log,
	})
	if err != nil {
		return err
	}
	stops = append(stops, h.Stop)

	runCtx, stopRun := context.WithCancel(context.Background())
	stops = append(stops, func() error { stopRun(); return nil })
	if err := h.Ledger.Publish(runCtx, h.Client, types.NamespacedName{Namespace: LedgerNamespace, Name: LedgerConfigMap}); err != nil {
		return err
	}
	ledgerMetrics, stopMetrics, err := serveLedgerMetrics(h.Ledger)
	if err != nil {
		return err
	}
	e.LedgerMetricsURL = ledgerMetrics
	stops = append(stops, stopMetrics)

	private, err := h.StartOperator(startCtx, "private", capipods.Proxied, func(hc *hyperv1.HostedCluster) bool {
		return hc.Annotations[PrivateTypesAnnotation] == "true"
	})
	if err != nil {
		return err
	}
	stops = append(stops, private.Stop)
	legacy, err := h.StartOperator(startCtx, "legacy", capipods.Direct, func(hc *hyperv1.HostedCluster) bool {
		return hc.Annotations[ScopeAnnotation] == "legacy"
	})
	if err != nil {
		return err
	}
	stops = append(stops, legacy.Stop)

	// As on a real management cluster: the legacy clusters exist before the install; the classifier (part of
	// `capi-private migrate`) gives them scope: legacy; the demo cluster is created afterwards and born private (the
	// classifier marks it). Nothing here annotates a HostedCluster.
	fmt.Fprintf(stdout, "creating %d legacy hosted cluster(s), starting the classifier, then the demo hosted cluster %s/%s (born private: private groups, pods through the proxy)…\n",
		o.LegacyClusters, HostedClusterNamespace, DemoCluster)
	var clusters []*capipods.HostedCluster
	for i := range o.LegacyClusters {
		hc, err := h.CreateHostedCluster(startCtx, capipods.LegacyHostedCluster(HostedClusterNamespace, fmt.Sprintf("legacy-%d", i+1), 1, o.Machines))
		if err != nil {
			return err
		}
		clusters = append(clusters, hc)
	}
	stopClassifier, err := installtest.StartClassifier(env.TokenConfig(env.AdminToken), HostedClusterNamespace, log.WithName("classifier"))
	if err != nil {
		return err
	}
	stops = append(stops, stopClassifier)
	demo, err := h.CreateHostedCluster(startCtx, capipods.HostedClusterSpec{
		Namespace: HostedClusterNamespace, Name: DemoCluster, Groups: capipods.PrivateGroups,
		MachineDeployments:  []capipods.MachineDeploymentSpec{{Name: DemoCluster + "-workers", Replicas: int32(o.Machines)}},
		MachineHealthChecks: true, Deployments: true, DeploymentReplicas: 1, Proxied: true,
	})
	if err != nil {
		return err
	}
	for _, hc := range append([]*capipods.HostedCluster{demo}, clusters...) {
		want := 0
		for _, md := range hc.Spec.MachineDeployments {
			want += int(md.Replicas)
		}
		if _, err := hc.WaitMachinesRunning(startCtx, hc.Spec.Groups, want, 3*time.Minute); err != nil {
			return err
		}
	}

	fmt.Fprintln(stdout, "registering the sidecar injector and the RBAC mirror, creating a Pod of each HyperShift component…")
	inj, err := startInjection(startCtx, env, hyperNamespace(DemoCluster), log)
	if err != nil {
		return err
	}
	stops = append(stops, inj.stop)

	if o.EnvFile != "" {
		if err := writeFileAtomic(o.EnvFile, []byte(e.Lines())); err != nil {
			return err
		}
	}
	if o.Migrate {
		mig, err := migratecontroller.Start(ctx, env.TokenConfig(env.AdminToken), migratecontroller.RunOptions{
			Options: migratecontroller.Options{Namespace: HostedClusterNamespace, Log: log.WithName("migrate")},
		})
		if err != nil {
			return err
		}
		stops = append(stops, mig.Stop)
		fmt.Fprintf(stdout, "migrator running: capi-private migrate status --kubeconfig %s\n", e.HubKubeconfig)
	}
	printRunning(stdout, e, o, h.Ledger.Stats(), time.Since(began), env.AuditLog)
	inj.print(stdout, kubectlPath(o)+" --kubeconfig "+e.HubKubeconfig)
	fmt.Fprintln(stdout, "\nCtrl-C stops everything.")
	if o.Started != nil {
		o.Started(e)
	}
	<-ctx.Done()
	return nil
}

func hyperNamespace(name string) string {
	return capipods.ControlPlaneNamespace(HostedClusterNamespace, name)
}

// Kubeconfig is a kubeconfig for server (CA caPEM) with a bearer token.
func Kubeconfig(name, server string, caPEM []byte, user, token string) ([]byte, error) {
	cfg := clientcmdapi.NewConfig()
	cfg.Clusters[name] = &clientcmdapi.Cluster{Server: server, CertificateAuthorityData: caPEM}
	cfg.AuthInfos[user] = &clientcmdapi.AuthInfo{Token: token}
	cfg.Contexts[name] = &clientcmdapi.Context{Cluster: name, AuthInfo: user}
	cfg.CurrentContext = name
	return clientcmd.Write(*cfg)
}

// serveLedgerMetrics serves the ledger's counters on a loopback listener it keeps until stop.
func serveLedgerMetrics(l *capipods.Ledger) (string, func() error, error) {
	reg := prometheus.NewRegistry()
	if err := reg.Register(l); err != nil {
		return "", nil, err
	}
	lis, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return "", nil, err
	}
	mux := http.NewServeMux()
	mux.Handle("GET /metrics", promhttp.HandlerFor(reg, promhttp.HandlerOpts{}))
	srv := &http.Server{Handler: mux, ReadHeaderTimeout: 10 * time.Second}
	go func() { _ = srv.Serve(lis) }()
	return "http://" + lis.Addr().String() + "/metrics", func() error { return srv.Close() }, nil
}

func writeFileAtomic(path string, data []byte) error {
	tmp, err := os.CreateTemp(filepath.Dir(path), ".env-*")
	if err != nil {
		return err
	}
	if _, err := tmp.Write(data); err != nil {
		_ = tmp.Close()
		_ = os.Remove(tmp.Name())
		return err
	}
	if err := tmp.Close(); err != nil {
		return err
	}
	return os.Rename(tmp.Name(), path)
}

// kubectlPath is the hub's kubectl.
func kubectlPath(o Options) string {
	if o.BinDir != "" {
		return filepath.Join(o.BinDir, "kubectl")
	}
	return filepath.Join(localhub.DefaultBinDir(), "kubectl")
}

// printRunning prints what runs and how to look at it.
func printRunning(w io.Writer, e Env, o Options, s capipods.Stats, took time.Duration, auditLog string) {
	kubectl := kubectlPath(o)
	viaProxy := kubectl + " --kubeconfig " + e.ProxyKubeconfig
	direct := kubectl + " --kubeconfig " + e.HubKubeconfig
	fmt.Fprintf(w, "\ncapi-private dev is running (everything up in %s)\n\n", took.Round(100*time.Millisecond))
	rows := [][2]string{
		{"Hub", "kube-apiserver " + localhub.KubernetesVersion + " + etcd; kube-controller-manager (garbage collector, namespace controller)"},
		{"CRDs", "platform CAPI v1.14.2 (cluster.x-k8s.io, v1beta2 only) + objects in " + capihub.PlatformNamespace + "; CAPK v0.11.2; HostedCluster/HostedControlPlane; private CRDs (*.cluster.hypershift.openshift.io) converted by the in-process webhook"},
		{"Proxy", e.ProxyURL + " (passthrough auth; kubeconfig " + e.ProxyKubeconfig + "); /metrics, /healthz, /readyz on " + strings.TrimSuffix(e.ProxyMetricsURL, "/metrics")},
		{"Demo cluster", fmt.Sprintf("HostedCluster %s/%s, CAPI objects in %s (stored private): Cluster, KubevirtCluster, MachineDeployment of %d, MachineHealthCheck", HostedClusterNamespace, DemoCluster, e.Namespace, o.Machines)},
		{"Simulated pods", "Deployments cluster-api (upstream CAPI v1.13.4), capi-provider (ledger provider), control-plane-operator (fake) … in " + e.Namespace + ", through the proxy; the fake HyperShift operators 'private' (proxied) and 'legacy' (direct)"},
		{"Ledger", fmt.Sprintf("%s; ConfigMap %s; metrics %s", s, e.LedgerConfigMap, e.LedgerMetricsURL)},
		{"Audit log", auditLog},
	}
	if o.LegacyClusters > 0 {
		rows = append(rows, [2]string{"Legacy clusters", fmt.Sprintf("%d in %s/legacy-<n> (standard groups, pods direct, scope: legacy)", o.LegacyClusters, HostedClusterNamespace)})
	}
	for _, r := range rows {
		fmt.Fprintf(w, "  %-15s %s\n", r[0], r[1])
	}
	fmt.Fprintf(w, `
What CAPI sees, through the proxy (standard groups; the platform's objects are invisible):
  %[1]s get clusters,machinedeployments,machinesets,machines -A
  %[1]s get kubevirtmachines -n %[3]s
  %[1]s scale machinedeployment %[4]s-workers -n %[3]s --replicas 3
What is stored, directly (private groups; the platform's standard objects are untouched):
  %[2]s get machines.cluster.hypershift.openshift.io -A
  %[2]s get machines.cluster.x-k8s.io -A
  %[2]s get nodes,pods -A
  %[2]s get configmap -n %[5]s %[6]s -o yaml
The proxy's metrics:
  curl -s %[7]s | grep ^capi_private_proxy
`, viaProxy, direct, e.Namespace, DemoCluster, LedgerNamespace, LedgerConfigMap, e.ProxyMetricsURL)
	if o.EnvFile != "" {
		fmt.Fprintf(w, "\nEnvironment written to %s\n", o.EnvFile)
	}
}
