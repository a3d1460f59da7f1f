package hubtest

import (
	"strings"
	"testing"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"

	"github.com/dcm-sp/acm-cluster-sp/internal/capiprivate/proxy"
)

// JSON patch `test` operations on reference groups match what is stored (they are translated too); SSA in
// JSON and YAML with a conflict; managedFields standard through the proxy and private when read directly.
func TestS3PatchesAndApply(t *testing.T) {
	ctx := t.Context()
	ps := startProxy(t, proxy.Options{})
	pc := ps.dynamic(t, env.AdminToken)
	ns := env.NewNamespace(t, "s3")
	v2 := pc.Resource(gvr(stdCore, "v1beta2", "machines")).Namespace(ns)
	v1 := pc.Resource(gvr(stdCore, "v1beta1", "machines")).Namespace(ns)
	if _, err := v2.Create(ctx, kinds[2].object("v1beta2", ns, "m"), metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	ok := `[{"op":"test","path":"/spec/infrastructureRef/apiGroup","value":"infrastructure.cluster.x-k8s.io"},{"op":"replace","path":"/spec/infrastructureRef/name","value":"m2"}]`
	if _, err := v2.Patch(ctx, "m", types.JSONPatchType, []byte(ok), metav1.PatchOptions{}); err != nil {
		t.Fatalf("v1beta2 test on apiGroup: %v", err)
	}
	okV1 := `[{"op":"test","path":"/spec/infrastructureRef/apiVersion","value":"infrastructure.cluster.x-k8s.io/v1alpha1"},{"op":"replace","path":"/spec/infrastructureRef/name","value":"m3"}]`
	if _, err := v1.Patch(ctx, "m", types.JSONPatchType, []byte(okV1), metav1.PatchOptions{}); err != nil {
		t.Fatalf("v1beta1 test on apiVersion: %v", err)
	}
	// The escaped spelling names the platform's group: it does not match the stored private reference.
	bad := `[{"op":"test","path":"/spec/infrastructureRef/apiGroup","value":"infrastructure.cluster.x-k8s.io.platform.invalid"}]`
	if _, err := v2.Patch(ctx, "m", types.JSONPatchType, []byte(bad), metav1.PatchOptions{}); !apierrors.IsInvalid(err) {
		t.Errorf("a test against the platform's group: %v, want 422 (kube-apiserver's failed test)", err)
	}

	// SSA, JSON body (client-go's Apply) and YAML body.
	applied := kinds[2].object("v1beta2", ns, "ssa")
	if _, err := v2.Apply(ctx, "ssa", applied, metav1.ApplyOptions{FieldManager: "capi"}); err != nil {
		t.Fatalf("apply (JSON): %v", err)
	}
	yamlBody := "apiVersion: cluster.x-k8s.io/v1beta2\nkind: Machine\nmetadata:\n  name: ssa\n  namespace: " + ns + "\nspec:\n  clusterName: c1\n  bootstrap:\n    dataSecretName: other\n  infrastructureRef:\n    apiGroup: infrastructure.cluster.x-k8s.io\n    kind: KubevirtMachine\n    name: m\n"
	_, err := v2.Patch(ctx, "ssa", types.ApplyYAMLPatchType, []byte(yamlBody), metav1.PatchOptions{FieldManager: "intruder"})
	if !apierrors.IsConflict(err) || !strings.Contains(err.Error(), `conflict with "capi"`) {
		t.Fatalf("conflicting YAML apply: %v", err)
	}
	force := true
	got, err := v2.Patch(ctx, "ssa", types.ApplyYAMLPatchType, []byte(yamlBody), metav1.PatchOptions{FieldManager: "intruder", Force: &force})
	if err != nil {
		t.Fatal(err)
	}
	if nested(t, got, "spec", "bootstrap", "dataSecretName") != "other" {
		t.Errorf("forced apply did not take")
	}
	for _, mf := range got.GetManagedFields() {
		if mf.APIVersion != stdCore+"/v1beta2" {
			t.Errorf("managedFields through the proxy: %s", mf.APIVersion)
		}
	}
	stored, err := direct(t).Resource(gvr(privCore, "v1beta2", "machines")).Namespace(ns).Get(ctx, "ssa", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	managers := map[string]bool{}
	for _, mf := range stored.GetManagedFields() {
		managers[mf.Manager] = true
		if mf.APIVersion != privCore+"/v1beta2" {
			t.Errorf("stored managedFields: %s", mf.APIVersion)
		}
	}
	if !managers["capi"] || !managers["intruder"] {
		t.Errorf("managers %v", managers)
	}
	if nested(t, stored, "spec", "infrastructureRef", "apiGroup") != privInfra {
		t.Errorf("applied ref stored as %s", nested(t, stored, "spec", "infrastructureRef", "apiGroup"))
	}
}
