package app

import (
	"context"
	"fmt"
	"net/http"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	hyperv1 "github.com/openshift/hypershift/api/hypershift/v1beta1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/dcm-sp/acm-cluster-sp/internal/devtest/sp/faultproxy"
	"github.com/dcm-sp/acm-cluster-sp/internal/devtest/testwait"
)

// pausable is an SP replica whose Lease requests can be cut: a paused process, as the hub sees it, that cannot
// renew its leadership while everything else keeps working.
type pausable struct {
	*testSP
	px *faultproxy.Proxy
}

func (p *pausable) pause(paused bool) {
	p.px.SetRule(func(r faultproxy.Request) faultproxy.Verdict {
		if paused && strings.Contains(r.Path, "/apis/coordination.k8s.io/") {
			return faultproxy.Abort
		}
		return faultproxy.Pass
	})
}

// Leadership flaps fast between two replicas (a 1.5 s lease, which the Lease records as 1 s: the others wait 1 s,
// which once let both publish for a moment; the leader is paused until the other takes over, a
// dozen times) while clusters are created, become READY and are deleted through both replicas. Two replicas' terms
// may overlap (client-go's renew loop outlives the lease when the API server struggles), but never both may
// publish; and every cluster's statuses reach the stream in order, READY and DELETED always (the finalizer holds
// each HostedCluster until DELETED is acknowledged), never a step back: a new leader first catches its caches up
// with the API server. Before these fixes this test saw DELETING → READY → DELETING and PROVISIONING → PENDING.
func TestLeadershipFlapping(t *testing.T) {
	cfg := eventsConfig("flap", "sp-flap", testHub.NATSURL)
	cfg.LeaseDuration = 1500 * time.Millisecond
	var replicas []*pausable
	for range 2 {
		px, err := faultproxy.Start(testHub.Config)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { px.Close() })
		replicas = append(replicas, &pausable{testSP: startSP(t, cfg, Options{RestConfig: px.Config()}), px: px})
	}
	leaderIndex := func() int {
		for i, r := range replicas {
			if r.App.Leading() {
				return i
			}
		}
		return -1
	}
	waitFor(t, 60*time.Second, "a leader", func() bool { return leaderIndex() >= 0 })
	done := make(chan struct{})

	// At no sampled moment may both replicas be allowed to publish (their terms may overlap; publishing may not).
	// A sample reads the two replicas one after the other: it counts only when both reads fall within pairWindow,
	// well inside the fence's margin (a tenth of the 1 s the Lease records), so a sampler descheduled between its
	// two reads on a loaded machine cannot see the old leader before a handover and the new one after it.
	const pairWindow = 20 * time.Millisecond
	var samples, both, slow atomic.Int64
	sampling := make(chan struct{})
	go func() {
		defer close(sampling)
		tick := time.NewTicker(5 * time.Millisecond)
		defer tick.Stop()
		for {
			select {
			case <-done:
				return
			case <-tick.C:
			}
			began := time.Now()
			pair := replicas[0].App.leader.Holds() && replicas[1].App.leader.Holds()
			if time.Since(began) > pairWindow {
				slow.Add(1)
				continue
			}
			samples.Add(1)
			if pair {
				both.Add(1)
			}
		}
	}()

	// Flip leadership until the clusters are done: pause the leader until the other replica leads, then resume.
	var flips atomic.Int32
	var flipping sync.WaitGroup
	flipping.Add(1)
	go func() {
		defer flipping.Done()
		for {
			select {
			case <-done:
				return
			default:
			}
			from := leaderIndex()
			if from < 0 {
				if !testwait.Poll(20*time.Second, func() bool { return leaderIndex() >= 0 }) {
					t.Error("no leader for 20s")
					return
				}
				continue
			}
			to := 1 - from
			replicas[from].pause(true)
			took := testwait.Poll(20*time.Second, func() bool { return replicas[to].App.Leading() && !replicas[from].App.Leading() })
			replicas[from].pause(false)
			if !took {
				t.Errorf("replica %d did not take over from %d within 20s", to, from)
				return
			}
			flips.Add(1)
		}
	}()

	type cluster struct {
		id, name string
		stream   *statusStream
	}
	order := []string{"PENDING", "PROVISIONING", "READY", "DELETING", "DELETED"}
	duplicates, skipped, total := 0, 0, 0
	// Waves of clusters until leadership has changed a dozen times.
	for wave := 0; flips.Load() < 12 && wave < 30; wave++ {
		var clusters []cluster
		for i := range 4 {
			name := uniqueName(fmt.Sprintf("flap%d-%d", wave, i))
			c := cluster{id: "inst-" + name, name: name}
			c.stream = watchEvents(t, testHub.NATSURL, "sp-flap", c.id)
			if code, _, raw := replicas[i%2].create(t, c.id, kubevirtBody(name, 1)); code != http.StatusCreated {
				t.Fatalf("create %s: %d %s", c.id, code, raw)
			}
			clusters = append(clusters, c)
		}
		for _, c := range clusters {
			c.stream.until("READY", 60*time.Second)
		}
		for i, c := range clusters {
			resp, err := replicas[(i+1)%2].Client.DeleteClusterWithResponse(context.Background(), c.id, nil)
			if err != nil || resp.StatusCode() != http.StatusNoContent {
				t.Fatalf("DELETE %s: %v %v", c.id, err, resp.Status())
			}
		}
		for _, c := range clusters {
			seq, _ := c.stream.until("DELETED", 60*time.Second)
			total++
			duplicates += len(c.stream.events) - len(seq)
			skipped += len(order) - len(seq)
			// In order, READY and DELETED always, never a step back. A new leader republishes the current status
			// (consumers are idempotent; the collapsed sequence absorbs it), and a status that lasted less than
			// the gap between two terms (up to a lease) is coalesced into the next one, as the debounce does.
			if !inOrder(seq, order) || !slices.Contains(seq, "READY") {
				t.Errorf("%s: statuses %v, want an ordered part of %v with READY and DELETED", c.id, seq, order)
			}
			waitFor(t, 30*time.Second, c.name+" HostedCluster gone", func() bool {
				return testHub.Client.Get(context.Background(), client.ObjectKey{Namespace: "flap", Name: c.name}, &hyperv1.HostedCluster{}) != nil
			})
		}
	}
	close(done)
	flipping.Wait()
	<-sampling
	// Every cluster is gone: neither replica holds anything about them, whichever term saw their deletion end.
	waitFor(t, 30*time.Second, "no per-cluster state left on either replica", func() bool {
		for _, r := range replicas {
			if r.App.Reconciler.Remembered() != 0 || r.App.Publisher.Tracked() != 0 || r.App.Service.Remembered() != 0 {
				return false
			}
		}
		return true
	})
	if both.Load() > 0 {
		t.Errorf("both replicas could publish in %d of %d samples", both.Load(), samples.Load())
	}
	if samples.Load() < 1000 {
		t.Errorf("only %d samples within %v (%d slower); the check saw too little", samples.Load(), pairWindow, slow.Load())
	}
	if flips.Load() < 12 {
		t.Fatalf("only %d leadership changes during the run", flips.Load())
	}
	t.Logf("%d leadership changes; %d clusters delivered READY and DELETED in order; %d repeated events (republished by a new leader), %d short statuses coalesced; %d samples (%d slower than %v left out), never both publishing",
		flips.Load(), total, duplicates, skipped, samples.Load(), slow.Load(), pairWindow)
}

