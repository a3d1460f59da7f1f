//lint:file-ignore SA1019 the deprecated v1beta1 (and ipam v1alpha1) API packages are what this webhook serves.

package webhook

import (
	"bytes"
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"reflect"
	"slices"
	"sort"
	"strings"
	"sync"
	"testing"

	"github.com/prometheus/client_golang/prometheus"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/rest"
	clusterv1beta1 "sigs.k8s.io/cluster-api/api/core/v1beta1"
	clusterv1 "sigs.k8s.io/cluster-api/api/core/v1beta2"
	"sigs.k8s.io/controller-runtime/pkg/webhook/conversion"

	"github.com/dcm-sp/acm-cluster-sp/internal/capiprivate/crds"
)

// The converted kinds per private group: core Cluster API's and CAPIBM's (the only provider whose private CRDs
// serve several versions).
var wantKinds = map[string][]string{
	CoreGroup: {"Cluster", "ClusterClass", "Machine", "MachineDeployment", "MachineDrainRule", "MachineHealthCheck",
		"MachinePool", "MachineSet"},
	AddonsGroup: {"ClusterResourceSet", "ClusterResourceSetBinding"},
	IPAMGroup:   {"IPAddress", "IPAddressClaim"},
	InfrastructureGroup: {"IBMPowerVSCluster", "IBMPowerVSClusterTemplate", "IBMPowerVSImage", "IBMPowerVSMachine",
		"IBMPowerVSMachineTemplate", "IBMVPCCluster", "IBMVPCMachine", "IBMVPCMachineTemplate"},
}

func TestSchemeRegistersPrivateGVKsOnly(t *testing.T) {
	s, err := NewScheme()
	if err != nil {
		t.Fatal(err)
	}
	versions := map[schema.GroupKind][]string{}
	for gvk, typ := range s.AllKnownTypes() {
		if _, ok := wantKinds[gvk.Group]; !ok {
			t.Errorf("%v is not a private GVK", gvk)
		}
		obj := reflect.New(typ).Interface().(runtime.Object)
		if kinds, _, err := s.ObjectKinds(obj); err != nil || len(kinds) != 1 {
			t.Errorf("%s has GVKs %v (%v), want exactly one", typ, kinds, err)
		}
		ok, err := conversion.IsConvertible(s, obj)
		if err != nil || !ok {
			t.Errorf("%v: conversion.IsConvertible = %v, %v", gvk, ok, err)
		}
		versions[gvk.GroupKind()] = append(versions[gvk.GroupKind()], gvk.Version)
	}
	for group, kinds := range wantKinds {
		var got []string
		for gk := range versions {
			if gk.Group == group {
				got = append(got, gk.Kind)
			}
		}
		sort.Strings(got)
		if !slices.Equal(got, kinds) {
			t.Errorf("%s: kinds %v, want %v", group, got, kinds)
		}
	}

	// Every private CRD converted by the webhook has every served version in the scheme, and every kind of the
	// scheme is a private CRD serving exactly the scheme's versions.
	private, err := crds.Private(crds.DefaultClientConfig())
	if err != nil {
		t.Fatal(err)
	}
	crdKinds := map[schema.GroupKind]bool{}
	for _, u := range private {
		var crd apiextensionsv1.CustomResourceDefinition
		if body, err := u.MarshalJSON(); err != nil || json.Unmarshal(body, &crd) != nil {
			t.Fatalf("%s: %v", u.GetName(), err)
		}
		gk := schema.GroupKind{Group: crd.Spec.Group, Kind: crd.Spec.Names.Kind}
		crdKinds[gk] = true
		got := versions[gk]
		if crd.Spec.Conversion.Strategy != apiextensionsv1.WebhookConverter && got == nil {
			continue
		}
		var served []string
		for _, v := range crd.Spec.Versions {
			served = append(served, v.Name)
		}
		sort.Strings(served)
		sort.Strings(got)
		if !slices.Equal(got, served) {
			t.Errorf("%s (conversion %s): scheme versions %v, CRD serves %v", crd.Name, crd.Spec.Conversion.Strategy, got, served)
		}
	}
	for gk := range versions {
		if !crdKinds[gk] {
			t.Errorf("%v is in the scheme but no private CRD serves it", gk)
		}
	}
}

// Cases of upstream's internal/contract TestGetAPIVersion / TestGetLatestAPIVersionFromContract (current contract
// v1beta2), plus ordering cases.
func TestLatestAPIVersionMatchesUpstream(t *testing.T) {
	for _, tc := range []struct {
		labels map[string]string
		want   string // "" = error
	}{
		{nil, ""},
		{map[string]string{"cluster.x-k8s.io/v1beta1": ""}, ""},
		{map[string]string{"cluster.x-k8s.io/v1beta1": "v1alpha1_v1alpha2"}, "v1alpha2"},
		{map[string]string{"cluster.x-k8s.io/v1beta2": "v1alpha3_v1alpha4"}, "v1alpha4"},
		{map[string]string{"cluster.x-k8s.io/v1beta1": "v1alpha1_v1alpha2", "cluster.x-k8s.io/v1beta2": "v1alpha3_v1alpha4"}, "v1alpha4"},
		{map[string]string{"cluster.x-k8s.io/v1beta1": "v1alpha1", "cluster.x-k8s.io/v1beta2": ""}, "v1alpha1"},
		{map[string]string{"cluster.x-k8s.io/v1beta1": "v1beta1_v1_v1alpha4"}, "v1"},
		{map[string]string{"cluster.x-k8s.io/v1beta1": "v1beta2_v1beta10"}, "v1beta10"},
		{map[string]string{"cluster.x-k8s.io/v1alpha4": "v1alpha1"}, ""},
	} {
		got, err := LatestAPIVersion("things.example.com", tc.labels)
		if (err != nil) != (tc.want == "") || got != tc.want {
			t.Errorf("%v: %q, %v; want %q", tc.labels, got, err, tc.want)
		}
	}
}

