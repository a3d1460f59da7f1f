package hubtest

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/tools/cache"

	"github.com/dcm-sp/acm-cluster-sp/internal/capiprivate/proxy"
)

// event is what a watcher saw: type, name and resourceVersion.
type event struct{ typ, name, rv string }

func (e event) String() string { return e.typ + " " + e.name + "@" + e.rv }

// For every kind, a watch through the proxy sees the same events in the same order as a direct watch of the
// private group, in the standard group; bookmarks pass (the initial-events-end bookmark of a watch list).
func TestS4WatchEveryKindInOrder(t *testing.T) {
	ctx := t.Context()
	ps := startProxy(t, proxy.Options{})
	pc := ps.dynamic(t, env.AdminToken)
	dc := direct(t)
	ns := env.NewNamespace(t, "s4")
	for _, k := range kinds {
		v := k.versions[len(k.versions)-1]
		t.Run(k.kind, func(t *testing.T) {
			pres := pc.Resource(gvr(k.group, v, k.resource)).Namespace(ns)
			dres := dc.Resource(gvr(privateOf(k.group), v, k.resource)).Namespace(ns)
			list, err := dres.List(ctx, metav1.ListOptions{})
			if err != nil {
				t.Fatal(err)
			}
			rv := list.GetResourceVersion()
			pw, err := pres.Watch(ctx, metav1.ListOptions{ResourceVersion: rv, AllowWatchBookmarks: true})
			if err != nil {
				t.Fatal(err)
			}
			defer pw.Stop()
			dw, err := dres.Watch(ctx, metav1.ListOptions{ResourceVersion: rv})
			if err != nil {
				t.Fatal(err)
			}
			defer dw.Stop()

			name := strings.ToLower(k.kind) + "-w"
			if _, err := pres.Create(ctx, k.object(v, ns, name), metav1.CreateOptions{}); err != nil {
				t.Fatal(err)
			}
			for i := range 3 {
				patch := fmt.Sprintf(`{"metadata":{"labels":{"step":"%d"}}}`, i)
				if _, err := pres.Patch(ctx, name, "application/merge-patch+json", []byte(patch), metav1.PatchOptions{}); err != nil {
					t.Fatal(err)
				}
			}
			if err := pres.Delete(ctx, name, metav1.DeleteOptions{}); err != nil {
				t.Fatal(err)
			}
			want := collect(t, dw, 5, nil)
			got := collect(t, pw, 5, func(o *unstructured.Unstructured) {
				if o.GetAPIVersion() != k.group+"/"+v {
					t.Errorf("event object %s", o.GetAPIVersion())
				}
			})
			if !slices.Equal(got, want) {
				t.Errorf("through the proxy %v\ndirect %v", got, want)
			}
		})
	}
	if n := ps.metric(t, "capi_private_proxy_watch_events_total", "type", "ADDED"); n < float64(len(kinds)) {
		t.Errorf("watch_events_total{type=ADDED} %v", n)
	}
	if n := ps.metric(t, "capi_private_proxy_objects_translated_total", "direction", "response"); n == 0 {
		t.Error("no translated response objects counted")
	}
	waitFor(t, 10*time.Second, "watches_active back to 0", func() (bool, error) {
		return ps.metric(t, "capi_private_proxy_watches_active") == 0, nil
	})
	// Durations: every create observed, no watch (long-running requests stay out of the histogram).
	if n := ps.metric(t, "capi_private_proxy_request_duration_seconds", "verb", "create", "path", "translated"); n != float64(len(kinds)) {
		t.Errorf("request_duration_seconds{create} count %v, want %d", n, len(kinds))
	}
	if n := ps.metric(t, "capi_private_proxy_request_duration_seconds", "verb", "watch"); n != 0 {
		t.Errorf("request_duration_seconds{watch} count %v, want 0", n)
	}
	if n := ps.metric(t, "capi_private_proxy_translation_duration_seconds", "direction", "response"); n < float64(5*len(kinds)) {
		t.Errorf("translation_duration_seconds{response} count %v, want one per event at least", n)
	}
	if n := ps.metric(t, "capi_private_proxy_translation_duration_seconds", "direction", "request"); n < float64(4*len(kinds)) {
		t.Errorf("translation_duration_seconds{request} count %v, want one per body", n)
	}

	// A watch list: initial events, then the initial-events-end BOOKMARK, through the proxy.
	code, frames := rawWatch(t, ps.URL+"/apis/cluster.x-k8s.io/v1beta2/namespaces/"+ns+"/machines?watch=true&sendInitialEvents=true&resourceVersionMatch=NotOlderThan&allowWatchBookmarks=true", env.AdminToken,
		func(f map[string]any) bool { return f["type"] == "BOOKMARK" })
	if code != 200 || len(frames) == 0 {
		t.Fatalf("watch list: %d, %d frames", code, len(frames))
	}
	bm := frames[len(frames)-1]["object"].(map[string]any)
	if bm["apiVersion"] != stdCore+"/v1beta2" || bm["metadata"].(map[string]any)["annotations"].(map[string]any)["k8s.io/initial-events-end"] != "true" {
		t.Errorf("bookmark %v", bm)
	}

	// A resourceVersion older than the watch cache's window: 410 as an ERROR event, which a client answers by
	// relisting.
	code, frames = rawWatch(t, ps.URL+"/apis/cluster.x-k8s.io/v1beta2/namespaces/"+ns+"/machines?watch=true&resourceVersion=1", env.AdminToken,
		func(map[string]any) bool { return true })
	if code != 200 || len(frames) != 1 || frames[0]["type"] != "ERROR" || frames[0]["object"].(map[string]any)["code"] != float64(410) {
		t.Errorf("old resourceVersion: %d %v", code, frames)
	}
}