// inOrder reports whether seq is a subsequence of order.
func inOrder(seq, order []string) bool {
	i := 0
	for _, s := range seq {
		for i < len(order) && order[i] != s {
			i++
		}
		if i == len(order) {
			return false
		}
		i++
	}
	return true
}

// Stopping the SP (SIGTERM) takes no longer than shutdownTimeout, even with a request hanging on the hub and the
// leader's tasks running: the request is cancelled when the budget is spent.
func TestShutdownWithinBudget(t *testing.T) {
	cfg := eventsConfig("faults", "sp-stop", testHub.NATSURL)
	// 8 s: 6 s to drain, then 2 s for the cancelled create to answer, enough on a loaded machine (it once took
	// more than 0.5 s).
	cfg.ShutdownTimeout, cfg.RequestTimeout = 8*time.Second, time.Minute
	px, err := faultproxy.Start(testHub.Config)
	if err != nil {
		t.Fatal(err)
	}
	defer px.Close()
	sp := launchSP(t, cfg, Options{RestConfig: px.Config()})
	waitFor(t, 60*time.Second, "leading", sp.App.Leading)
	px.SetRule(func(r faultproxy.Request) faultproxy.Verdict {
		if r.Write && strings.Contains(r.Path, "/configmaps") {
			return faultproxy.Hang // the create's first write never returns
		}
		return faultproxy.Pass
	})
	answered := make(chan int, 1)
	go func() {
		name := uniqueName("stop")
		resp, err := http.Post(sp.URL+"/api/v1alpha1/clusters?id=inst-"+name, "application/json", strings.NewReader(kubevirtBody(name, 1)))
		if err != nil {
			answered <- 0
			return
		}
		resp.Body.Close()
		answered <- resp.StatusCode
	}()
	waitFor(t, 60*time.Second, "the create hanging on the hub", func() bool { return px.Faults() > 0 })
	began := time.Now()
	sp.stop()
	took := time.Since(began)
	if took > cfg.ShutdownTimeout+2*time.Second {
		t.Fatalf("shutdown took %v, budget %v", took, cfg.ShutdownTimeout)
	}
	select {
	case code := <-answered:
		if code != http.StatusServiceUnavailable {
			t.Fatalf("the create cancelled by the shutdown answered %d, want 503 (retry)", code)
		}
		t.Logf("shutdown took %v (budget %v); the hanging create was answered %d", took, cfg.ShutdownTimeout, code)
	case <-time.After(5 * time.Second):
		t.Fatal("the hanging request was never ended")
	}
}
