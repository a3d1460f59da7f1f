package translate

import (
	"errors"
	"strings"
	"testing"

	"github.com/dcm-sp/acm-cluster-sp/internal/capiprivate/groups"
)

var tr = New(groups.Default)

// ruleCase is one unit in the client's view and as stored.
type ruleCase struct {
	name   string
	ctx    Context
	view   string
	stored string
}

// Object-rule cases that hold in both directions: RequestObject(view) == stored and
// ResponseObject(stored) == view, byte for byte.
var bijectiveCases = []ruleCase{
	{name: "apiVersion of the object", view: `{"apiVersion":"cluster.x-k8s.io/v1beta2","kind":"Machine"}`,
		stored: `{"apiVersion":"cluster.hypershift.openshift.io/v1beta2","kind":"Machine"}`},
	{name: "each mapped group",
		view:   `{"a":[{"apiVersion":"addons.cluster.x-k8s.io/v1beta2"},{"apiVersion":"ipam.cluster.x-k8s.io/v1beta1"},{"apiVersion":"infrastructure.cluster.x-k8s.io/v1alpha1"}]}`,
		stored: `{"a":[{"apiVersion":"addons.cluster.hypershift.openshift.io/v1beta2"},{"apiVersion":"ipam.cluster.hypershift.openshift.io/v1beta1"},{"apiVersion":"infrastructure.cluster.hypershift.openshift.io/v1alpha1"}]}`},
	{name: "unmapped groups pass",
		view:   `{"apiVersion":"bootstrap.cluster.x-k8s.io/v1beta1","x":{"apiGroup":"controlplane.cluster.x-k8s.io"},"y":{"apiVersion":"runtime.cluster.x-k8s.io/v1alpha1"},"z":{"apiGroup":"hypershift.openshift.io"},"core":{"apiVersion":"v1"}}`,
		stored: `{"apiVersion":"bootstrap.cluster.x-k8s.io/v1beta1","x":{"apiGroup":"controlplane.cluster.x-k8s.io"},"y":{"apiVersion":"runtime.cluster.x-k8s.io/v1alpha1"},"z":{"apiGroup":"hypershift.openshift.io"},"core":{"apiVersion":"v1"}}`},
	// CAP-Agent keeps its own group: its objects and refs to them pass, while its ownerReference to a Machine is
	// renamed like any other.
	{name: "CAP-Agent's group passes",
		view:   `{"apiVersion":"capi-provider.agent-install.openshift.io/v1beta1","kind":"AgentMachine","metadata":{"ownerReferences":[{"apiVersion":"cluster.x-k8s.io/v1beta2","kind":"Machine"}]},"spec":{"agentRef":{"apiVersion":"agent-install.openshift.io/v1beta1"}},"ref":{"apiGroup":"capi-provider.agent-install.openshift.io","kind":"AgentMachine"}}`,
		stored: `{"apiVersion":"capi-provider.agent-install.openshift.io/v1beta1","kind":"AgentMachine","metadata":{"ownerReferences":[{"apiVersion":"cluster.hypershift.openshift.io/v1beta2","kind":"Machine"}]},"spec":{"agentRef":{"apiVersion":"agent-install.openshift.io/v1beta1"}},"ref":{"apiGroup":"capi-provider.agent-install.openshift.io","kind":"AgentMachine"}}`},
	{name: "platform refs are escaped",
		view:   `{"metadata":{"ownerReferences":[{"apiVersion":"cluster.x-k8s.io.platform.invalid/v1beta2","kind":"Machine"}]}}`,
		stored: `{"metadata":{"ownerReferences":[{"apiVersion":"cluster.x-k8s.io/v1beta2","kind":"Machine"}]}}`},
	{name: "v1beta1 refs and ownerReferences and managedFields",
		view:   `{"metadata":{"ownerReferences":[{"apiVersion":"cluster.x-k8s.io/v1beta1","kind":"MachineSet","name":"ms","uid":"u"}],"managedFields":[{"apiVersion":"cluster.x-k8s.io/v1beta1","fieldsType":"FieldsV1","fieldsV1":{"f:spec":{"f:infrastructureRef":{"f:apiVersion":{}}}}}]},"spec":{"infrastructureRef":{"apiVersion":"infrastructure.cluster.x-k8s.io/v1alpha1","kind":"KubevirtMachine"},"bootstrap":{"configRef":{"apiVersion":"bootstrap.cluster.x-k8s.io/v1beta1"}}}}`,
		stored: `{"metadata":{"ownerReferences":[{"apiVersion":"cluster.hypershift.openshift.io/v1beta1","kind":"MachineSet","name":"ms","uid":"u"}],"managedFields":[{"apiVersion":"cluster.hypershift.openshift.io/v1beta1","fieldsType":"FieldsV1","fieldsV1":{"f:spec":{"f:infrastructureRef":{"f:apiVersion":{}}}}}]},"spec":{"infrastructureRef":{"apiVersion":"infrastructure.cluster.hypershift.openshift.io/v1alpha1","kind":"KubevirtMachine"},"bootstrap":{"configRef":{"apiVersion":"bootstrap.cluster.x-k8s.io/v1beta1"}}}}`},
	{name: "v1beta2 apiGroup refs",
		view:   `{"spec":{"infrastructureRef":{"apiGroup":"infrastructure.cluster.x-k8s.io","kind":"KubevirtMachine","name":"m"},"controlPlaneRef":{"apiGroup":"hypershift.openshift.io","kind":"HostedControlPlane"}}}`,
		stored: `{"spec":{"infrastructureRef":{"apiGroup":"infrastructure.cluster.hypershift.openshift.io","kind":"KubevirtMachine","name":"m"},"controlPlaneRef":{"apiGroup":"hypershift.openshift.io","kind":"HostedControlPlane"}}}`},
	{name: "RBAC apiGroups and subjects",
		view:   `{"rules":[{"apiGroups":["cluster.x-k8s.io","","*","cluster.x-k8s.io.platform.invalid"],"resources":["machines"]}],"subjects":[{"apiGroup":"rbac.authorization.k8s.io"}]}`,
		stored: `{"rules":[{"apiGroups":["cluster.hypershift.openshift.io","","*","cluster.x-k8s.io"],"resources":["machines"]}],"subjects":[{"apiGroup":"rbac.authorization.k8s.io"}]}`},
	{name: "resourceNames of a CRD rule",
		view:   `{"rules":[{"resourceNames":["machines.cluster.x-k8s.io","hostedclusters.hypershift.openshift.io","kubevirtmachines.infrastructure.cluster.x-k8s.io.platform.invalid"],"apiGroups":["apiextensions.k8s.io"],"resources":["customresourcedefinitions"]}]}`,
		stored: `{"rules":[{"resourceNames":["machines.cluster.hypershift.openshift.io","hostedclusters.hypershift.openshift.io","kubevirtmachines.infrastructure.cluster.x-k8s.io"],"apiGroups":["apiextensions.k8s.io"],"resources":["customresourcedefinitions"]}]}`},
	{name: "resourceNames of any other rule are names",
		view:   `{"rules":[{"apiGroups":[""],"resources":["secrets"],"resourceNames":["machines.cluster.x-k8s.io"]},{"apiGroups":["cluster.x-k8s.io"],"resources":["customresourcedefinitions"],"resourceNames":["machines.cluster.x-k8s.io"]}]}`,
		stored: `{"rules":[{"apiGroups":[""],"resources":["secrets"],"resourceNames":["machines.cluster.x-k8s.io"]},{"apiGroups":["cluster.hypershift.openshift.io"],"resources":["customresourcedefinitions"],"resourceNames":["machines.cluster.x-k8s.io"]}]}`},
	{name: "SAR resourceAttributes",
		view:   `{"kind":"SubjectAccessReview","spec":{"resourceAttributes":{"group":"cluster.x-k8s.io","resource":"machines","verb":"update"}},"status":{"allowed":true}}`,
		stored: `{"kind":"SubjectAccessReview","spec":{"resourceAttributes":{"group":"cluster.hypershift.openshift.io","resource":"machines","verb":"update"}},"status":{"allowed":true}}`},
	{name: "SAR on a CRD names the CRD",
		view:   `{"spec":{"resourceAttributes":{"name":"machines.cluster.x-k8s.io","group":"apiextensions.k8s.io","resource":"customresourcedefinitions"}}}`,
		stored: `{"spec":{"resourceAttributes":{"name":"machines.cluster.hypershift.openshift.io","group":"apiextensions.k8s.io","resource":"customresourcedefinitions"}}}`},
	{name: "group only where the rule names it",
		view:   `{"spec":{"group":"cluster.x-k8s.io"},"x":{"group":"cluster.x-k8s.io"},"responseKind":{"group":"cluster.x-k8s.io","kind":"Machine"},"x-kubernetes-group-version-kind":[{"group":"cluster.x-k8s.io","version":"v1beta2"}]}`,
		stored: `{"spec":{"group":"cluster.x-k8s.io"},"x":{"group":"cluster.x-k8s.io"},"responseKind":{"group":"cluster.hypershift.openshift.io","kind":"Machine"},"x-kubernetes-group-version-kind":[{"group":"cluster.hypershift.openshift.io","version":"v1beta2"}]}`},
	{name: "CRD: name and spec.group", ctx: Context{CRD: true},
		view:   `{"apiVersion":"apiextensions.k8s.io/v1","kind":"CustomResourceDefinition","metadata":{"name":"machines.cluster.x-k8s.io","labels":{"cluster.x-k8s.io/v1beta2":"v1beta2"}},"spec":{"group":"cluster.x-k8s.io","names":{"plural":"machines"}}}`,
		stored: `{"apiVersion":"apiextensions.k8s.io/v1","kind":"CustomResourceDefinition","metadata":{"name":"machines.cluster.hypershift.openshift.io","labels":{"cluster.x-k8s.io/v1beta2":"v1beta2"}},"spec":{"group":"cluster.hypershift.openshift.io","names":{"plural":"machines"}}}`},
	{name: "CRD of another group", ctx: Context{CRD: true},
		view:   `{"metadata":{"name":"hostedclusters.hypershift.openshift.io"},"spec":{"group":"hypershift.openshift.io"}}`,
		stored: `{"metadata":{"name":"hostedclusters.hypershift.openshift.io"},"spec":{"group":"hypershift.openshift.io"}}`},
	{name: "names are not CRD names outside CRDs",
		view:   `{"metadata":{"name":"machines.cluster.x-k8s.io"}}`,
		stored: `{"metadata":{"name":"machines.cluster.x-k8s.io"}}`},
	{name: "labels, annotations, finalizers are opaque",
		view:   `{"metadata":{"labels":{"apiVersion":"cluster.x-k8s.io/v1beta2","cluster.x-k8s.io/cluster-name":"c"},"annotations":{"apiGroup":"cluster.x-k8s.io","cluster.x-k8s.io/conversion-data":"{\"apiVersion\":\"cluster.hypershift.openshift.io/v1beta2\"}"},"finalizers":["machine.cluster.x-k8s.io"]},"spec":{"template":{"metadata":{"labels":{"apiVersion":"cluster.x-k8s.io/v1beta2"},"annotations":{"apiVersion":"cluster.x-k8s.io/v1beta2"}}}}}`,
		stored: `{"metadata":{"labels":{"apiVersion":"cluster.x-k8s.io/v1beta2","cluster.x-k8s.io/cluster-name":"c"},"annotations":{"apiGroup":"cluster.x-k8s.io","cluster.x-k8s.io/conversion-data":"{\"apiVersion\":\"cluster.hypershift.openshift.io/v1beta2\"}"},"finalizers":["machine.cluster.x-k8s.io"]},"spec":{"template":{"metadata":{"labels":{"apiVersion":"cluster.x-k8s.io/v1beta2"},"annotations":{"apiVersion":"cluster.x-k8s.io/v1beta2"}}}}}`},
	{name: "selectors are opaque",
		view:   `{"spec":{"selector":{"matchLabels":{"apiVersion":"cluster.x-k8s.io/v1beta2"},"matchExpressions":[{"key":"apiGroup","operator":"In","values":["cluster.x-k8s.io"]}]}}}`,
		stored: `{"spec":{"selector":{"matchLabels":{"apiVersion":"cluster.x-k8s.io/v1beta2"},"matchExpressions":[{"key":"apiGroup","operator":"In","values":["cluster.x-k8s.io"]}]}}}`},
	{name: "ConfigMap and Secret data are opaque",
		view:   `{"kind":"ConfigMap","data":{"apiVersion":"cluster.x-k8s.io/v1beta2"},"binaryData":{"apiGroup":"Y2x1c3Rlcg=="},"stringData":{"apiVersion":"cluster.x-k8s.io/v1beta2"}}`,
		stored: `{"kind":"ConfigMap","data":{"apiVersion":"cluster.x-k8s.io/v1beta2"},"binaryData":{"apiGroup":"Y2x1c3Rlcg=="},"stringData":{"apiVersion":"cluster.x-k8s.io/v1beta2"}}`},
	{name: "managedFields fieldsV1 is opaque",
		view:   `{"metadata":{"managedFields":[{"apiVersion":"cluster.x-k8s.io/v1beta2","fieldsV1":{"apiVersion":"cluster.x-k8s.io/v1beta2"}}]}}`,
		stored: `{"metadata":{"managedFields":[{"apiVersion":"cluster.hypershift.openshift.io/v1beta2","fieldsV1":{"apiVersion":"cluster.x-k8s.io/v1beta2"}}]}}`},
	{name: "non-string values are entered, not renamed",
		view:   `{"properties":{"apiVersion":{"type":"string","default":{"apiVersion":"cluster.x-k8s.io/v1beta2"}},"apiGroup":null,"apiGroups":[1,{"a":true},"cluster.x-k8s.io"]}}`,
		stored: `{"properties":{"apiVersion":{"type":"string","default":{"apiVersion":"cluster.hypershift.openshift.io/v1beta2"}},"apiGroup":null,"apiGroups":[1,{"a":true},"cluster.hypershift.openshift.io"]}}`},
	{name: "values that merely contain a group",
		view:   `{"apiVersion":"cluster.x-k8s.io","a":{"apiVersion":"xcluster.x-k8s.io/v1"},"b":{"apiGroup":"cluster.x-k8s.io/v1beta2"},"c":{"apiVersion":"/v1"},"d":{"apiVersion":"cluster.x-k8s.io/"},"e":{"apiVersion":"cluster.x-k8s.io/beta1"}}`,
		stored: `{"apiVersion":"cluster.x-k8s.io","a":{"apiVersion":"xcluster.x-k8s.io/v1"},"b":{"apiGroup":"cluster.x-k8s.io/v1beta2"},"c":{"apiVersion":"/v1"},"d":{"apiVersion":"cluster.x-k8s.io/"},"e":{"apiVersion":"cluster.x-k8s.io/beta1"}}`},
	{name: "list items are roots",
		view:   `{"kind":"MachineList","apiVersion":"cluster.x-k8s.io/v1beta2","metadata":{"resourceVersion":"7","continue":"eyJ2IjoiY2x1c3Rlci54LWs4cy5pbyJ9"},"items":[{"apiVersion":"cluster.x-k8s.io/v1beta2","data":{"apiVersion":"cluster.x-k8s.io/v1beta2"}}]}`,
		stored: `{"kind":"MachineList","apiVersion":"cluster.hypershift.openshift.io/v1beta2","metadata":{"resourceVersion":"7","continue":"eyJ2IjoiY2x1c3Rlci54LWs4cy5pbyJ9"},"items":[{"apiVersion":"cluster.hypershift.openshift.io/v1beta2","data":{"apiVersion":"cluster.x-k8s.io/v1beta2"}}]}`},
	{name: "whitespace, order and numbers are kept",
		view:   " {\n  \"spec\" : { \"n\": 1.50e+3 , \"infrastructureRef\" :\t{\"kind\":\"K\", \"apiGroup\" : \"infrastructure.cluster.x-k8s.io\" } },\n \"apiVersion\":\"cluster.x-k8s.io/v1beta2\"}\n",
		stored: " {\n  \"spec\" : { \"n\": 1.50e+3 , \"infrastructureRef\" :\t{\"kind\":\"K\", \"apiGroup\" : \"infrastructure.cluster.hypershift.openshift.io\" } },\n \"apiVersion\":\"cluster.hypershift.openshift.io/v1beta2\"}\n"},
	{name: "partial objects: merge patch", view: `{"spec":{"infrastructureRef":{"apiGroup":"infrastructure.cluster.x-k8s.io"}}}`,
		stored: `{"spec":{"infrastructureRef":{"apiGroup":"infrastructure.cluster.hypershift.openshift.io"}}}`},
	{name: "partial objects: strategic merge patch directives",
		view:   `{"metadata":{"$setElementOrder/ownerReferences":[{"uid":"a"}],"ownerReferences":[{"apiVersion":"cluster.x-k8s.io/v1beta2","uid":"a"}],"$deleteFromPrimitiveList/finalizers":["machine.cluster.x-k8s.io"]}}`,
		stored: `{"metadata":{"$setElementOrder/ownerReferences":[{"uid":"a"}],"ownerReferences":[{"apiVersion":"cluster.hypershift.openshift.io/v1beta2","uid":"a"}],"$deleteFromPrimitiveList/finalizers":["machine.cluster.x-k8s.io"]}}`},
}

