package webhook_test

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"net/http"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/google/go-cmp/cmp/cmpopts"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/util/wait"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/yaml"

	"github.com/dcm-sp/acm-cluster-sp/internal/capiprivate/crds"
	"github.com/dcm-sp/acm-cluster-sp/internal/capiprivate/webhook"
	"github.com/dcm-sp/acm-cluster-sp/internal/devtest/capi/capihub"
)

var env *capihub.Env

func TestMain(m *testing.M) { os.Exit(capihub.Main(m, &env)) }

func load(t *testing.T, path, ns string) *unstructured.Unstructured {
	t.Helper()
	data, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	u := &unstructured.Unstructured{}
	// v1beta1 refs carry the namespace of the object.
	if err := yaml.Unmarshal(bytes.ReplaceAll(data, []byte("NAMESPACE"), []byte(ns)), &u.Object); err != nil {
		t.Fatal(err)
	}
	u.SetNamespace(ns)
	return u
}

// get reads name in namespace at apiVersion (group/version).
func get(t *testing.T, apiVersion, kind, ns, name string) *unstructured.Unstructured {
	t.Helper()
	u := &unstructured.Unstructured{}
	u.SetAPIVersion(apiVersion)
	u.SetKind(kind)
	if err := env.Client.Get(t.Context(), client.ObjectKey{Namespace: ns, Name: name}, u); err != nil {
		t.Fatalf("GET %s %s at %s: %v", kind, name, apiVersion, err)
	}
	return u
}

// servedVersions are the private CRD's served versions of gk.
func servedVersions(t *testing.T, gk schema.GroupKind) []string {
	t.Helper()
	var list apiextensionsv1.CustomResourceDefinitionList
	if err := env.Client.List(t.Context(), &list); err != nil {
		t.Fatal(err)
	}
	for _, crd := range list.Items {
		if crd.Spec.Group == gk.Group && crd.Spec.Names.Kind == gk.Kind {
			var out []string
			for _, v := range crd.Spec.Versions {
				if v.Served {
					out = append(out, v.Name)
				}
			}
			return out
		}
	}
	t.Fatalf("no CRD for %v", gk)
	return nil
}

// comparable is obj without what the server rewrites on every write.
func comparable(obj *unstructured.Unstructured) map[string]any {
	c := obj.DeepCopy()
	c.SetResourceVersion("")
	c.SetManagedFields(nil)
	return c.Object
}

// What the v1beta1 converters resolve through the apiVersion getter, from the CRDs' contract labels.
var wantV1beta1 = map[string]map[string]string{
	"Cluster": {
		"spec.infrastructureRef.apiVersion": "infrastructure.cluster.hypershift.openshift.io/v1alpha1",
		"spec.controlPlaneRef.apiVersion":   "hypershift.openshift.io/v1beta1",
	},
	"Machine":           {"spec.infrastructureRef.apiVersion": "infrastructure.cluster.hypershift.openshift.io/v1alpha1"},
	"MachineSet":        {"spec.template.spec.infrastructureRef.apiVersion": "infrastructure.cluster.hypershift.openshift.io/v1alpha1"},
	"MachineDeployment": {"spec.template.spec.infrastructureRef.apiVersion": "infrastructure.cluster.hypershift.openshift.io/v1alpha1"},
	"MachinePool":       {"spec.template.spec.infrastructureRef.apiVersion": "infrastructure.cluster.hypershift.openshift.io/v1alpha1"},
}

func nestedString(t *testing.T, obj *unstructured.Unstructured, path string) string {
	t.Helper()
	v, _, err := unstructured.NestedString(obj.Object, strings.Split(path, ".")...)
	if err != nil {
		t.Fatal(err)
	}
	return v
}

