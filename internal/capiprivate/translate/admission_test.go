package translate

import (
	"encoding/base64"
	"encoding/json"
	"strings"
	"testing"

	"github.com/dcm-sp/acm-cluster-sp/internal/capiprivate/groups"
)

// An AdmissionReview from kube-apiserver about a private MachineDeployment, as the proxy's webhook side receives it.
const privateReview = `{"kind":"AdmissionReview","apiVersion":"admission.k8s.io/v1","request":{"uid":"u1",` +
	`"kind":{"group":"cluster.hypershift.openshift.io","version":"v1beta2","kind":"MachineDeployment"},` +
	`"resource":{"group":"cluster.hypershift.openshift.io","version":"v1beta2","resource":"machinedeployments"},` +
	`"requestKind":{"group":"cluster.hypershift.openshift.io","version":"v1beta1","kind":"MachineDeployment"},` +
	`"requestResource":{"group":"cluster.hypershift.openshift.io","version":"v1beta1","resource":"machinedeployments"},` +
	`"name":"md","namespace":"ns","operation":"CREATE",` +
	`"userInfo":{"username":"cluster.hypershift.openshift.io","groups":["cluster.hypershift.openshift.io"],"extra":{"group":["cluster.hypershift.openshift.io"]}},` +
	`"object":{"apiVersion":"cluster.hypershift.openshift.io/v1beta2","kind":"MachineDeployment","metadata":{"name":"md","labels":{"cluster.x-k8s.io/cluster-name":"c"},` +
	`"ownerReferences":[{"apiVersion":"cluster.hypershift.openshift.io/v1beta2","kind":"Cluster","name":"c","uid":"x"}]},` +
	`"spec":{"template":{"spec":{"infrastructureRef":{"apiGroup":"infrastructure.cluster.hypershift.openshift.io","kind":"KubevirtMachineTemplate","name":"t"},` +
	`"bootstrap":{"configRef":{"apiGroup":"cluster.x-k8s.io","kind":"Platform","name":"p"}}}}}},` +
	`"oldObject":null,"dryRun":false,"options":{"kind":"CreateOptions","apiVersion":"meta.k8s.io/v1"}}}`

func TestAdmissionRequest(t *testing.T) {
	res, err := tr.AdmissionRequest([]byte(privateReview))
	if err != nil {
		t.Fatal(err)
	}
	want := strings.NewReplacer(
		`"group":"cluster.hypershift.openshift.io","version"`, `"group":"cluster.x-k8s.io","version"`,
		`"apiVersion":"cluster.hypershift.openshift.io/v1beta2"`, `"apiVersion":"cluster.x-k8s.io/v1beta2"`,
		`"apiGroup":"infrastructure.cluster.hypershift.openshift.io"`, `"apiGroup":"infrastructure.cluster.x-k8s.io"`,
		// a standard ref in a private object points at a platform object: escaped, as in every response
		`"apiGroup":"cluster.x-k8s.io"`, `"apiGroup":"cluster.x-k8s.io.platform.invalid"`,
	).Replace(privateReview)
	if string(res.Body) != want {
		t.Errorf("\n got %s\nwant %s", res.Body, want)
	}
	// userInfo is opaque: a user or group that happens to be named like a private group stays.
	if !strings.Contains(string(res.Body), `"userInfo":{"username":"cluster.hypershift.openshift.io","groups":["cluster.hypershift.openshift.io"],"extra":{"group":["cluster.hypershift.openshift.io"]}}`) {
		t.Errorf("userInfo changed: %s", res.Body)
	}
	// Fast path: a review of an unrelated object is returned as the same bytes.
	plain := `{"kind":"AdmissionReview","apiVersion":"admission.k8s.io/v1","request":{"uid":"u","kind":{"group":"","version":"v1","kind":"ConfigMap"}}}`
	if res, err := tr.AdmissionRequest([]byte(plain)); err != nil || res.Translated || string(res.Body) != plain {
		t.Errorf("fast path: %+v %v", res, err)
	}
	if _, err := tr.AdmissionRequest([]byte(`["cluster.hypershift.openshift.io"]`)); ReasonOf(err) != ReasonInvalidAdmissionReview {
		t.Errorf("array review: %v", err)
	}
	if _, err := tr.AdmissionRequest([]byte(`{"request":{"kind":{"group":"cluster.hypershift.openshift.io"}`)); ReasonOf(err) != ReasonInvalidJSON {
		t.Errorf("truncated review: %v", err)
	}
}

