//go:build record

package record

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"sort"
	"strings"
	"testing"
	"time"

	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/framer"
	"k8s.io/client-go/rest"
	"sigs.k8s.io/yaml"

	"github.com/dcm-sp/acm-cluster-sp/internal/capiprivate/groups"
	"github.com/dcm-sp/acm-cluster-sp/internal/capiprivate/translate/internal/fixtures"
	"github.com/dcm-sp/acm-cluster-sp/internal/devtest/localhub"
)

const (
	ns         = "clusters-hc1"
	platformNS = "openshift-cluster-api"
	outDir     = "../../testdata/upstream"
)

type recorder struct {
	t       *testing.T
	host    string
	client  *http.Client
	headers map[string]map[string][]string
}

func TestRecord(t *testing.T) {
	hub, err := localhub.Start(localhub.Options{StartTimeout: 3 * time.Minute})
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = hub.Stop() }()
	hc, err := rest.HTTPClientFor(hub.Config)
	if err != nil {
		t.Fatal(err)
	}
	r := &recorder{t: t, host: strings.TrimSuffix(hub.Config.Host, "/"), client: hc, headers: map[string]map[string][]string{}}
	if err := os.MkdirAll(outDir, 0o755); err != nil {
		t.Fatal(err)
	}

	// CRDs: upstream core/addons/ipam in both groups, plus small stand-ins for the CAPK kinds.
	var crds []*apiextensionsv1.CustomResourceDefinition
	for _, c := range upstreamCRDs(t) {
		crds = append(crds, c, privateCopy(c))
	}
	for _, c := range kubevirtCRDs() {
		crds = append(crds, c, privateCopy(c))
	}
	for _, c := range crds {
		r.do("POST", "/apis/apiextensions.k8s.io/v1/customresourcedefinitions", mustJSON(c), "application/json", "", http.StatusCreated)
	}
	for _, c := range crds {
		r.waitEstablished(c.Name)
	}
	// Discovery and OpenAPI follow CRDs asynchronously.
	r.waitFor("/apis/infrastructure.cluster.hypershift.openshift.io/v1alpha1", "application/json")
	r.waitFor("/apis/cluster.hypershift.openshift.io/v1beta2", "application/json")
	r.waitForBody("/openapi/v3", "apis/infrastructure.cluster.hypershift.openshift.io/v1alpha1")
	r.waitForBody("/openapi/v3", "apis/cluster.hypershift.openshift.io/v1beta2")
	r.waitForBody("/apis", "infrastructure.cluster.hypershift.openshift.io")

	for _, n := range []string{ns, platformNS} {
		r.do("POST", "/api/v1/namespaces", []byte(`{"apiVersion":"v1","kind":"Namespace","metadata":{"name":"`+n+`"}}`), "application/json", "", http.StatusCreated)
	}
	// A platform Machine in the standard group (owner of the platform Secret).
	r.do("POST", "/apis/cluster.x-k8s.io/v1beta2/namespaces/"+platformNS+"/machines",
		[]byte(`{"apiVersion":"cluster.x-k8s.io/v1beta2","kind":"Machine","metadata":{"name":"ocp-worker-0","namespace":"`+platformNS+`"},"spec":{"clusterName":"ocp","bootstrap":{"dataSecretName":"worker-user-data-managed"},"infrastructureRef":{"apiGroup":"infrastructure.cluster.x-k8s.io","kind":"KubevirtMachine","name":"ocp-worker-0"}}}`),
		"application/json", "", http.StatusCreated)
	stored := fixtures.Objects(fixtures.Stored(groups.Default), ns, platformNS)
	for _, o := range stored {
		if o.Name == "selfsubjectaccessreview" {
			r.record("selfsubjectaccessreview", "POST", o.Path, o.JSON(), "application/json", "application/json")
			continue
		}
		b := withoutUID(o.JSON()) // uids are the server's
		r.do("POST", o.Path+"?fieldManager=fixture", b, "application/json", "", http.StatusCreated)
	}
	r.do("POST", "/apis/infrastructure.cluster.hypershift.openshift.io/v1alpha1/namespaces/"+ns+"/kubevirtmachines?fieldManager=fixture",
		[]byte(`{"apiVersion":"infrastructure.cluster.hypershift.openshift.io/v1alpha1","kind":"KubevirtMachine","metadata":{"name":"hc1-np1-abcde-x7k2p","ownerReferences":[{"apiVersion":"cluster.hypershift.openshift.io/v1beta2","kind":"Machine","name":"hc1-np1-abcde-x7k2p","uid":"`+string(fixtures.MachineUID)+`","controller":true}]},"spec":{"running":true}}`),
		"application/json", "", http.StatusCreated)
	machinePath := "/apis/cluster.hypershift.openshift.io/v1beta2/namespaces/" + ns + "/machines/hc1-np1-abcde-x7k2p"
	// Status and an apply, so managedFields hold Update, Apply and status entries.
	r.do("PATCH", machinePath+"/status?fieldManager=machine-controller",
		[]byte(`{"status":{"phase":"Running","nodeRef":{"name":"hc1-np1-abcde-x7k2p"},"addresses":[{"type":"InternalIP","address":"10.128.0.12"}],"conditions":[{"type":"Ready","status":"True","reason":"Ready","message":"","lastTransitionTime":"2026-01-02T03:04:05Z"}]}}`),
		"application/merge-patch+json", "", http.StatusOK)
	r.do("PATCH", machinePath+"?fieldManager=capi-private-fixture",
		[]byte("apiVersion: cluster.hypershift.openshift.io/v1beta2\nkind: Machine\nmetadata:\n  name: hc1-np1-abcde-x7k2p\n  labels:\n    example.com/applied: \"true\"\n"),
		"application/apply-patch+yaml", "", http.StatusOK)

	// Discovery.
	r.record("discovery-v1-apis", "GET", "/apis", nil, "", "application/json")
	r.record("discovery-v2-apis", "GET", "/apis", nil, "", "application/json;g=apidiscovery.k8s.io;v=v2;as=APIGroupDiscoveryList,application/json")
	// kube-apiserver 1.34 no longer serves v2beta1 (it answers the v1 APIGroupList); older servers do, with the v2
	// shape, so the tests derive their v2beta1 case from this recording.
	r.record("discovery-v1-group", "GET", "/apis/cluster.hypershift.openshift.io", nil, "", "application/json")
	r.record("discovery-v1-resources", "GET", "/apis/cluster.hypershift.openshift.io/v1beta2", nil, "", "application/json")
	r.record("discovery-v1-resources-infra", "GET", "/apis/infrastructure.cluster.hypershift.openshift.io/v1alpha1", nil, "", "application/json")
	// OpenAPI v3.
	r.record("openapi-v3-index", "GET", "/openapi/v3", nil, "", "application/json")
	r.record("openapi-v3-infra", "GET", "/openapi/v3/apis/infrastructure.cluster.hypershift.openshift.io/v1alpha1", nil, "", "application/json")
	r.record("openapi-v3-ipam", "GET", "/openapi/v3/apis/ipam.cluster.hypershift.openshift.io/v1beta2", nil, "", "application/json")
	// Objects.
	base := "/apis/cluster.hypershift.openshift.io"
	r.record("get-machine", "GET", machinePath, nil, "", "application/json")
	r.record("get-machine-v1beta1", "GET", base+"/v1beta1/namespaces/"+ns+"/machines/hc1-np1-abcde-q4w8z", nil, "", "application/json")
	r.record("get-machineset", "GET", base+"/v1beta2/namespaces/"+ns+"/machinesets/hc1-np1-abcde", nil, "", "application/json")
	r.record("get-machinedeployment", "GET", base+"/v1beta2/namespaces/"+ns+"/machinedeployments/hc1-np1", nil, "", "application/json")
	r.record("get-cluster", "GET", base+"/v1beta2/namespaces/"+ns+"/clusters/hc1", nil, "", "application/json")
	r.record("get-machinehealthcheck", "GET", base+"/v1beta2/namespaces/"+ns+"/machinehealthchecks/np1", nil, "", "application/json")
	r.record("get-secret-kubeconfig", "GET", "/api/v1/namespaces/"+ns+"/secrets/hc1-kubeconfig", nil, "", "application/json")
	r.record("get-secret-platform-owned", "GET", "/api/v1/namespaces/"+platformNS+"/secrets/worker-user-data-managed", nil, "", "application/json")
	r.record("get-configmap-opaque", "GET", "/api/v1/namespaces/"+ns+"/configmaps/opaque", nil, "", "application/json")
	r.record("get-deployment", "GET", "/apis/apps/v1/namespaces/"+ns+"/deployments/cluster-api", nil, "", "application/json")
	r.record("get-clusterrole-crds", "GET", "/apis/rbac.authorization.k8s.io/v1/clusterroles/capi-crd-reader", nil, "", "application/json")
	r.record("get-role", "GET", "/apis/rbac.authorization.k8s.io/v1/namespaces/"+ns+"/roles/cluster-api", nil, "", "application/json")
	r.record("list-events", "GET", "/api/v1/namespaces/"+ns+"/events", nil, "", "application/json")
	r.record("list-machines", "GET", base+"/v1beta2/namespaces/"+ns+"/machines", nil, "", "application/json")
	r.record("list-machines-table", "GET", base+"/v1beta2/namespaces/"+ns+"/machines", nil, "",
		"application/json;as=Table;v=v1;g=meta.k8s.io,application/json")
	r.record("list-machines-table-object", "GET", base+"/v1beta2/namespaces/"+ns+"/machines?includeObject=Object", nil, "",
		"application/json;as=Table;v=v1;g=meta.k8s.io,application/json")
	r.record("list-machines-metadata", "GET", base+"/v1beta2/namespaces/"+ns+"/machines", nil, "",
		"application/json;as=PartialObjectMetadataList;v=v1;g=meta.k8s.io,application/json")
	r.record("list-all-cluster-objects", "GET", base+"/v1beta2/machinesets", nil, "", "application/json")
	// CRDs: the small CAPK stand-ins only (the upstream ones are hundreds of KiB each).
	crdBase := "/apis/apiextensions.k8s.io/v1/customresourcedefinitions"
	r.record("get-crd-private", "GET", crdBase+"/kubevirtmachines.infrastructure.cluster.hypershift.openshift.io", nil, "", "application/json")
	r.record("get-crd-platform", "GET", crdBase+"/kubevirtmachines.infrastructure.cluster.x-k8s.io", nil, "", "application/json")
	r.record("list-crds-small", "GET", crdBase+"?labelSelector=fixture%3Dsmall", nil, "", "application/json")
	r.record("list-crds-table", "GET", crdBase+"?labelSelector=fixture%3Dsmall", nil, "", "application/json;as=Table;v=v1;g=meta.k8s.io,application/json")
	r.record("list-crds-metadata", "GET", crdBase, nil, "", "application/json;as=PartialObjectMetadataList;v=v1;g=meta.k8s.io,application/json")
	r.record("get-crd-metadata", "GET", crdBase+"/machines.cluster.hypershift.openshift.io", nil, "", "application/json;as=PartialObjectMetadata;v=v1;g=meta.k8s.io,application/json")
	// Status bodies and Warnings.
	r.record("status-notfound", "GET", base+"/v1beta2/namespaces/"+ns+"/machines/missing", nil, "", "application/json")
	r.record("status-crd-notfound", "GET", crdBase+"/missing.cluster.hypershift.openshift.io", nil, "", "application/json")
	r.record("status-invalid", "POST", base+"/v1beta2/namespaces/"+ns+"/machines",
		[]byte(`{"apiVersion":"cluster.hypershift.openshift.io/v1beta2","kind":"Machine","metadata":{"name":"bad"},"spec":{"clusterName":"","infrastructureRef":{"apiGroup":"infrastructure.cluster.hypershift.openshift.io","kind":"KubevirtMachine","name":"x"}}}`),
		"application/json", "application/json")
	r.record("status-conflict", "PUT", base+"/v1beta2/namespaces/"+ns+"/machinesets/hc1-np1-abcde",
		[]byte(`{"apiVersion":"cluster.hypershift.openshift.io/v1beta2","kind":"MachineSet","metadata":{"name":"hc1-np1-abcde","resourceVersion":"1"},"spec":{"clusterName":"hc1"}}`),
		"application/json", "application/json")
	r.record("status-delete", "DELETE", base+"/v1beta2/namespaces/"+ns+"/machinehealthchecks/np1", nil, "", "application/json")
	r.record("warning-v1beta1-list", "GET", base+"/v1beta1/namespaces/"+ns+"/machines", nil, "", "application/json")

	// Watches: initial events, the bookmark, then a change and a delete.
	r.recordWatch("watch-machines", base+"/v1beta2/namespaces/"+ns+"/machines?watch=true&allowWatchBookmarks=true&sendInitialEvents=true&resourceVersionMatch=NotOlderThan", 3, func() {
		r.do("PATCH", machinePath, []byte(`{"metadata":{"labels":{"example.com/touched":"true"}}}`), "application/merge-patch+json", "", http.StatusOK)
		r.do("DELETE", base+"/v1beta1/namespaces/"+ns+"/machines/hc1-np1-abcde-q4w8z", nil, "", "", http.StatusOK)
	}, 2)
	r.recordWatch("watch-crds", crdBase+"?watch=true&labelSelector=fixture%3Dsmall&allowWatchBookmarks=true&sendInitialEvents=true&resourceVersionMatch=NotOlderThan", 2*len(kubevirtCRDs())+1, nil, 0)

	hb, _ := json.MarshalIndent(r.headers, "", "  ")
	if err := os.WriteFile(filepath.Join(outDir, "headers.json"), append(hb, '\n'), 0o644); err != nil {
		t.Fatal(err)
	}
}

