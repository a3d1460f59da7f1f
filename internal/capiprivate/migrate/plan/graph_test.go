package plan

import (
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/utils/ptr"

	"github.com/dcm-sp/acm-cluster-sp/internal/capiprivate/groups"
)

const (
	stdCore  = "cluster.x-k8s.io/v1beta2"
	stdInfra = "infrastructure.cluster.x-k8s.io/v1alpha1"
	prvCore  = "cluster.hypershift.openshift.io/v1beta2"
	prvInfra = "infrastructure.cluster.hypershift.openshift.io/v1alpha1"
)

func obj(apiVersion, kind, name, uid string, created int, owners ...metav1.OwnerReference) unstructured.Unstructured {
	u := unstructured.Unstructured{Object: map[string]any{"apiVersion": apiVersion, "kind": kind,
		"metadata": map[string]any{"name": name, "namespace": "clusters-a"}}}
	u.SetUID(types.UID(uid))
	u.SetCreationTimestamp(metav1.NewTime(t0.Add(time.Duration(created) * time.Second)))
	u.SetResourceVersion("7")
	u.SetGeneration(3)
	u.SetOwnerReferences(owners)
	return u
}

func owner(apiVersion, kind, name, uid string) metav1.OwnerReference {
	return metav1.OwnerReference{APIVersion: apiVersion, Kind: kind, Name: name, UID: types.UID(uid),
		Controller: ptr.To(true), BlockOwnerDeletion: ptr.To(true)}
}

// graph is a small legacy hosted cluster: Cluster ← MachineDeployment ← MachineSet ← Machine ← KubevirtMachine,
// with the KubevirtCluster and the template owned by the Cluster. Creation times are deliberately not owner
// order.
func graph() []unstructured.Unstructured {
	cluster := obj(stdCore, "Cluster", "infra", "u-cluster", 5)
	cluster.Object["spec"] = map[string]any{
		"paused":            true,
		"infrastructureRef": map[string]any{"apiGroup": "infrastructure.cluster.x-k8s.io", "kind": "KubevirtCluster", "name": "infra"},
		"controlPlaneRef":   map[string]any{"apiGroup": "hypershift.openshift.io", "kind": "HostedControlPlane", "name": "a"},
	}
	cluster.Object["status"] = map[string]any{"phase": "Provisioned", "observedGeneration": int64(3),
		"initialization": map[string]any{"infrastructureProvisioned": true, "controlPlaneInitialized": true},
		"conditions":     []any{map[string]any{"type": "Available", "status": "True", "observedGeneration": int64(3)}, map[string]any{"type": "Old", "status": "True", "observedGeneration": int64(1)}}}
	cluster.SetFinalizers([]string{"cluster.cluster.x-k8s.io"})
	cluster.SetLabels(map[string]string{"cluster.x-k8s.io/cluster-name": "infra"})
	cluster.SetAnnotations(map[string]string{"cluster.x-k8s.io/conversion-data": `{"apiVersion":"cluster.x-k8s.io/v1beta2"}`})
	cluster.SetManagedFields([]metav1.ManagedFieldsEntry{{Manager: "capi", Operation: metav1.ManagedFieldsOperationUpdate, APIVersion: stdCore, FieldsType: "FieldsV1", FieldsV1: &metav1.FieldsV1{Raw: []byte(`{"f:spec":{}}`)}}})
	cOwner := owner(stdCore, "Cluster", "infra", "u-cluster")
	cOwner.Controller = ptr.To(false)
	kc := obj(stdInfra, "KubevirtCluster", "infra", "u-kc", 6, cOwner)
	kmt := obj(stdInfra, "KubevirtMachineTemplate", "np1", "u-kmt", 1, cOwner)
	md := obj(stdCore, "MachineDeployment", "np1", "u-md", 2, owner(stdCore, "Cluster", "infra", "u-cluster"))
	md.Object["spec"] = map[string]any{"replicas": int64(1), "template": map[string]any{"spec": map[string]any{
		"infrastructureRef": map[string]any{"apiGroup": "infrastructure.cluster.x-k8s.io", "kind": "KubevirtMachineTemplate", "name": "np1"}}}}
	ms := obj(stdCore, "MachineSet", "np1-abc", "u-ms", 3, owner(stdCore, "MachineDeployment", "np1", "u-md"))
	m := obj(stdCore, "Machine", "np1-abc-x", "u-m", 4, owner(stdCore, "MachineSet", "np1-abc", "u-ms"))
	m.Object["spec"] = map[string]any{"providerID": "kubevirt://ledger-1",
		"bootstrap":         map[string]any{"dataSecretName": "user-data-np1"},
		"infrastructureRef": map[string]any{"apiGroup": "infrastructure.cluster.x-k8s.io", "kind": "KubevirtMachine", "name": "np1-abc-x"}}
	m.Object["status"] = map[string]any{"nodeRef": map[string]any{"name": "node-1"}, "phase": "Running"}
	m.SetFinalizers([]string{"machine.cluster.x-k8s.io"})
	m.SetManagedFields([]metav1.ManagedFieldsEntry{{Manager: "capi-machineset", Operation: metav1.ManagedFieldsOperationApply, APIVersion: stdCore,
		FieldsType: "FieldsV1", FieldsV1: &metav1.FieldsV1{Raw: []byte(`{"f:metadata":{"f:ownerReferences":{"k:{\"uid\":\"u-ms\"}":{}}},"f:spec":{"f:providerID":{}}}`)}}})
	km := obj(stdInfra, "KubevirtMachine", "np1-abc-x", "u-km", 0, owner(stdCore, "Machine", "np1-abc-x", "u-m"))
	km.Object["spec"] = map[string]any{"providerID": "kubevirt://ledger-1",
		// a v1beta1-style reference carrying a uid
		"legacyRef": map[string]any{"apiVersion": stdCore, "kind": "Machine", "name": "np1-abc-x", "uid": "u-m"}}
	return []unstructured.Unstructured{km, m, ms, md, kmt, kc, cluster}
}