func reviewResponse(patch string, extra string) string {
	b64 := base64.StdEncoding.EncodeToString([]byte(patch))
	return `{"kind":"AdmissionReview","apiVersion":"admission.k8s.io/v1","response":{"uid":"u1","allowed":true,"patchType":"JSONPatch","patch":"` + b64 + `"` + extra + `}}`
}

func TestAdmissionResponse(t *testing.T) {
	// A defaulting webhook's patch, computed on the standard object: values carrying groups become private;
	// label keys, annotation values and pointers stay.
	patch := `[{"op":"add","path":"/metadata/labels/cluster.x-k8s.io~1cluster-name","value":"c"},` +
		`{"op":"add","path":"/spec/template/spec/infrastructureRef/apiGroup","value":"infrastructure.cluster.x-k8s.io"},` +
		`{"op":"replace","path":"/spec/template/spec/bootstrap/configRef","value":{"apiGroup":"cluster.x-k8s.io.platform.invalid","kind":"Platform","name":"p"}},` +
		`{"op":"add","path":"/metadata/annotations","value":{"cluster.x-k8s.io/cloned-from-groupkind":"KubevirtMachineTemplate.infrastructure.cluster.x-k8s.io"}},` +
		`{"op":"add","path":"/metadata/ownerReferences/-","value":{"apiVersion":"cluster.x-k8s.io/v1beta2","kind":"Cluster","name":"c","uid":"x"}}]`
	wantPatch := `[{"op":"add","path":"/metadata/labels/cluster.x-k8s.io~1cluster-name","value":"c"},` +
		`{"op":"add","path":"/spec/template/spec/infrastructureRef/apiGroup","value":"infrastructure.cluster.hypershift.openshift.io"},` +
		`{"op":"replace","path":"/spec/template/spec/bootstrap/configRef","value":{"apiGroup":"cluster.x-k8s.io","kind":"Platform","name":"p"}},` +
		`{"op":"add","path":"/metadata/annotations","value":{"cluster.x-k8s.io/cloned-from-groupkind":"KubevirtMachineTemplate.infrastructure.cluster.x-k8s.io"}},` +
		`{"op":"add","path":"/metadata/ownerReferences/-","value":{"apiVersion":"cluster.hypershift.openshift.io/v1beta2","kind":"Cluster","name":"c","uid":"x"}}]`
	res, err := tr.AdmissionResponse([]byte(reviewResponse(patch, "")))
	if err != nil {
		t.Fatal(err)
	}
	if want := reviewResponse(wantPatch, ""); string(res.Body) != want {
		t.Errorf("\n got %s\nwant %s", res.Body, want)
	}

	// A patch without groups keeps its bytes (no re-encoding).
	plain := reviewResponse(`[{"op":"add","path":"/spec/replicas","value":1}]`, "")
	if res, err := tr.AdmissionResponse([]byte(plain)); err != nil || res.Changed {
		t.Errorf("plain patch: changed %v, %v", res.Changed, err)
	}

	// A denial: details.group becomes private, the message stays as CAPI wrote it.
	denial := `{"kind":"AdmissionReview","apiVersion":"admission.k8s.io/v1","response":{"uid":"u1","allowed":false,"status":{"metadata":{},"status":"Failure",` +
		`"message":"Cluster.cluster.x-k8s.io \"c\" is invalid: spec.clusterNetwork.pods.cidrBlocks[0]: Invalid value","reason":"Invalid",` +
		`"details":{"name":"c","group":"cluster.x-k8s.io","kind":"Cluster","causes":[{"message":"cluster.x-k8s.io/cluster-name"}]},"code":422},"warnings":["cluster.x-k8s.io"]}}`
	res, err = tr.AdmissionResponse([]byte(denial))
	if err != nil {
		t.Fatal(err)
	}
	if want := strings.Replace(denial, `"group":"cluster.x-k8s.io"`, `"group":"cluster.hypershift.openshift.io"`, 1); string(res.Body) != want {
		t.Errorf("\n got %s\nwant %s", res.Body, want)
	}

	for _, bad := range []struct{ review, reason string }{
		{`{"response":{"patch":"not base64!"}}`, ReasonInvalidAdmissionReview},
		{reviewResponse(`{"op":"add"}`, ""), ReasonInvalidJSONPatch},
		{`"x"`, ReasonInvalidAdmissionReview},
	} {
		if _, err := tr.AdmissionResponse([]byte(bad.review)); ReasonOf(err) != bad.reason {
			t.Errorf("%s: %v, want %s", bad.review, err, bad.reason)
		}
	}
}

