package cli

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"time"

	"github.com/spf13/cobra"

	"github.com/dcm-sp/acm-cluster-sp/pkg/api"
)

// updateOptions are the flags of the day-2 commands (update, scale, upgrade, resize).
type updateOptions struct {
	version, memory, storage, ifMatch string
	workers, cpu                      int
	wait                              bool
	timeout                           time.Duration
}

// updatePatch is the merge patch {"spec": …} of the flags given on cmd.
func updatePatch(cmd *cobra.Command) ([]byte, error) {
	spec := map[string]any{}
	workers := map[string]any{}
	f := cmd.Flags()
	if f.Changed("version") {
		spec["version"], _ = f.GetString("version")
	}
	for flag, key := range map[string]string{"workers": "count", "cpu": "cpu"} {
		if f.Changed(flag) {
			workers[key], _ = f.GetInt(flag)
		}
	}
	for _, flag := range []string{"memory", "storage"} {
		if f.Changed(flag) {
			workers[flag], _ = f.GetString(flag)
		}
	}
	if len(workers) > 0 {
		spec["nodes"] = map[string]any{"workers": workers}
	}
	if len(spec) == 0 {
		return nil, errors.New("nothing to change: give --version, --workers, or --cpu/--memory/--storage")
	}
	return json.Marshal(map[string]any{"spec": spec})
}

// newUpdateCommand is `clusters update` and, with a fixed set of flags, its shorthands scale, upgrade and resize.
func newUpdateCommand(o *clientOptions, stdout io.Writer, use, short, example string, flags ...string) *cobra.Command {
	var u updateOptions
	cmd := &cobra.Command{
		Use:     use + " ID",
		Short:   short,
		Example: example,
		Args:    cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			body, err := updatePatch(cmd)
			if err != nil {
				return err
			}
			cl, err := o.client()
			if err != nil {
				return err
			}
			params := &api.UpdateClusterParams{}
			if u.ifMatch != "" {
				params.IfMatch = &u.ifMatch
			}
			resp, err := cl.UpdateClusterWithBodyWithResponse(cmd.Context(), args[0], params, "application/merge-patch+json", bytes.NewReader(body))
			if err != nil {
				return transportError(o.server, err)
			}
			if resp.JSON200 == nil {
				return apiError(resp.StatusCode(), resp.Body)
			}
			c := resp.JSON200
			if o.output != "" {
				return printCluster(stdout, o, c)
			}
			fmt.Fprintln(stdout, updateLine(c))
			if !u.wait || c.Status != "UPDATING" {
				return nil
			}
			return waitFor(cmd.Context(), o, stdout, c.Id, "READY", u.timeout, 2*time.Second)
		},
	}
	fl := cmd.Flags()
	for _, name := range flags {
		switch name {
		case "version":
			fl.StringVar(&u.version, "version", "", "target version: OpenShift (4.18, 4.18.22) or Kubernetes (1.31); a minor resolves to its newest patch")
		case "workers":
			fl.IntVar(&u.workers, "workers", 0, "number of workers")
		case "cpu":
			fl.IntVar(&u.cpu, "cpu", 0, "cores per worker (baremetal: minimum per Agent)")
		case "memory":
			fl.StringVar(&u.memory, "memory", "", "memory per worker, e.g. 32GB")
		case "storage":
			fl.StringVar(&u.storage, "storage", "", "root disk per worker, e.g. 250GB")
		}
	}
	fl.StringVar(&u.ifMatch, "if-match", "", "only if the cluster's ETag is still this one (412 otherwise)")
	fl.BoolVar(&u.wait, "wait", false, "follow the operation until the cluster is READY again (exit code 1 on FAILED)")
	fl.DurationVar(&u.timeout, "timeout", 3*time.Hour, "how long --wait waits")
	addOutputFlag(cmd, o, "json, yaml (default: one line)")
	return cmd
}

// updateLine says what an accepted update started.
func updateLine(c *api.Cluster) string {
	op := c.CurrentOperation
	if op == nil || c.Status != "UPDATING" {
		return fmt.Sprintf("cluster %s: nothing to change (%s)", c.Id, c.Status)
	}
	return fmt.Sprintf("cluster %s: %s %s → %s started (%s)", c.Id, op.Kind, op.From, op.To, c.Status)
}

func dayTwoCommands(o *clientOptions, stdout io.Writer) []*cobra.Command {
	return []*cobra.Command{
		newUpdateCommand(o, stdout, "update", "Change a running cluster (one of: version, worker count, worker size)",
			"  acm-cluster-sp clusters update ID --workers 5\n  acm-cluster-sp clusters update ID --version 4.18 --wait",
			"version", "workers", "cpu", "memory", "storage"),
		newUpdateCommand(o, stdout, "scale", "Scale a cluster's workers", "  acm-cluster-sp clusters scale ID --workers 5 --wait", "workers"),
		newUpdateCommand(o, stdout, "upgrade", "Upgrade a cluster: the control plane first, then the workers",
			"  acm-cluster-sp clusters upgrade ID --version 4.18 --wait", "version"),
		newUpdateCommand(o, stdout, "resize", "Resize a cluster's workers (KubeVirt: every worker is replaced)",
			"  acm-cluster-sp clusters resize ID --memory 32GB --wait", "cpu", "memory", "storage"),
	}
}