func names(objs []unstructured.Unstructured) []string {
	var out []string
	for _, o := range objs {
		out = append(out, o.GetKind())
	}
	return out
}

func TestOrderOwnersFirst(t *testing.T) {
	got := names(Order(graph()))
	want := []string{"Cluster", "KubevirtMachineTemplate", "MachineDeployment", "MachineSet", "Machine", "KubevirtMachine", "KubevirtCluster"}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("order (-want +got):\n%s", diff)
	}
	// A cycle still yields every object once.
	a := obj(stdCore, "Machine", "a", "ua", 0, owner(stdCore, "Machine", "b", "ub"))
	b := obj(stdCore, "Machine", "b", "ub", 1, owner(stdCore, "Machine", "a", "ua"))
	if got := Order([]unstructured.Unstructured{b, a}); len(got) != 2 || got[0].GetName() != "a" {
		t.Errorf("cycle: %v", names(got))
	}
}

// copyAll copies a graph the way CopyTwins does (owners first), giving each twin a fresh UID as the server would.
func copyAll(t *testing.T, c *Copier, old []unstructured.Unstructured) ([]unstructured.Unstructured, UIDMap) {
	t.Helper()
	m := UIDMap{}
	var twins []unstructured.Unstructured
	for _, o := range Order(old) {
		tw, err := c.Twin(&o, m, "run1")
		if err != nil {
			t.Fatal(err)
		}
		created := tw.Object.DeepCopy()
		created.SetUID(types.UID("new-" + string(o.GetUID())))
		created.SetGeneration(1)
		if st := TwinStatus(tw, 1); st != nil {
			created.Object["status"] = st
		}
		m[o.GetUID()] = RefOf(created)
		twins = append(twins, *created)
	}
	return twins, m
}