func (r *recorder) request(method, path string, body []byte, contentType, accept string) *http.Response {
	r.t.Helper()
	req, err := http.NewRequest(method, r.host+path, bytes.NewReader(body))
	if err != nil {
		r.t.Fatal(err)
	}
	if body == nil {
		req.Body = nil
	}
	if contentType != "" {
		req.Header.Set("Content-Type", contentType)
	}
	if accept != "" {
		req.Header.Set("Accept", accept)
	}
	resp, err := r.client.Do(req)
	if err != nil {
		r.t.Fatal(err)
	}
	return resp
}

func (r *recorder) do(method, path string, body []byte, contentType, accept string, want int) []byte {
	r.t.Helper()
	resp := r.request(method, path, body, contentType, accept)
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	if want != 0 && resp.StatusCode != want {
		r.t.Fatalf("%s %s: %d, want %d: %s", method, path, resp.StatusCode, want, b)
	}
	return b
}

var keptHeaders = []string{"Content-Type", "Etag", "Warning", "Audit-Id"}

func (r *recorder) record(name, method, path string, body []byte, contentType, accept string) {
	r.t.Helper()
	resp := r.request(method, path, body, contentType, accept)
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		r.t.Fatal(err)
	}
	h := map[string][]string{"Status": {fmt.Sprint(resp.StatusCode)}, "Request": {method + " " + path}}
	for _, k := range keptHeaders {
		if v := resp.Header.Values(k); len(v) > 0 && k != "Audit-Id" {
			h[k] = v
		}
	}
	r.headers[name] = h
	if err := os.WriteFile(filepath.Join(outDir, name+".json"), b, 0o644); err != nil {
		r.t.Fatal(err)
	}
}