// Conversion through the real API server: every kind created at v1beta2 (status written through /status) is read at
// each older served version, written back unchanged at that version (object and status), and read at v1beta2
// again: exactly the same object, with the same generation (the spec never changed).
func TestConversionRoundTripThroughAPIServer(t *testing.T) {
	t.Parallel()
	ns := env.NewNamespace(t, "s2")
	files, err := filepath.Glob("testdata/v1beta2/*.yaml")
	// One per converted kind: 12 core Cluster API kinds and 8 CAPIBM kinds (IBMVPCClusterTemplate serves one
	// version).
	if err != nil || len(files) != 20 {
		t.Fatalf("%d fixtures, want one per converted kind (20): %v", len(files), err)
	}
	for _, file := range files {
		obj := load(t, file, ns)
		gvk := obj.GroupVersionKind()
		t.Run(gvk.Kind, func(t *testing.T) {
			t.Parallel()
			written := obj.DeepCopy()
			status, hasStatus := obj.Object["status"]
			if err := env.Client.Create(t.Context(), obj); err != nil {
				t.Fatal(err)
			}
			if hasStatus {
				obj.Object["status"] = status
				if err := env.Client.Status().Update(t.Context(), obj); err != nil {
					t.Fatal(err)
				}
			}
			before := get(t, gvk.GroupVersion().String(), gvk.Kind, ns, obj.GetName())
			// Nothing written is pruned: the fixtures set the fields only the pinned versions have (Machine
			// taints and status.failureDomain, MachineHealthCheck unhealthyMachineConditions, ...).
			for _, field := range []string{"spec", "status"} {
				if lost, err := capihub.LostFields(written.Object[field], before.Object[field]); err != nil || len(lost) > 0 {
					t.Errorf("written at %s and read back, %s's %s lost or changed: %v %v", gvk.Version, gvk.Kind, field, lost, err)
				}
			}

			for _, v := range servedVersions(t, gvk.GroupKind()) {
				if v == gvk.Version {
					continue
				}
				apiVersion := schema.GroupVersion{Group: gvk.Group, Version: v}.String()
				spoke := get(t, apiVersion, gvk.Kind, ns, obj.GetName())
				if spoke.GetAPIVersion() != apiVersion {
					t.Fatalf("read at %s, answered %s", apiVersion, spoke.GetAPIVersion())
				}
				if v == "v1beta1" {
					for path, want := range wantV1beta1[gvk.Kind] {
						if got := nestedString(t, spoke, path); got != want {
							t.Errorf("%s at %s: %s = %q, want %q", gvk.Kind, v, path, got, want)
						}
					}
				}
				if lossyV1beta1Writes[gvk.Kind] {
					continue
				}
				if err := env.Client.Update(t.Context(), spoke); err != nil {
					t.Fatalf("update at %s: %v", v, err)
				}
				if hasStatus {
					if err := env.Client.Status().Update(t.Context(), spoke); err != nil {
						t.Fatalf("status update at %s: %v", v, err)
					}
				}
				after := get(t, gvk.GroupVersion().String(), gvk.Kind, ns, obj.GetName())
				dropAddedZeros(before, after, addedByV1beta1Writes[gvk.Kind])
				if d := cmp.Diff(comparable(before), comparable(after)); d != "" {
					t.Errorf("v1beta2 → %s → v1beta2 through kube-apiserver differs (-before +after):\n%s", v, d)
				}
			}
		})
	}
}

// Known-lossy v1beta2 → v1beta1 → v1beta2 through kube-apiserver: a write at v1beta1 carries the old status at
// v1beta1 (kube-apiserver keeps the old status in the request's version), whose replica counters are plain
// int32, so the way up fills the v1beta1 counters into status.deprecated.v1beta1 and an unset status.replicas
// with zeros. Upstream's behaviour, the same for standard CAPI; only added zero values are tolerated there.
var addedByV1beta1Writes = map[string][]string{
	"MachineSet":        {"status.deprecated", "status.replicas"},
	"MachineDeployment": {"status.deprecated", "status.replicas"},
	"MachinePool":       {"status.deprecated", "status.replicas"},
}