func TestObjectRuleBothDirections(t *testing.T) {
	for _, c := range bijectiveCases {
		t.Run(c.name, func(t *testing.T) {
			req, err := tr.RequestObject([]byte(c.view), c.ctx)
			if err != nil {
				t.Fatalf("RequestObject: %v", err)
			}
			if string(req.Body) != c.stored {
				t.Errorf("RequestObject:\n got %s\nwant %s", req.Body, c.stored)
			}
			if req.Changed != (c.view != c.stored) {
				t.Errorf("RequestObject Changed = %v", req.Changed)
			}
			resp, err := tr.ResponseObject([]byte(c.stored), c.ctx)
			if err != nil {
				t.Fatalf("ResponseObject: %v", err)
			}
			if string(resp.Body) != c.view {
				t.Errorf("ResponseObject:\n got %s\nwant %s", resp.Body, c.view)
			}
			if resp.Drop || req.Drop {
				t.Error("unexpected Drop")
			}
		})
	}
}

// Cases that hold in one direction only.
func TestObjectRuleOneWay(t *testing.T) {
	cases := []struct {
		name     string
		dir      Direction
		ctx      Context
		in, want string
		drop     bool
	}{
		{name: "escaped JSON strings are decoded", dir: DirectionRequest,
			in:   `{"apiVersion":"cluster\u002ex-k8s.io\/v1beta2","api\u0047roup":"cluster.x-k8s.io"}`,
			want: `{"apiVersion":"cluster.hypershift.openshift.io/v1beta2","api\u0047roup":"cluster.hypershift.openshift.io"}`},
		{name: "a private group in a request is left as written", dir: DirectionRequest,
			in: `{"apiVersion":"cluster.hypershift.openshift.io/v1beta2"}`, want: `{"apiVersion":"cluster.hypershift.openshift.io/v1beta2"}`},
		{name: "Status: details.group and message tokens, longest first", dir: DirectionResponse,
			in:   `{"kind":"Status","apiVersion":"v1","status":"Failure","message":"kubevirtmachines.infrastructure.cluster.hypershift.openshift.io \"m\" not found; machines.cluster.hypershift.openshift.io","reason":"NotFound","details":{"name":"m","group":"infrastructure.cluster.hypershift.openshift.io","kind":"kubevirtmachines","causes":[{"message":"cluster.hypershift.openshift.io/v1beta2 gone","field":"spec"}]},"code":404}`,
			want: `{"kind":"Status","apiVersion":"v1","status":"Failure","message":"kubevirtmachines.infrastructure.cluster.x-k8s.io \"m\" not found; machines.cluster.x-k8s.io","reason":"NotFound","details":{"name":"m","group":"infrastructure.cluster.x-k8s.io","kind":"kubevirtmachines","causes":[{"message":"cluster.x-k8s.io/v1beta2 gone","field":"spec"}]},"code":404}`},
		{name: "Status details are recognised by kind, in any member order", dir: DirectionResponse,
			in:   `{"details":{"group":"cluster.hypershift.openshift.io"},"message":"cluster.hypershift.openshift.io","kind":"Status"}`,
			want: `{"details":{"group":"cluster.x-k8s.io"},"message":"cluster.x-k8s.io","kind":"Status"}`},
		{name: "messages of other kinds are free text", dir: DirectionResponse,
			in:   `{"kind":"Event","message":"cluster.hypershift.openshift.io","details":{"group":"cluster.hypershift.openshift.io"}}`,
			want: `{"kind":"Event","message":"cluster.hypershift.openshift.io","details":{"group":"cluster.hypershift.openshift.io"}}`},
		{name: "Status of a CRD request names the CRD", dir: DirectionResponse, ctx: Context{CRD: true},
			in:   `{"kind":"Status","details":{"name":"machines.cluster.hypershift.openshift.io","group":"apiextensions.k8s.io","kind":"customresourcedefinitions"}}`,
			want: `{"kind":"Status","details":{"name":"machines.cluster.x-k8s.io","group":"apiextensions.k8s.io","kind":"customresourcedefinitions"}}`},
		{name: "a platform CRD is dropped", dir: DirectionResponse, ctx: Context{CRD: true},
			in: `{"kind":"CustomResourceDefinition","metadata":{"name":"machines.cluster.x-k8s.io"},"spec":{"group":"cluster.x-k8s.io"}}`, drop: true},
		{name: "a platform CRD is dropped by group alone", dir: DirectionResponse, ctx: Context{CRD: true},
			in: `{"spec":{"group":"ipam.cluster.x-k8s.io"}}`, drop: true},
		{name: "platform CRDs leave lists: first, middle, last", dir: DirectionResponse, ctx: Context{CRD: true},
			in:   `{"items":[{"metadata":{"name":"machines.cluster.x-k8s.io"}}, {"metadata":{"name":"machines.cluster.hypershift.openshift.io"}} ,{"metadata":{"name":"a.cluster.x-k8s.io"}},{"metadata":{"name":"b.example.com"}},{"metadata":{"name":"c.cluster.x-k8s.io"}}]}`,
			want: `{"items":[{"metadata":{"name":"machines.cluster.x-k8s.io"}},{"metadata":{"name":"b.example.com"}}]}`},
		{name: "platform CRDs leave lists: all of them", dir: DirectionResponse, ctx: Context{CRD: true},
			in: `{"items":[{"metadata":{"name":"machines.cluster.x-k8s.io"}},{"metadata":{"name":"a.cluster.x-k8s.io"}}],"x":1}`, want: `{"items":[],"x":1}`},
		{name: "CRD Table: cells[0] renamed, platform rows dropped", dir: DirectionResponse, ctx: Context{CRD: true},
			in:   `{"kind":"Table","rows":[{"cells":["kubevirtmachines.infrastructure.cluster.x-k8s.io","1d"],"object":{"metadata":{"name":"kubevirtmachines.infrastructure.cluster.x-k8s.io"}}},{"cells":["kubevirtmachines.infrastructure.cluster.hypershift.openshift.io","1d"],"object":{"metadata":{"name":"kubevirtmachines.infrastructure.cluster.hypershift.openshift.io"}}}]}`,
			want: `{"kind":"Table","rows":[{"cells":["kubevirtmachines.infrastructure.cluster.x-k8s.io","1d"],"object":{"metadata":{"name":"kubevirtmachines.infrastructure.cluster.x-k8s.io"}}}]}`},
		{name: "Table rows' objects are roots", dir: DirectionResponse,
			in:   `{"kind":"Table","rows":[{"cells":["cluster.hypershift.openshift.io"],"object":{"apiVersion":"cluster.hypershift.openshift.io/v1beta2","data":{"apiVersion":"cluster.hypershift.openshift.io/v1beta2"}}}]}`,
			want: `{"kind":"Table","rows":[{"cells":["cluster.hypershift.openshift.io"],"object":{"apiVersion":"cluster.x-k8s.io/v1beta2","data":{"apiVersion":"cluster.hypershift.openshift.io/v1beta2"}}}]}`},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			f := tr.ResponseObject
			if c.dir == DirectionRequest {
				f = tr.RequestObject
			}
			res, err := f([]byte(c.in), c.ctx)
			if err != nil {
				t.Fatal(err)
			}
			if res.Drop != c.drop {
				t.Fatalf("Drop = %v, want %v", res.Drop, c.drop)
			}
			if !c.drop && string(res.Body) != c.want {
				t.Errorf("\n got %s\nwant %s", res.Body, c.want)
			}
		})
	}
}

