package translate

import (
	"bytes"
	"encoding/json"
	"reflect"
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/serializer/protobuf"
	"k8s.io/client-go/kubernetes/scheme"
)

func TestRequestJSONPatch(t *testing.T) {
	cases := []struct {
		name     string
		ctx      Context
		in, want string
	}{
		{"scalar values at rule-named pointers, test ops too", Context{},
			`[{"op":"test","path":"/spec/infrastructureRef/apiGroup","value":"infrastructure.cluster.x-k8s.io"},{"op":"replace","path":"/spec/infrastructureRef/apiGroup","value":"infrastructure.cluster.x-k8s.io.platform.invalid"},{"op":"test","path":"/spec/bootstrap/configRef/apiVersion","value":"cluster.x-k8s.io/v1beta1"},{"op":"add","path":"/rules/0/apiGroups/-","value":"ipam.cluster.x-k8s.io"},{"op":"add","path":"/rules/0/apiGroups/1","value":"ipam.cluster.x-k8s.io"}]`,
			`[{"op":"test","path":"/spec/infrastructureRef/apiGroup","value":"infrastructure.cluster.hypershift.openshift.io"},{"op":"replace","path":"/spec/infrastructureRef/apiGroup","value":"infrastructure.cluster.x-k8s.io"},{"op":"test","path":"/spec/bootstrap/configRef/apiVersion","value":"cluster.hypershift.openshift.io/v1beta1"},{"op":"add","path":"/rules/0/apiGroups/-","value":"ipam.cluster.hypershift.openshift.io"},{"op":"add","path":"/rules/0/apiGroups/1","value":"ipam.cluster.hypershift.openshift.io"}]`},
		{"object values go through the rule", Context{},
			`[{"value":{"apiVersion":"cluster.x-k8s.io/v1beta2","kind":"MachineSet","name":"ms","uid":"u"},"op":"add","path":"/metadata/ownerReferences/-"},{"op":"replace","path":"/spec/infrastructureRef","value":{"apiGroup":"infrastructure.cluster.x-k8s.io","kind":"KubevirtMachine"}},{"op":"add","path":"","value":{"apiVersion":"cluster.x-k8s.io/v1beta2","data":{"apiVersion":"cluster.x-k8s.io/v1beta2"}}}]`,
			`[{"value":{"apiVersion":"cluster.hypershift.openshift.io/v1beta2","kind":"MachineSet","name":"ms","uid":"u"},"op":"add","path":"/metadata/ownerReferences/-"},{"op":"replace","path":"/spec/infrastructureRef","value":{"apiGroup":"infrastructure.cluster.hypershift.openshift.io","kind":"KubevirtMachine"}},{"op":"add","path":"","value":{"apiVersion":"cluster.hypershift.openshift.io/v1beta2","data":{"apiVersion":"cluster.x-k8s.io/v1beta2"}}}]`},
		{"opaque per path; pointers never rewritten", Context{},
			`[{"op":"add","path":"/metadata/labels/apiVersion","value":"cluster.x-k8s.io/v1beta2"},{"op":"add","path":"/metadata/annotations","value":{"apiVersion":"cluster.x-k8s.io/v1beta2"}},{"op":"add","path":"/metadata/labels/cluster.x-k8s.io~1cluster-name","value":"hc1"},{"op":"remove","path":"/metadata/finalizers/0"},{"op":"move","from":"/spec/cluster.x-k8s.io","path":"/spec/apiVersion"},{"op":"add","path":"/spec/selector/matchLabels/apiGroup","value":"cluster.x-k8s.io"},{"op":"add","path":"/data/apiVersion","value":"cluster.x-k8s.io/v1beta2"}]`,
			`[{"op":"add","path":"/metadata/labels/apiVersion","value":"cluster.x-k8s.io/v1beta2"},{"op":"add","path":"/metadata/annotations","value":{"apiVersion":"cluster.x-k8s.io/v1beta2"}},{"op":"add","path":"/metadata/labels/cluster.x-k8s.io~1cluster-name","value":"hc1"},{"op":"remove","path":"/metadata/finalizers/0"},{"op":"move","from":"/spec/cluster.x-k8s.io","path":"/spec/apiVersion"},{"op":"add","path":"/spec/selector/matchLabels/apiGroup","value":"cluster.x-k8s.io"},{"op":"add","path":"/data/apiVersion","value":"cluster.x-k8s.io/v1beta2"}]`},
		{"CRD patches", Context{CRD: true},
			`[{"op":"test","path":"/spec/group","value":"cluster.x-k8s.io"},{"op":"test","path":"/metadata/name","value":"machines.cluster.x-k8s.io"},{"op":"replace","path":"/status/storedVersions","value":["v1beta2"]}]`,
			`[{"op":"test","path":"/spec/group","value":"cluster.hypershift.openshift.io"},{"op":"test","path":"/metadata/name","value":"machines.cluster.hypershift.openshift.io"},{"op":"replace","path":"/status/storedVersions","value":["v1beta2"]}]`},
		{"empty patch", Context{}, `[]`, `[]`},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			res, err := tr.RequestJSONPatch([]byte(c.in), c.ctx)
			if err != nil {
				t.Fatal(err)
			}
			if string(res.Body) != c.want {
				t.Errorf("\n got %s\nwant %s", res.Body, c.want)
			}
		})
	}
	for _, bad := range []string{`{"op":"add","path":"/apiVersion","value":"cluster.x-k8s.io/v1"}`, `["cluster.x-k8s.io"]`} {
		if _, err := tr.RequestJSONPatch([]byte(bad), Context{}); ReasonOf(err) != ReasonInvalidJSONPatch {
			t.Errorf("%s: err = %v", bad, err)
		}
	}
	if _, err := tr.RequestJSONPatch([]byte(`[{"op":"add","path":"/apiVersion","value":"cluster.x-k8s.io/v1"}`), Context{}); ReasonOf(err) != ReasonInvalidJSON {
		t.Errorf("truncated patch: %v", err)
	}
}

