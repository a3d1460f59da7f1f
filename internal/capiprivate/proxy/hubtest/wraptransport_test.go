package hubtest

import (
	"testing"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/rest"

	"github.com/dcm-sp/acm-cluster-sp/internal/capiprivate/groups"
	"github.com/dcm-sp/acm-cluster-sp/internal/capiprivate/proxy"
)

// WrapTransport: the proxy's translation in-process, straight to kube-apiserver. A client-go client with it
// creates, lists, patches and watches in the standard group; the objects are stored private; hidden paths 404.
func TestWrapTransport(t *testing.T) {
	ctx := t.Context()
	cfg := rest.CopyConfig(env.TokenConfig(env.AdminToken))
	cfg.WrapTransport = proxy.WrapTransport(groups.Default)
	c, err := dynamic.NewForConfig(cfg)
	if err != nil {
		t.Fatal(err)
	}
	ns := env.NewNamespace(t, "wrap")
	res := c.Resource(gvr(stdCore, "v1beta1", "machines")).Namespace(ns)
	list, err := res.List(ctx, metav1.ListOptions{})
	if err != nil {
		t.Fatal(err)
	}
	w, err := c.Resource(gvr(stdCore, "v1beta2", "machines")).Namespace(ns).Watch(ctx, metav1.ListOptions{ResourceVersion: list.GetResourceVersion()})
	if err != nil {
		t.Fatal(err)
	}
	defer w.Stop()
	if _, err := res.Create(ctx, kinds[2].object("v1beta1", ns, "m"), metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	if _, err := res.Patch(ctx, "m", types.MergePatchType, []byte(`{"metadata":{"labels":{"x":"y"}}}`), metav1.PatchOptions{}); err != nil {
		t.Fatal(err)
	}
	evs := collect(t, w, 2, func(o *unstructured.Unstructured) {
		if o.GetAPIVersion() != stdCore+"/v1beta2" || nested(t, o, "spec", "infrastructureRef", "apiGroup") != stdInfra {
			t.Errorf("watched %s %v", o.GetAPIVersion(), o.Object["spec"])
		}
	})
	if evs[0].typ != "ADDED" || evs[1].typ != "MODIFIED" {
		t.Errorf("events %v", evs)
	}
	got, err := res.Get(ctx, "m", metav1.GetOptions{})
	if err != nil || nested(t, got, "spec", "infrastructureRef", "apiVersion") != stdInfra+"/v1alpha1" {
		t.Fatalf("get: %v", err)
	}
	stored, err := direct(t).Resource(gvr(privCore, "v1beta2", "machines")).Namespace(ns).Get(ctx, "m", metav1.GetOptions{})
	if err != nil || nested(t, stored, "spec", "infrastructureRef", "apiGroup") != privInfra {
		t.Fatalf("stored: %v", err)
	}
	if _, err := c.Resource(gvr(privCore, "v1beta2", "machines")).Namespace(ns).Get(ctx, "m", metav1.GetOptions{}); err == nil {
		t.Error("a private path through WrapTransport answered")
	}
}
