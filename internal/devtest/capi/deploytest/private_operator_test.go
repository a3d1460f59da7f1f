package deploytest

import (
	"bytes"
	"os"
	"path/filepath"
	"reflect"
	"slices"
	"testing"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"

	"github.com/dcm-sp/acm-cluster-sp/internal/devtest/manifesttest"
)

// objectKey is what names an object on a cluster: two objects with the same key are one object.
func objectKey(o *unstructured.Unstructured) string {
	return o.GroupVersionKind().GroupKind().String() + " " + o.GetNamespace() + "/" + o.GetName()
}

// operatorContainer is the operator container of the rendered operator Deployment.
func operatorContainer(t *testing.T, objs []*unstructured.Unstructured) (args []string, env map[string]string) {
	t.Helper()
	d := manifesttest.Find(objs, "Deployment", "operator")
	if d == nil {
		t.Fatal("no Deployment operator")
	}
	containers, _, _ := unstructured.NestedSlice(d.Object, "spec", "template", "spec", "containers")
	for _, c := range containers {
		c := c.(map[string]any)
		if c["name"] != "operator" {
			continue
		}
		for _, a := range c["args"].([]any) {
			args = append(args, a.(string))
		}
		env = map[string]string{}
		for _, e := range c["env"].([]any) {
			e := e.(map[string]any)
			v, _ := e["value"].(string)
			env[e["name"].(string)] = v
		}
		return args, env
	}
	t.Fatal("no operator container")
	return nil, nil
}

// The private operator's overlay installs a second HyperShift operator that shares no object with the recorded
// HyperShift install (so applying it writes nothing the legacy operator runs on), ships no CRD, lives in its own
// namespace labelled for the proxy sidecar, is bound to its own ClusterRole, and runs scoped to HostedClusters
// without a scope, without the controllers that act on every HostedCluster or every CAPI object.
func TestPrivateOperatorOverlay(t *testing.T) {
	legacy := manifesttest.Render(t, HyperShiftInstallDir)
	private := manifesttest.Render(t, PrivateOperatorDir)
	taken := map[string]bool{}
	for _, o := range legacy {
		taken[objectKey(o)] = true
	}
	for _, o := range private {
		if taken[objectKey(o)] {
			t.Errorf("the overlay writes %s, which the legacy install owns", objectKey(o))
		}
		if o.GetKind() == "CustomResourceDefinition" || o.GetKind() == "PriorityClass" {
			t.Errorf("the overlay ships %s", objectKey(o))
		}
		if o.GetNamespace() != "" && o.GetNamespace() != PrivateOperatorNamespace {
			t.Errorf("%s is outside %s", objectKey(o), PrivateOperatorNamespace)
		}
	}
	ns := manifesttest.Find(private, "Namespace", PrivateOperatorNamespace)
	if ns == nil || ns.GetLabels()["hypershift.openshift.io/private-capi-proxy"] != "true" {
		t.Errorf("namespace %s missing or not marked for the proxy: %v", PrivateOperatorNamespace, ns)
	}
	crb := manifesttest.Find(private, "ClusterRoleBinding", "hypershift-operator-private")
	if crb == nil {
		t.Fatal("no ClusterRoleBinding hypershift-operator-private")
	}
	subjects, _, _ := unstructured.NestedSlice(crb.Object, "subjects")
	if role, _, _ := unstructured.NestedString(crb.Object, "roleRef", "name"); role != "hypershift-operator-private" || len(subjects) != 1 ||
		subjects[0].(map[string]any)["namespace"] != PrivateOperatorNamespace || subjects[0].(map[string]any)["name"] != "operator" {
		t.Errorf("ClusterRoleBinding hypershift-operator-private: roleRef %q, subjects %v", role, subjects)
	}
	// The overlay's ClusterRole grants what HyperShift's does.
	lr, pr := manifesttest.Find(legacy, "ClusterRole", "hypershift-operator"), manifesttest.Find(private, "ClusterRole", "hypershift-operator-private")
	if lr == nil || pr == nil || !equalRules(lr, pr) {
		t.Error("the private operator's ClusterRole is not HyperShift's")
	}

	args, env := operatorContainer(t, private)
	for _, want := range []string{"--namespace=$(MY_NAMESPACE)", "--private-platform=None", "--enable-dedicated-request-serving-isolation=false"} {
		if !slices.Contains(args, want) {
			t.Errorf("operator args %v lack %s", args, want)
		}
	}
	if env["ENABLE_HOSTEDCLUSTERS_ANNOTATION_SCOPING"] != "true" {
		t.Errorf("operator env %v: no annotation scoping", env)
	}
	for _, absent := range []string{"HOSTEDCLUSTERS_SCOPE_ANNOTATION", "CAPI_STORAGE_VERSION", "ENABLE_SIZE_TAGGING"} {
		if _, ok := env[absent]; ok {
			t.Errorf("operator env sets %s", absent)
		}
	}
	// Everything else is HyperShift's as rendered: the recorded install sets what the overlay removes.
	largs, lenv := operatorContainer(t, legacy)
	if !slices.Contains(largs, "--enable-dedicated-request-serving-isolation=true") || lenv["CAPI_STORAGE_VERSION"] != "v1beta2" {
		t.Errorf("the recorded install changed (args %v, env %v): review the overlay's patches", largs, lenv)
	}
	if n := len(private); n < 10 {
		t.Errorf("%d objects rendered", n)
	}
	t.Logf("overlay: %d objects; recorded install: %d", len(private), len(legacy))
}

func equalRules(a, b *unstructured.Unstructured) bool {
	ra, _, _ := unstructured.NestedSlice(a.Object, "rules")
	rb, _, _ := unstructured.NestedSlice(b.Object, "rules")
	return len(ra) > 0 && reflect.DeepEqual(ra, rb)
}

// The injection tests' recording of HyperShift's operator (injecttest) is the install the overlay is built from,
// file for file.
func TestInjectionTestsRecordTheSameOperator(t *testing.T) {
	for _, f := range []string{"deployment.yaml", "serviceaccount.yaml", "clusterrole.yaml", "clusterrolebinding.yaml"} {
		a, err := os.ReadFile(filepath.Join(manifesttest.Root(), HyperShiftInstallDir, f))
		if err != nil {
			t.Fatal(err)
		}
		b, err := os.ReadFile(filepath.Join(manifesttest.Root(), "internal/devtest/capi/injecttest/testdata/hypershift/operator", f))
		if err != nil {
			t.Fatal(err)
		}
		if !bytes.Equal(a, b) {
			t.Errorf("%s differs between %s and injecttest's recording", f, HyperShiftInstallDir)
		}
	}
}