func TestFastPathReturnsTheSameSlice(t *testing.T) {
	body := []byte(`{"apiVersion":"v1","kind":"Secret","metadata":{"labels":{"cluster.x-k8s.io/cluster-name":"hc1"}}}`)
	for name, f := range map[string]func([]byte, Context) (Result, error){
		"RequestObject": tr.RequestObject, "ResponseObject": tr.ResponseObject, "ResponseWatchEvent": tr.ResponseWatchEvent,
		"RequestJSONPatch": tr.RequestJSONPatch, "RequestApply": tr.RequestApply, "RequestProtobuf": tr.RequestProtobuf,
	} {
		in := body
		if name == "RequestObject" || name == "RequestJSONPatch" || name == "RequestApply" || name == "RequestProtobuf" {
			in = []byte(`{"apiVersion":"v1","kind":"Secret","metadata":{"labels":{"app":"x"}}}`)
		}
		res, err := f(in, Context{})
		if err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		if &res.Body[0] != &in[0] || len(res.Body) != len(in) || res.Translated || res.Changed {
			t.Errorf("%s did not return the input slice untouched: %+v", name, res)
		}
		allocs := testing.AllocsPerRun(100, func() { _, _ = f(in, Context{}) })
		if allocs != 0 {
			t.Errorf("%s fast path allocates %.0f times", name, allocs)
		}
	}
}