// collect reads n events (bookmarks skipped) from w.
func collect(t *testing.T, w watch.Interface, n int, check func(*unstructured.Unstructured)) []event {
	t.Helper()
	var out []event
	timeout := time.After(30 * time.Second)
	for len(out) < n {
		select {
		case ev, ok := <-w.ResultChan():
			if !ok {
				t.Fatalf("watch closed after %v", out)
			}
			if ev.Type == watch.Bookmark {
				continue
			}
			o, ok := ev.Object.(*unstructured.Unstructured)
			if !ok {
				t.Fatalf("event %s %T %v", ev.Type, ev.Object, ev.Object)
			}
			if check != nil {
				check(o)
			}
			out = append(out, event{string(ev.Type), o.GetName(), o.GetResourceVersion()})
		case <-timeout:
			t.Fatalf("%d of %d events: %v", len(out), n, out)
		}
	}
	return out
}

// rawWatch reads watch frames until stop says so or the stream ends.
func rawWatch(t *testing.T, url, token string, stop func(map[string]any) bool) (int, []map[string]any) {
	t.Helper()
	ctx, cancel := context.WithTimeout(t.Context(), 30*time.Second)
	defer cancel()
	req, _ := http.NewRequestWithContext(ctx, "GET", url, nil)
	req.Header.Set("Authorization", "Bearer "+token)
	resp, err := httpClient(t).Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	var frames []map[string]any
	dec := json.NewDecoder(bufio.NewReader(resp.Body))
	for {
		var f map[string]any
		if err := dec.Decode(&f); err != nil {
			return resp.StatusCode, frames
		}
		frames = append(frames, f)
		if stop(f) {
			return resp.StatusCode, frames
		}
	}
}

// limit=50 pagination through the proxy: continue tokens pass unchanged and the pages add up to a direct list.
func TestS4Pagination(t *testing.T) {
	ctx := t.Context()
	ps := startProxy(t, proxy.Options{})
	ns := env.NewNamespace(t, "page")
	createMachines(t, ns, 120, 8)
	pres := ps.dynamic(t, env.AdminToken).Resource(gvr(stdCore, "v1beta2", "machines")).Namespace(ns)
	var names []string
	cont, pages := "", 0
	for {
		l, err := pres.List(ctx, metav1.ListOptions{Limit: 50, Continue: cont})
		if err != nil {
			t.Fatal(err)
		}
		pages++
		for _, o := range l.Items {
			names = append(names, o.GetName())
			if o.GetAPIVersion() != stdCore+"/v1beta2" {
				t.Fatalf("item %s", o.GetAPIVersion())
			}
		}
		if cont = l.GetContinue(); cont == "" {
			break
		}
	}
	all, err := direct(t).Resource(gvr(privCore, "v1beta2", "machines")).Namespace(ns).List(ctx, metav1.ListOptions{})
	if err != nil {
		t.Fatal(err)
	}
	var want []string
	for _, o := range all.Items {
		want = append(want, o.GetName())
	}
	if pages != 3 || !slices.Equal(names, want) {
		t.Errorf("%d pages, %d names, want 3 pages of %d", pages, len(names), len(want))
	}
}

