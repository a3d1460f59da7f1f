package main

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"os/exec"
	"strings"

	"sigs.k8s.io/yaml"
)

// capiVariants are deploy/capi-private's base and overlays, with the annotation each overlay's CA-bundle injector
// needs on the webhook configurations ("" for the base, which has none).
var capiVariants = []struct{ dir, injector string }{
	{"deploy/capi-private/base", ""},
	{"deploy/capi-private/overlays/service-ca", "service.beta.openshift.io/inject-cabundle"},
	{"deploy/capi-private/overlays/cert-manager", "cert-manager.io/inject-ca-from"},
}

const legacyPatch = "deploy/capi-private/legacy-operator/patch.yaml"

// privateOperator is the private HyperShift operator's overlay: HyperShift's recorded install, renamed. Its Pods are
// HyperShift's as rendered, so they are validated but not held to capi-private's hardening.
const privateOperator = "deploy/capi-private/private-operator"

// checkCAPIPrivate validates deploy/capi-private's variants on the hub (dry run, strict), checks their Pods are
// hardened and, in the overlays, that every webhook configuration gets its CA bundle from the injector; then
// dry-runs the legacy operator's patch on the hub's HyperShift operator Deployment and the private operator's overlay.
func checkCAPIPrivate(ctx context.Context, kubectl, kubeconfig string) error {
	for _, v := range capiVariants {
		rendered, out, err := dryRun(ctx, kubectl, kubeconfig, v.dir)
		if err != nil {
			return err
		}
		objs, err := decode(rendered)
		if err != nil {
			return fmt.Errorf("%s: %w", v.dir, err)
		}
		if err := errors.Join(hardened(objs), caInjected(objs, v.injector)); err != nil {
			return fmt.Errorf("%s: %w", v.dir, err)
		}
		fmt.Printf("%s: %d objects valid (server-side dry run, strict); pods hardened; CA bundles %s\n", v.dir,
			bytes.Count(out, []byte("\n")), orNone(v.injector))
	}
	out, err := exec.CommandContext(ctx, kubectl, "--kubeconfig", kubeconfig, "-n", "hypershift", "patch", "deployment", "operator",
		"--patch-file", legacyPatch, "--dry-run=server", "-o", "yaml").CombinedOutput()
	if err != nil {
		return fmt.Errorf("%s does not apply to hypershift/operator:\n%s", legacyPatch, out)
	}
	if !bytes.Contains(out, []byte("HOSTEDCLUSTERS_SCOPE_ANNOTATION")) || !bytes.Contains(out, []byte("ENABLE_HOSTEDCLUSTERS_ANNOTATION_SCOPING")) {
		return fmt.Errorf("%s: the patched operator has no scoping environment:\n%s", legacyPatch, out)
	}
	fmt.Printf("%s: applies to hypershift/operator (server-side dry run)\n", legacyPatch)
	_, out, err = dryRun(ctx, kubectl, kubeconfig, privateOperator)
	if err != nil {
		return err
	}
	fmt.Printf("%s: %d objects valid (server-side dry run, strict)\n", privateOperator, bytes.Count(out, []byte("\n")))
	return nil
}

func orNone(injector string) string {
	if injector == "" {
		return "not injected (base)"
	}
	return "injected by " + injector
}

type object = map[string]any

func decode(rendered []byte) ([]object, error) {
	var out []object
	for _, doc := range bytes.Split(rendered, []byte("\n---\n")) {
		var o object
		if err := yaml.Unmarshal(doc, &o); err != nil {
			return nil, err
		}
		if o != nil {
			out = append(out, o)
		}
	}
	return out, nil
}

// field walks o along path (maps only).
func field(o any, path ...string) any {
	for _, p := range path {
		m, ok := o.(map[string]any)
		if !ok {
			return nil
		}
		o = m[p]
	}
	return o
}

// hardened checks every Deployment's Pod: runAsNonRoot and the RuntimeDefault seccomp profile; every container
// without privilege escalation, with a read-only root filesystem and every capability dropped.
func hardened(objs []object) error {
	var errs []error
	n := 0
	for _, o := range objs {
		if o["kind"] != "Deployment" {
			continue
		}
		n++
		name := field(o, "metadata", "name")
		pod := field(o, "spec", "template", "spec")
		if field(pod, "securityContext", "runAsNonRoot") != true || field(pod, "securityContext", "seccompProfile", "type") != "RuntimeDefault" {
			errs = append(errs, fmt.Errorf("deployment %v: pod not runAsNonRoot with seccomp RuntimeDefault", name))
		}
		containers, _ := field(pod, "containers").([]any)
		for _, c := range containers {
			sc := field(c, "securityContext")
			drop, _ := field(sc, "capabilities", "drop").([]any)
			if field(sc, "allowPrivilegeEscalation") != false || field(sc, "readOnlyRootFilesystem") != true || len(drop) != 1 || drop[0] != "ALL" {
				errs = append(errs, fmt.Errorf("deployment %v container %v: not hardened (%v)", name, field(c, "name"), sc))
			}
		}
	}
	if n == 0 {
		errs = append(errs, errors.New("no Deployment rendered"))
	}
	return errors.Join(errs...)
}

// caInjected checks that every CRD converted by a webhook and every MutatingWebhookConfiguration carries the
// injector's annotation (none at all in the base).
func caInjected(objs []object, injector string) error {
	var errs []error
	webhooks := 0
	for _, o := range objs {
		kind := o["kind"]
		isWebhook := kind == "MutatingWebhookConfiguration" ||
			kind == "CustomResourceDefinition" && field(o, "spec", "conversion", "strategy") == "Webhook"
		annotations, _ := field(o, "metadata", "annotations").(map[string]any)
		for k := range annotations {
			if strings.Contains(k, "inject-ca") && (!isWebhook || injector == "" || k != injector) {
				errs = append(errs, fmt.Errorf("%v %v: unexpected annotation %s", kind, field(o, "metadata", "name"), k))
			}
		}
		if !isWebhook {
			continue
		}
		webhooks++
		if injector != "" && annotations[injector] == nil {
			errs = append(errs, fmt.Errorf("%v %v: no %s", kind, field(o, "metadata", "name"), injector))
		}
	}
	if webhooks == 0 {
		errs = append(errs, errors.New("no webhook configuration rendered"))
	}
	return errors.Join(errs...)
}