func TestTwin(t *testing.T) {
	c := NewCopier(groups.Default)
	old := graph()
	twins, m := copyAll(t, c, old)
	byKind := map[string]unstructured.Unstructured{}
	for _, tw := range twins {
		byKind[tw.GetKind()] = tw
	}
	cl := byKind["Cluster"]
	if cl.GetAPIVersion() != prvCore || cl.GetUID() != "new-u-cluster" {
		t.Errorf("Cluster twin %s uid %s", cl.GetAPIVersion(), cl.GetUID())
	}
	if g, _, _ := unstructured.NestedString(cl.Object, "spec", "infrastructureRef", "apiGroup"); g != "infrastructure.cluster.hypershift.openshift.io" {
		t.Errorf("infrastructureRef apiGroup %q", g)
	}
	if g, _, _ := unstructured.NestedString(cl.Object, "spec", "controlPlaneRef", "apiGroup"); g != "hypershift.openshift.io" {
		t.Errorf("controlPlaneRef apiGroup %q (not a mapped group: must stay)", g)
	}
	if cl.GetFinalizers()[0] != "cluster.cluster.x-k8s.io" || cl.GetLabels()["cluster.x-k8s.io/cluster-name"] != "infra" {
		t.Errorf("finalizers %v labels %v", cl.GetFinalizers(), cl.GetLabels())
	}
	ann := cl.GetAnnotations()
	if ann["cluster.x-k8s.io/conversion-data"] != `{"apiVersion":"cluster.x-k8s.io/v1beta2"}` || ann[MigratedFromUIDAnnotation] != "u-cluster" || ann[IDAnnotation] != "run1" {
		t.Errorf("annotations %v (annotation values are opaque)", ann)
	}
	if mf := cl.GetManagedFields(); len(mf) != 1 || mf[0].APIVersion != prvCore {
		t.Errorf("managedFields %+v", mf)
	}
	// The owner key of the MachineSet's ownerReference follows the twin's UID: capi-machineset keeps owning it.
	mach := byKind["Machine"]
	if mf := mach.GetManagedFields(); len(mf) != 1 || mf[0].Manager != "capi-machineset" ||
		string(mf[0].FieldsV1.Raw) != `{"f:metadata":{"f:ownerReferences":{"k:{\"uid\":\"new-u-ms\"}":{}}},"f:spec":{"f:providerID":{}}}` {
		t.Errorf("Machine managedFields %+v", mf)
	}
	if !ManagedFieldsPending(&cl, nil) || ManagedFieldsPending(&cl, cl.GetManagedFields()) {
		t.Error("ManagedFieldsPending")
	}
	for _, k := range []string{"resourceVersion", "uid", "creationTimestamp", "generation"} {
		if _, ok := (byKind["Machine"].Object["metadata"].(map[string]any))[k]; ok && k != "uid" && k != "generation" {
			t.Errorf("twin keeps metadata.%s", k)
		}
	}
	// status observedGeneration follows the new generation only where it matched the old one.
	if og, _, _ := unstructured.NestedInt64(cl.Object, "status", "observedGeneration"); og != 1 {
		t.Errorf("status.observedGeneration %d, want 1", og)
	}
	conds, _, _ := unstructured.NestedSlice(cl.Object, "status", "conditions")
	if conds[0].(map[string]any)["observedGeneration"] != int64(1) || conds[1].(map[string]any)["observedGeneration"] != int64(1) {
		// the second one was 1 == stale; it stays 1 by coincidence of numbers: check the stale path explicitly below
		t.Logf("conditions %v", conds)
	}
	// Every ownerReference names a twin by its new UID and private group; controller flags kept.
	for _, tw := range twins {
		for _, r := range tw.GetOwnerReferences() {
			if !strings.HasPrefix(string(r.UID), "new-") || !strings.Contains(r.APIVersion, "hypershift") {
				t.Errorf("%s %s owner %+v", tw.GetKind(), tw.GetName(), r)
			}
		}
	}
	kcTwin := byKind["KubevirtCluster"]
	if r := kcTwin.GetOwnerReferences()[0]; *r.Controller || !*r.BlockOwnerDeletion {
		t.Errorf("controller/blockOwnerDeletion not kept: %+v", r)
	}
	if uid, _, _ := unstructured.NestedString(byKind["KubevirtMachine"].Object, "spec", "legacyRef", "uid"); uid != "new-u-m" {
		t.Errorf("object reference uid %q, want the twin's", uid)
	}
	if p, _, _ := unstructured.NestedString(byKind["Machine"].Object, "spec", "providerID"); p != "kubevirt://ledger-1" {
		t.Errorf("providerID %q", p)
	}
	if n, _, _ := unstructured.NestedString(byKind["Machine"].Object, "status", "nodeRef", "name"); n != "node-1" {
		t.Errorf("nodeRef %q", n)
	}
	if len(m) != len(old) {
		t.Errorf("UID map %d entries", len(m))
	}
	// The originals are untouched.
	if old[1].GetAPIVersion() != stdCore || old[1].GetOwnerReferences()[0].UID != "u-ms" {
		t.Errorf("Twin modified its input")
	}
}