// recordingGetter answers like the CRD labels of the test environment and records what it was asked.
type recordingGetter struct {
	mu    sync.Mutex
	asked []schema.GroupKind
}

func (g *recordingGetter) get(gk schema.GroupKind) (string, error) {
	g.mu.Lock()
	g.asked = append(g.asked, gk)
	g.mu.Unlock()
	switch {
	case strings.HasPrefix(gk.Group, "infrastructure."):
		return gk.Group + "/v1alpha1", nil
	case gk.Group == "hypershift.openshift.io":
		return gk.Group + "/v1beta1", nil
	}
	return "", fmt.Errorf("unknown %v", gk)
}

// review posts a ConversionReview of objs to h and returns the response.
func review(t *testing.T, h http.Handler, desired string, objs ...any) *apiextensionsv1.ConversionResponse {
	t.Helper()
	req := apiextensionsv1.ConversionReview{Request: &apiextensionsv1.ConversionRequest{UID: "u1", DesiredAPIVersion: desired}}
	req.APIVersion, req.Kind = "apiextensions.k8s.io/v1", "ConversionReview"
	for _, o := range objs {
		raw, err := json.Marshal(o)
		if err != nil {
			t.Fatal(err)
		}
		req.Request.Objects = append(req.Request.Objects, runtime.RawExtension{Raw: raw})
	}
	body, _ := json.Marshal(req)
	rec := httptest.NewRecorder()
	h.ServeHTTP(rec, httptest.NewRequest(http.MethodPost, ConvertPath, bytes.NewReader(body)))
	if rec.Code != http.StatusOK {
		t.Fatalf("status %d: %s", rec.Code, rec.Body)
	}
	var resp apiextensionsv1.ConversionReview
	if err := json.Unmarshal(rec.Body.Bytes(), &resp); err != nil || resp.Response == nil {
		t.Fatalf("%v: %s", err, rec.Body)
	}
	if resp.Response.UID != "u1" {
		t.Errorf("uid %q", resp.Response.UID)
	}
	return resp.Response
}

// newOffline is a Webhook whose getter is replaced by g (no API server involved).
func newOffline(t *testing.T, g func(schema.GroupKind) (string, error)) *Webhook {
	t.Helper()
	swapGetter(t, g)
	w, err := New(&rest.Config{Host: "https://127.0.0.1:1"}, prometheus.NewRegistry(), Limits{})
	if err != nil {
		t.Fatal(err)
	}
	setAPIVersionGetter(g)
	return w
}

// swapGetter installs g as the process-global getter for the test and restores the previous one after it (the
// test environment's, when the package runs on it).
func swapGetter(t *testing.T, g func(schema.GroupKind) (string, error)) {
	prev := installedGetter()
	setAPIVersionGetter(g)
	t.Cleanup(func() {
		if prev != nil {
			setAPIVersionGetter(prev)
		}
	})
}

// A private v1beta2 Machine converted to v1beta1 comes back in the private group, and the getter was asked about
// the private infrastructure kind (in-process, without kube-apiserver).
func TestHandlerConvertsPrivateMachine(t *testing.T) {
	g := &recordingGetter{}
	w := newOffline(t, g.get)
	m := &clusterv1.Machine{}
	m.APIVersion, m.Kind = CoreGroup+"/v1beta2", "Machine"
	m.Name, m.Namespace = "m1", "ns"
	m.Spec.ClusterName = "c1"
	m.Spec.InfrastructureRef = clusterv1.ContractVersionedObjectReference{
		APIGroup: "infrastructure.cluster.hypershift.openshift.io", Kind: "KubevirtMachine", Name: "m1"}
	m.Spec.Bootstrap.DataSecretName = new("boot")

	resp := review(t, w.Handler(), CoreGroup+"/v1beta1", m)
	if resp.Result.Status != "Success" || len(resp.ConvertedObjects) != 1 {
		t.Fatalf("result %+v", resp.Result)
	}
	var got clusterv1beta1.Machine
	if err := json.Unmarshal(resp.ConvertedObjects[0].Raw, &got); err != nil {
		t.Fatal(err)
	}
	if got.APIVersion != CoreGroup+"/v1beta1" || got.Kind != "Machine" {
		t.Errorf("converted to %s %s", got.APIVersion, got.Kind)
	}
	if got.Spec.InfrastructureRef.APIVersion != "infrastructure.cluster.hypershift.openshift.io/v1alpha1" {
		t.Errorf("infrastructureRef %+v", got.Spec.InfrastructureRef)
	}
	if want := []schema.GroupKind{{Group: "infrastructure.cluster.hypershift.openshift.io", Kind: "KubevirtMachine"}}; !reflect.DeepEqual(g.asked, want) {
		t.Errorf("getter asked %v, want %v", g.asked, want)
	}
	// The hub is kept in the conversion-data annotation, private groups included.
	if data := got.Annotations["cluster.x-k8s.io/conversion-data"]; !strings.Contains(data, CoreGroup+"/v1beta2") {
		t.Errorf("conversion-data %q", data)
	}

	// A standard-group object is not known to the private scheme.
	m.APIVersion = "cluster.x-k8s.io/v1beta2"
	if resp := review(t, w.Handler(), "cluster.x-k8s.io/v1beta1", m); resp.Result.Status != "Failure" {
		t.Errorf("standard Machine converted: %+v", resp.Result)
	}
}
