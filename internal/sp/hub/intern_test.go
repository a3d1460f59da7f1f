package hub

import (
	"bytes"
	"os"
	"reflect"
	"testing"
	"unsafe"

	hyperv1 "github.com/openshift/hypershift/api/hypershift/v1beta1"
	"sigs.k8s.io/yaml"
)

// recordedHostedCluster decodes the HostedCluster of a recorded stage (the status package's fixtures).
func recordedHostedCluster(t *testing.T, path string) *hyperv1.HostedCluster {
	t.Helper()
	data, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	var hc hyperv1.HostedCluster
	if err := yaml.UnmarshalStrict(bytes.Split(data, []byte("\n---\n"))[0], &hc); err != nil {
		t.Fatal(err)
	}
	return &hc
}

// Two clusters decoded separately hold their shared strings once after the informers' transform (one copy in
// memory, not one per object), and the transform changes no value it keeps.
func TestTransformInternsSharedStrings(t *testing.T) {
	const stage = "../status/testdata/recorded/4-completed.yaml"
	decodedA, decodedB := recordedHostedCluster(t, stage), recordedHostedCluster(t, stage)
	want := decodedA.DeepCopy()
	var kept [2]*hyperv1.HostedCluster
	for i, hc := range []*hyperv1.HostedCluster{decodedA, decodedB} {
		out, err := trimTransform(newLabelSets())(hc)
		if err != nil {
			t.Fatal(err)
		}
		kept[i] = out.(*hyperv1.HostedCluster)
	}
	a, b := kept[0], kept[1]
	if len(a.Status.Conditions) == 0 || len(a.Labels) == 0 {
		t.Fatal("the recorded HostedCluster has no conditions or labels to share")
	}
	same := func(what, x, y string) {
		t.Helper()
		if x != y || (x != "" && unsafe.StringData(x) != unsafe.StringData(y)) {
			t.Errorf("%s: %q and %q are two copies", what, x, y)
		}
	}
	for i, c := range a.Status.Conditions {
		d := b.Status.Conditions[i]
		same("condition type", c.Type, d.Type)
		same("condition reason", c.Reason, d.Reason)
		if len(c.Message) <= maxInterned {
			same("condition message", c.Message, d.Message)
		}
	}
	for k, v := range a.Labels {
		same("label "+k, v, b.Labels[k])
	}
	same("namespace", a.Namespace, b.Namespace)
	if !reflect.DeepEqual(a.Status.Conditions, want.Status.Conditions) || !reflect.DeepEqual(a.Labels, want.Labels) {
		t.Fatal("interning changed a value")
	}
}