// recordWatch records the first `initial` frames, runs change, then records `more` frames.
func (r *recorder) recordWatch(name, path string, initial int, change func(), more int) {
	r.t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	req, _ := http.NewRequestWithContext(ctx, "GET", r.host+path, nil)
	req.Header.Set("Accept", "application/json")
	resp, err := r.client.Do(req)
	if err != nil {
		r.t.Fatal(err)
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		b, _ := io.ReadAll(resp.Body)
		r.t.Fatalf("watch %s: %d %s", path, resp.StatusCode, b)
	}
	r.headers[name] = map[string][]string{"Status": {"200"}, "Request": {"GET " + path}, "Content-Type": resp.Header.Values("Content-Type")}
	fr := framer.NewJSONFramedReader(resp.Body)
	frames := make(chan []byte)
	errs := make(chan error, 1)
	go func() {
		buf := make([]byte, 1<<20)
		for {
			n, err := fr.Read(buf)
			if err != nil {
				errs <- err
				return
			}
			frames <- append([]byte(nil), buf[:n]...)
		}
	}()
	var out bytes.Buffer
	read := func(k int) {
		for i := 0; i < k; i++ {
			select {
			case f := <-frames:
				out.Write(f)
				out.WriteByte('\n')
			case err := <-errs:
				r.t.Fatalf("watch %s: %v", path, err)
			case <-time.After(30 * time.Second):
				r.t.Fatalf("watch %s: no frame %d within 30s", path, i)
			}
		}
	}
	read(initial)
	if change != nil {
		change()
		read(more)
	}
	if err := os.WriteFile(filepath.Join(outDir, name+".jsonl"), out.Bytes(), 0o644); err != nil {
		r.t.Fatal(err)
	}
}

