//go:build chaos

package chaos

import (
	"context"
	"fmt"
	"math/rand/v2"
	"net/http"
	"os"
	"path/filepath"
	"runtime"
	"slices"
	"sort"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	toxiproxy "github.com/Shopify/toxiproxy/v2"
	"github.com/rs/zerolog"
	"k8s.io/client-go/tools/clientcmd"
	clientcmdapi "k8s.io/client-go/tools/clientcmd/api"

	"github.com/dcm-sp/acm-cluster-sp/internal/devtest/sp/faultproxy"
	"github.com/dcm-sp/acm-cluster-sp/internal/devtest/sp/sphub"
	"github.com/dcm-sp/acm-cluster-sp/internal/devtest/testwait"
)

// knob reads a size from the environment (make chaos sets the figures; smaller for a quick try).
func knob(name string, def int) int {
	if v, err := strconv.Atoi(os.Getenv(name)); err == nil && v > 0 {
		return v
	}
	return def
}

func knobDuration(name string, def time.Duration) time.Duration {
	if v, err := time.ParseDuration(os.Getenv(name)); err == nil && v > 0 {
		return v
	}
	return def
}

func wanted(scenario string) bool {
	only := os.Getenv("CHAOS_SCENARIOS")
	return only == "" || slices.Contains(strings.Split(only, ","), scenario)
}

// TestChaos runs the scenarios one after the other, prints the table and fails on any loss or orphan.
func TestChaos(t *testing.T) {
	var rows []row
	run := func(name string, f func(t *testing.T) row) {
		if !wanted(name) {
			return
		}
		t.Run(name, func(t *testing.T) {
			began := time.Now()
			r := f(t)
			r.scenario, r.took = name, time.Since(began)
			rows = append(rows, r)
			if r.lost() > 0 || len(r.orphans) > 0 || r.duplicates > 0 || len(r.odd) > 0 {
				t.Errorf("%s: %d lost, %d duplicate clusters, orphans %v, undocumented answers %v", name, r.lost(), r.duplicates, r.orphans, first(r.odd, 10))
			}
		})
	}
	run("kill-9", scenarioKill)
	run("nats-outage", scenarioNATSOutage)
	run("hub-faults", scenarioHubFaults)
	run("apiserver-restart", scenarioAPIServerRestart)
	run("churn", scenarioChurn)
	out := table(rows)
	if wanted("load") {
		out += "\n" + loadReport(t)
	}
	fmt.Printf("\n## Chaos run (%s, %d CPUs, Go %s)\n\n%s\n", time.Now().UTC().Format("2006-01-02"), runtime.NumCPU(), runtime.Version(), out)
	if p := os.Getenv("CHAOS_REPORT"); p != "" {
		_ = os.WriteFile(p, []byte(out), 0o644)
	}
	t.Logf("replica logs in %s", logDir)
}

func first(s []string, n int) []string { return s[:min(n, len(s))] }

// scenarioKill: SIGKILLs of the leader (two in three) and of the follower while clusters go through their life.
func scenarioKill(t *testing.T) row {
	rec := startRecorder(t)
	p := startPair(t, "kill", baseEnv(testHub.KubeconfigPath))
	d := newDCM(p)
	n, kills := knob("CHAOS_CLUSTERS", 200), knob("CHAOS_KILLS", 20)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	var killed, leaders atomic.Int32
	var wg sync.WaitGroup
	wg.Add(1)
	go func() {
		defer wg.Done()
		for i := 0; i < kills && ctx.Err() == nil; i++ {
			select {
			case <-ctx.Done():
				return
			case <-time.After(3 * time.Second):
			}
			victim := p.leader()
			if i%3 == 2 || victim == nil {
				victim = p[0]
				if p[0].leading() {
					victim = p[1]
				}
			} else {
				leaders.Add(1)
			}
			victim.kill()
			killed.Add(1)
			time.Sleep(time.Second) // down for a second, as a restarting pod
			if err := victim.start(); err != nil {
				t.Error(err)
				return
			}
		}
	}()
	ids := d.lifecycles(ctx, rec, "kill", n, 10, 5*time.Minute)
	wg.Wait()
	r := tally(rec, ids)
	r.faults = fmt.Sprintf("%d SIGKILLs (%d of the leader)", killed.Load(), leaders.Load())
	r.answers, r.odd = d.summary()
	r.orphans = orphans(t, ids)
	return r
}