func TestTwinRefusesMissingOwner(t *testing.T) {
	c := NewCopier(groups.Default)
	old := graph()
	// The Machine before its MachineSet: keeping the old UID would get the twin collected, so Twin refuses.
	if _, err := c.Twin(&old[1], UIDMap{}, "run1"); err == nil || !strings.Contains(err.Error(), "no twin") {
		t.Errorf("Twin of a Machine whose MachineSet has no twin: %v", err)
	}
	// A reference carrying a uid into a mapped group likewise.
	if _, err := c.Twin(&old[0], UIDMap{"u-m": {UID: "x"}}, "run1"); err != nil {
		t.Errorf("KubevirtMachine with its Machine copied: %v", err)
	}
	if _, err := c.Twin(&old[0], UIDMap{}, "run1"); err == nil {
		t.Error("KubevirtMachine without its Machine's twin: no error")
	}
	// Not a mapped group.
	cm := obj("v1", "ConfigMap", "x", "u-x", 0)
	if _, err := c.Twin(&cm, UIDMap{}, "run1"); err == nil {
		t.Error("Twin of a ConfigMap: no error")
	}
}

func TestTwinStatusStaleGeneration(t *testing.T) {
	tw := Twin{OldGeneration: 5, Status: map[string]any{"observedGeneration": int64(4),
		"conditions": []any{map[string]any{"observedGeneration": int64(5)}, map[string]any{"observedGeneration": float64(4)}}}}
	st := TwinStatus(tw, 1)
	if st["observedGeneration"] != int64(4) {
		t.Errorf("stale top-level observedGeneration changed: %v", st["observedGeneration"])
	}
	conds := st["conditions"].([]any)
	if conds[0].(map[string]any)["observedGeneration"] != int64(1) || conds[1].(map[string]any)["observedGeneration"] != float64(4) {
		t.Errorf("conditions %v", conds)
	}
	if tw.Status["conditions"].([]any)[0].(map[string]any)["observedGeneration"] != int64(5) {
		t.Error("TwinStatus modified its input")
	}
	if TwinStatus(Twin{}, 1) != nil {
		t.Error("no status → nil")
	}
}

// withAnnotations returns a copy of o with annotations set (nil values delete).
func withAnnotations(o unstructured.Unstructured, kv map[string]*string) unstructured.Unstructured {
	cp := *o.DeepCopy()
	a := cp.GetAnnotations()
	if a == nil {
		a = map[string]string{}
	}
	for k, v := range kv {
		if v == nil {
			delete(a, k)
		} else {
			a[k] = *v
		}
	}
	cp.SetAnnotations(a)
	return cp
}

