// Package devcmd is acm-cluster-sp's `dev` command: a local hub (envtest), the HyperShift simulator, embedded NATS
// JetStream and the service, in one process on loopback. It links the test machinery, so only the separate
// acm-cluster-sp-dev binary (make run) includes it; the production acm-cluster-sp never does.
package devcmd

import (
	"bufio"
	"context"
	"crypto/tls"
	"crypto/x509"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"time"

	"github.com/spf13/cobra"

	"github.com/dcm-sp/acm-cluster-sp/internal/devtest/sp/simulator"
	"github.com/dcm-sp/acm-cluster-sp/internal/devtest/sp/sphub"
	"github.com/dcm-sp/acm-cluster-sp/internal/sp/app"
	"github.com/dcm-sp/acm-cluster-sp/internal/sp/cli"
	"github.com/dcm-sp/acm-cluster-sp/internal/sp/config"
	"github.com/dcm-sp/acm-cluster-sp/internal/sp/events"
)

type devOptions struct {
	selfSignedTLS bool
	stateDir      string
	envFile       string
	readyAfter    time.Duration
	verbose       bool
	registry      string // "" off, "local" the loopback stand-in, else a registry URL
}

// devDefaults are dev mode's defaults; flags, SP_* variables and a --config file still override them.
func devDefaults(hub *sphub.Hub, pullSecretFile string) map[string]string {
	return map[string]string{
		"namespace":           "clusters",
		"agentNamespace":      "hardware-inventory",
		"defaultInfraEnvName": "production-infraenv",
		"listenAddress":       "127.0.0.1:8080",
		"pullSecretFile":      pullSecretFile,
		"auth":                config.AuthNone,
		"natsURL":             hub.NATSURL,
		"logLevel":            "warn",
	}
}

// New builds `dev`: everything on a local hub.
func New(stdout, stderr io.Writer) *cobra.Command {
	var o devOptions
	cmd := &cobra.Command{
		Use:   "dev",
		Short: "Run everything locally: a real kube-apiserver + etcd hub, the HyperShift simulator, NATS JetStream and the service",
		Long: `dev starts a local hub (kube-apiserver and etcd built by 'make tools', with the real HyperShift, Hive, ACM,
Agent and KubeVirt CRDs and seeded ClusterImageSets, InfraEnv and Agents), an embedded NATS server with JetStream,
the HyperShift simulator that plays the operator, and the service itself against them. Everything listens on
127.0.0.1 only. Ctrl-C stops it all. Every 'serve' setting can be given too (flags, SP_* variables, --config).`,
		Args: cobra.NoArgs,
	}
	loader := config.Bind(cmd.Flags())
	cmd.Flags().StringVar(&o.stateDir, "state-dir", "", "where the hub's kubeconfig and NATS data go (default: a new temporary directory, removed on exit)")
	cmd.Flags().StringVar(&o.envFile, "env-file", "", "write SP_URL=, NATS_URL=, STATUS_SUBJECT= and KUBECONFIG= lines to this file once everything is ready")
	cmd.Flags().DurationVar(&o.readyAfter, "ready-after", simulator.DevTimeline().ReadyAfter, "how long the simulated operator takes to bring a KubeVirt cluster to READY")
	cmd.Flags().BoolVarP(&o.verbose, "verbose", "v", false, "log the hub's, the simulator's and the service's progress")
	cmd.Flags().StringVar(&o.registry, "registry", "", "register with DCM: --registry starts a loopback registry stand-in, --registry=URL uses a real one (…/api/v1alpha1)")
	cmd.Flags().Lookup("registry").NoOptDefVal = "local"
	cmd.Flags().BoolVar(&o.selfSignedTLS, "self-signed-tls", false, "serve HTTPS with a certificate from a throw-away CA (written to the state directory); try with --auth kubernetes")
	cmd.RunE = func(cmd *cobra.Command, _ []string) error { return runDev(cmd.Context(), loader, o, stdout, stderr) }
	return cmd
}

