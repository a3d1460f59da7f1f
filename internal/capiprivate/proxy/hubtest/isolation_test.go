package hubtest

import (
	"context"
	"encoding/json"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/client-go/kubernetes"

	"github.com/dcm-sp/acm-cluster-sp/internal/capiprivate/proxy"
	"github.com/dcm-sp/acm-cluster-sp/internal/devtest/capi/capihub"
)

// The platform's standard CAPI objects and CRDs are invisible through the proxy and never change; a
// platform-owned Secret reads with its owner escaped and keeps its standard owner through an update; a watch of
// CRDs never shows a platform CRD's event.
func TestS10PlatformIsolation(t *testing.T) {
	ctx := t.Context()
	ps := startProxy(t, proxy.Options{})
	pc := ps.dynamic(t, env.AdminToken)
	dc := direct(t)
	platformMachine, err := dc.Resource(gvr(stdCore, "v1beta2", "machines")).Namespace(capihub.PlatformNamespace).Get(ctx, capihub.PlatformMachine, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}

	// Machines of every namespace: none of the platform's.
	all, err := pc.Resource(gvr(stdCore, "v1beta2", "machines")).List(ctx, metav1.ListOptions{})
	if err != nil {
		t.Fatal(err)
	}
	for _, m := range all.Items {
		if m.GetNamespace() == capihub.PlatformNamespace {
			t.Errorf("platform Machine %s visible", m.GetName())
		}
	}

	// CRDs: each mapped name once, the private CRD renamed; the platform's dropped (counted).
	crds, err := pc.Resource(gvr("apiextensions.k8s.io", "v1", "customresourcedefinitions")).List(ctx, metav1.ListOptions{})
	if err != nil {
		t.Fatal(err)
	}
	seen := map[string]int{}
	for _, c := range crds.Items {
		seen[c.GetName()]++
		if strings.HasSuffix(c.GetName(), ".cluster.x-k8s.io") && c.GetLabels()["hypershift.openshift.io/private-capi"] != "true" {
			t.Errorf("CRD %s is not the private one", c.GetName())
		}
		if strings.Contains(c.GetName(), "cluster.hypershift.openshift.io") {
			t.Errorf("private CRD name %s visible", c.GetName())
		}
	}
	for _, k := range kinds {
		if n := seen[k.resource+"."+k.group]; n != 1 {
			t.Errorf("CRD %s.%s listed %d times", k.resource, k.group, n)
		}
	}
	if n := ps.metric(t, "capi_private_proxy_objects_filtered_total", "kind", "crd"); n < 8 {
		t.Errorf("filtered CRDs %v", n)
	}

	// The platform-owned Secret: its owner reads escaped and stays standard through an update.
	kc := kubernetes.NewForConfigOrDie(ps.config(env.AdminToken))
	s, err := kc.CoreV1().Secrets(capihub.PlatformNamespace).Get(ctx, capihub.PlatformSecret, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if got := s.OwnerReferences[0].APIVersion; got != "cluster.x-k8s.io.platform.invalid/v1beta2" {
		t.Errorf("platform owner reads %q", got)
	}
	s.Labels["touched-through-proxy"] = "yes"
	if _, err := kc.CoreV1().Secrets(capihub.PlatformNamespace).Update(ctx, s, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	var stored corev1.Secret
	if err := env.Client.Get(ctx, types.NamespacedName{Namespace: capihub.PlatformNamespace, Name: capihub.PlatformSecret}, &stored); err != nil {
		t.Fatal(err)
	}
	if stored.Labels["touched-through-proxy"] != "yes" || stored.OwnerReferences[0].APIVersion != "cluster.x-k8s.io/v1beta2" || stored.OwnerReferences[0].UID != platformMachine.GetUID() {
		t.Errorf("stored platform Secret owners %+v labels %v", stored.OwnerReferences, stored.Labels)
	}

	// A watch of CRDs through the proxy: a platform CRD changes first, a private one after; only the private
	// one's event arrives (the platform's was dropped, counted), so the watch had its chance to show it.
	crdRes := gvr("apiextensions.k8s.io", "v1", "customresourcedefinitions")
	list, err := dc.Resource(crdRes).List(ctx, metav1.ListOptions{})
	if err != nil {
		t.Fatal(err)
	}
	w, err := pc.Resource(crdRes).Watch(ctx, metav1.ListOptions{ResourceVersion: list.GetResourceVersion()})
	if err != nil {
		t.Fatal(err)
	}
	defer w.Stop()
	label := func(name string) {
		t.Helper()
		patch := `{"metadata":{"labels":{"hubtest-touch":"` + time.Now().Format("150405.000000") + `"}}}`
		if _, err := dc.Resource(crdRes).Patch(ctx, name, types.MergePatchType, []byte(patch), metav1.PatchOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	label("machines.cluster.x-k8s.io")                // the platform's CRD
	label("machines.cluster.hypershift.openshift.io") // the private one
	wctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	select {
	case ev := <-w.ResultChan():
		o, _ := ev.Object.(*unstructured.Unstructured)
		if ev.Type != watch.Modified || o == nil || o.GetName() != "machines.cluster.x-k8s.io" || o.GetLabels()["hypershift.openshift.io/private-capi"] != "true" {
			b, _ := json.Marshal(ev.Object)
			t.Errorf("first CRD event %s %s", ev.Type, b)
		}
	case <-wctx.Done():
		t.Fatal("no CRD event")
	}
	waitFor(t, 10*time.Second, "the dropped platform event to be counted", func() (bool, error) {
		return ps.metric(t, "capi_private_proxy_objects_filtered_total", "kind", "watch_event") == 1, nil
	})

	// The platform Machine never changed.
	after, err := dc.Resource(gvr(stdCore, "v1beta2", "machines")).Namespace(capihub.PlatformNamespace).Get(ctx, capihub.PlatformMachine, metav1.GetOptions{})
	if err != nil || after.GetResourceVersion() != platformMachine.GetResourceVersion() {
		t.Errorf("platform Machine changed: %v", err)
	}
}
