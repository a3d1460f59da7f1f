package hubtest

import (
	"context"
	"fmt"
	"slices"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/tools/cache"
)

// 50 informers watch Machines through a capi-private subprocess. The proxy is killed with SIGKILL in the
// middle of a stream of writes, writes go on while it is down, and a new process takes over the same socket. Every
// informer ends with exactly the direct informer's event sequence (same events, same order: it resumed from its
// resourceVersion, nothing lost, nothing reordered), and the new process served no LIST (no informer relisted).
func TestS4RestartUnder50Informers(t *testing.T) {
	ctx, cancel := context.WithCancel(t.Context())
	defer cancel()
	pp := startProxyProcess(t)
	ns := env.NewNamespace(t, "restart")
	pcfg := pp.config(env.AdminToken)
	pc, err := dynamic.NewForConfig(pcfg)
	if err != nil {
		t.Fatal(err)
	}
	dc := direct(t)
	const n = 50
	var logs []*informerLog
	for range n {
		logs = append(logs, newInformerLog(pc, gvr(stdCore, "v1beta2", "machines"), ns))
	}
	ref := newInformerLog(dc, gvr(privCore, "v1beta2", "machines"), ns)
	for _, il := range append(logs, ref) {
		go il.inf.RunWithContext(ctx)
	}
	for _, il := range append(logs, ref) {
		if !cache.WaitForCacheSync(ctx.Done(), il.inf.HasSynced) {
			t.Fatal("informer did not sync")
		}
	}
	waitFor(t, 30*time.Second, "50 watches through the proxy", func() (bool, error) {
		return metric(t, pp.scrape(t), "capi_private_proxy_watches_active") == n, nil
	})

	res := dc.Resource(gvr(privCore, "v1beta2", "machines")).Namespace(ns)
	step, events := 0, 0 // events: how many watch events the writes make
	write := func(k int) {
		t.Helper()
		for range k {
			name := fmt.Sprintf("r-%02d", step%12)
			switch {
			case step < 12:
				_, err = res.Create(ctx, storedMachine(ns, name), metav1.CreateOptions{})
				events++
			case step%5 == 4:
				err = res.Delete(ctx, name, metav1.DeleteOptions{})
				if err == nil {
					_, err = res.Create(ctx, storedMachine(ns, name), metav1.CreateOptions{})
				}
				events += 2
			default:
				_, err = res.Patch(ctx, name, "application/merge-patch+json", fmt.Appendf(nil, `{"metadata":{"labels":{"step":"%d"}}}`, step), metav1.PatchOptions{})
				events++
			}
			if err != nil {
				t.Fatalf("write %d: %v", step, err)
			}
			step++
		}
	}
	write(30)
	pp.kill() // kill -9 in the middle of the stream
	write(30) // while no proxy runs
	pp.start()
	write(30)
	// Every informer converges on the direct one's sequence, once each has seen every event the writes made.
	waitFor(t, 60*time.Second, "every informer to see every event", func() (bool, error) {
		for i, il := range append(logs, ref) {
			if got := il.log(); len(got) < events {
				return false, fmt.Errorf("informer %d has %d of %d events", i, len(got), events)
			}
		}
		return true, nil
	})
	w := ref.log()
	for i, il := range logs {
		if got := il.log(); !slices.Equal(got, w) {
			t.Fatalf("informer %d\n got %v\nwant %v", i, got, w)
		}
	}
	after := pp.scrape(t)
	if lists := metric(t, after, "capi_private_proxy_requests_total", "verb", "list"); lists != 0 {
		t.Errorf("the new proxy process served %v LISTs: an informer relisted", lists)
	}
	if watches := metric(t, after, "capi_private_proxy_watches_active"); watches != n {
		t.Errorf("%v watches on the new process, want %d", watches, n)
	}
	// Graceful stop: watches end, the process exits 0.
	cancel()
	if err := pp.terminate(); err != nil {
		t.Fatal(err)
	}
}
