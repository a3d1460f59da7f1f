package capihub

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/discovery"
	"k8s.io/client-go/metadata"
	"sigs.k8s.io/controller-runtime/pkg/client"
)

var nsCounter atomic.Int64

// NewNamespace creates a namespace for one test and deletes it after the test (DeleteNamespace).
func (e *Env) NewNamespace(t testing.TB, prefix string) string {
	t.Helper()
	name := fmt.Sprintf("%s-%d", strings.ToLower(prefix), nsCounter.Add(1))
	ns := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: name}}
	if err := e.Client.Create(context.Background(), ns); err != nil {
		t.Fatalf("creating namespace %s: %v", name, err)
	}
	t.Cleanup(func() { e.DeleteNamespace(name) })
	return name
}

// namespaceReleaseWithin bounds the release of one deleted namespace's finalizers.
const namespaceReleaseWithin = 2 * time.Minute

// DeleteNamespace deletes a test's namespace and, in the background until it is gone, removes the finalizers of
// the objects in it that are being deleted. A test's controllers are gone when its namespace is deleted, so the
// finalizers they own (Cluster API's, HyperShift's) would never be removed: the namespace would stay Terminating,
// and kube-controller-manager's namespace controller would list and delete-collect every resource in it again
// and again for the rest of the package's run — at times half of the requests kube-apiserver served. Only
// objects already marked for deletion are touched (the API server refuses new finalizers on those, so a
// controller still running cannot put one back). Stop waits for the releases still under way.
func (e *Env) DeleteNamespace(name string) {
	err := e.Client.Delete(context.Background(), &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: name}})
	if err != nil { // gone already, or the hub is
		return
	}
	disc, err := discovery.NewDiscoveryClientForConfig(e.Config)
	if err != nil {
		return
	}
	md, err := metadata.NewForConfig(e.Config)
	if err != nil {
		return
	}
	e.releases.Add(1)
	go func() {
		defer e.releases.Done()
		ctx, cancel := context.WithTimeout(e.releaseCtx, namespaceReleaseWithin)
		defer cancel()
		_ = wait.PollUntilContextCancel(ctx, 2*time.Second, false, func(ctx context.Context) (bool, error) {
			err := e.Client.Get(ctx, client.ObjectKey{Name: name}, &corev1.Namespace{})
			if apierrors.IsNotFound(err) {
				return true, nil
			}
			releaseFinalizers(ctx, disc, md, name)
			return false, nil
		})
	}()
}

// releaseFinalizers removes the finalizers of every object in namespace that has a deletion timestamp.
func releaseFinalizers(ctx context.Context, disc discovery.DiscoveryInterface, md metadata.Interface, namespace string) {
	lists, _ := disc.ServerPreferredNamespacedResources() // partial results are fine: the next pass retries
	release := []byte(`{"metadata":{"finalizers":null}}`)
	for _, l := range lists {
		gv, err := schema.ParseGroupVersion(l.GroupVersion)
		if err != nil {
			continue
		}
		for _, r := range l.APIResources {
			if !slices.Contains(r.Verbs, "list") || !slices.Contains(r.Verbs, "patch") {
				continue
			}
			res := md.Resource(gv.WithResource(r.Name)).Namespace(namespace)
			items, err := res.List(ctx, metav1.ListOptions{})
			if err != nil {
				continue
			}
			for _, o := range items.Items {
				if o.DeletionTimestamp != nil && len(o.Finalizers) > 0 {
					_, _ = res.Patch(ctx, o.Name, types.MergePatchType, release, metav1.PatchOptions{})
				}
			}
		}
	}
}