func TestIdentify(t *testing.T) {
	c := NewCopier(groups.Default)
	old := graph()
	twins, _ := copyAll(t, c, old)
	id := c.Identify(old, twins, "run1", nil)
	if len(id.Twins) != len(old) || len(id.Leftovers) != 0 || len(id.Strays) != 0 {
		t.Fatalf("clean copy: %+v", id)
	}
	for _, o := range old {
		if got := id.Twins[o.GetUID()]; got.UID != types.UID("new-"+string(o.GetUID())) || got.Kind != o.GetKind() {
			t.Errorf("twin of %s: %+v", o.GetName(), got)
		}
	}
	partial := UIDMap{"u-cluster": id.Twins["u-cluster"]}
	if miss := Missing(old, partial); len(miss) != len(old)-1 || miss[0].GetKind() != "KubevirtMachineTemplate" || miss[len(miss)-1].GetKind() != "KubevirtCluster" {
		t.Errorf("Missing %v", names(miss))
	}

	replace := func(k string, f func(unstructured.Unstructured) unstructured.Unstructured) []unstructured.Unstructured {
		out := make([]unstructured.Unstructured, len(twins))
		for i := range twins {
			out[i] = *twins[i].DeepCopy()
			if out[i].GetKind() == k {
				out[i] = f(out[i])
			}
		}
		return out
	}
	str := func(s string) *string { return &s }
	cases := []struct {
		name      string
		private   []unstructured.Unstructured
		leftovers []string
		twins     int
		leftover  int // in the Leftovers map
		objects   int // LeftoverObjects
		strays    []string
	}{
		// CAPI's MachineDeployment controller copies the MachineDeployment's annotations onto its MachineSets.
		{"MachineSet carrying its MachineDeployment's migrated-from-uid", replace("MachineSet", func(u unstructured.Unstructured) unstructured.Unstructured {
			return withAnnotations(u, map[string]*string{MigratedFromUIDAnnotation: str("u-md")})
		}), nil, 7, 0, 0, nil},
		{"same name, another original's uid", replace("Machine", func(u unstructured.Unstructured) unstructured.Unstructured {
			return withAnnotations(u, map[string]*string{MigratedFromUIDAnnotation: str("u-kc")})
		}), nil, 6, 0, 0, []string{"Machine/np1-abc-x"}},
		{"same name, no migrated-from-uid (a stray)", replace("Machine", func(u unstructured.Unstructured) unstructured.Unstructured {
			return withAnnotations(u, map[string]*string{MigratedFromUIDAnnotation: nil, IDAnnotation: nil})
		}), nil, 6, 0, 0, []string{"Machine/np1-abc-x"}},
		{"same name, a foreign uid, our run id", replace("Machine", func(u unstructured.Unstructured) unstructured.Unstructured {
			return withAnnotations(u, map[string]*string{MigratedFromUIDAnnotation: str("somebody-else")})
		}), nil, 6, 0, 0, []string{"Machine/np1-abc-x"}},
		{"an earlier run's twin", replace("Machine", func(u unstructured.Unstructured) unstructured.Unstructured {
			return withAnnotations(u, map[string]*string{IDAnnotation: str("run0")})
		}), nil, 6, 1, 1, nil},
		{"an earlier run's twin whose original is gone", append(slices.Clone(twins), withAnnotations(obj(prvCore, "Machine", "gone", "u-x", 9), map[string]*string{
			MigratedFromUIDAnnotation: str("u-gone"), IDAnnotation: str("run0")})), []string{"run0"}, 7, 0, 1, nil},
		{"the same, but run0 is not a recorded leftover run", append(slices.Clone(twins), withAnnotations(obj(prvCore, "Machine", "gone", "u-x", 9), map[string]*string{
			MigratedFromUIDAnnotation: str("u-gone"), IDAnnotation: str("run0")})), nil, 7, 0, 0, []string{"Machine/gone"}},
		{"born after unpause", append(slices.Clone(twins), obj(prvCore, "Machine", "new", "u-born", 9)), nil, 7, 0, 0, []string{"Machine/new"}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			id := c.Identify(old, tc.private, "run1", tc.leftovers)
			if len(id.Twins) != tc.twins || len(id.Leftovers) != tc.leftover || len(id.LeftoverObjects) != tc.objects || !slices.Equal(id.Strays, tc.strays) {
				t.Errorf("twins %d leftovers %d/%d strays %v, want %d %d/%d %v", len(id.Twins), len(id.Leftovers), len(id.LeftoverObjects), id.Strays,
					tc.twins, tc.leftover, tc.objects, tc.strays)
			}
		})
	}
}

