package cli

import (
	"errors"
	"fmt"
	"io"
	"log/slog"
	"slices"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/go-logr/logr"
	hyperv1 "github.com/openshift/hypershift/api/hypershift/v1beta1"
	"github.com/spf13/cobra"
	"github.com/spf13/pflag"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/dcm-sp/acm-cluster-sp/internal/capiprivate/inject"
	"github.com/dcm-sp/acm-cluster-sp/internal/capiprivate/migrate/controller"
	"github.com/dcm-sp/acm-cluster-sp/internal/capiprivate/migrate/plan"
	"github.com/dcm-sp/acm-cluster-sp/internal/capiprivate/migrate/scope"
)

// migrateFlags are the migrate command's flags.
type migrateFlags struct {
	o                          controller.RunOptions
	kubeconfig, componentLabel string
	reroutes, deployments      []string
}

func newMigrateCommand() *cobra.Command {
	m := migrateFlags{deployments: slices.Clone(controller.DefaultDeployments)}
	m.o.Config = plan.DefaultConfig()
	cmd := &cobra.Command{
		Use:   "migrate",
		Short: "Classify HostedClusters and migrate legacy ones to the private groups, one at a time (leader-elected)",
		Long: "Runs the scope classifier and the migrator (docs/capi-private-migration.md). It talks to kube-apiserver " +
			"directly, never through the proxy. `migrate status` prints each HostedCluster's migration state.",
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error { return m.run(cmd) },
	}
	m.bind(cmd.Flags())
	cmd.AddCommand(newMigrateStatusCommand())
	return cmd
}

// run starts the classifier and the migrator and waits until they stop.
func (m *migrateFlags) run(cmd *cobra.Command) error {
	if m.o.LeaderElection && m.o.LeaderElectionNamespace == "" {
		return errors.New("--leader-election-namespace is required with --leader-elect")
	}
	if len(m.deployments) == 0 {
		return errors.New("--deployments must name at least one Deployment")
	}
	selection := inject.DefaultConfig("")
	selection.ComponentLabel = m.componentLabel
	if err := applyReroutes(&selection, m.reroutes); err != nil {
		return err
	}
	cfg, err := restConfig(m.kubeconfig)
	if err != nil {
		return err
	}
	log := logr.FromSlogHandler(slog.NewTextHandler(cmd.ErrOrStderr(), nil))
	ctrl.SetLogger(log)
	m.o.Log = log.WithName("migrate")
	c, err := client.New(cfg, client.Options{Scheme: controller.Scheme()})
	if err != nil {
		return err
	}
	m.o.Switcher = controller.RolloutSwitcher{Client: c, Names: m.deployments, Selection: &selection}
	m.o.Client = c
	r, err := controller.Start(cmd.Context(), cfg, m.o)
	if err != nil {
		return err
	}
	fmt.Fprintf(cmd.OutOrStdout(), "capi-private migrate running (leader election %v, metrics on %s)\n", m.o.LeaderElection, m.o.MetricsAddr)
	<-r.Done()
	if cmd.Context().Err() != nil {
		return nil
	}
	return r.Err()
}

