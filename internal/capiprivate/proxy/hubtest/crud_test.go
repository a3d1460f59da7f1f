package hubtest

import (
	"fmt"
	"strings"
	"sync"
	"testing"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/rest"

	"github.com/dcm-sp/acm-cluster-sp/internal/capiprivate/proxy"
)

// Every kind, written through the proxy at each served version, reads back at every other version through
// the proxy in the standard groups, and is stored in the private group with private references. Update, merge
// patch, /status, /scale, dryRun, 409, fieldValidation and Warning through the proxy; deletecollection at the end.
func TestS1CRUDEveryKindAcrossVersions(t *testing.T) {
	ctx := t.Context()
	ps := startProxy(t, proxy.Options{})
	var warnings warningRecorder
	cfg := ps.config(env.AdminToken)
	cfg.WarningHandler = &warnings
	pc, err := dynamic.NewForConfig(cfg)
	if err != nil {
		t.Fatal(err)
	}
	dc := direct(t)
	ns := env.NewNamespace(t, "s1")

	// The owner of everything: a Cluster created through the proxy.
	owner, err := pc.Resource(gvr(stdCore, "v1beta2", "clusters")).Namespace(ns).Create(ctx, kinds[0].object("v1beta2", ns, "owner"), metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	ownerRef := metav1.OwnerReference{APIVersion: stdCore + "/v1beta2", Kind: "Cluster", Name: "owner", UID: owner.GetUID()}

	for _, k := range kinds {
		for _, v := range k.versions {
			name := strings.ToLower(fmt.Sprintf("%s-%s", k.kind, v))
			t.Run(k.kind+"/"+v, func(t *testing.T) {
				obj := k.object(v, ns, name)
				obj.SetOwnerReferences([]metav1.OwnerReference{ownerRef})
				res := pc.Resource(gvr(k.group, v, k.resource)).Namespace(ns)

				// dryRun=All: answered, not stored.
				if _, err := res.Create(ctx, obj, metav1.CreateOptions{DryRun: []string{metav1.DryRunAll}}); err != nil {
					t.Fatalf("dry-run create: %v", err)
				}
				if _, err := res.Get(ctx, name, metav1.GetOptions{}); !apierrors.IsNotFound(err) {
					t.Fatalf("after dry run: %v, want NotFound", err)
				}
				created, err := res.Create(ctx, obj, metav1.CreateOptions{})
				if err != nil {
					t.Fatalf("create: %v", err)
				}
				if created.GetAPIVersion() != k.group+"/"+v {
					t.Errorf("create answered %s", created.GetAPIVersion())
				}
				// 409 with the standard group in the Status details.
				_, err = res.Create(ctx, obj, metav1.CreateOptions{})
				if se, ok := err.(apierrors.APIStatus); !apierrors.IsAlreadyExists(err) || !ok || se.Status().Details.Group != k.group {
					t.Errorf("second create: %v, want AlreadyExists in group %s", err, k.group)
				}

				// Every version reads it back through the proxy in the standard group.
				for _, other := range k.versions {
					got, err := pc.Resource(gvr(k.group, other, k.resource)).Namespace(ns).Get(ctx, name, metav1.GetOptions{})
					if err != nil {
						t.Fatalf("get at %s: %v", other, err)
					}
					checkView(t, got, k, other, ownerRef)
				}
				// Stored private, with private references, labels and annotations as written.
				stored, err := dc.Resource(gvr(privateOf(k.group), k.versions[len(k.versions)-1], k.resource)).Namespace(ns).Get(ctx, name, metav1.GetOptions{})
				if err != nil {
					t.Fatalf("direct get: %v", err)
				}
				checkStored(t, stored, k, ownerRef)

				// Update at another version, merge patch at this one, /status.
				other := k.versions[0]
				cur, err := pc.Resource(gvr(k.group, other, k.resource)).Namespace(ns).Get(ctx, name, metav1.GetOptions{})
				if err != nil {
					t.Fatal(err)
				}
				lbl := cur.GetLabels()
				lbl["cluster.x-k8s.io/set-name"] = "updated"
				cur.SetLabels(lbl)
				if _, err := pc.Resource(gvr(k.group, other, k.resource)).Namespace(ns).Update(ctx, cur, metav1.UpdateOptions{}); err != nil {
					t.Fatalf("update at %s: %v", other, err)
				}
				patch := []byte(`{"metadata":{"annotations":{"cluster.x-k8s.io/delete-machine":"yes"}}}`)
				if _, err := res.Patch(ctx, name, types.MergePatchType, patch, metav1.PatchOptions{}); err != nil {
					t.Fatalf("merge patch: %v", err)
				}
				if k.status != "" {
					if _, err := res.Patch(ctx, name, types.MergePatchType, []byte(k.status), metav1.PatchOptions{}, "status"); err != nil {
						t.Fatalf("status patch: %v", err)
					}
				}
				if k.scale {
					scale, err := res.Get(ctx, name, metav1.GetOptions{}, "scale")
					if err != nil {
						t.Fatalf("get scale: %v", err)
					}
					if scale.GetAPIVersion() != "autoscaling/v1" || scale.GetKind() != "Scale" {
						t.Errorf("scale is %s %s", scale.GetAPIVersion(), scale.GetKind())
					}
					if _, err := res.Patch(ctx, name, types.MergePatchType, []byte(`{"spec":{"replicas":0}}`), metav1.PatchOptions{}, "scale"); err != nil {
						t.Fatalf("patch scale: %v", err)
					}
				}
				stored, err = dc.Resource(gvr(privateOf(k.group), k.versions[len(k.versions)-1], k.resource)).Namespace(ns).Get(ctx, name, metav1.GetOptions{})
				if err != nil {
					t.Fatal(err)
				}
				if stored.GetLabels()["cluster.x-k8s.io/set-name"] != "updated" || stored.GetAnnotations()["cluster.x-k8s.io/delete-machine"] != "yes" {
					t.Errorf("stored labels %v annotations %v", stored.GetLabels(), stored.GetAnnotations())
				}
				checkStored(t, stored, k, ownerRef)
			})
		}
	}

	// fieldValidation: Strict refuses an unknown field; Warn answers with a Warning header.
	m := kinds[2].object("v1beta2", ns, "strict")
	_ = unstructured.SetNestedField(m.Object, "x", "spec", "unknownField")
	mres := pc.Resource(gvr(stdCore, "v1beta2", "machines")).Namespace(ns)
	if _, err := mres.Create(ctx, m, metav1.CreateOptions{FieldValidation: "Strict"}); !apierrors.IsBadRequest(err) || !strings.Contains(err.Error(), "unknownField") {
		t.Errorf("strict create: %v, want BadRequest naming the field", err)
	}
	warnings.reset()
	if _, err := mres.Create(ctx, m, metav1.CreateOptions{FieldValidation: "Warn"}); err != nil {
		t.Fatal(err)
	}
	if w := warnings.all(); !strings.Contains(w, "unknownField") {
		t.Errorf("warnings %q, want the unknown field", w)
	}
	if w := warnings.all(); strings.Contains(w, privCore) {
		t.Errorf("a warning names the private group: %q", w)
	}

	// deletecollection through the proxy, by label, per kind.
	for _, k := range kinds {
		res := pc.Resource(gvr(k.group, k.versions[len(k.versions)-1], k.resource)).Namespace(ns)
		if err := res.DeleteCollection(ctx, metav1.DeleteOptions{}, metav1.ListOptions{LabelSelector: "hubtest=crud"}); err != nil {
			t.Errorf("deletecollection %s: %v", k.resource, err)
		}
		list, err := dc.Resource(gvr(privateOf(k.group), k.versions[len(k.versions)-1], k.resource)).Namespace(ns).List(ctx, metav1.ListOptions{LabelSelector: "hubtest=crud"})
		if err != nil {
			t.Fatal(err)
		}
		for _, o := range list.Items {
			if o.GetDeletionTimestamp() == nil {
				t.Errorf("%s %s survived deletecollection", k.kind, o.GetName())
			}
		}
	}
	if n := ps.metric(t, "capi_private_proxy_requests_total", "verb", "deletecollection", "group", stdCore, "code", "200"); n == 0 {
		t.Error("no deletecollection counted")
	}
}

// checkView: the object as a client sees it through the proxy.
func checkView(t *testing.T, o *unstructured.Unstructured, k kind, version string, owner metav1.OwnerReference) {
	t.Helper()
	if o.GetAPIVersion() != k.group+"/"+version {
		t.Errorf("read %s at %s", o.GetAPIVersion(), version)
	}
	if refs := o.GetOwnerReferences(); len(refs) != 1 || refs[0].APIVersion != owner.APIVersion || refs[0].UID != owner.UID {
		t.Errorf("ownerReferences %+v", refs)
	}
	if k.ref != nil {
		path, want := k.ref(version)
		if got := nested(t, o, path...); got != want {
			t.Errorf("%s = %q, want %q", strings.Join(path, "."), got, want)
		}
	}
	checkKeys(t, o)
}

// checkStored: the object as kube-apiserver stores it.
func checkStored(t *testing.T, o *unstructured.Unstructured, k kind, owner metav1.OwnerReference) {
	t.Helper()
	if g := strings.Split(o.GetAPIVersion(), "/")[0]; g != privateOf(k.group) {
		t.Errorf("stored in %s", g)
	}
	if refs := o.GetOwnerReferences(); len(refs) != 1 || refs[0].APIVersion != privCore+"/v1beta2" || refs[0].UID != owner.UID {
		t.Errorf("stored ownerReferences %+v", refs)
	}
	if k.ref != nil {
		path, want := k.ref(strings.Split(o.GetAPIVersion(), "/")[1])
		want = strings.Replace(want, stdInfra, privInfra, 1)
		want = strings.Replace(want, stdIPAM, privateOf(stdIPAM), 1)
		if got := nested(t, o, path...); got != want {
			t.Errorf("stored %s = %q, want %q", strings.Join(path, "."), got, want)
		}
	}
	checkKeys(t, o)
}

// checkKeys: label and annotation keys and values are never renamed.
func checkKeys(t *testing.T, o *unstructured.Unstructured) {
	t.Helper()
	if o.GetLabels()["cluster.x-k8s.io/cluster-name"] != "c1" {
		t.Errorf("labels %v", o.GetLabels())
	}
	if a := o.GetAnnotations(); a["note"] != "cluster.x-k8s.io/v1beta2" {
		t.Errorf("annotations %v", a)
	}
	if _, ok := o.GetAnnotations()["cluster.x-k8s.io/paused"]; !ok {
		t.Errorf("annotations %v", o.GetAnnotations())
	}
}

type warningRecorder struct {
	mu   sync.Mutex
	msgs []string
}

func (w *warningRecorder) HandleWarningHeader(_ int, _ string, text string) {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.msgs = append(w.msgs, text)
}

func (w *warningRecorder) reset() {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.msgs = nil
}

func (w *warningRecorder) all() string {
	w.mu.Lock()
	defer w.mu.Unlock()
	return strings.Join(w.msgs, "\n")
}

var _ rest.WarningHandler = &warningRecorder{}