func runDev(ctx context.Context, loader *config.Loader, o devOptions, stdout, stderr io.Writer) error {
	level := slog.LevelWarn
	if o.verbose {
		level = slog.LevelInfo
	}
	log := slog.New(slog.NewTextHandler(stderr, &slog.HandlerOptions{Level: level}))
	app.SetGlobalLoggers(slog.New(slog.NewTextHandler(stderr, &slog.HandlerOptions{Level: slog.LevelError})))
	fmt.Fprintln(stdout, "starting the local hub (kube-apiserver "+sphub.KubernetesVersion+", etcd "+sphub.EtcdVersion+", NATS JetStream)…")
	began := time.Now()
	hub, err := sphub.Start(ctx, sphub.Options{StateDir: o.stateDir, Log: log})
	if err != nil {
		return err
	}
	defer func() {
		fmt.Fprintln(stdout, "stopping the local hub…")
		if err := hub.Stop(); err != nil {
			fmt.Fprintln(stderr, "error stopping the hub:", err)
		}
	}()
	tl := simulator.DevTimeline()
	tl.ReadyAfter = o.readyAfter
	stopSim, err := simulator.Start(ctx, hub.Config, simulator.Options{Timeline: tl, Log: log})
	if err != nil {
		return err
	}
	defer stopSim()

	pullSecretFile, err := sphub.WritePullSecret(hub.StateDir)
	if err != nil {
		return err
	}
	loader.SetDefaults(devDefaults(hub, pullSecretFile))
	cfg, err := loader.Load(os.Getenv)
	if err != nil {
		return err
	}
	if o.verbose && cfg.LogLevel == "warn" {
		cfg.LogLevel = "info"
	}
	caFile := ""
	if o.selfSignedTLS && !cfg.TLS() {
		if caFile, cfg.TLSCertFile, cfg.TLSKeyFile, err = sphub.SelfSignedServing(hub.StateDir); err != nil {
			return err
		}
	}
	if cfg.Auth == config.AuthKubernetes {
		if err := sphub.SeedAuth(ctx, hub.Config, cfg.Namespace, cfg.AuthAPIGroup); err != nil {
			return fmt.Errorf("seeding the dev ServiceAccounts: %w", err)
		}
	}
	listener := listenOrAny(cfg.ListenAddress, stderr)
	if listener == nil {
		return fmt.Errorf("cannot listen on %s or any loopback port", cfg.ListenAddress)
	}
	scheme := "http"
	if cfg.TLS() {
		scheme = "https"
	}
	url := scheme + "://" + listener.Addr().String()
	registryURL := ""
	switch o.registry {
	case "":
	case "local":
		reg, err := sphub.StartRegistry("127.0.0.1:0")
		if err != nil {
			return err
		}
		defer reg.Close()
		registryURL = reg.URL
	default:
		registryURL = o.registry
	}
	if registryURL != "" {
		cfg.RegistrationURL = registryURL
		if cfg.APIHost == "" {
			cfg.APIHost = url
		}
		if err := cfg.Validate(); err != nil {
			return err
		}
	}
	spLog := app.NewLogger(cfg.LogLevel, cfg.LogFormat, stderr)
	a, err := app.New(cfg, app.Options{RestConfig: hub.Config, Log: spLog, Listener: listener})
	if err != nil {
		return err
	}
	runCtx, cancel := context.WithCancel(ctx)
	defer cancel()
	done := make(chan error, 1)
	go func() { done <- a.Run(runCtx) }()
	if err := waitReady(ctx, url, caFile, done); err != nil {
		return err
	}

	subject := statusSubjectPattern(cfg)
	fmt.Fprintf(stdout, "\nacm-cluster-sp is running (everything up in %s)\n", time.Since(began).Round(100*time.Millisecond))
	rows := [][2]string{
		{"API", url + "/api/v1alpha1/clusters"},
		{"Health", url + "/health"},
		{"NATS", hub.NATSURL + "  subject " + subject},
		{"Hub kubeconfig", hub.KubeconfigPath},
		{"Simulator", fmt.Sprintf("KubeVirt clusters reach READY after ~%s, baremetal ~%s", tl.ReadyAfter, time.Duration(float64(tl.ReadyAfter)*tl.BareMetalFactor))},
	}
	if registryURL != "" {
		rows = append(rows, [2]string{"DCM registry", registryURL + "/providers"})
	}
	printBlock(stdout, rows)
	self, _ := os.Executable()
	bin := "acm-cluster-sp"
	if wd, err := os.Getwd(); err == nil {
		if rel, err := filepath.Rel(wd, self); err == nil && !strings.HasPrefix(rel, "..") {
			bin = "./" + rel
		}
	}
	kubectl := filepath.Join(sphub.DefaultBinDir(), "kubectl") + " --kubeconfig " + hub.KubeconfigPath
	var exports []string
	curl := "curl -s"
	if url != cli.DefaultServer {
		exports = append(exports, "SP_SERVER="+url)
	}
	if caFile != "" {
		exports = append(exports, "SP_CA_FILE="+caFile)
		curl += " --cacert $SP_CA_FILE"
	} else if cfg.TLS() {
		curl += " -k"
	}
	fmt.Fprintf(stdout, "\nSecurity: auth %s, %s", cfg.Auth, strings.ToUpper(scheme))
	if cfg.Auth == config.AuthNone {
		fmt.Fprintf(stdout, " (dev only: loopback, no credentials). The secure path in one command:\n  make run RUN_ARGS='--auth kubernetes --self-signed-tls'\n")
	} else {
		fmt.Fprintf(stdout, ". Tokens are checked by the local hub's TokenReview, permissions by its RBAC:\n")
		fmt.Fprintf(stdout, "  %s create token %s -n %s   # clusters, day-2 changes and their admin kubeconfigs\n", kubectl, sphub.DevAdmin, cfg.Namespace)
		fmt.Fprintf(stdout, "  %s create token %s -n %s     # what DCM's SPM needs: no day-2, no kubeconfigs\n", kubectl, sphub.DevSPM, cfg.Namespace)
		exports = append(exports, `SP_TOKEN=$(`+kubectl+" create token "+sphub.DevAdmin+" -n "+cfg.Namespace+`)`)
		curl += ` -H "Authorization: Bearer $SP_TOKEN"`
	}
	fmt.Fprintf(stdout, "\nTry:\n")
	for _, e := range exports {
		fmt.Fprintf(stdout, "  export %s\n", e)
	}
	shownURL := url
	if url != cli.DefaultServer {
		shownURL = "$SP_SERVER"
	}
	fmt.Fprintf(stdout, "  %s clusters create --id demo-1 --name demo --version 1.30 && %s clusters wait demo-1\n", bin, bin)
	fmt.Fprintf(stdout, "  %s %s/api/v1alpha1/clusters/demo-1\n", curl, shownURL)
	fmt.Fprintf(stdout, "  %s get hostedclusters,nodepools -n %s\n", kubectl, cfg.Namespace)
	if o.envFile != "" {
		env := map[string]string{"SP_URL": url, "NATS_URL": hub.NATSURL, "STATUS_SUBJECT": subject, "KUBECONFIG": hub.KubeconfigPath}
		if caFile != "" {
			env["SP_CA_FILE"] = caFile
		}
		if err := writeEnvFile(o.envFile, env); err != nil {
			return err
		}
		fmt.Fprintln(stdout, "\nenvironment written to", o.envFile)
	}
	fmt.Fprintln(stdout, "\nPress Ctrl-C to stop.")
	select {
	case <-ctx.Done():
		cancel()
		return <-done
	case err := <-done:
		return err
	}
}