// scenarioNATSOutage: the NATS server stops for a minute mid-run and comes back on the same port and store.
func scenarioNATSOutage(t *testing.T) row {
	rec := startRecorder(t)
	p := startPair(t, "nats", baseEnv(testHub.KubeconfigPath))
	d := newDCM(p)
	n, outage := knob("CHAOS_OUTAGE_CLUSTERS", 100), knobDuration("CHAOS_OUTAGE", time.Minute)
	ctx := context.Background()
	done := make(chan struct{})
	go func() {
		defer close(done)
		time.Sleep(10 * time.Second) // the run is under way
		testHub.NATS.Shutdown()
		testHub.NATS.WaitForShutdown()
		time.Sleep(outage)
		s, err := sphub.StartNATSWith(ctx, sphub.NATSOptions{StoreDir: natsStore, Port: natsPort})
		if err != nil {
			t.Error(err)
			return
		}
		testHub.NATS = s
	}()
	ids := d.lifecycles(ctx, rec, "nats", n, 10, outage+5*time.Minute)
	<-done
	r := tally(rec, ids)
	r.faults = fmt.Sprintf("NATS down %v (same port and store)", outage)
	r.answers, r.odd = d.summary()
	r.orphans = orphans(t, ids)
	return r
}

// scenarioHubFaults: the replicas reach kube-apiserver through Toxiproxy (latency, held and reset connections)
// and the HTTP fault proxy (500 or 429 for a fraction of the writes, watch streams dropped).
func scenarioHubFaults(t *testing.T) row {
	px, err := faultproxy.Start(testHub.Config)
	if err != nil {
		t.Fatal(err)
	}
	defer px.Close()
	fraction := float64(knob("CHAOS_WRITE_FAULT_PERCENT", 10)) / 100
	var mu sync.Mutex
	rnd := rand.New(rand.NewPCG(1, 2))
	px.SetRule(func(r faultproxy.Request) faultproxy.Verdict {
		if !r.Write {
			return faultproxy.Pass
		}
		mu.Lock()
		defer mu.Unlock()
		switch x := rnd.Float64(); {
		case x < fraction/2:
			return faultproxy.Fail500
		case x < fraction:
			return faultproxy.Fail429
		}
		return faultproxy.Pass
	})
	toxi := toxiproxy.NewServer(toxiproxy.NewMetricsContainer(nil), zerolog.Nop())
	proxy := toxiproxy.NewProxy(toxi, "hub", "127.0.0.1:0", strings.TrimPrefix(px.URL, "http://"))
	if err := proxy.Start(); err != nil {
		t.Fatal(err)
	}
	defer proxy.Stop()
	if _, err := proxy.Toxics.AddToxicJson(strings.NewReader(`{"name":"latency","type":"latency","stream":"downstream","toxicity":1,"attributes":{"latency":5,"jitter":5}}`)); err != nil {
		t.Fatal(err)
	}
	kubeconfig := filepath.Join(logDir, "hub-faults.kubeconfig")
	kc := clientcmdapi.NewConfig()
	kc.Clusters["hub"] = &clientcmdapi.Cluster{Server: "http://" + proxy.Listen}
	kc.AuthInfos["proxy"] = &clientcmdapi.AuthInfo{}
	kc.Contexts["hub"] = &clientcmdapi.Context{Cluster: "hub", AuthInfo: "proxy"}
	kc.CurrentContext = "hub"
	if err := clientcmd.WriteToFile(*kc, kubeconfig); err != nil {
		t.Fatal(err)
	}

	rec := startRecorder(t)
	p := startPair(t, "faults", baseEnv(kubeconfig))
	d := newDCM(p)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	var cuts, holds, drops atomic.Int32
	go func() { // every few seconds one more fault of the network kind
		for i := 0; ctx.Err() == nil; i++ {
			select {
			case <-ctx.Done():
				return
			case <-time.After(7 * time.Second):
			}
			switch i % 3 {
			case 0: // connections reset
				if _, err := proxy.Toxics.AddToxicJson(strings.NewReader(`{"name":"reset","type":"reset_peer","stream":"downstream","toxicity":1,"attributes":{"timeout":0}}`)); err == nil {
					time.Sleep(500 * time.Millisecond)
					_ = proxy.Toxics.RemoveToxic(ctx, "reset")
					cuts.Add(1)
				}
			case 1: // the hub holds every byte for 3 s (a stalled connection), then lets go
				if _, err := proxy.Toxics.AddToxicJson(strings.NewReader(`{"name":"hold","type":"timeout","stream":"downstream","toxicity":1,"attributes":{"timeout":0}}`)); err == nil {
					time.Sleep(3 * time.Second)
					_ = proxy.Toxics.RemoveToxic(ctx, "hold")
					holds.Add(1)
				}
			case 2:
				drops.Add(int32(px.DropWatches()))
			}
		}
	}()
	ids := d.lifecycles(ctx, rec, "fault", knob("CHAOS_CYCLES", 1000), 20, 10*time.Minute)
	cancel()
	r := tally(rec, ids)
	r.faults = fmt.Sprintf("%d%% of %d writes failed (500/429: %d); %d resets, %d 3 s stalls, %d watch streams dropped; 5±5 ms latency",
		int(fraction*100), px.Writes()+px.Faults(), px.Faults(), cuts.Load(), holds.Load(), drops.Load())
	r.answers, r.odd = d.summary()
	r.orphans = orphans(t, ids)
	return r
}

