// Command acm-cluster-sp is the ACM Cluster Service Provider: `serve` runs the service against an ACM hub and
// `clusters …` drives a running instance. The commands live in internal/sp/cli. It links no dev or test machinery;
// `dev` is in the separate acm-cluster-sp-dev binary.
package main

import (
	"context"
	"os"
	"os/signal"
	"syscall"

	"github.com/dcm-sp/acm-cluster-sp/internal/sp/cli"
)

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	code := cli.Main(ctx, os.Args[1:], os.Stdout, os.Stderr)
	stop()
	os.Exit(code)
}