// listenOrAny listens on addr, or on a free loopback port if addr is taken (a second dev instance).
func listenOrAny(addr string, stderr io.Writer) net.Listener {
	l, err := net.Listen("tcp", addr)
	if err == nil {
		return l
	}
	l, err2 := net.Listen("tcp", "127.0.0.1:0")
	if err2 != nil {
		return nil
	}
	fmt.Fprintf(stderr, "note: %s is in use (%v); serving on %s instead\n", addr, err, l.Addr())
	return l
}

func waitReady(ctx context.Context, url, caFile string, done <-chan error) error {
	probe := &http.Client{Timeout: 5 * time.Second}
	if strings.HasPrefix(url, "https://") {
		tc := &tls.Config{MinVersion: tls.VersionTLS12, InsecureSkipVerify: true} //nolint:gosec // dev readiness probe of our own listener
		if caFile != "" {
			if pem, err := os.ReadFile(caFile); err == nil {
				pool := x509.NewCertPool()
				pool.AppendCertsFromPEM(pem)
				tc = &tls.Config{MinVersion: tls.VersionTLS12, RootCAs: pool}
			}
		}
		probe.Transport = &http.Transport{TLSClientConfig: tc}
	}
	deadline := time.Now().Add(2 * time.Minute)
	for time.Now().Before(deadline) {
		select {
		case err := <-done:
			return fmt.Errorf("the service stopped while starting: %v", err)
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(100 * time.Millisecond):
		}
		if resp, err := probe.Get(url + "/readyz"); err == nil {
			resp.Body.Close()
			if resp.StatusCode == http.StatusOK {
				return nil
			}
		}
	}
	return fmt.Errorf("the service did not become ready within 2 minutes (see %s/readyz)", url)
}

// statusSubjectPattern shows where status events go, with a wildcard for the instance id.
func statusSubjectPattern(cfg *config.Config) string {
	n, err := events.ResolveNaming(cfg.StatusPreset, events.Naming{Subject: cfg.StatusSubject})
	if err != nil {
		return err.Error()
	}
	return n.SubjectFor(cfg.ProviderName, "*")
}

func printBlock(w io.Writer, rows [][2]string) {
	for _, r := range rows {
		fmt.Fprintf(w, "  %-15s %s\n", r[0], r[1])
	}
}

// writeEnvFile writes KEY=value lines (sorted) atomically, so a script polling for the file never reads half of it.
func writeEnvFile(path string, env map[string]string) error {
	keys := make([]string, 0, len(env))
	for k := range env {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	tmp, err := os.CreateTemp(filepath.Dir(path), ".env-*")
	if err != nil {
		return err
	}
	bw := bufio.NewWriter(tmp)
	for _, k := range keys {
		fmt.Fprintf(bw, "%s=%s\n", k, env[k])
	}
	if err := bw.Flush(); err != nil {
		tmp.Close()
		return err
	}
	if err := tmp.Close(); err != nil {
		return err
	}
	return os.Rename(tmp.Name(), path)
}