// A unit that holds a needle but nothing to rename comes back as the same slice too (copy on write).
func TestSlowPathWithoutChangesReturnsTheSameSlice(t *testing.T) {
	in := []byte(`{"metadata":{"labels":{"cluster.x-k8s.io/cluster-name":"x"},"annotations":{"a":"cluster.hypershift.openshift.io/v1"}}}`)
	res, err := tr.ResponseObject(in, Context{})
	if err != nil {
		t.Fatal(err)
	}
	if !res.Translated || res.Changed || &res.Body[0] != &in[0] {
		t.Errorf("got %+v", res)
	}
}

func TestBookmarkBlueprintIsDropped(t *testing.T) {
	const bp = `"kubernetes.io/initial-events-list-blueprint":"azhzAAo..."`
	for _, c := range []struct{ in, want string }{
		{`{"k8s.io/initial-events-end":"true",` + bp + `}`, `{"k8s.io/initial-events-end":"true"}`},
		{`{` + bp + `,"k8s.io/initial-events-end":"true"}`, `{"k8s.io/initial-events-end":"true"}`},
		{`{"a":"1",` + bp + `,"b":"2"}`, `{"a":"1","b":"2"}`},
		{`{ ` + bp + ` }`, `{  }`},
		{`{"a":"1"}`, `{"a":"1"}`},
	} {
		frame := `{"type":"BOOKMARK","object":{"kind":"Machine","apiVersion":"cluster.hypershift.openshift.io/v1beta2","metadata":{"resourceVersion":"12","annotations":` + c.in + `}}}`
		want := `{"type":"BOOKMARK","object":{"kind":"Machine","apiVersion":"cluster.x-k8s.io/v1beta2","metadata":{"resourceVersion":"12","annotations":` + c.want + `}}}`
		res, err := tr.ResponseWatchEvent([]byte(frame), Context{})
		if err != nil {
			t.Fatal(err)
		}
		if string(res.Body) != want {
			t.Errorf("\n got %s\nwant %s", res.Body, want)
		}
		// Other events keep every annotation.
		other := strings.Replace(frame, "BOOKMARK", "MODIFIED", 1)
		res, err = tr.ResponseWatchEvent([]byte(other), Context{})
		if err != nil {
			t.Fatal(err)
		}
		if !strings.Contains(string(res.Body), c.in) {
			t.Errorf("MODIFIED lost an annotation: %s", res.Body)
		}
	}
}

