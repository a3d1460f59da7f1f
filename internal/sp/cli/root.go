// Package cli is the command-line interface: `serve` (production) and the `clusters` client commands; `dev`
// (package devcmd) is added by the acm-cluster-sp-dev binary only. Commands parse flags and call into the other packages;
// they hold no product logic.
package cli

import (
	"context"
	"errors"
	"fmt"
	"io"

	"github.com/spf13/cobra"

	"github.com/dcm-sp/acm-cluster-sp/internal/buildinfo"
)

// Main runs the command line and returns the process exit code.
func Main(ctx context.Context, args []string, stdout, stderr io.Writer, extra ...func(stdout, stderr io.Writer) *cobra.Command) int {
	root := newRoot(stdout, stderr)
	for _, c := range extra {
		root.AddCommand(c(stdout, stderr))
	}
	root.SetArgs(args)
	if err := root.ExecuteContext(ctx); err != nil {
		var ee exitError
		if errors.As(err, &ee) {
			if ee.msg != "" {
				fmt.Fprintln(stderr, ee.msg)
			}
			return ee.code
		}
		fmt.Fprintln(stderr, "error:", err)
		return 1
	}
	return 0
}

// exitError carries a specific exit code (e.g. `clusters wait` on FAILED).
type exitError struct {
	code int
	msg  string
}

func (e exitError) Error() string { return e.msg }

func newRoot(stdout, stderr io.Writer) *cobra.Command {
	root := &cobra.Command{
		Use:           "acm-cluster-sp",
		Short:         "ACM Cluster Service Provider: OpenShift clusters for DCM through HyperShift",
		Version:       buildinfo.Version(),
		SilenceUsage:  true,
		SilenceErrors: true,
	}
	root.SetOut(stdout)
	root.SetErr(stderr)
	root.AddCommand(newServeCommand(stdout, stderr), newClustersCommand(stdout, stderr))
	return root
}
