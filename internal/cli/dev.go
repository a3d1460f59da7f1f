package cli

import (
	"bufio"
	"fmt"
	"io"
	"log/slog"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"time"

	"github.com/spf13/cobra"

	"github.com/dcm-sp/acm-cluster-sp/internal/devhub"
	"github.com/dcm-sp/acm-cluster-sp/internal/simulator"
)

type devOptions struct {
	stateDir   string
	envFile    string
	readyAfter time.Duration
	verbose    bool
}

func newDevCommand(stdout, stderr io.Writer) *cobra.Command {
	var o devOptions
	cmd := &cobra.Command{
		Use:   "dev",
		Short: "Run everything locally: a real kube-apiserver + etcd hub, the HyperShift simulator and NATS JetStream",
		Long: `dev starts a local hub (kube-apiserver and etcd built by 'make tools', with the real HyperShift, Hive, ACM,
Agent and KubeVirt CRDs and seeded ClusterImageSets, InfraEnv and Agents), an embedded NATS server with JetStream,
and the HyperShift simulator that plays the operator. Everything listens on 127.0.0.1 only. Ctrl-C stops it all.`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error { return runDev(cmd, o, stdout, stderr) },
	}
	cmd.Flags().StringVar(&o.stateDir, "state-dir", "", "where the hub's kubeconfig and NATS data go (default: a new temporary directory, removed on exit)")
	cmd.Flags().StringVar(&o.envFile, "env-file", "", "write KUBECONFIG=, NATS_URL= (and SP_URL=, STATUS_SUBJECT=) lines to this file once everything is ready")
	cmd.Flags().DurationVar(&o.readyAfter, "ready-after", simulator.DevTimeline().ReadyAfter, "how long the simulated operator takes to bring a KubeVirt cluster to READY")
	cmd.Flags().BoolVarP(&o.verbose, "verbose", "v", false, "log the hub's and the simulator's progress")
	return cmd
}

func runDev(cmd *cobra.Command, o devOptions, stdout, stderr io.Writer) error {
	ctx := cmd.Context()
	level := slog.LevelWarn
	if o.verbose {
		level = slog.LevelInfo
	}
	log := slog.New(slog.NewTextHandler(stderr, &slog.HandlerOptions{Level: level}))
	fmt.Fprintln(stdout, "starting the local hub (kube-apiserver "+devhub.KubernetesVersion+", etcd "+devhub.EtcdVersion+", NATS JetStream)…")
	began := time.Now()
	hub, err := devhub.Start(ctx, devhub.Options{StateDir: o.stateDir, Log: log})
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
	stopSim, err := simulator.Start(ctx, hub.Config, tl, log)
	if err != nil {
		return err
	}
	defer stopSim()

	env := map[string]string{"KUBECONFIG": hub.KubeconfigPath, "NATS_URL": hub.NATSURL}
	fmt.Fprintf(stdout, "\nlocal hub ready in %s\n", time.Since(began).Round(100*time.Millisecond))
	printBlock(stdout, [][2]string{
		{"Hub kubeconfig", hub.KubeconfigPath},
		{"", "kubectl --kubeconfig " + hub.KubeconfigPath + " get hostedclusters -A"},
		{"NATS", hub.NATSURL + " (stream " + devhub.StatusStream + ": " + strings.Join(devhub.StatusSubjects, ", ") + ")"},
		{"Simulator", fmt.Sprintf("HyperShift stand-in, KubeVirt clusters READY after ~%s", tl.ReadyAfter)},
	})
	if o.envFile != "" {
		if err := writeEnvFile(o.envFile, env); err != nil {
			return err
		}
		fmt.Fprintln(stdout, "environment written to", o.envFile)
	}
	fmt.Fprintln(stdout, "\nPress Ctrl-C to stop.")
	<-ctx.Done()
	return nil
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