// The two directions are inverse: a review's object translated to standard and a patch computed there come back
// as what kube-apiserver stores.
func TestAdmissionRoundTrip(t *testing.T) {
	std, err := tr.AdmissionRequest([]byte(privateReview))
	if err != nil {
		t.Fatal(err)
	}
	var review struct {
		Request struct {
			Object json.RawMessage `json:"object"`
		} `json:"request"`
	}
	if err := json.Unmarshal(std.Body, &review); err != nil {
		t.Fatal(err)
	}
	// Replace the whole object with itself (what a defaulter that rebuilt it would send).
	patch, _ := json.Marshal([]map[string]any{{"op": "replace", "path": "", "value": review.Request.Object}})
	back, err := tr.AdmissionResponse([]byte(reviewResponse(string(patch), "")))
	if err != nil {
		t.Fatal(err)
	}
	var resp struct {
		Response struct {
			Patch []byte `json:"patch"`
		} `json:"response"`
	}
	if err := json.Unmarshal(back.Body, &resp); err != nil {
		t.Fatal(err)
	}
	var ops []struct {
		Value json.RawMessage `json:"value"`
	}
	if err := json.Unmarshal(resp.Response.Patch, &ops); err != nil {
		t.Fatal(err)
	}
	var orig struct {
		Request struct {
			Object json.RawMessage `json:"object"`
		} `json:"request"`
	}
	_ = json.Unmarshal([]byte(privateReview), &orig)
	if string(ops[0].Value) != string(orig.Request.Object) {
		t.Errorf("round trip\n got %s\nwant %s", ops[0].Value, orig.Request.Object)
	}
}

// Result.Dropped counts what the proxy reports as capi_private_proxy_objects_filtered_total.
func TestDroppedCounts(t *testing.T) {
	platform := func(name string) bool { // a CRD name or a group of the platform's standard groups
		_, g, _ := strings.Cut(name, ".")
		return groups.Default.IsStandard(name) || groups.Default.IsStandard(g)
	}
	count := func(t *testing.T, file string) int {
		var doc struct {
			Items []struct {
				Metadata struct{ Name string } `json:"metadata"`
			} `json:"items"`
			Rows []struct {
				Cells []any `json:"cells"`
			} `json:"rows"`
			Groups []struct{ Name string } `json:"groups"`
			Paths  map[string]any          `json:"paths"`
		}
		if err := json.Unmarshal(upstream(t, file), &doc); err != nil {
			t.Fatal(err)
		}
		n := 0
		for _, it := range doc.Items {
			if platform(it.Metadata.Name) {
				n++
			}
		}
		for _, r := range doc.Rows {
			if s, _ := r.Cells[0].(string); platform(s) {
				n++
			}
		}
		for _, g := range doc.Groups {
			if platform(g.Name) {
				n++
			}
		}
		for k := range doc.Paths {
			if rest, ok := strings.CutPrefix(k, "apis/"); ok {
				if g, _, _ := strings.Cut(rest, "/"); groups.Default.IsStandard(g) {
					n++
				}
			}
		}
		return n
	}
	crd := func(b []byte) (Result, error) { return tr.ResponseObject(b, Context{CRD: true}) }
	for _, c := range []struct {
		file string
		f    func([]byte) (Result, error)
	}{
		{"list-crds-small.json", crd},
		{"list-crds-table.json", crd},
		{"list-crds-metadata.json", crd},
		{"discovery-v1-apis.json", tr.ResponseDiscovery},
		{"discovery-v2-apis.json", tr.ResponseDiscovery},
		{"openapi-v3-index.json", tr.ResponseOpenAPIIndex},
		{"list-machines.json", func(b []byte) (Result, error) { return tr.ResponseObject(b, Context{}) }},
	} {
		res, err := c.f(upstream(t, c.file))
		if err != nil {
			t.Fatalf("%s: %v", c.file, err)
		}
		want := count(t, c.file)
		if c.file == "discovery-v2-apis.json" {
			want = 4 // items[].metadata.name: the four platform groups
		}
		if res.Dropped != want || want == 0 && c.file != "list-machines.json" {
			t.Errorf("%s: Dropped %d, want %d", c.file, res.Dropped, want)
		}
	}
}
