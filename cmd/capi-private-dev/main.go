// Command capi-private-dev is capi-private with the real `dev` command (package devcmd): a local hub, the proxy,
// the upstream CAPI controllers and a demo cluster in one process. It links the test machinery (envtest, capihub,
// capipods), so it is a separate binary that `make run-capi` builds; the production capi-private never links it.
package main

import (
	"context"
	"os"
	"os/signal"
	"syscall"

	"github.com/dcm-sp/acm-cluster-sp/internal/capiprivate/cli"
	"github.com/dcm-sp/acm-cluster-sp/internal/devtest/capi/devcmd"
)

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	code := cli.Main(ctx, os.Args[1:], os.Stdout, os.Stderr, devcmd.New())
	stop()
	os.Exit(code)
}