// scenarioAPIServerRestart: kube-apiserver is killed and started again on the same etcd mid-run.
func scenarioAPIServerRestart(t *testing.T) row {
	rec := startRecorder(t)
	p := startPair(t, "apiserver", baseEnv(testHub.KubeconfigPath))
	d := newDCM(p)
	ctx := context.Background()
	down := knobDuration("CHAOS_APISERVER_DOWN", 15*time.Second)
	done := make(chan struct{})
	go func() {
		defer close(done)
		time.Sleep(10 * time.Second)
		if err := testHub.StopAPIServer(); err != nil {
			t.Error(err)
			return
		}
		time.Sleep(down)
		if err := testHub.StartAPIServer(); err != nil {
			t.Error(err)
		}
	}()
	ids := d.lifecycles(ctx, rec, "apisrv", knob("CHAOS_RESTART_CLUSTERS", 60), 10, 10*time.Minute)
	<-done
	r := tally(rec, ids)
	r.faults = fmt.Sprintf("kube-apiserver killed, down %v, started again on the same etcd", down)
	r.answers, r.odd = d.summary()
	r.orphans = orphans(t, ids)
	return r
}

// scenarioChurn: many create → delete cycles (each deleted while it provisions): every DELETED arrives, and the
// per-cluster state of both replicas follows the live clusters back to zero, heap with it.
func scenarioChurn(t *testing.T) row {
	rec := startRecorder(t)
	p := startPair(t, "churn", baseEnv(testHub.KubeconfigPath))
	d := newDCM(p)
	n := knob("CHAOS_CHURN", 10000)
	heap := func() string {
		return fmt.Sprintf("%.0f/%.0f MiB heap, %.0f/%.0f MiB RSS", p[0].metric("go_memstats_heap_inuse_bytes")/(1<<20), p[1].metric("go_memstats_heap_inuse_bytes")/(1<<20), p[0].rssMiB(), p[1].rssMiB())
	}
	before := heap()
	ids := make([]string, n)
	sem := make(chan struct{}, 40)
	var wg sync.WaitGroup
	for i := range n {
		name := fmt.Sprintf("churn-%d-%d", i, rand.IntN(1e6))
		ids[i] = "inst-" + name
		wg.Add(1)
		sem <- struct{}{}
		go func(id string) {
			defer wg.Done()
			defer func() { <-sem }()
			ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
			defer cancel()
			if d.create(ctx, id, name) && d.remove(ctx, id) {
				testwait.Poll(5*time.Minute, func() bool { return rec.has(id, "DELETED") })
			}
		}(ids[i])
	}
	wg.Wait()
	var r row
	r.clusters, r.expected = n, n
	for _, id := range ids {
		if rec.has(id, "DELETED") {
			r.got++
		}
		_, rep := rec.sequence(id)
		r.repeats += rep
		if watch.duplicated(id) {
			r.duplicates++
		}
		if at, due := rec.first(id, "DELETED"), watch.at(watch.gone, id); !at.IsZero() && !due.IsZero() && at.Sub(due) > r.maxLatency {
			r.maxLatency = at.Sub(due)
		}
	}
	state := func() float64 {
		return p[0].metric("acm_sp_tracked_instances") + p[1].metric("acm_sp_tracked_instances")
	}
	if !testwait.Poll(2*time.Minute, func() bool { return state() == 0 }) {
		d.flag(fmt.Sprintf("per-cluster state left after the churn: %v instances", state()))
	}
	r.faults = fmt.Sprintf("%d create→delete cycles (DELETED expected); before %s, after %s; per-cluster state after: %.0f", n, before, heap(), state())
	r.answers, r.odd = d.summary()
	r.orphans = orphans(t, ids)
	return r
}