// createMachines creates n Machines m-0000… directly in the private group (the stored form), with c writers.
func createMachines(t testing.TB, ns string, n, c int) {
	t.Helper()
	res := direct(t).Resource(gvr(privCore, "v1beta2", "machines")).Namespace(ns)
	var wg sync.WaitGroup
	errs := make(chan error, n)
	next := make(chan int, n)
	for i := range n {
		next <- i
	}
	close(next)
	for range c {
		wg.Go(func() {
			for i := range next {
				if _, err := res.Create(context.Background(), storedMachine(ns, fmt.Sprintf("m-%04d", i)), metav1.CreateOptions{}); err != nil {
					errs <- err
				}
			}
		})
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Fatal(err)
	}
}

// storedMachine is a Machine as stored (~8 KB as JSON, like a real one with conditions and annotations). Like
// HyperShift's, its bootstrap is a data Secret, without a bootstrap provider's configRef: a ref to a kind whose
// CRD is not installed makes the Machine unconvertible to v1beta1, and while one exists kube-apiserver's
// v1beta1 view of Machines re-lists and fails for every namespace (a later test's v1beta1 list among them).
func storedMachine(ns, name string) *unstructured.Unstructured {
	conds := []any{}
	for _, c := range []string{"Available", "Ready", "UpToDate", "BootstrapConfigReady", "InfrastructureReady", "NodeHealthy", "NodeReady", "Deleting", "Paused", "Remediating", "Updating", "HealthCheckSucceeded"} {
		conds = append(conds, map[string]any{"type": c, "status": "True", "reason": "Ready", "message": strings.Repeat("condition message text ", 8),
			"lastTransitionTime": "2026-01-01T00:00:00Z", "observedGeneration": int64(1)})
	}
	ann := map[string]any{}
	for i := range 8 {
		ann[fmt.Sprintf("example.com/annotation-%d", i)] = strings.Repeat("v", 120)
	}
	ann["cluster.x-k8s.io/cloned-from-groupkind"] = "KubevirtMachineTemplate.infrastructure.cluster.x-k8s.io"
	return &unstructured.Unstructured{Object: map[string]any{
		"apiVersion": privCore + "/v1beta2", "kind": "Machine",
		"metadata": map[string]any{"name": name, "namespace": ns, "annotations": ann,
			"labels": map[string]any{"cluster.x-k8s.io/cluster-name": "c1", "cluster.x-k8s.io/set-name": "ms", "cluster.x-k8s.io/deployment-name": "md"}},
		"spec": map[string]any{"clusterName": "c1", "version": "v1.34.0", "providerID": "kubevirt://" + name,
			"bootstrap":         map[string]any{"dataSecretName": name + "-bootstrap"},
			"infrastructureRef": map[string]any{"apiGroup": privInfra, "kind": "KubevirtMachine", "name": name}},
		"status": map[string]any{"conditions": conds},
	}}
}

// informerLog runs an informer on a resource and records every event after the initial list.
type informerLog struct {
	inf    cache.SharedIndexInformer
	mu     sync.Mutex
	events []event
}

func newInformerLog(c dynamic.Interface, r schema.GroupVersionResource, ns string) *informerLog {
	res := c.Resource(r).Namespace(ns)
	il := &informerLog{}
	il.inf = cache.NewSharedIndexInformer(&cache.ListWatch{
		ListWithContextFunc: func(ctx context.Context, o metav1.ListOptions) (runtime.Object, error) {
			return res.List(ctx, o)
		},
		WatchFuncWithContext: func(ctx context.Context, o metav1.ListOptions) (watch.Interface, error) {
			return res.Watch(ctx, o)
		},
	}, &unstructured.Unstructured{}, 0, cache.Indexers{})
	record := func(typ string, obj any) {
		if d, ok := obj.(cache.DeletedFinalStateUnknown); ok {
			obj = d.Obj
			typ = "DELETED-UNKNOWN"
		}
		o := obj.(*unstructured.Unstructured)
		il.mu.Lock()
		il.events = append(il.events, event{typ, o.GetName(), o.GetResourceVersion()})
		il.mu.Unlock()
	}
	_, _ = il.inf.AddEventHandler(cache.ResourceEventHandlerDetailedFuncs{
		AddFunc: func(obj any, initial bool) {
			if !initial {
				record("ADDED", obj)
			}
		},
		UpdateFunc: func(_, obj any) { record("MODIFIED", obj) },
		DeleteFunc: func(obj any) { record("DELETED", obj) },
	})
	return il
}

func (il *informerLog) log() []event {
	il.mu.Lock()
	defer il.mu.Unlock()
	return slices.Clone(il.events)
}