func TestFailClosed(t *testing.T) {
	deep := strings.Repeat(`{"a":`, maxDepth+1) + `"cluster.x-k8s.io"` + strings.Repeat("}", maxDepth+1)
	cases := []struct {
		name, in, reason string
	}{
		{"truncated", `{"apiVersion":"cluster.x-k8s.io/v1beta2"`, ReasonInvalidJSON},
		{"trailing data", `{"apiVersion":"cluster.x-k8s.io/v1beta2"} {}`, ReasonInvalidJSON},
		{"bad escape", `{"apiVersion":"cluster.x-k8s.io/v1\x"}`, ReasonInvalidJSON},
		{"control character", "{\"apiVersion\":\"cluster.x-k8s.io/v1\n\"}", ReasonInvalidJSON},
		{"bad number", `{"n":01,"apiVersion":"cluster.x-k8s.io/v1beta2"}`, ReasonInvalidJSON},
		{"bad literal", `{"n":tru,"apiVersion":"cluster.x-k8s.io/v1beta2"}`, ReasonInvalidJSON},
		{"missing colon", `{"apiVersion" "cluster.x-k8s.io/v1beta2"}`, ReasonInvalidJSON},
		{"too deep", deep, ReasonTooDeep},
		{"empty", ` cluster.x-k8s.io" `, ReasonInvalidJSON},
	}
	for _, c := range cases {
		for _, f := range []func([]byte, Context) (Result, error){tr.RequestObject, tr.ResponseObject} {
			_, err := f([]byte(c.in), Context{})
			var e *Error
			if !errors.As(err, &e) || e.Reason != c.reason {
				t.Errorf("%s: err = %v, want reason %s", c.name, err, c.reason)
			}
			if ReasonOf(err) != c.reason {
				t.Errorf("%s: ReasonOf = %q", c.name, ReasonOf(err))
			}
		}
	}
	if _, err := tr.ResponseWatchEvent([]byte(`["cluster.hypershift.openshift.io"]`), Context{}); ReasonOf(err) != ReasonInvalidWatchEvent {
		t.Errorf("array watch frame: %v", err)
	}
}