func TestRequestApply(t *testing.T) {
	yamlBody := "apiVersion: cluster.x-k8s.io/v1beta2\nkind: Machine\nmetadata:\n  name: m\n  labels:\n    cluster.x-k8s.io/cluster-name: hc1\n    apiVersion: cluster.x-k8s.io/v1beta2\n  ownerReferences:\n  - apiVersion: cluster.x-k8s.io/v1beta2\n    kind: MachineSet\n    name: ms\n    uid: u\nspec:\n  clusterName: hc1\n  replicas: 3\n  infrastructureRef:\n    apiGroup: \"infrastructure.cluster.x-k8s.io\"\n    kind: KubevirtMachine\n    name: m\n"
	want := `{"apiVersion":"cluster.hypershift.openshift.io/v1beta2","kind":"Machine","metadata":{"labels":{"apiVersion":"cluster.x-k8s.io/v1beta2","cluster.x-k8s.io/cluster-name":"hc1"},"name":"m","ownerReferences":[{"apiVersion":"cluster.hypershift.openshift.io/v1beta2","kind":"MachineSet","name":"ms","uid":"u"}]},"spec":{"clusterName":"hc1","infrastructureRef":{"apiGroup":"infrastructure.cluster.hypershift.openshift.io","kind":"KubevirtMachine","name":"m"},"replicas":3}}`
	res, err := tr.RequestApply([]byte(yamlBody), Context{})
	if err != nil {
		t.Fatal(err)
	}
	if string(res.Body) != want || !res.Changed {
		t.Errorf("YAML apply:\n got %s\nwant %s", res.Body, want)
	}
	// JSON apply bodies keep their bytes apart from the renamed values.
	js := `{"apiVersion":"cluster.x-k8s.io/v1beta2", "kind":"Machine","metadata":{"name":"m"}}`
	res, err = tr.RequestApply([]byte(js), Context{})
	if err != nil {
		t.Fatal(err)
	}
	if want := `{"apiVersion":"cluster.hypershift.openshift.io/v1beta2", "kind":"Machine","metadata":{"name":"m"}}`; string(res.Body) != want {
		t.Errorf("JSON apply: got %s", res.Body)
	}
	// YAML escapes can spell a group: they take the slow path.
	res, err = tr.RequestApply([]byte("apiVersion: \"cluster.x-k8s\\x2eio/v1beta2\"\nkind: Machine\n"), Context{})
	if err != nil {
		t.Fatal(err)
	}
	if want := `{"apiVersion":"cluster.hypershift.openshift.io/v1beta2","kind":"Machine"}`; string(res.Body) != want {
		t.Errorf("escaped YAML: got %s", res.Body)
	}
	// Nothing renamed: the client's YAML stays.
	plain := []byte("apiVersion: v1\nkind: ConfigMap\nmetadata:\n  labels:\n    cluster.x-k8s.io/cluster-name: hc1\n")
	res, err = tr.RequestApply(plain, Context{})
	if err != nil || !bytes.Equal(res.Body, plain) || res.Changed {
		t.Errorf("unchanged YAML: %v %s", err, res.Body)
	}
	if _, err := tr.RequestApply([]byte("apiVersion: cluster.x-k8s.io/v1\n\tkind: [x\n"), Context{}); ReasonOf(err) != ReasonInvalidYAML {
		t.Errorf("bad YAML: %v", err)
	}
}

func protobufBody(t *testing.T, obj runtime.Object) []byte {
	t.Helper()
	var buf bytes.Buffer
	if err := protobuf.NewSerializer(scheme.Scheme, scheme.Scheme).Encode(obj, &buf); err != nil {
		t.Fatal(err)
	}
	return buf.Bytes()
}