func TestRepointAndInvert(t *testing.T) {
	c := NewCopier(groups.Default)
	old := graph()
	_, m := copyAll(t, c, old)
	hcpRefs := []metav1.OwnerReference{owner(stdCore, "Cluster", "infra", "u-cluster"), owner("v1", "ConfigMap", "x", "u-other")}
	got, changed := Repoint(hcpRefs, m)
	if !changed || got[0].UID != "new-u-cluster" || got[0].APIVersion != prvCore || got[1].UID != "u-other" || !*got[0].Controller {
		t.Errorf("Repoint: %+v", got)
	}
	if hcpRefs[0].UID != "u-cluster" {
		t.Error("Repoint modified its input")
	}
	if !NamesAny(hcpRefs, m) || NamesAny(got, m) {
		t.Error("NamesAny")
	}
	back, changed := Repoint(got, m.Invert(old))
	if !changed || diffRefs(back, hcpRefs) != "" {
		t.Errorf("round trip: %s", diffRefs(back, hcpRefs))
	}
	if _, changed := Repoint(hcpRefs[1:], m); changed {
		t.Error("unrelated ref changed")
	}
}

func diffRefs(a, b []metav1.OwnerReference) string { return cmp.Diff(a, b) }

func kind(objs []unstructured.Unstructured, k string) *unstructured.Unstructured {
	for i := range objs {
		if objs[i].GetKind() == k {
			return &objs[i]
		}
	}
	panic(k)
}

func TestVerify(t *testing.T) {
	c := NewCopier(groups.Default)
	old := graph()
	twins, m := copyAll(t, c, old)
	if p := c.Verify(old, twins, m, "run1"); len(p) != 0 {
		t.Fatalf("clean copy: %v", p)
	}
	mutate := map[string]func(tw []unstructured.Unstructured) []unstructured.Unstructured{
		"no twin": func(tw []unstructured.Unstructured) []unstructured.Unstructured { return tw[1:] },
		"spec differs": func(tw []unstructured.Unstructured) []unstructured.Unstructured {
			kind(tw, "Machine").Object["spec"].(map[string]any)["providerID"] = "x"
			return tw
		},
		"labels differ": func(tw []unstructured.Unstructured) []unstructured.Unstructured { tw[0].SetLabels(nil); return tw },
		"finalizers differ": func(tw []unstructured.Unstructured) []unstructured.Unstructured {
			kind(tw, "Machine").SetFinalizers(nil)
			return tw
		},
		"status differs": func(tw []unstructured.Unstructured) []unstructured.Unstructured {
			delete(kind(tw, "Machine").Object, "status")
			return tw
		},
		"ownerReferences differ": func(tw []unstructured.Unstructured) []unstructured.Unstructured {
			r := kind(tw, "Machine").GetOwnerReferences()
			r[0].UID = "u-ms" // the old UID
			kind(tw, "Machine").SetOwnerReferences(r)
			return tw
		},
		"managedFields differ": func(tw []unstructured.Unstructured) []unstructured.Unstructured {
			// what a create leaves before CopyTwins sets the managedFields back
			mf := append(kind(tw, "Machine").GetManagedFields(), metav1.ManagedFieldsEntry{Manager: FieldManager,
				Operation: metav1.ManagedFieldsOperationUpdate, APIVersion: prvCore, FieldsType: "FieldsV1", FieldsV1: &metav1.FieldsV1{Raw: []byte(`{"f:spec":{}}`)}})
			kind(tw, "Machine").SetManagedFields(mf)
			return tw
		},
		"not of run run1": func(tw []unstructured.Unstructured) []unstructured.Unstructured {
			a := tw[0].GetAnnotations()
			a[IDAnnotation] = "run0"
			tw[0].SetAnnotations(a)
			return tw
		},
	}
	for want, f := range mutate {
		t.Run(want, func(t *testing.T) {
			cp := make([]unstructured.Unstructured, len(twins))
			for i := range twins {
				cp[i] = *twins[i].DeepCopy()
			}
			p := c.Verify(old, f(cp), m, "run1")
			if !strings.Contains(strings.Join(p, "\n"), want) {
				t.Errorf("Verify = %v, want a problem %q", p, want)
			}
		})
	}
}

func classes(blocks []Block) string {
	var out []string
	for _, b := range blocks {
		out = append(out, b.String())
	}
	return strings.Join(out, "\n")
}

