package cli

import (
	"fmt"
	"io"
	"os"

	"github.com/spf13/cobra"

	"github.com/dcm-sp/acm-cluster-sp/internal/buildinfo"
	"github.com/dcm-sp/acm-cluster-sp/internal/sp/app"
	"github.com/dcm-sp/acm-cluster-sp/internal/sp/config"
)

func newServeCommand(_, stderr io.Writer) *cobra.Command {
	cmd := &cobra.Command{
		Use:   "serve",
		Short: "Run the service provider against an ACM hub (production)",
		Long: `serve runs the API, the status event publisher, DCM registration and health against the ACM hub named by
hubKubeconfig (or the in-cluster service account). Every setting is a YAML key (--config FILE), an environment
variable SP_<KEY> and a flag; flag > env > file > default.`,
		Args: cobra.NoArgs,
	}
	loader := config.Bind(cmd.Flags())
	cmd.RunE = func(cmd *cobra.Command, _ []string) error {
		cfg, err := loader.Load(os.Getenv)
		if err != nil {
			return err
		}
		if err := cfg.ValidateServe(); err != nil {
			return err
		}
		log := app.NewLogger(cfg.LogLevel, cfg.LogFormat, stderr)
		app.SetGlobalLoggers(log)
		log.Info("starting acm-cluster-sp", "version", buildinfo.Version())
		a, err := app.New(cfg, app.Options{Log: log})
		if err != nil {
			return err
		}
		if err := a.Run(cmd.Context()); err != nil {
			return fmt.Errorf("serve: %w", err)
		}
		return nil
	}
	return cmd
}