// lossyV1beta1Writes are CAPIBM's kinds: its own converters (v0.13.1) keep no conversion-data annotation for
// most of them, so a write at v1beta1 drops what only v1beta2 holds (PowerVS zone, VPC and resource group, v1beta2
// conditions, ...) and adds empty structs. That is CAPIBM's behaviour whoever serves its conversion; the reads at
// v1beta1 are checked here, and TestConversionFromV1beta1 checks v1beta1 → v1beta2 → v1beta1 is exact.
var lossyV1beta1Writes = map[string]bool{
	"IBMPowerVSCluster": true, "IBMPowerVSClusterTemplate": true, "IBMPowerVSImage": true, "IBMPowerVSMachine": true,
	"IBMPowerVSMachineTemplate": true, "IBMVPCCluster": true, "IBMVPCMachine": true, "IBMVPCMachineTemplate": true,
}

// dropAddedZeros removes from after each path that before does not have and after holds only zero values at.
func dropAddedZeros(before, after *unstructured.Unstructured, paths []string) {
	for _, path := range paths {
		fields := strings.Split(path, ".")
		if _, found, _ := unstructured.NestedFieldNoCopy(before.Object, fields...); found {
			continue
		}
		if v, found, _ := unstructured.NestedFieldNoCopy(after.Object, fields...); found && zero(v) {
			unstructured.RemoveNestedField(after.Object, fields...)
		}
		if status, ok := after.Object["status"].(map[string]any); ok && len(status) == 0 {
			delete(after.Object, "status")
		}
	}
}

// zero reports whether v holds only zero values.
func zero(v any) bool {
	switch v := v.(type) {
	case map[string]any:
		for _, e := range v {
			if !zero(e) {
				return false
			}
		}
		return true
	case []any:
		return len(v) == 0
	case int64:
		return v == 0
	case string:
		return v == ""
	case bool:
		return !v
	}
	return v == nil
}

// Known-lossy v1beta1 → v1beta2 → v1beta1: v1beta2 stores durations as seconds, so a v1beta1 duration comes back
// in its canonical form ("5m" → 300 → "5m0s"). Fields named here are compared as durations.
var durationFields = map[string][]string{
	"MachineHealthCheck": {"nodeStartupTimeout", "timeout"},
}

// canonicalDurations rewrites, anywhere in v, the string values of the named fields to time.Duration's form.
func canonicalDurations(v any, fields []string) {
	switch v := v.(type) {
	case map[string]any:
		for k, e := range v {
			if s, ok := e.(string); ok && slices.Contains(fields, k) {
				if d, err := time.ParseDuration(s); err == nil {
					v[k] = d.String()
				}
				continue
			}
			canonicalDurations(e, fields)
		}
	case []any:
		for _, e := range v {
			canonicalDurations(e, fields)
		}
	}
}

// A v1beta1 create is stored as v1beta2 (refs become apiGroup/kind/name) and reads back at v1beta1 as written,
// except the known-lossy fields.
func TestConversionFromV1beta1(t *testing.T) {
	t.Parallel()
	ns := env.NewNamespace(t, "s2-v1beta1")
	files, err := filepath.Glob("testdata/v1beta1/*.yaml")
	if err != nil || len(files) == 0 {
		t.Fatalf("no v1beta1 fixtures: %v", err)
	}
	for _, file := range files {
		obj := load(t, file, ns)
		gvk := obj.GroupVersionKind()
		t.Run(gvk.Kind+"@"+gvk.Version, func(t *testing.T) {
			t.Parallel()
			want := obj.DeepCopy()
			if err := env.Client.Create(t.Context(), obj); err != nil {
				t.Fatal(err)
			}
			hub := get(t, gvk.Group+"/v1beta2", gvk.Kind, ns, obj.GetName())
			if ref, ok, _ := unstructured.NestedMap(hub.Object, "spec", "infrastructureRef"); ok {
				if ref["apiGroup"] != "infrastructure.cluster.hypershift.openshift.io" || ref["apiVersion"] != nil {
					t.Errorf("stored infrastructureRef %v, want a private apiGroup ref", ref)
				}
			}
			got := get(t, gvk.GroupVersion().String(), gvk.Kind, ns, obj.GetName())
			dropAddedZeros(want, got, addedByV1beta1RoundTrip[gvk.Kind])
			for _, o := range []*unstructured.Unstructured{want, got} {
				annotations := o.GetAnnotations()
				delete(annotations, "cluster.x-k8s.io/conversion-data")
				o.SetAnnotations(annotations)
				canonicalDurations(o.Object["spec"], durationFields[gvk.Kind])
			}
			if d := cmp.Diff(jsonOf(t, want.Object["spec"]), jsonOf(t, got.Object["spec"])); d != "" {
				t.Errorf("spec: %s → v1beta2 → %s differs (-written +read):\n%s", gvk.Version, gvk.Version, d)
			}
			if d := cmp.Diff(want.GetLabels(), got.GetLabels(), cmpopts.EquateEmpty()); d != "" {
				t.Errorf("labels differ: %s", d)
			}
			if d := cmp.Diff(want.GetAnnotations(), got.GetAnnotations(), cmpopts.EquateEmpty()); d != "" {
				t.Errorf("annotations differ: %s", d)
			}
		})
	}
}