func TestPreconditionsAndFingerprint(t *testing.T) {
	old := graph()
	if p := Preconditions(old, true); len(p) != 1 || p[0].Class != ClassMachineDeploymentUnsettled || p[0].Object != "MachineDeployment/np1" {
		t.Errorf("graph (MD without status): %v", p)
	}
	old[3].Object["status"] = map[string]any{"observedGeneration": int64(3), "replicas": int64(1), "upToDateReplicas": int64(1)}
	if p := Preconditions(old, true); len(p) != 0 {
		t.Errorf("ready graph: %v", p)
	}
	if p := Preconditions(old, false); len(p) != 1 || p[0].Class != ClassPausedByOther {
		t.Errorf("paused Cluster before we paused it: %v", p)
	}
	bad := graph()
	bad[3].Object["status"] = old[3].Object["status"]
	delete(bad[1].Object["status"].(map[string]any), "nodeRef")
	bad[0].Object["spec"].(map[string]any)["providerID"] = ""
	bad[2].SetAnnotations(map[string]string{BlockMoveAnnotation: ""})
	now := metav1.Now()
	bad[4].SetDeletionTimestamp(&now)
	unstructured.SetNestedField(bad[6].Object, false, "status", "initialization", "controlPlaneInitialized")
	p := classes(Preconditions(bad, true))
	for _, want := range []string{"no-noderef Machine/np1-abc-x", "no-provider-id KubevirtMachine/np1-abc-x", "block-move MachineSet/np1-abc",
		"deleting KubevirtMachineTemplate/np1", "not-provisioned Cluster/infra (control plane not initialized)"} {
		if !strings.Contains(p, want) {
			t.Errorf("preconditions %q lack %q", p, want)
		}
	}
	// A Machine without providerID, whatever its infrastructure kind (the ref names it generically).
	noPID := graph()
	noPID[3].Object["status"] = old[3].Object["status"]
	delete(noPID[1].Object["spec"].(map[string]any), "providerID")
	if p := Preconditions(noPID, true); len(p) != 1 || p[0].String() != "no-provider-id Machine/np1-abc-x" {
		t.Errorf("Machine without providerID: %v", p)
	}
	if p := Preconditions(old[:6], true); len(p) != 1 || p[0].Class != ClassClusterCount {
		t.Errorf("no Cluster: %v", p)
	}

	f := Fingerprint(old)
	rev := []unstructured.Unstructured{old[6], old[5], old[4], old[3], old[2], old[1], old[0]}
	if Fingerprint(rev) != f {
		t.Error("Fingerprint depends on order")
	}
	old[2].SetResourceVersion("8")
	if Fingerprint(old) == f {
		t.Error("Fingerprint ignores a write")
	}
	if Fingerprint(old[1:]) == Fingerprint(old) {
		t.Error("Fingerprint ignores a delete")
	}
	if !StatusPending(&old[1], &old[0]) || StatusPending(&old[0], &old[1]) {
		t.Error("StatusPending")
	}
}

// TestPlatformBlocks: the platforms whose NodePools HyperShift reconciles in both operators are refused with a
// safety block naming the ConfigMap whose watch ignores the scope; every other platform passes.
func TestPlatformBlocks(t *testing.T) {
	for _, tc := range []struct {
		platform, configMap string
	}{
		{"Azure", "azure-cloud-config"}, {"OpenStack", "openstack-cloud-config"},
		{"AWS", ""}, {"KubeVirt", ""}, {"Agent", ""}, {"None", ""}, {"PowerVS", ""}, {"IBMCloud", ""}, {"GCP", ""}, {"", ""},
	} {
		b := PlatformBlocks(tc.platform)
		if tc.configMap == "" {
			if len(b) != 0 {
				t.Errorf("%q: blocks %v", tc.platform, b)
			}
			continue
		}
		if len(b) != 1 || b[0].Class != ClassUnsupportedPlatform || b[0].Class.Waitable() || b[0].Object != tc.platform || !strings.Contains(b[0].Detail, tc.configMap) {
			t.Errorf("%q: blocks %v", tc.platform, b)
		}
		if got := Blocking(b, []string{string(ClassUnsupportedPlatform)}); len(got) != 1 {
			t.Errorf("%q: an override removed the safety block: %v", tc.platform, got)
		}
	}
}