// A Translator works for any table, not only the default one.
func TestOtherMapping(t *testing.T) {
	m := groups.MustNew(groups.Row{Standard: "widgets.example.com", Private: "widgets.internal.example.org"},
		groups.Row{Standard: "gadgets.example.net", Private: "gadgets.internal.example.org"})
	x := New(m)
	view := `{"apiVersion":"widgets.example.com/v1","spec":{"ref":{"apiGroup":"gadgets.example.net"},"other":{"apiGroup":"gadgets.example.net.platform.invalid"}}}`
	stored := `{"apiVersion":"widgets.internal.example.org/v1","spec":{"ref":{"apiGroup":"gadgets.internal.example.org"},"other":{"apiGroup":"gadgets.example.net"}}}`
	req, err := x.RequestObject([]byte(view), Context{})
	if err != nil || string(req.Body) != stored {
		t.Errorf("request: %s %v", req.Body, err)
	}
	resp, err := x.ResponseObject([]byte(stored), Context{})
	if err != nil || string(resp.Body) != view {
		t.Errorf("response: %s %v", resp.Body, err)
	}
	// The default table's groups mean nothing to it.
	in := []byte(`{"apiVersion":"cluster.x-k8s.io/v1beta2"}`)
	if res, _ := x.RequestObject(in, Context{}); res.Changed {
		t.Error("renamed a group outside its table")
	}
}