// Known-lossy v1beta1 → v1beta2 → v1beta1 in CAPIBM's own converters: an unset struct comes back empty.
var addedByV1beta1RoundTrip = map[string][]string{
	"IBMVPCMachine": {"spec.primaryNetworkInterface"},
}

// jsonOf is v as encoding/json reads it back (one number type).
func jsonOf(t *testing.T, v any) any {
	t.Helper()
	data, err := json.Marshal(v)
	if err != nil {
		t.Fatal(err)
	}
	var out any
	if err := json.Unmarshal(data, &out); err != nil {
		t.Fatal(err)
	}
	return out
}

func privateMachine(ns, name, infraGroup, infraKind string) *unstructured.Unstructured {
	return &unstructured.Unstructured{Object: map[string]any{
		"apiVersion": webhook.CoreGroup + "/v1beta2", "kind": "Machine",
		"metadata": map[string]any{"name": name, "namespace": ns},
		"spec": map[string]any{
			"clusterName":       "c1",
			"bootstrap":         map[string]any{"dataSecretName": name},
			"infrastructureRef": map[string]any{"apiGroup": infraGroup, "kind": infraKind, "name": name},
		},
	}}
}

func machineAt(version, ns, name string) *unstructured.Unstructured {
	u := &unstructured.Unstructured{}
	u.SetAPIVersion(webhook.CoreGroup + "/" + version)
	u.SetKind("Machine")
	u.SetNamespace(ns)
	u.SetName(name)
	return u
}

// waitV1beta1List waits until a v1beta1 LIST of Machines in ns works (the v1beta1 watch cache has recovered).
func waitV1beta1List(t *testing.T, ns string) {
	t.Helper()
	list := &unstructured.UnstructuredList{}
	list.SetAPIVersion(webhook.CoreGroup + "/v1beta1")
	list.SetKind("MachineList")
	var last error
	err := wait.PollUntilContextTimeout(t.Context(), 100*time.Millisecond, time.Minute, true, func(ctx context.Context) (bool, error) {
		last = env.Client.List(ctx, list, client.InNamespace(ns))
		return last == nil, nil
	})
	if err != nil {
		t.Errorf("v1beta1 LIST does not work again: %v", last)
	}
}

// code is the HTTP status of an API error (0 for nil or another error).
func code(err error) int32 {
	var status apierrors.APIStatus
	if errors.As(err, &status) {
		return status.Status().Code
	}
	return 0
}

func isStatus(err error, c int32) bool { return code(err) == c }