func (r *recorder) waitEstablished(name string) {
	r.t.Helper()
	r.poll("CRD "+name+" Established", func() bool {
		b := r.do("GET", "/apis/apiextensions.k8s.io/v1/customresourcedefinitions/"+name, nil, "", "", http.StatusOK)
		var c apiextensionsv1.CustomResourceDefinition
		_ = json.Unmarshal(b, &c)
		for _, cond := range c.Status.Conditions {
			if cond.Type == apiextensionsv1.Established && cond.Status == apiextensionsv1.ConditionTrue {
				return true
			}
		}
		return false
	})
}

func (r *recorder) waitFor(path, accept string) {
	r.poll(path+" served", func() bool {
		resp := r.request("GET", path, nil, "", accept)
		defer resp.Body.Close()
		_, _ = io.Copy(io.Discard, resp.Body)
		return resp.StatusCode == http.StatusOK
	})
}

func (r *recorder) waitForBody(path, substring string) {
	r.poll(path+" contains "+substring, func() bool {
		return bytes.Contains(r.do("GET", path, nil, "", "application/json", 0), []byte(substring))
	})
}

func (r *recorder) poll(what string, ok func() bool) {
	r.t.Helper()
	deadline := time.Now().Add(2 * time.Minute)
	for !ok() {
		if time.Now().After(deadline) {
			r.t.Fatalf("timed out waiting for %s", what)
		}
		time.Sleep(200 * time.Millisecond)
	}
}

