package hub

import (
	"context"
	"sync"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/watch"
	toolscache "k8s.io/client-go/tools/cache"
)

// The hub's informers start from a list, then watch from its resourceVersion: never a streaming list (a watch asking
// for the initial events), which client-go would otherwise try first.
func TestInformersList(t *testing.T) {
	var mu sync.Mutex
	var calls []string
	watched := make(chan struct{}, 1)
	lw := &toolscache.ListWatch{
		ListWithContextFunc: func(_ context.Context, o metav1.ListOptions) (runtime.Object, error) {
			mu.Lock()
			calls = append(calls, "list")
			mu.Unlock()
			return &corev1.ConfigMapList{ListMeta: metav1.ListMeta{ResourceVersion: "7"},
				Items: []corev1.ConfigMap{{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "a", ResourceVersion: "7"}}}}, nil
		},
		WatchFuncWithContext: func(_ context.Context, o metav1.ListOptions) (watch.Interface, error) {
			mu.Lock()
			if o.SendInitialEvents != nil && *o.SendInitialEvents {
				calls = append(calls, "streaming list")
			} else {
				calls = append(calls, "watch from "+o.ResourceVersion)
			}
			mu.Unlock()
			select {
			case watched <- struct{}{}:
			default:
			}
			return watch.NewFake(), nil
		},
	}
	inf := newListingInformer(lw, &corev1.ConfigMap{}, 0, toolscache.Indexers{})
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	go inf.RunWithContext(ctx)
	select {
	case <-watched:
	case <-time.After(30 * time.Second):
		t.Fatal("the informer never watched")
	}
	// The informer moves the list into its store on its own goroutine, which the watch may come before.
	if !toolscache.WaitForCacheSync(ctx.Done(), inf.HasSynced) {
		t.Fatal("the informer never synced")
	}
	mu.Lock()
	defer mu.Unlock()
	if len(calls) < 2 || calls[0] != "list" || calls[1] != "watch from 7" {
		t.Fatalf("calls %v, want a list, then a watch from its resourceVersion 7", calls)
	}
	if keys := inf.GetStore().ListKeys(); len(keys) != 1 || keys[0] != "ns/a" {
		t.Errorf("store %v after the list", keys)
	}
}