func TestRequestProtobuf(t *testing.T) {
	secret := &corev1.Secret{
		TypeMeta: metav1.TypeMeta{APIVersion: "v1", Kind: "Secret"},
		ObjectMeta: metav1.ObjectMeta{Name: "kubevirt-user-data", Namespace: "ns",
			Labels: map[string]string{"cluster.x-k8s.io/cluster-name": "hc1"},
			OwnerReferences: []metav1.OwnerReference{{APIVersion: "infrastructure.cluster.x-k8s.io/v1alpha1",
				Kind: "KubevirtMachine", Name: "m", UID: "u"}}},
		Data: map[string][]byte{"userdata": []byte("apiVersion: cluster.x-k8s.io/v1beta2")},
	}
	res, err := tr.RequestBody("application/vnd.kubernetes.protobuf", protobufBody(t, secret), Context{})
	if err != nil {
		t.Fatal(err)
	}
	if res.ContentType != ContentTypeJSON || !res.Changed {
		t.Fatalf("content type %q, changed %v", res.ContentType, res.Changed)
	}
	var got corev1.Secret
	if err := json.Unmarshal(res.Body, &got); err != nil {
		t.Fatal(err)
	}
	want := secret.DeepCopy()
	want.OwnerReferences[0].APIVersion = "infrastructure.cluster.hypershift.openshift.io/v1alpha1"
	if !reflect.DeepEqual(&got, want) {
		t.Errorf("got %s", res.Body)
	}

	// No group: the protobuf bytes are forwarded as they are.
	plain := secret.DeepCopy()
	plain.OwnerReferences, plain.Labels, plain.Data = nil, nil, nil
	pb := protobufBody(t, plain)
	res, err = tr.RequestBody("application/vnd.kubernetes.protobuf", pb, Context{})
	if err != nil || !bytes.Equal(res.Body, pb) || res.ContentType != "application/vnd.kubernetes.protobuf" || res.Changed {
		t.Errorf("plain protobuf: %v %+v", err, res)
	}

	// An unknown type carrying a group: 415.
	unknown := &runtime.Unknown{TypeMeta: runtime.TypeMeta{APIVersion: "cluster.x-k8s.io/v1beta2", Kind: "Machine"}, Raw: []byte{}}
	_, err = tr.RequestBody("application/vnd.kubernetes.protobuf", protobufBody(t, unknown), Context{})
	var e *Error
	if ReasonOf(err) != ReasonUnsupportedMediaType || !asError(err, &e) || e.RequestStatus() != 415 {
		t.Errorf("unknown protobuf type: %v", err)
	}
	if _, err := tr.RequestProtobuf([]byte("k8s\x00\x0a\x02cluster.x-k8s.io garbage"), Context{}); ReasonOf(err) != ReasonInvalidProtobuf {
		t.Errorf("garbage protobuf: %v", err)
	}
}

func asError(err error, e **Error) bool {
	var ok bool
	*e, ok = err.(*Error)
	return ok
}

func TestRequestBodyDispatch(t *testing.T) {
	obj := []byte(`{"apiVersion":"cluster.x-k8s.io/v1beta2"}`)
	stored := `{"apiVersion":"cluster.hypershift.openshift.io/v1beta2"}`
	for _, ct := range []string{"application/json", "application/json; charset=utf-8", "application/merge-patch+json",
		"application/strategic-merge-patch+json", "application/apply-patch+yaml", ""} {
		res, err := tr.RequestBody(ct, obj, Context{})
		if err != nil || string(res.Body) != stored || res.ContentType != ct {
			t.Errorf("%q: %v %s %q", ct, err, res.Body, res.ContentType)
		}
	}
	res, err := tr.RequestBody("application/yaml", []byte("apiVersion: cluster.x-k8s.io/v1beta2\n"), Context{})
	if err != nil || string(res.Body) != stored || res.ContentType != ContentTypeJSON {
		t.Errorf("yaml: %v %s %q", err, res.Body, res.ContentType)
	}
	res, err = tr.RequestBody("application/json-patch+json", []byte(`[{"op":"add","path":"/apiVersion","value":"cluster.x-k8s.io/v1beta2"}]`), Context{})
	if err != nil || string(res.Body) != `[{"op":"add","path":"/apiVersion","value":"cluster.hypershift.openshift.io/v1beta2"}]` {
		t.Errorf("json patch: %v %s", err, res.Body)
	}
	for _, ct := range []string{"application/cbor", "application/apply-patch+cbor"} {
		_, err := tr.RequestBody(ct, []byte{0xa1}, Context{})
		var e *Error
		if !asError(err, &e) || e.Reason != ReasonUnsupportedMediaType || e.RequestStatus() != 415 {
			t.Errorf("%s: %v", ct, err)
		}
	}
	if _, err := tr.RequestBody("text/plain", obj, Context{}); ReasonOf(err) != ReasonUnsupportedMediaType {
		t.Errorf("text/plain with a group: %v", err)
	}
	if res, err := tr.RequestBody("text/plain", []byte("hello"), Context{}); err != nil || string(res.Body) != "hello" {
		t.Errorf("text/plain: %v", err)
	}
	if res, err := tr.RequestBody("application/json", nil, Context{}); err != nil || res.Body != nil {
		t.Errorf("empty body: %v", err)
	}
	var e *Error
	if _, err := tr.RequestBody("application/json", []byte(`{"apiVersion":"cluster.x-k8s.io/v1`), Context{}); !asError(err, &e) || e.RequestStatus() != 400 {
		t.Errorf("bad JSON body: %v", err)
	}
	if (&Error{Reason: ReasonTooLarge}).RequestStatus() != 413 {
		t.Error("too large is 413")
	}
}