func withoutUID(b []byte) []byte {
	var m map[string]any
	if err := json.Unmarshal(b, &m); err != nil {
		panic(err)
	}
	delete(m["metadata"].(map[string]any), "uid")
	return mustJSON(m)
}

func mustJSON(v any) []byte {
	b, err := json.Marshal(v)
	if err != nil {
		panic(err)
	}
	return b
}

// upstreamCRDs reads the core, addons and ipam CRDs of the pinned cluster-api module, served versions only and
// without conversion (no webhook runs here).
func upstreamCRDs(t *testing.T) []*apiextensionsv1.CustomResourceDefinition {
	out, err := exec.Command("go", "list", "-m", "-f", "{{.Dir}}", "sigs.k8s.io/cluster-api").Output()
	if err != nil {
		t.Fatalf("locating sigs.k8s.io/cluster-api: %v", err)
	}
	dir := filepath.Join(strings.TrimSpace(string(out)), "config", "crd", "bases")
	files, err := filepath.Glob(filepath.Join(dir, "*.yaml"))
	if err != nil || len(files) == 0 {
		t.Fatalf("no CRDs in %s: %v", dir, err)
	}
	sort.Strings(files)
	var crds []*apiextensionsv1.CustomResourceDefinition
	for _, f := range files {
		if strings.HasPrefix(filepath.Base(f), "runtime.") {
			continue
		}
		b, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		var c apiextensionsv1.CustomResourceDefinition
		if err := yaml.Unmarshal(b, &c); err != nil {
			t.Fatalf("%s: %v", f, err)
		}
		var served []apiextensionsv1.CustomResourceDefinitionVersion
		for _, v := range c.Spec.Versions {
			if v.Served {
				served = append(served, v)
			}
		}
		c.Spec.Versions = served
		c.Spec.Conversion = &apiextensionsv1.CustomResourceConversion{Strategy: apiextensionsv1.NoneConverter}
		c.Labels = map[string]string{"fixture": "capi", "cluster.x-k8s.io/provider": "cluster-api"}
		crds = append(crds, &c)
	}
	return crds
}

