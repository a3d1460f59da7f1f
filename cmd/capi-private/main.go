// Command capi-private keeps HyperShift's Cluster API objects in private API groups: `crds generate|install`
// (the private CRDs), `webhook` (their conversion webhook), `proxy` (the group-renaming sidecar and its admission
// side) and `migrate` (the classifier and migrator, and `migrate status`). The commands live in internal/capiprivate/cli. It shares no runtime package with
// acm-cluster-sp and links no test machinery: `dev` is in cmd/capi-private-dev (make run-capi).
package main

import (
	"context"
	"os"
	"os/signal"
	"syscall"

	"github.com/dcm-sp/acm-cluster-sp/internal/capiprivate/cli"
)

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	code := cli.Main(ctx, os.Args[1:], os.Stdout, os.Stderr)
	stop()
	os.Exit(code)
}
