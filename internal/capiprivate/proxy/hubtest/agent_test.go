package hubtest

import (
	"bytes"
	"context"
	"os"
	"testing"
	"time"

	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/yaml"

	"github.com/dcm-sp/acm-cluster-sp/internal/capiprivate/crds"
	"github.com/dcm-sp/acm-cluster-sp/internal/capiprivate/proxy"
	"github.com/dcm-sp/acm-cluster-sp/internal/devtest/capi/capihub"
)

// CAP-Agent's own group is outside the group table.
const agentGroup = "capi-provider.agent-install.openshift.io"

// installAgentCRD applies CAP-Agent's AgentMachine CRD (recorded from HyperShift's installer) with the contract
// label HyperShift's installer adds, and removes it when the test ends.
func installAgentCRD(t *testing.T) {
	t.Helper()
	data, err := os.ReadFile("testdata/agent/agentmachines.yaml")
	if err != nil {
		t.Fatal(err)
	}
	u := &unstructured.Unstructured{}
	if err := yaml.Unmarshal(data, &u.Object); err != nil {
		t.Fatal(err)
	}
	u.SetLabels(map[string]string{"cluster.x-k8s.io/v1beta1": "v1beta1"})
	ctx := t.Context()
	if err := env.Client.Apply(ctx, client.ApplyConfigurationFromUnstructured(u), client.FieldOwner(capihub.FieldManager), client.ForceOwnership); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		_ = env.Client.Delete(ctx, &apiextensionsv1.CustomResourceDefinition{ObjectMeta: metav1.ObjectMeta{Name: u.GetName()}})
	})
	wctx, cancel := context.WithTimeout(ctx, time.Minute)
	defer cancel()
	if err := crds.WaitEstablished(wctx, env.Client, []*unstructured.Unstructured{u}); err != nil {
		t.Fatal(err)
	}
}

// CAP-Agent's group passes through the proxy untouched: an AgentMachine created through the proxy is stored in
// its own group (only its ownerReference to a Machine is renamed), a Machine's ref to it keeps its group when
// stored, and a v1beta1 read of that Machine resolves the ref's version from the AgentMachine CRD's contract label.
func TestAgentGroupPassesThrough(t *testing.T) {
	installAgentCRD(t)
	ctx := t.Context()
	ps := startProxy(t, proxy.Options{})
	pc := ps.dynamic(t, env.AdminToken)
	dc := direct(t)
	ns := env.NewNamespace(t, "agent")

	machine := coreObject("Machine", ns, "m1", map[string]any{"clusterName": "c1",
		"bootstrap":         map[string]any{"dataSecretName": "bootstrap"},
		"infrastructureRef": map[string]any{"apiGroup": agentGroup, "kind": "AgentMachine", "name": "a1"}})
	m, err := pc.Resource(gvr(stdCore, "v1beta2", "machines")).Namespace(ns).Create(ctx, machine, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	am := &unstructured.Unstructured{Object: map[string]any{"spec": map[string]any{}}}
	am.SetAPIVersion(agentGroup + "/v1beta1")
	am.SetKind("AgentMachine")
	am.SetNamespace(ns)
	am.SetName("a1")
	am.SetOwnerReferences([]metav1.OwnerReference{{APIVersion: stdCore + "/v1beta2", Kind: "Machine", Name: "m1", UID: m.GetUID()}})
	agentRes := gvr(agentGroup, "v1beta1", "agentmachines")
	created, err := pc.Resource(agentRes).Namespace(ns).Create(ctx, am, metav1.CreateOptions{})
	if err != nil {
		t.Fatalf("create AgentMachine through the proxy: %v", err)
	}
	if created.GetAPIVersion() != agentGroup+"/v1beta1" || created.GetOwnerReferences()[0].APIVersion != stdCore+"/v1beta2" {
		t.Errorf("created %s owned by %+v", created.GetAPIVersion(), created.GetOwnerReferences())
	}

	stored, err := dc.Resource(agentRes).Namespace(ns).Get(ctx, "a1", metav1.GetOptions{})
	if err != nil {
		t.Fatalf("direct get in CAP-Agent's own group: %v", err)
	}
	if refs := stored.GetOwnerReferences(); stored.GetAPIVersion() != agentGroup+"/v1beta1" || len(refs) != 1 || refs[0].APIVersion != privCore+"/v1beta2" {
		t.Errorf("stored %s owned by %+v", stored.GetAPIVersion(), refs)
	}
	list, err := pc.Resource(agentRes).Namespace(ns).List(ctx, metav1.ListOptions{})
	if err != nil || len(list.Items) != 1 || list.Items[0].GetAPIVersion() != agentGroup+"/v1beta1" {
		t.Errorf("list through the proxy: %v %v", err, list)
	}

	storedMachine, err := dc.Resource(gvr(privCore, "v1beta2", "machines")).Namespace(ns).Get(ctx, "m1", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if got := nested(t, storedMachine, "spec", "infrastructureRef", "apiGroup"); got != agentGroup {
		t.Errorf("stored Machine infrastructureRef.apiGroup %q, want %q", got, agentGroup)
	}
	old, err := pc.Resource(gvr(stdCore, "v1beta1", "machines")).Namespace(ns).Get(ctx, "m1", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if got := nested(t, old, "spec", "infrastructureRef", "apiVersion"); got != agentGroup+"/v1beta1" {
		t.Errorf("v1beta1 Machine infrastructureRef.apiVersion %q", got)
	}

	// The CRD reads under its own name through the proxy, and the group is in discovery.
	crd, err := pc.Resource(gvr("apiextensions.k8s.io", "v1", "customresourcedefinitions")).Get(ctx, "agentmachines."+agentGroup, metav1.GetOptions{})
	if err != nil || nested(t, crd, "spec", "group") != agentGroup {
		t.Errorf("CRD through the proxy: %v", err)
	}
	code, _, body := rawRequest(t, "GET", ps.URL+"/apis/"+agentGroup, env.AdminToken, nil)
	if code != 200 || !bytes.Contains(body, []byte(`"name":"`+agentGroup+`"`)) {
		t.Errorf("discovery of %s through the proxy: %d %s", agentGroup, code, body)
	}
}