// kubevirtCRDs are small stand-ins for CAPK's CRDs (YAML only upstream): same names, group, version and contract
// label; the schema just preserves fields.
func kubevirtCRDs() []*apiextensionsv1.CustomResourceDefinition {
	var out []*apiextensionsv1.CustomResourceDefinition
	for _, kind := range []string{"KubevirtMachine", "KubevirtCluster"} {
		plural := strings.ToLower(kind) + "s"
		out = append(out, &apiextensionsv1.CustomResourceDefinition{
			TypeMeta: metav1.TypeMeta{APIVersion: "apiextensions.k8s.io/v1", Kind: "CustomResourceDefinition"},
			ObjectMeta: metav1.ObjectMeta{
				Name: plural + ".infrastructure.cluster.x-k8s.io",
				Labels: map[string]string{
					"fixture": "small", "cluster.x-k8s.io/v1beta1": "v1alpha1",
					"cluster.x-k8s.io/provider": "infrastructure-kubevirt",
				},
			},
			Spec: apiextensionsv1.CustomResourceDefinitionSpec{
				Group: "infrastructure.cluster.x-k8s.io",
				Names: apiextensionsv1.CustomResourceDefinitionNames{
					Plural: plural, Singular: strings.ToLower(kind), Kind: kind, ListKind: kind + "List",
					Categories: []string{"cluster-api"},
				},
				Scope: apiextensionsv1.NamespaceScoped,
				Versions: []apiextensionsv1.CustomResourceDefinitionVersion{{
					Name: "v1alpha1", Served: true, Storage: true,
					Subresources: &apiextensionsv1.CustomResourceSubresources{Status: &apiextensionsv1.CustomResourceSubresourceStatus{}},
					Schema: &apiextensionsv1.CustomResourceValidation{OpenAPIV3Schema: &apiextensionsv1.JSONSchemaProps{
						Type: "object",
						Properties: map[string]apiextensionsv1.JSONSchemaProps{
							"apiVersion": {Type: "string"}, "kind": {Type: "string"}, "metadata": {Type: "object"},
							"spec":   {Type: "object", XPreserveUnknownFields: ptrTrue()},
							"status": {Type: "object", XPreserveUnknownFields: ptrTrue()},
						},
					}},
					AdditionalPrinterColumns: []apiextensionsv1.CustomResourceColumnDefinition{
						{Name: "Ready", Type: "boolean", JSONPath: ".status.ready"},
					},
				}},
			},
		})
	}
	return out
}

func ptrTrue() *bool { b := true; return &b }

// privateCopy renames a standard CRD into its private group.
func privateCopy(c *apiextensionsv1.CustomResourceDefinition) *apiextensionsv1.CustomResourceDefinition {
	p := c.DeepCopy()
	priv, ok := groups.Default.ToPrivate(c.Spec.Group)
	if !ok {
		panic(errors.New("unmapped group " + c.Spec.Group))
	}
	p.Spec.Group = priv
	p.Name = groups.CRDName(c.Spec.Names.Plural, priv)
	p.Labels["hypershift.openshift.io/private-capi"] = "true"
	return p
}
