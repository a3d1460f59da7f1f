package simulator

import (
	"bytes"
	"os"
	"reflect"
	"strings"
	"testing"

	hyperv1 "github.com/openshift/hypershift/api/hypershift/v1beta1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"sigs.k8s.io/yaml"
)

// operatorFixtures reads testdata/hypershift-operator-objects.yaml for one HostedCluster, by kind/name.
func operatorFixtures(t *testing.T, hc *hyperv1.HostedCluster) map[string]*unstructured.Unstructured {
	t.Helper()
	raw, err := os.ReadFile("testdata/hypershift-operator-objects.yaml")
	if err != nil {
		t.Fatal(err)
	}
	labels, _ := yaml.Marshal(hc.Labels)
	text := strings.NewReplacer("LABELS", "{"+strings.ReplaceAll(strings.TrimSpace(string(labels)), "\n", ", ")+"}",
		"NAMESPACE", hc.Namespace, "NAME", hc.Name, "UID", string(hc.UID)).Replace(string(raw))
	out := map[string]*unstructured.Unstructured{}
	for _, doc := range bytes.Split([]byte(text), []byte("\n---\n")) {
		u := &unstructured.Unstructured{}
		if err := yaml.Unmarshal(doc, &u.Object); err != nil {
			t.Fatal(err)
		}
		out[u.GetKind()+"/"+u.GetName()] = u
	}
	return out
}

// The objects the simulator writes in the operator's place have the metadata HyperShift gives them (names,
// namespace, labels, annotations, ownerReferences, type).
func TestOperatorObjectsMatchHyperShift(t *testing.T) {
	hc := &hyperv1.HostedCluster{ObjectMeta: metav1.ObjectMeta{Name: "demo", Namespace: "clusters", UID: "4f1c",
		Labels: map[string]string{"dcm-instance-id": "inst-1", "managed-by": "dcm"}}}
	want := operatorFixtures(t, hc)
	for _, sec := range OperatorSecrets(hc, []byte("kubeconfig"), "pw", true) {
		obj, err := runtime.DefaultUnstructuredConverter.ToUnstructured(sec)
		if err != nil {
			t.Fatal(err)
		}
		got := &unstructured.Unstructured{Object: obj}
		w := want["Secret/"+sec.Name]
		if w == nil {
			t.Fatalf("the operator writes no Secret %s", sec.Name)
		}
		for _, field := range [][]string{{"metadata", "namespace"}, {"metadata", "labels"}, {"metadata", "annotations"}, {"metadata", "ownerReferences"}, {"type"}} {
			g, _, _ := unstructured.NestedFieldNoCopy(got.Object, field...)
			x, _, _ := unstructured.NestedFieldNoCopy(w.Object, field...)
			if !reflect.DeepEqual(g, x) {
				t.Errorf("Secret %s %s: simulator %v, HyperShift %v", sec.Name, strings.Join(field, "."), g, x)
			}
		}
		for key := range w.Object["data"].(map[string]any) {
			if _, ok := sec.Data[key]; !ok {
				t.Errorf("Secret %s: no key %q", sec.Name, key)
			}
		}
		delete(want, "Secret/"+sec.Name)
	}
	for k := range want {
		if strings.HasPrefix(k, "Secret/") {
			t.Errorf("the simulator does not write %s", k)
		}
	}
	ns := controlPlaneNamespace(hc)
	w := want["Namespace/"+ns.Name]
	if w == nil {
		t.Fatalf("the operator's control plane namespace is not %s", ns.Name)
	}
	if !reflect.DeepEqual(w.GetLabels(), ns.Labels) || len(w.GetAnnotations()) != len(ns.Annotations) {
		t.Errorf("namespace %s: simulator labels %v annotations %v, HyperShift %v %v", ns.Name, ns.Labels, ns.Annotations, w.GetLabels(), w.GetAnnotations())
	}
}