// loadReport: clients mixing create, get, list and delete against existing clusters, for a while.
func loadReport(t *testing.T) string {
	existing, clients, dur := knob("CHAOS_LOAD_EXISTING", 10000), knob("CHAOS_LOAD_CLIENTS", 50), knobDuration("CHAOS_LOAD_DURATION", 5*time.Minute)
	rec := startRecorder(t)
	p := startPair(t, "load", baseEnv(testHub.KubeconfigPath))
	d := newDCM(p)
	ctx := context.Background()
	// The existing clusters, created through the API (the simulator drives them to READY).
	began := time.Now()
	sem := make(chan struct{}, 16)
	var wg sync.WaitGroup
	for i := range existing {
		wg.Add(1)
		sem <- struct{}{}
		go func() {
			defer wg.Done()
			defer func() { <-sem }()
			name := fmt.Sprintf("load-%d", i)
			d.create(ctx, "inst-"+name, name)
		}()
	}
	wg.Wait()
	seeded := time.Since(began)
	testwait.Poll(10*time.Minute, func() bool { return p.leader() != nil && p.leader().metric("acm_sp_events_pending") == 0 })
	goroutinesBefore := []float64{p[0].metric("go_goroutines"), p[1].metric("go_goroutines")}

	load := newDCM(p)
	var rss [][2]float64
	stop := time.Now().Add(dur)
	sampling := make(chan struct{})
	go func() {
		defer close(sampling)
		for time.Now().Before(stop) {
			rss = append(rss, [2]float64{p[0].rssMiB(), p[1].rssMiB()})
			time.Sleep(dur / 10)
		}
		rss = append(rss, [2]float64{p[0].rssMiB(), p[1].rssMiB()})
	}()
	var created sync.Map
	var seq atomic.Int64
	for c := range clients {
		wg.Add(1)
		go func() {
			defer wg.Done()
			rnd := rand.New(rand.NewPCG(uint64(c), 7))
			for time.Now().Before(stop) {
				switch x := rnd.IntN(100); {
				case x < 45:
					id := fmt.Sprintf("inst-load-%d", rnd.IntN(existing))
					load.send(ctx, "get", http.MethodGet, "/api/v1alpha1/clusters/"+id, nil)
				case x < 75:
					load.send(ctx, "list", http.MethodGet, "/api/v1alpha1/clusters?max_page_size=50", nil)
				case x < 90:
					name := fmt.Sprintf("churn-%d", seq.Add(1))
					load.send(ctx, "create", http.MethodPost, "/api/v1alpha1/clusters?id=inst-"+name,
						fmt.Appendf(nil, `{"spec":{"service_type":"cluster","version":"1.30","metadata":{"name":%q},"nodes":{"workers":{"count":1}},"provider_hints":{"acm":{"platform":"kubevirt"}}}}`, name))
					created.Store("inst-"+name, true)
				default:
					var victim string
					created.Range(func(k, _ any) bool { victim = k.(string); return false })
					if victim == "" {
						continue
					}
					created.Delete(victim)
					load.send(ctx, "delete", http.MethodDelete, "/api/v1alpha1/clusters/"+victim, nil)
				}
			}
		}()
	}
	wg.Wait()
	<-sampling
	goroutinesAfter := []float64{p[0].metric("go_goroutines"), p[1].metric("go_goroutines")}
	_ = rec

	var b strings.Builder
	load.mu.Lock()
	defer load.mu.Unlock()
	total, errs := 0, 0
	for code, n := range load.answers {
		total += n
		if code == 0 || code >= 500 {
			errs += n
		}
	}
	fmt.Fprintf(&b, "Load: %d clients for %v over %d existing clusters (created through the API in %v): %d requests, error rate %.3f%% (5xx and no answer), odd answers %d.\n\n",
		clients, dur, existing, seeded.Round(time.Second), total, 100*float64(errs)/float64(max(total, 1)), len(load.odd))
	fmt.Fprintln(&b, "| operation | requests | p50 | p99 |")
	fmt.Fprintln(&b, "|---|---|---|---|")
	ops := make([]string, 0, len(load.lat))
	for op := range load.lat {
		ops = append(ops, op)
	}
	sort.Strings(ops)
	for _, op := range ops {
		l := load.lat[op]
		sort.Slice(l, func(i, j int) bool { return l[i] < l[j] })
		fmt.Fprintf(&b, "| %s | %d | %v | %v |\n", op, len(l), l[len(l)/2].Round(100*time.Microsecond), l[len(l)*99/100].Round(100*time.Microsecond))
	}
	fmt.Fprintf(&b, "\nRSS (MiB) of the two replicas every %v: ", dur/10)
	for _, s := range rss {
		fmt.Fprintf(&b, "%.0f/%.0f ", s[0], s[1])
	}
	fmt.Fprintf(&b, "\n\nGoroutines before/after: %.0f→%.0f and %.0f→%.0f.\n", goroutinesBefore[0], goroutinesAfter[0], goroutinesBefore[1], goroutinesAfter[1])
	if len(load.odd) > 0 {
		t.Errorf("undocumented answers under load: %v", first(load.odd, 10))
	}
	return b.String()
}
