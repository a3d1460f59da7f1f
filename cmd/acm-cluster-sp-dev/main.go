// Command acm-cluster-sp-dev is acm-cluster-sp with the `dev` command (package devcmd): a local hub, the HyperShift
// simulator, NATS JetStream and the service in one process. It links the test machinery (envtest, the embedded
// NATS server, the simulator), so it is a separate binary that `make run` builds; the production acm-cluster-sp
// never links it.
package main

import (
	"context"
	"os"
	"os/signal"
	"syscall"

	"github.com/dcm-sp/acm-cluster-sp/internal/devtest/sp/devcmd"
	"github.com/dcm-sp/acm-cluster-sp/internal/sp/cli"
)

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	code := cli.Main(ctx, os.Args[1:], os.Stdout, os.Stderr, devcmd.New)
	stop()
	os.Exit(code)
}
