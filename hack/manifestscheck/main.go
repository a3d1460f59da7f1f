// Command manifestscheck renders deploy/ and each overlay with kubectl kustomize and validates the result against a
// real kube-apiserver's OpenAPI (a local hub with the product's CRDs, and those of the PrometheusRule,
// ServiceMonitor, PodMonitor and cert-manager Certificate and Issuer deploy/ ships): server-side apply, dry-run,
// strict field validation; and checks that every SP variant but the dcm overlay serves HTTPS. It does the same
// for deploy/capi-private's base and overlays, checks their Pods are hardened and their webhooks get a CA bundle
// injected, and dry-runs the legacy operator's patch on HyperShift's operator Deployment. `make manifests-check`
// runs it; CI too.
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

	"github.com/dcm-sp/acm-cluster-sp/internal/devtest/sp/sphub"
)

// variants are the SP's; capiVariants (capiprivate.go) capi-private's.
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
	hub, err := sphub.Start(ctx, sphub.Options{NoNATS: true})
	if err != nil {
		return err
	}
	defer func() { _ = hub.Stop() }()
	kubectl := filepath.Join(sphub.DefaultBinDir(), "kubectl")
	// A dry run creates nothing, so objects in the products' own namespaces need them to exist on this throwaway hub.
	for _, ns := range []string{"acm-cluster-sp", "capi-private", "hypershift-private"} {
		if out, err := exec.CommandContext(ctx, kubectl, "--kubeconfig", hub.KubeconfigPath, "create", "namespace", ns).CombinedOutput(); err != nil {
			return fmt.Errorf("creating namespace %s: %s", ns, out)
		}
	}
	for _, dir := range variants {
		rendered, out, err := dryRun(ctx, kubectl, hub.KubeconfigPath, dir)
		if err != nil {
			return err
		}
		if tls, err := servesTLS(rendered); err != nil {
			return fmt.Errorf("%s: %w", dir, err)
		} else if tls != (dir != plainHTTP) {
			return fmt.Errorf("%s serves TLS: %v (only %s may serve plain HTTP)", dir, tls, plainHTTP)
		}
		fmt.Printf("%s: %d objects valid (server-side dry run, strict)\n", dir, bytes.Count(out, []byte("\n")))
	}
	return checkCAPIPrivate(ctx, kubectl, hub.KubeconfigPath)
}

// dryRun renders dir and server-side applies it, dry-run, with strict field validation; it returns the rendered
// manifests and kubectl's output (one line per object).
func dryRun(ctx context.Context, kubectl, kubeconfig, dir string) (rendered, out []byte, err error) {
	rendered, err = exec.CommandContext(ctx, kubectl, "kustomize", dir).Output()
	if err != nil {
		return nil, nil, fmt.Errorf("kubectl kustomize %s: %w", dir, stderrOf(err))
	}
	cmd := exec.CommandContext(ctx, kubectl, "--kubeconfig", kubeconfig, "apply", "--server-side", "--dry-run=server",
		"--validate=strict", "--field-manager=manifests-check", "-f", "-")
	cmd.Stdin = bytes.NewReader(rendered)
	if out, err = cmd.CombinedOutput(); err != nil {
		return nil, nil, fmt.Errorf("%s does not validate:\n%s", dir, out)
	}
	return rendered, out, nil
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