// With the webhook down, v1beta1 requests fail with 500 and v1beta2 (storage) requests keep working.
func TestWebhookDown(t *testing.T) {
	ns := env.NewNamespace(t, "down")
	kv := "infrastructure.cluster.hypershift.openshift.io"
	if err := env.Client.Create(t.Context(), privateMachine(ns, "m1", kv, "KubevirtMachine")); err != nil {
		t.Fatal(err)
	}
	env.SetWebhookDown(true)
	t.Cleanup(func() { env.SetWebhookDown(false) })

	ctx := t.Context()
	if err := env.Client.Get(ctx, client.ObjectKey{Namespace: ns, Name: "m1"}, machineAt("v1beta1", ns, "m1")); !isStatus(err, http.StatusInternalServerError) {
		t.Errorf("v1beta1 GET with the webhook down: %v, want 500", err)
	}
	list := &unstructured.UnstructuredList{}
	list.SetAPIVersion(webhook.CoreGroup + "/v1beta1")
	list.SetKind("MachineList")
	// kube-apiserver keeps a watch cache per served version, converted as objects are written: a v1beta1 LIST of
	// objects it has already converted may be answered from it (logged, not asserted: it depends on whether the
	// cache has caught up). An object written while the webhook is down cannot enter it, so a LIST that must
	// include one fails.
	t.Logf("v1beta1 LIST of objects converted before the webhook went down: %v", env.Client.List(ctx, list, client.InNamespace(ns)))
	if err := env.Client.Create(ctx, privateMachine(ns, "m0", kv, "KubevirtMachine")); err != nil {
		t.Fatal(err)
	}
	start := time.Now()
	if err := env.Client.List(ctx, list, client.InNamespace(ns)); code(err) < 500 {
		t.Errorf("v1beta1 LIST after a write with the webhook down: %v, want a 5xx", err)
	} else {
		t.Logf("v1beta1 LIST after a write with the webhook down: %d after %s", code(err), time.Since(start).Round(time.Millisecond))
	}
	v1beta1 := privateMachine(ns, "m2", kv, "KubevirtMachine")
	v1beta1.SetAPIVersion(webhook.CoreGroup + "/v1beta1")
	unstructured.RemoveNestedField(v1beta1.Object, "spec", "infrastructureRef", "apiGroup")
	_ = unstructured.SetNestedField(v1beta1.Object, kv+"/v1alpha1", "spec", "infrastructureRef", "apiVersion")
	if err := env.Client.Create(ctx, v1beta1); !isStatus(err, http.StatusInternalServerError) {
		t.Errorf("v1beta1 CREATE with the webhook down: %v, want 500", err)
	}

	// v1beta2 keeps working: create, get, list, update, delete.
	m3 := privateMachine(ns, "m3", kv, "KubevirtMachine")
	if err := env.Client.Create(ctx, m3); err != nil {
		t.Errorf("v1beta2 CREATE with the webhook down: %v", err)
	}
	got := machineAt("v1beta2", ns, "m1")
	if err := env.Client.Get(ctx, client.ObjectKeyFromObject(got), got); err != nil {
		t.Errorf("v1beta2 GET: %v", err)
	}
	got.SetLabels(map[string]string{"updated": "while-down"})
	if err := env.Client.Update(ctx, got); err != nil {
		t.Errorf("v1beta2 UPDATE: %v", err)
	}
	list.SetAPIVersion(webhook.CoreGroup + "/v1beta2")
	if err := env.Client.List(ctx, list, client.InNamespace(ns)); err != nil || len(list.Items) != 3 {
		t.Errorf("v1beta2 LIST: %d items, %v", len(list.Items), err)
	}
	if err := env.Client.Delete(ctx, m3); err != nil {
		t.Errorf("v1beta2 DELETE: %v", err)
	}
	if err := crds.Probe(ctx, env.Client, ns); err == nil {
		t.Error("the install probe passed with the webhook down")
	}

	env.SetWebhookDown(false)
	err := wait.PollUntilContextTimeout(ctx, 50*time.Millisecond, 30*time.Second, true, func(ctx context.Context) (bool, error) {
		return env.Client.Get(ctx, client.ObjectKey{Namespace: ns, Name: "m1"}, machineAt("v1beta1", ns, "m1")) == nil, nil
	})
	if err != nil {
		t.Errorf("v1beta1 GET after the webhook is back: %v", err)
	}
	waitV1beta1List(t, ns)
	if err := crds.Probe(ctx, env.Client, ns); err != nil {
		t.Errorf("the install probe after the webhook is back: %v", err)
	}
}