// bind registers the flags on f.
func (m *migrateFlags) bind(f *pflag.FlagSet) {
	f.StringVar(&m.kubeconfig, "kubeconfig", "", "kubeconfig file (default: $KUBECONFIG, ~/.kube/config, then in-cluster)")
	f.StringVar(&m.o.Namespace, "namespace", "", "only HostedClusters of this namespace (default: all)")
	f.BoolVar(&m.o.LeaderElection, "leader-elect", true, "elect one migrator (Lease "+controller.LeaderElectionID+")")
	f.StringVar(&m.o.LeaderElectionNamespace, "leader-election-namespace", "", "namespace of the leader election Lease")
	f.StringVar(&m.o.MetricsAddr, "metrics-bind-address", ":9442", "address of /metrics (0: off)")
	f.StringVar(&m.o.HealthAddr, "health-probe-bind-address", ":9443", "address of /healthz and /readyz (0: off)")
	f.StringVar(&m.o.ProbeNamespace, "probe-namespace", "default", "existing namespace of the conversion webhook probe (a dry-run create)")
	f.StringVar(&m.o.StateNamespace, "state-namespace", controller.DefaultStateNamespace, "existing namespace of the migrator's records of its runs (ConfigMaps; only capi-private may write there)")
	for _, d := range []struct {
		v          *time.Duration
		name, help string
	}{
		{&m.o.Config.QuietWindow, "quiet-window", "Quiescing: how long only the migrator may write the standard objects"},
		{&m.o.Config.HealthWindow, "health-window", "Resuming: how long the cluster must stay green"},
		{&m.o.Config.QuiesceTimeout, "quiesce-timeout", "deadline of Quiescing (legacy pods gone, quiet window held)"},
		{&m.o.Config.CopyTimeout, "copy-timeout", "deadline of Copying"},
		{&m.o.Config.RepointTimeout, "repoint-timeout", "deadline of Repointing"},
		{&m.o.Config.VerifyTimeout, "verify-timeout", "deadline of Verifying"},
		{&m.o.Config.SwitchTimeout, "switch-timeout", "deadline of Switching (proxied workloads Available)"},
		{&m.o.Config.ResumeTimeout, "resume-timeout", "deadline of Resuming to turn green (the health window comes on top)"},
		{&m.o.Config.RollbackTimeout, "rollback-timeout", "deadline of a rollback: past it, it gives the cluster back to the legacy controllers and leaves the twins for the next run"},
		{&m.o.Config.CleanupTimeout, "cleanup-timeout", "deadline of CleaningUp: past it, the phase is reported stalled and retried with back-off"},
		{&m.o.Config.BlockedTimeout, "blocked-timeout", "how long a legacy HostedCluster may be blocked by its preconditions before it is reported overdue"},
	} {
		f.DurationVar(d.v, d.name, *d.v, d.help)
	}
	f.Func("deployments", "comma-separated Deployments quiesced (scaled to 0 before the copy, back at the switch) per hosted control plane (default "+strings.Join(m.deployments, ",")+")", func(v string) error {
		m.deployments = nil
		for _, n := range strings.Split(v, ",") {
			if n = strings.TrimSpace(n); n != "" {
				m.deployments = append(m.deployments, n)
			}
		}
		return nil
	})
	// The switch restarts the Pods the injector injects: these two flags must be the injector's.
	f.StringVar(&m.componentLabel, "component-label", inject.DefaultComponentLabel, "Pod label whose value names a control plane component (the injector's --component-label)")
	f.StringArrayVar(&m.reroutes, "reroute", nil, "COMPONENT=CONTAINER[,CONTAINER...]: a CAPI-dependent component whose Pods the switch restarts (the injector's --reroute; default its built-in table of HyperShift's components)")
}

func newMigrateStatusCommand() *cobra.Command {
	var kubeconfig, namespace string
	cmd := &cobra.Command{
		Use:   "status",
		Short: "Print each HostedCluster's migration state and phase",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			cfg, err := restConfig(kubeconfig)
			if err != nil {
				return err
			}
			c, err := client.New(cfg, client.Options{Scheme: controller.Scheme()})
			if err != nil {
				return err
			}
			list := &hyperv1.HostedClusterList{}
			if err := c.List(cmd.Context(), list, client.InNamespace(namespace)); err != nil {
				return err
			}
			return writeStatus(cmd.OutOrStdout(), list.Items, time.Now())
		},
	}
	cmd.Flags().StringVar(&kubeconfig, "kubeconfig", "", "kubeconfig file (default: $KUBECONFIG, ~/.kube/config, then in-cluster)")
	cmd.Flags().StringVarP(&namespace, "namespace", "n", "", "only HostedClusters of this namespace (default: all)")
	return cmd
}

// writeStatus prints one line per HostedCluster, sorted by namespace and name: its state (legacy, in_progress,
// migrated, failed, unclassified, other_scope), phase, run id, start time, and what plan.Report says: a failure or
// rollback and its reason, a stalled phase, or the preconditions blocking a legacy HostedCluster and for how long.
func writeStatus(w io.Writer, hcs []hyperv1.HostedCluster, now time.Time) error {
	slices.SortFunc(hcs, func(a, b hyperv1.HostedCluster) int {
		return strings.Compare(a.Namespace+"/"+a.Name, b.Namespace+"/"+b.Name)
	})
	tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "NAMESPACE\tNAME\tSTATE\tPHASE\tRUN\tSTARTED\tREASON")
	for _, hc := range hcs {
		s := plan.ReadState(hc.Annotations, hc.DeletionTimestamp != nil)
		started := "-"
		if !s.Started.IsZero() {
			started = s.Started.UTC().Format("2006-01-02T15:04:05Z")
		}
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\t%s\t%s\n", hc.Namespace, hc.Name, scope.State(hc.Annotations),
			orDash(string(s.Phase)), orDash(s.ID), started, plan.Report(s, now))
	}
	return tw.Flush()
}

func orDash(s string) string {
	if s == "" {
		return "-"
	}
	return s
}
