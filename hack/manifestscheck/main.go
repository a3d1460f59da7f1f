// Command manifestscheck renders deploy/ and each overlay with kubectl kustomize and validates the result against a
// real kube-apiserver's OpenAPI (a local hub with the product's CRDs): server-side apply, dry-run, strict field
// validation. `make manifests-check` runs it; CI too.
package main

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"time"

	"github.com/dcm-sp/acm-cluster-sp/internal/devhub"
)

var variants = []string{"deploy", "deploy/overlays/dcm", "deploy/overlays/secure"}

func main() {
	if err := run(); err != nil {
		fmt.Fprintln(os.Stderr, "manifests-check:", err)
		os.Exit(1)
	}
}

func run() error {
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	hub, err := devhub.Start(ctx, devhub.Options{NoNATS: true})
	if err != nil {
		return err
	}
	defer func() { _ = hub.Stop() }()
	kubectl := filepath.Join(devhub.DefaultBinDir(), "kubectl")
	// A dry run creates nothing, so objects in the SP's own namespace need it to exist on this throwaway hub.
	if out, err := exec.CommandContext(ctx, kubectl, "--kubeconfig", hub.KubeconfigPath, "create", "namespace", "acm-cluster-sp").CombinedOutput(); err != nil {
		return fmt.Errorf("creating namespace acm-cluster-sp: %s", out)
	}
	for _, dir := range variants {
		rendered, err := exec.CommandContext(ctx, kubectl, "kustomize", dir).Output()
		if err != nil {
			return fmt.Errorf("kubectl kustomize %s: %w", dir, stderrOf(err))
		}
		cmd := exec.CommandContext(ctx, kubectl, "--kubeconfig", hub.KubeconfigPath, "apply", "--server-side", "--dry-run=server",
			"--validate=strict", "--field-manager=manifests-check", "-f", "-")
		cmd.Stdin = bytes.NewReader(rendered)
		out, err := cmd.CombinedOutput()
		if err != nil {
			return fmt.Errorf("%s does not validate:\n%s", dir, out)
		}
		fmt.Printf("%s: %d objects valid (server-side dry run, strict)\n", dir, bytes.Count(out, []byte("\n")))
	}
	return nil
}

func stderrOf(err error) error {
	if ee, ok := err.(*exec.ExitError); ok && len(ee.Stderr) > 0 {
		return fmt.Errorf("%s", ee.Stderr)
	}
	return err
}
