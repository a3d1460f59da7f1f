// Command manifestscheck renders deploy/ and each overlay with kubectl kustomize and validates the result against a
// real kube-apiserver's OpenAPI (a local hub with the product's CRDs, and those of the PrometheusRule,
// ServiceMonitor and cert-manager Certificate deploy/ ships): server-side apply, dry-run, strict field validation;
// and checks that every variant but the dcm overlay serves HTTPS. `make manifests-check` runs it; CI too.
package main

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"time"

	"sigs.k8s.io/yaml"

	"github.com/dcm-sp/acm-cluster-sp/internal/devhub"
)

var variants = []string{"deploy", "deploy/overlays/dcm", "deploy/overlays/secure", "deploy/overlays/cert-manager"}

// plainHTTP is the one variant that serves plain HTTP (DCM's credential-less calls); every other one must serve
// HTTPS.
const plainHTTP = "deploy/overlays/dcm"

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
		if tls, err := servesTLS(rendered); err != nil {
			return fmt.Errorf("%s: %w", dir, err)
		} else if tls != (dir != plainHTTP) {
			return fmt.Errorf("%s serves TLS: %v (only %s may serve plain HTTP)", dir, tls, plainHTTP)
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

// servesTLS reports whether the rendered Deployment gives the SP a serving certificate (SP_TLS_CERT_FILE) and
// probes it over HTTPS.
func servesTLS(rendered []byte) (bool, error) {
	for _, doc := range bytes.Split(rendered, []byte("\n---\n")) {
		var d struct {
			Kind string
			Spec struct {
				Template struct {
					Spec struct {
						Containers []struct {
							Env            []struct{ Name, Value string }
							ReadinessProbe struct {
								HTTPGet struct{ Scheme string } `json:"httpGet"`
							} `json:"readinessProbe"`
						}
					}
				}
			}
		}
		if err := yaml.Unmarshal(doc, &d); err != nil || d.Kind != "Deployment" {
			continue
		}
		c := d.Spec.Template.Spec.Containers[0]
		cert := false
		for _, e := range c.Env {
			cert = cert || e.Name == "SP_TLS_CERT_FILE" && e.Value != ""
		}
		if https := c.ReadinessProbe.HTTPGet.Scheme == "HTTPS"; cert != https {
			return false, fmt.Errorf("serving certificate %v but readiness probe over %q", cert, c.ReadinessProbe.HTTPGet.Scheme)
		}
		return cert, nil
	}
	return false, errors.New("no Deployment rendered")
}
