package app

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"math/rand"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"runtime/pprof"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	hyperv1 "github.com/openshift/hypershift/api/hypershift/v1beta1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/rest"
	"k8s.io/utils/ptr"
	clusterv1 "open-cluster-management.io/api/cluster/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/dcm-sp/acm-cluster-sp/internal/devtest/localhub"
	"github.com/dcm-sp/acm-cluster-sp/internal/devtest/sp/simulator"
	"github.com/dcm-sp/acm-cluster-sp/internal/devtest/sp/sphub"
	"github.com/dcm-sp/acm-cluster-sp/internal/devtest/sp/spprocess"
	"github.com/dcm-sp/acm-cluster-sp/internal/devtest/testwait"
	"github.com/dcm-sp/acm-cluster-sp/internal/sp/clusters"
	"github.com/dcm-sp/acm-cluster-sp/internal/sp/config"
	"github.com/dcm-sp/acm-cluster-sp/internal/sp/hub"
	"github.com/dcm-sp/acm-cluster-sp/internal/sp/meta"
	"github.com/dcm-sp/acm-cluster-sp/internal/sp/render"
	"github.com/dcm-sp/acm-cluster-sp/internal/sp/wire"
	"github.com/dcm-sp/acm-cluster-sp/pkg/api"
)

// The benchmarks measure what a DCM user sees from an SP that serves many clusters: the SP runs as its own process
// (bin/acm-cluster-sp serve, as deployed: production defaults, hub client from a kubeconfig) against the real
// local hub and NATS JetStream, over loopback. Its namespace is seeded directly on the hub with the objects a create
// renders (HostedCluster, NodePool, Secrets, instance lock, ManagedCluster) and the status the simulated operator
// writes at a random point of its timeline — ≥ 20% READY with their admin kubeconfig Secrets, full HyperShift
// status, NodePools with their nodes, ManagedClusters joined — so GETs read real views and READY GETs disclose
// kubeconfigs. Seeding, starting the SP and waiting until it has converged every cluster and delivered every
// status event is setup, outside the timers; every timed loop runs b.N operations.
//
//	BENCH_CLUSTERS=1000,10000  sizes (default); the namespace grows from one to the next
//	BENCH_SP_BIN=path          the SP binary (default: built into a temporary directory)
//	BENCH_SP_ENV="K=V …"       extra environment of the SP process (an experiment: a GODEBUG, a client-go
//	                           feature gate such as KUBE_FEATURE_WatchListClient=false)
//	BENCH_INPROCESS=1          run the SP inside the test process instead (for -cpuprofile/-memprofile; its RSS
//	                           then includes the harness)
//	BENCH_REPORT=path          also write the summary table there (make bench: bin/bench-report.md)
//	BENCH_HEAPPROFILE=prefix   with BENCH_INPROCESS, write a heap profile at each memory measurement
//	BENCH_STARTPROFILE=prefix  with BENCH_INPROCESS, write a CPU profile of each start, from launch to ready
//	BENCH_MEMLIMIT=256MiB      the GOMEMLIMIT of the last measurement at each size (the SP restarted with it, as the
//	                           deployment sets it from the container's memory limit); "off" skips it
const (
	benchNS       = "bench"
	benchProvider = "sp-bench"
	readyEvery    = 5 // every 5th seeded cluster is READY
)

// BenchmarkAtScale runs every measurement at each size; see the comment above.
func BenchmarkAtScale(b *testing.B) {
	sizes := []int{1000, 10000}
	if s := os.Getenv("BENCH_CLUSTERS"); s != "" {
		sizes = nil
		for _, part := range strings.Split(s, ",") {
			n, err := strconv.Atoi(strings.TrimSpace(part))
			if err != nil {
				b.Fatal(err)
			}
			sizes = append(sizes, n)
		}
	}
	ctx := context.Background()
	seeder := newSeeder(b)
	if err := sphub.EnsureStatusStream(ctx, testHub.NATSURL); err != nil {
		b.Fatal(err)
	}
	var sp *benchSP
	defer func() {
		if sp != nil {
			sp.stop()
		}
	}()
	for _, n := range sizes {
		col := fmt.Sprintf("%d", n)
		began := time.Now()
		before := seedWrites.Load()
		seeder.seed(b, n)
		if w := seedWrites.Load() - before; w > 0 {
			record(col, "setup: seeding, hub writes/s (32 writers, no rate limit)", fmt.Sprintf("%.0f (%d writes in %s)",
				float64(w)/time.Since(began).Seconds(), w, time.Since(began).Round(time.Second)))
		}
		b.Run(fmt.Sprintf("n=%d/start-to-readyz", n), func(b *testing.B) {
			d := make([]time.Duration, 0, b.N)
			var spCPU, apiCPU, etcdCPU []time.Duration
			for i := 0; i < b.N; i++ {
				if sp != nil {
					b.StopTimer()
					sp.stop()
					b.StartTimer()
				}
				sp = startBenchSP(b)
				d = append(d, sp.readyAfter)
				spCPU, apiCPU, etcdCPU = append(spCPU, sp.startCPU.sp), append(apiCPU, sp.startCPU.apiserver), append(etcdCPU, sp.startCPU.etcd)
			}
			b.StopTimer()
			p := percentiles(d)
			b.ReportMetric(float64(p.p50.Milliseconds()), "ms-p50")
			record(col, "start → /readyz 200 (p50)", fmt.Sprintf("%s (%d starts)", p.p50.Round(10*time.Millisecond), len(d)))
			ownCPU := "– (in process)"
			if os.Getenv("BENCH_INPROCESS") == "" {
				ownCPU = percentiles(spCPU).p50.Round(10 * time.Millisecond).String()
			}
			record(col, "start → /readyz: CPU of the SP / kube-apiserver / etcd (p50)", fmt.Sprintf("%s / %s / %s", ownCPU,
				percentiles(apiCPU).p50.Round(10*time.Millisecond), percentiles(etcdCPU).p50.Round(10*time.Millisecond)))
		})
		if sp == nil { // start-to-readyz filtered out by -bench
			sp = startBenchSP(b)
		}
		// Setup: the start-up convergence of every cluster and the start-up status events are finished.
		sp.waitIdle(b, seeder.total())
		ids := seeder.ids()
		readyIDs := seeder.readyIDs()
		memory(b, sp, col, "idle")

		getURL := func(r *rand.Rand) string { return sp.url + "/api/v1alpha1/clusters/" + ids[r.Intn(len(ids))] }
		// Setup, outside the timers but reported: a poller's first round over every page. The SP builds (status
		// function, encoding) and keeps each cluster's resource on its first read after a change, so the timed loops
		// below measure repeated polls.
		warm := time.Now()
		tokens := pageTokens(b, sp.url, 50)
		took := time.Since(warm)
		record(col, "first LIST(50) of every page after start (builds every resource)", fmt.Sprintf("%s (%s per cluster)",
			took.Round(10*time.Millisecond), fmtDur(took/time.Duration(len(ids)))))
		listURL := func(r *rand.Rand) string {
			u := sp.url + "/api/v1alpha1/clusters?max_page_size=50"
			if t := tokens[r.Intn(len(tokens))]; t != "" {
				u += "&page_token=" + t
			}
			return u
		}
		for _, c := range []int{1, 8} {
			b.Run(fmt.Sprintf("n=%d/GET/c=%d", n, c), func(b *testing.B) {
				p := load(b, c, getURL)
				record(col, fmt.Sprintf("GET c=%d p50 / p99", c), p.String())
			})
			b.Run(fmt.Sprintf("n=%d/GET-ready/c=%d", n, c), func(b *testing.B) {
				p := load(b, c, func(r *rand.Rand) string { return sp.url + "/api/v1alpha1/clusters/" + readyIDs[r.Intn(len(readyIDs))] })
				record(col, fmt.Sprintf("GET READY (kubeconfig) c=%d p50 / p99", c), p.String())
			})
			b.Run(fmt.Sprintf("n=%d/LIST50/c=%d", n, c), func(b *testing.B) {
				p := load(b, c, listURL)
				record(col, fmt.Sprintf("LIST(50) c=%d p50 / p99", c), p.String())
			})
		}
		// The in-process row before the open-loop rows: their kube-apiserver rows can leave it saturated for minutes
		// (at 10,000 clusters, LISTs at 500/s), and the in-process replica must sync from it.
		inProcessRuns(b, n, col, ids, tokens)
		openLoopRuns(b, n, col, sp, ids, tokens, seeder.nameOf)
		b.Run(fmt.Sprintf("n=%d/GET-under-writes/c=8", n), func(b *testing.B) {
			stop := hubNoise(b, 20)
			p := load(b, 8, getURL)
			writes := stop()
			record(col, "GET c=8 while the hub takes 20 writes/s p50 / p99", fmt.Sprintf("%s (%d writes)", p, writes))
		})
		var spCreates float64 // at c=8
		for _, c := range []int{1, 8} {
			b.Run(fmt.Sprintf("n=%d/create/c=%d", n, c), func(b *testing.B) {
				var rate float64
				var p pct
				load := perCreate(b, func() int { rate, p = creates(b, sp.url, c); return b.N })
				record(col, fmt.Sprintf("creates/s c=%d (latency p50 / p99; hub requests per create, everyone's)", c), fmt.Sprintf("%.0f (%s; %s)", rate, p, load))
				if c == 8 {
					spCreates = rate
				}
			})
		}
		b.Run(fmt.Sprintf("n=%d/create-hub-direct/c=8", n), func(b *testing.B) {
			var rate float64
			var p pct
			load := perCreate(b, func() int { rate, p = rawCreates(b, seeder, 8); return b.N })
			record(col, fmt.Sprintf("the hub's own creates/s c=8: a create's %d writes straight to kube-apiserver (p50 / p99; hub requests per create)", writesPerCreate),
				fmt.Sprintf("%.0f (%.0f writes/s; %s; %s)", rate, rate*writesPerCreate, p, load))
			if spCreates > 0 {
				record(col, "SP creates/s c=8 as a share of the hub's own", fmt.Sprintf("%.0f %%", 100*spCreates/rate))
			}
		})
		memory(b, sp, col, "after load")
		b.Run(fmt.Sprintf("n=%d/status-event", n), func(b *testing.B) {
			// Setup: the create rows' reconciles and events are done, so the row measures a change's way to
			// its event, not the wait behind another row's backlog (the drain time is a figure of its own).
			record(col, "backlog left by the create rows: drained in", sp.waitDrained(b).Round(100*time.Millisecond).String())
			p, events, updates := statusEvents(b, sp, seeder)
			record(col, "status change → acked event p50 / p99 (debounce 1s)", p.String())
			record(col, "events / status writes (bursts of 3)", fmt.Sprintf("%d / %d", events, updates))
		})
		if limit := benchMemLimit(); limit != "" && sp.inproc == nil {
			// Setup, outside the timers: the SP restarted with the limit and converged again.
			sp.stop()
			sp = startBenchSP(b, "GOMEMLIMIT="+limit)
			sp.waitIdle(b, seeder.total())
			pageTokens(b, sp.url, 50) // the first round, as above
			b.Run(fmt.Sprintf("n=%d/GET-GOMEMLIMIT/c=8", n), func(b *testing.B) {
				p := load(b, 8, getURL)
				record(col, "GET c=8 p50 / p99 with GOMEMLIMIT="+limit, p.String())
			})
			memory(b, sp, col, "with GOMEMLIMIT="+limit)
		}
		seeder.addCreated(sp)
	}
}

func benchMemLimit() string {
	switch v := os.Getenv("BENCH_MEMLIMIT"); v {
	case "":
		return "256MiB"
	case "off":
		return ""
	default:
		return v
	}
}

// --- the SP under test ---

type benchSP struct {
	url        string
	readyAfter time.Duration
	// startCPU is the CPU time the start took until ready: the SP process's (0 in process, where the harness shares
	// it), kube-apiserver's and etcd's.
	startCPU startCPU
	pid      int
	inproc   *testSP
	cmd      *exec.Cmd
	done     chan struct{}
	logFile  string
}

var (
	spBinOnce sync.Once
	spBin     string
	spBinErr  error
)

func benchBinary(b *testing.B) string {
	spBinOnce.Do(func() {
		if spBin = os.Getenv("BENCH_SP_BIN"); spBin != "" {
			return
		}
		dir, err := os.MkdirTemp("", "sp-bench-bin")
		if err != nil {
			spBinErr = err
			return
		}
		spBin = filepath.Join(dir, "acm-cluster-sp")
		out, err := exec.Command("go", "build", "-o", spBin, "../../../cmd/acm-cluster-sp").CombinedOutput()
		if err != nil {
			spBinErr = fmt.Errorf("building the SP: %v\n%s", err, out)
		}
	})
	if spBinErr != nil {
		b.Fatal(spBinErr)
	}
	return spBin
}

// benchConfig is the SP's configuration: production defaults but for the namespace, provider, auth and loopback.
func benchConfig() map[string]string {
	return map[string]string{
		"hubKubeconfig": testHub.KubeconfigPath, "namespace": benchNS, "providerName": benchProvider,
		"natsURL": testHub.NATSURL, "listenAddress": "127.0.0.1:0", "auth": "none", "logFormat": "json",
		"pullSecretFile": pullSecretFile, "enabledPlatforms": "kubevirt", "defaultPlatform": "kubevirt",
	}
}

type startCPU struct{ sp, apiserver, etcd time.Duration }

// starts counts the SP starts of this run (the names of BENCH_STARTPROFILE's files).
var starts int

// hubCPU reads the CPU time the hub's kube-apiserver and etcd have used so far.
func hubCPU(b *testing.B) startCPU {
	b.Helper()
	api, etcd, err := testHub.CPUTime()
	if err != nil {
		b.Fatal(err)
	}
	return startCPU{apiserver: api, etcd: etcd}
}

// startBenchSP starts the SP and returns once /readyz says 200; readyAfter is the time from start to then, startCPU
// what the start cost the SP and the hub.
func startBenchSP(b *testing.B, extraEnv ...string) *benchSP {
	b.Helper()
	hub0 := hubCPU(b)
	sp := launchBenchSP(b, extraEnv...)
	hub1 := hubCPU(b)
	sp.startCPU = startCPU{apiserver: hub1.apiserver - hub0.apiserver, etcd: hub1.etcd - hub0.etcd}
	if sp.inproc == nil {
		cpu, err := localhub.ProcessCPU(sp.pid)
		if err != nil {
			b.Fatal(err)
		}
		sp.startCPU.sp = cpu
	}
	return sp
}

func launchBenchSP(b *testing.B, extraEnv ...string) *benchSP {
	b.Helper()
	if os.Getenv("BENCH_INPROCESS") != "" {
		if prefix := os.Getenv("BENCH_STARTPROFILE"); prefix != "" {
			starts++
			f, err := os.Create(fmt.Sprintf("%s-start%d.pprof", prefix, starts))
			if err != nil {
				b.Fatal(err)
			}
			if err := pprof.StartCPUProfile(f); err != nil {
				b.Fatal(err)
			}
			defer func() { pprof.StopCPUProfile(); _ = f.Close() }()
		}
		cfg := testConfig(benchNS)
		cfg.ProviderName = benchProvider
		cfg.NATSURL = testHub.NATSURL
		cfg.EnabledPlatforms = []string{"kubevirt"}
		cfg.LeaseDuration = config.Defaults().LeaseDuration
		cfg.ResyncPeriod = config.Defaults().ResyncPeriod
		rc := rest.CopyConfig(testHub.Config)
		rc.QPS, rc.Burst = 0, 0 // the SP's own defaults, as from a kubeconfig
		began := time.Now()
		sp := launchSP(b, cfg, Options{RestConfig: rc, HealthInterval: 10 * time.Second})
		return &benchSP{url: sp.URL, readyAfter: time.Since(began), pid: os.Getpid(), inproc: sp}
	}
	bin := benchBinary(b)
	logf, err := os.CreateTemp("", "sp-bench-*.log")
	if err != nil {
		b.Fatal(err)
	}
	env := os.Environ()
	for k, v := range benchConfig() {
		env = append(env, config.EnvName(k)+"="+v)
	}
	env = append(append(env, strings.Fields(os.Getenv("BENCH_SP_ENV"))...), extraEnv...)
	began := time.Now()
	p, err := spprocess.Start(bin, env, logf, 2*time.Minute)
	if err != nil {
		_ = logf.Close()
		b.Fatalf("%v (log: %s)", err, logf.Name())
	}
	go func() { <-p.Done; _ = logf.Close() }()
	sp := &benchSP{url: p.URL, cmd: p.Cmd, pid: p.Cmd.Process.Pid, done: p.Done, logFile: logf.Name()}
	if !testwait.Poll(5*time.Minute, func() bool { return httpStatus(sp.url+"/readyz") == http.StatusOK }) {
		sp.stop()
		b.Fatalf("the SP was not ready within 5m (log: %s)", sp.logFile)
	}
	sp.readyAfter = time.Since(began)
	return sp
}

func (sp *benchSP) stop() {
	if sp.inproc != nil {
		sp.inproc.stop()
		return
	}
	_ = sp.cmd.Process.Signal(syscall.SIGTERM)
	select {
	case <-sp.done:
	case <-time.After(time.Minute):
		_ = sp.cmd.Process.Kill()
		<-sp.done
	}
	if os.Getenv("BENCH_KEEP_LOGS") == "" {
		_ = os.Remove(sp.logFile)
	} else {
		fmt.Fprintln(os.Stderr, "SP log kept:", sp.logFile)
	}
}

func httpStatus(url string) int {
	resp, err := http.Get(url)
	if err != nil {
		return 0
	}
	_, _ = io.Copy(io.Discard, resp.Body)
	resp.Body.Close()
	return resp.StatusCode
}

// metrics reads the SP's Prometheus metrics (name{labels} → value).
func (sp *benchSP) metrics(b *testing.B) map[string]float64 {
	resp, err := http.Get(sp.url + "/metrics")
	if err != nil {
		b.Fatal(err)
	}
	defer resp.Body.Close()
	out := map[string]float64{}
	sc := bufio.NewScanner(resp.Body)
	sc.Buffer(make([]byte, 1<<20), 1<<20)
	for sc.Scan() {
		line := sc.Text()
		if strings.HasPrefix(line, "#") {
			continue
		}
		i := strings.LastIndexByte(line, ' ')
		if i < 0 {
			continue
		}
		v, err := strconv.ParseFloat(line[i+1:], 64)
		if err == nil {
			out[line[:i]] = v
		}
	}
	return out
}

// waitIdle waits until the leader has converged every cluster once (the start-up reconcile of n clusters) and has
// no status event left to deliver.
func (sp *benchSP) waitIdle(b *testing.B, n int) {
	took := sp.waitMetrics(b, 20*time.Minute, fmt.Sprintf("converge %d clusters and publish their events", n), func(m map[string]float64) bool {
		return m[`acm_sp_tracked_instances{component="provision"}`] >= float64(n) && m["acm_sp_events_pending"] == 0 && m["acm_sp_leader"] == 1
	})
	b.Logf("start-up convergence of %d clusters and their events done %s after ready", n, took.Round(time.Millisecond))
}

// waitDrained waits until the leader's reconciler and publisher have nothing queued and no status event is
// pending, and returns how long that took.
func (sp *benchSP) waitDrained(b *testing.B) time.Duration {
	return sp.waitMetrics(b, 10*time.Minute, "drain its queues and pending events", func(m map[string]float64) bool {
		return m[`acm_sp_queued_instances{loop="reconciler"}`] == 0 && m[`acm_sp_queued_instances{loop="publisher"}`] == 0 && m["acm_sp_events_pending"] == 0
	})
}

// waitMetrics polls the SP's metrics until cond holds and returns how long that took; it fails the benchmark
// with the SP's acm_sp_ gauges when within passes first.
func (sp *benchSP) waitMetrics(b *testing.B, within time.Duration, what string, cond func(m map[string]float64) bool) time.Duration {
	began := time.Now()
	var m map[string]float64
	if !testwait.Poll(within, func() bool { m = sp.metrics(b); return cond(m) }) {
		var gauges []string
		for _, k := range []string{`acm_sp_tracked_instances{component="provision"}`, `acm_sp_queued_instances{loop="reconciler"}`,
			`acm_sp_queued_instances{loop="publisher"}`, "acm_sp_events_pending", "acm_sp_leader"} {
			gauges = append(gauges, fmt.Sprintf("%s %v", k, m[k]))
		}
		b.Fatalf("the SP did not %s within %s: %s", what, within, strings.Join(gauges, ", "))
	}
	return time.Since(began)
}

// memory records the SP's RSS (from /proc) and Go heap.
func memory(b *testing.B, sp *benchSP, col, when string) {
	b.Run(fmt.Sprintf("n=%s/memory-%s", col, strings.ReplaceAll(when, " ", "-")), func(b *testing.B) {
		var rss, heap float64
		for i := 0; i < b.N; i++ {
			rss = procRSS(b, sp.pid)
			if sp.inproc != nil {
				runtime.GC()
				var ms runtime.MemStats
				runtime.ReadMemStats(&ms)
				heap = float64(ms.HeapAlloc)
			} else {
				heap = sp.metrics(b)["go_memstats_heap_alloc_bytes"]
			}
		}
		if prefix := os.Getenv("BENCH_HEAPPROFILE"); prefix != "" && sp.inproc != nil {
			f, err := os.Create(fmt.Sprintf("%s-%s-%s.pprof", prefix, col, strings.ReplaceAll(when, " ", "-")))
			if err != nil {
				b.Fatal(err)
			}
			_ = pprof.WriteHeapProfile(f)
			_ = f.Close()
		}
		b.ReportMetric(rss/(1<<20), "RSS-MiB")
		b.ReportMetric(heap/(1<<20), "heap-MiB")
		record(col, "memory "+when+": RSS / Go heap", fmt.Sprintf("%.0f MiB / %.0f MiB", rss/(1<<20), heap/(1<<20)))
	})
}

func procRSS(b *testing.B, pid int) float64 {
	path := "/proc/self/status"
	if pid != os.Getpid() {
		path = fmt.Sprintf("/proc/%d/status", pid)
	}
	data, err := os.ReadFile(path)
	if err != nil {
		b.Fatal(err)
	}
	for _, line := range strings.Split(string(data), "\n") {
		if f := strings.Fields(line); len(f) >= 2 && f[0] == "VmRSS:" {
			kb, _ := strconv.ParseFloat(f[1], 64)
			return kb * 1024
		}
	}
	b.Fatal("no VmRSS")
	return 0
}

// --- load ---

type pct struct{ p50, p99 time.Duration }

func (p pct) String() string { return fmtDur(p.p50) + " / " + fmtDur(p.p99) }

func fmtDur(d time.Duration) string {
	switch {
	case d < time.Millisecond:
		return fmt.Sprintf("%d µs", d.Microseconds())
	case d < time.Second:
		return fmt.Sprintf("%.2f ms", float64(d.Microseconds())/1000)
	}
	return d.Round(10 * time.Millisecond).String()
}

func percentiles(d []time.Duration) pct {
	if len(d) == 0 {
		return pct{}
	}
	slices.Sort(d)
	return pct{p50: d[len(d)/2], p99: d[min(len(d)-1, len(d)*99/100)]}
}

var benchHTTP = &http.Client{Transport: &http.Transport{MaxIdleConnsPerHost: 64, DialContext: (&net.Dialer{}).DialContext}}

// load issues b.N GETs from c concurrent clients and reports the latency percentiles.
func load(b *testing.B, c int, url func(*rand.Rand) string) pct {
	d := make([]time.Duration, b.N)
	var next atomic.Int64
	var failed atomic.Value
	var wg sync.WaitGroup
	b.ResetTimer()
	for w := 0; w < c; w++ {
		wg.Add(1)
		go func(seed int64) {
			defer wg.Done()
			r := rand.New(rand.NewSource(seed))
			for {
				i := int(next.Add(1) - 1)
				if i >= b.N || failed.Load() != nil {
					return
				}
				u := url(r)
				start := time.Now()
				resp, err := benchHTTP.Get(u)
				if err != nil {
					failed.Store(err.Error())
					return
				}
				_, _ = io.Copy(io.Discard, resp.Body)
				resp.Body.Close()
				d[i] = time.Since(start)
				if resp.StatusCode != http.StatusOK {
					failed.Store(fmt.Sprintf("GET %s: %d", u, resp.StatusCode))
					return
				}
			}
		}(rand.Int63())
	}
	wg.Wait()
	b.StopTimer()
	if f := failed.Load(); f != nil {
		b.Fatal(f)
	}
	p := percentiles(d)
	b.ReportMetric(float64(p.p50.Microseconds()), "p50-µs")
	b.ReportMetric(float64(p.p99.Microseconds()), "p99-µs")
	return p
}

// pageTokens collects the token of every page of the given size ("" for the first).
func pageTokens(b *testing.B, base string, size int) []string {
	tokens := []string{""}
	next := ""
	for {
		u := fmt.Sprintf("%s/api/v1alpha1/clusters?max_page_size=%d", base, size)
		if next != "" {
			u += "&page_token=" + next
		}
		resp, err := benchHTTP.Get(u)
		if err != nil {
			b.Fatal(err)
		}
		var page api.ClusterList
		err = json.NewDecoder(resp.Body).Decode(&page)
		resp.Body.Close()
		if err != nil {
			b.Fatal(err)
		}
		if page.NextPageToken == nil {
			return tokens
		}
		next = *page.NextPageToken
		tokens = append(tokens, next)
	}
}

var (
	createSeq  atomic.Int64
	seedWrites atomic.Int64 // objects written while seeding
)

// creates posts b.N creates from c concurrent clients; it returns creates/s and the latency percentiles.
func creates(b *testing.B, base string, c int) (float64, pct) {
	return createsFrom(b, c, func() (time.Duration, error) {
		name := fmt.Sprintf("c%06d", createSeq.Add(1))
		body := kubevirtBody(name, 2)
		start := time.Now()
		resp, err := benchHTTP.Post(base+"/api/v1alpha1/clusters?id=bench-"+name, "application/json", strings.NewReader(body))
		if err != nil {
			return 0, err
		}
		data, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		took := time.Since(start)
		if resp.StatusCode != http.StatusCreated {
			return took, fmt.Errorf("create %s: %d %s", name, resp.StatusCode, data)
		}
		return took, nil
	})
}

// createsFrom runs b.N creates from c concurrent workers (create returns its own latency); it returns creates/s
// and the latency percentiles. The first failure ends the run and the benchmark.
func createsFrom(b *testing.B, c int, create func() (time.Duration, error)) (float64, pct) {
	d := make([]time.Duration, b.N)
	var next atomic.Int64
	var failed atomic.Value
	var wg sync.WaitGroup
	b.ResetTimer()
	began := time.Now()
	for range c {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for {
				i := int(next.Add(1) - 1)
				if i >= b.N || failed.Load() != nil {
					return
				}
				took, err := create()
				if err != nil {
					failed.Store(err.Error())
					return
				}
				d[i] = took
			}
		}()
	}
	wg.Wait()
	elapsed := time.Since(began)
	b.StopTimer()
	if f := failed.Load(); f != nil {
		b.Fatal(f)
	}
	rate := float64(b.N) / elapsed.Seconds()
	p := percentiles(d)
	b.ReportMetric(rate, "creates/s")
	b.ReportMetric(float64(p.p99.Microseconds()), "p99-µs")
	return rate, p
}

// hubNoise writes perSecond unrelated objects on the hub — Secrets in the SP's namespace, which its informers see
// and its index must take in — until the returned function is called; that returns how many writes were made.
func hubNoise(b *testing.B, perSecond int) func() int {
	ctx, cancel := context.WithCancel(context.Background())
	var n atomic.Int64
	done := make(chan struct{})
	go func() {
		defer close(done)
		t := time.NewTicker(time.Second / time.Duration(perSecond))
		defer t.Stop()
		for i := 0; ; i++ {
			select {
			case <-ctx.Done():
				return
			case <-t.C:
			}
			s := &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: benchNS, Name: fmt.Sprintf("noise-%d", i%50)},
				StringData: map[string]string{"n": strconv.Itoa(i)}}
			err := testHub.Client.Update(ctx, s)
			if apierrors.IsNotFound(err) {
				err = testHub.Client.Create(ctx, s)
			}
			if err == nil {
				n.Add(1)
			} else if ctx.Err() == nil {
				b.Error(err)
			}
		}
	}()
	return func() int { cancel(); <-done; return int(n.Load()) }
}

// statusEvents measures, over b.N bursts, the time from the last of a burst of three status writes on one
// HostedCluster (20 ms apart, inside the debounce) to the JetStream-acked event that carries that last status.
// Bursts start every 20 ms on distinct clusters, so the publisher's queue and the coalescing work at once.
func statusEvents(b *testing.B, sp *benchSP, s *seeder) (pct, int, int) {
	ctx := context.Background()
	// Only events stored from now on: replaying the stream's history (every start-up's events) is not latency.
	reader, err := sphub.NewEventTail(ctx, testHub.NATSURL, "dcm.providers."+benchProvider+".cluster.instances.*.status")
	if err != nil {
		b.Fatal(err)
	}
	defer reader.Close()
	ids := s.provisioningIDs()
	run := fmt.Sprintf("%x", time.Now().UnixNano()%0xffffff)
	var mu sync.Mutex
	lastWrite := map[string]time.Time{} // final message → time of its write
	var lat []time.Duration
	events := 0
	lastMsg := ""
	stopRead := make(chan struct{})
	readDone := make(chan struct{})
	go func() {
		defer close(readDone)
		for {
			select {
			case <-stopRead:
				return
			default:
			}
			ev, ok, err := reader.Next(100 * time.Millisecond)
			if err != nil || !ok {
				continue
			}
			at := time.Now()
			msg := eventData(b, ev).Message
			mu.Lock()
			if strings.Contains(msg, "bench-"+run+"-") {
				events++ // this run's
			}
			lastMsg = msg
			if t0, ok := lastWrite[msg]; ok {
				lat = append(lat, at.Sub(t0))
				delete(lastWrite, msg)
			}
			mu.Unlock()
		}
	}()
	var wg sync.WaitGroup
	var writes atomic.Int64
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		id := ids[(int(s.eventCursor.Add(1))*7919)%len(ids)]
		wg.Add(1)
		go func(i int, id string) {
			defer wg.Done()
			hc := &hyperv1.HostedCluster{}
			if err := testHub.Client.Get(ctx, client.ObjectKey{Namespace: benchNS, Name: s.nameOf(id)}, hc); err != nil {
				b.Error(err)
				return
			}
			for k := 0; k < 3; k++ {
				marker := fmt.Sprintf("bench-%s-%d-%d", run, i, k)
				now := metav1.Now()
				hc.Status = hyperv1.HostedClusterStatus{}
				hc.Status.Conditions = []metav1.Condition{
					{Type: "Degraded", Status: metav1.ConditionFalse, Reason: "AsExpected", LastTransitionTime: now},
					{Type: "Available", Status: metav1.ConditionFalse, Reason: "WaitingForAvailable", Message: marker, LastTransitionTime: now},
				}
				if k == 2 {
					mu.Lock()
					lastWrite["Control plane starting: "+marker] = time.Now()
					mu.Unlock()
				}
				if err := testHub.Client.Status().Update(ctx, hc); err != nil {
					b.Error(err)
					return
				}
				writes.Add(1)
				time.Sleep(20 * time.Millisecond) // the burst's pace (inside the debounce), not a settle pause
			}
		}(i, id)
		time.Sleep(20 * time.Millisecond)
	}
	wg.Wait()
	ok := testwait.Poll(2*time.Minute, func() bool {
		mu.Lock()
		defer mu.Unlock()
		return len(lat) >= b.N
	})
	b.StopTimer()
	close(stopRead)
	<-readDone
	if !ok {
		b.Fatalf("only %d of %d final statuses arrived (%d events; last message %q)", len(lat), b.N, events, lastMsg)
	}
	p := percentiles(lat)
	b.ReportMetric(float64(p.p50.Milliseconds()), "p50-ms")
	b.ReportMetric(float64(p.p99.Milliseconds()), "p99-ms")
	return p, events, int(writes.Load())
}

// --- seeding ---

type seeder struct {
	c           client.Client
	release     string
	sc          clusters.SpecContext
	seeded      int
	created     []string // ids created through the API by earlier sizes
	eventCursor atomic.Int64
}

func newSeeder(b *testing.B) *seeder {
	rc := rest.CopyConfig(testHub.Config)
	rc.QPS = -1 // setup: as fast as the hub takes it
	c, err := client.New(rc, client.Options{Scheme: hub.Scheme()})
	if err != nil {
		b.Fatal(err)
	}
	return &seeder{c: c, release: "quay.io/openshift-release-dev/ocp-release:4.17.29-multi",
		sc: clusters.SpecContext{Namespace: benchNS, DefaultPlatform: "kubevirt"}}
}

func seedID(i int) string    { return fmt.Sprintf("bench-s%05d", i) }
func seedName(i int) string  { return fmt.Sprintf("s%05d", i) }
func (s *seeder) total() int { return s.seeded + len(s.created) }
func (s *seeder) nameOf(id string) string {
	return strings.TrimPrefix(id, "bench-")
}

func (s *seeder) ids() []string {
	out := make([]string, 0, s.total())
	for i := 0; i < s.seeded; i++ {
		out = append(out, seedID(i))
	}
	return append(out, s.created...)
}

// provisioningIDs are the seeded clusters that are not READY (status events are measured on them).
func (s *seeder) provisioningIDs() []string {
	var out []string
	for i := 0; i < s.seeded; i++ {
		if i%readyEvery != 0 {
			out = append(out, seedID(i))
		}
	}
	return out
}

func (s *seeder) readyIDs() []string {
	var out []string
	for i := 0; i < s.seeded; i += readyEvery {
		out = append(out, seedID(i))
	}
	return out
}

// addCreated counts the clusters the create benchmarks made (the next size seeds only the difference).
func (s *seeder) addCreated(sp *benchSP) {
	for i := int64(1); i <= createSeq.Load(); i++ {
		id := fmt.Sprintf("bench-c%06d", i)
		if !slices.Contains(s.created, id) {
			s.created = append(s.created, id)
		}
	}
}

// seed brings the namespace to n clusters (seeded plus created), 32 at a time.
func (s *seeder) seed(b *testing.B, n int) {
	from, to := s.seeded, n-len(s.created)
	if to <= from {
		return
	}
	var next atomic.Int64
	next.Store(int64(from))
	var failed atomic.Value
	var wg sync.WaitGroup
	for w := 0; w < 32; w++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for {
				i := int(next.Add(1) - 1)
				if i >= to || failed.Load() != nil {
					return
				}
				if err := s.one(i); err != nil {
					failed.Store(fmt.Sprintf("seeding %s: %v", seedID(i), err))
					return
				}
			}
		}()
	}
	wg.Wait()
	if f := failed.Load(); f != nil {
		b.Fatal(f)
	}
	s.seeded = to
}

// one seeds cluster i: the objects a create renders, then the operator's status at a point of its timeline (READY
// for every readyEvery-th, else somewhere between creation and READY).
func (s *seeder) one(i int) error {
	ctx := context.Background()
	id, name := seedID(i), seedName(i)
	spec, err := wire.ParseSpec([]byte(kubevirtBody(name, 2)), s.sc)
	if err != nil {
		return err
	}
	tl := simulator.TestTimeline()
	age := 2 * tl.ReadyAfter
	if i%readyEvery != 0 {
		age = time.Duration(rand.Int63n(int64(tl.ReadyAfter)))
	}
	now := time.Now()
	objs := render.Render(render.Input{
		ID: id, Provider: benchProvider, Name: name, Namespace: benchNS, InfraID: name + "-bench",
		Platform: clusters.KubeVirt, SpecJSON: spec.JSON, ReleaseImage: s.release, OpenShiftVersion: "4.17.29",
		ControllerAvailabilityPolicy: hyperv1.HighlyAvailable, WorkerCount: 2,
		WorkerMemory: spec.Workers.Memory, WorkerStorage: spec.Workers.Storage, WorkerCores: ptr.To(uint32(4)),
		PullSecret: []byte(`{"auths":{}}`), EtcdEncryptionKey: make([]byte, 32), ManagedCluster: true,
		Finalizers: []string{meta.FinalizerStatus},
	})
	hc := objs.HostedCluster
	hc.Finalizers = append(hc.Finalizers, meta.FinalizerHyperShift)
	hc.Annotations[simulator.AnnotationStarted] = now.Add(-age).UTC().Format(time.RFC3339Nano)
	if err := seedCreate(ctx, s.c, hc); err != nil {
		return err
	}
	owner := []metav1.OwnerReference{{APIVersion: hyperv1.GroupVersion.String(), Kind: "HostedCluster", Name: hc.Name, UID: hc.UID, Controller: ptr.To(false)}}
	np := objs.NodePool
	np.OwnerReferences = owner
	np.Finalizers = append(np.Finalizers, meta.FinalizerHyperShift)
	children := []client.Object{np}
	for _, sec := range objs.Secrets {
		sec.OwnerReferences = owner
		children = append(children, sec)
	}
	lock := render.InstanceLock(benchProvider, benchNS, id, spec.JSON)
	lock.OwnerReferences = owner
	children = append(children, lock)
	if objs.ManagedCluster != nil {
		children = append(children, objs.ManagedCluster)
	}
	for _, o := range children {
		if err := seedCreate(ctx, s.c, o); err != nil {
			return err
		}
	}
	p := simulator.Step(simulator.Observed{HC: hc, NodePools: []*hyperv1.NodePool{np}, Now: now}, tl)
	if p.Kubeconfig {
		for _, sec := range simulator.OperatorSecrets(hc, benchKubeconfig(name), "bench-password-0123456789", true) {
			if err := seedCreate(ctx, s.c, sec); err != nil {
				return err
			}
		}
	}
	if p.HCStatus != nil {
		hc.Status = *p.HCStatus
		seedWrites.Add(1)
		if err := s.c.Status().Update(ctx, hc); err != nil {
			return err
		}
	}
	if st, ok := p.NPStatus[np.Name]; ok {
		np.Status = st
		seedWrites.Add(1)
		if err := s.c.Status().Update(ctx, np); err != nil {
			return err
		}
	}
	if p.JoinACM && objs.ManagedCluster != nil {
		mc := objs.ManagedCluster
		mc.Status = clusterv1.ManagedClusterStatus{
			Conditions: []metav1.Condition{{Type: clusterv1.ManagedClusterConditionJoined, Status: metav1.ConditionTrue, Reason: "ManagedClusterJoined", LastTransitionTime: metav1.Now()}},
			ClusterClaims: []clusterv1.ManagedClusterClaim{{Name: "consoleurl.cluster.open-cluster-management.io",
				Value: "https://console-openshift-console.apps." + name + "." + simulator.AppsDomain}},
		}
		seedWrites.Add(1)
		if err := s.c.Status().Update(ctx, mc); err != nil {
			return err
		}
	}
	return nil
}

// seedCreate creates an object; one that exists already (a retried write the hub had applied) is read back.
func seedCreate(ctx context.Context, c client.Client, o client.Object) error {
	seedWrites.Add(1)
	err := c.Create(ctx, o)
	if apierrors.IsAlreadyExists(err) {
		return c.Get(ctx, client.ObjectKeyFromObject(o), o)
	}
	return err
}

// benchKubeconfig is a kubeconfig of the size the operator writes (a CA certificate and a token).
func benchKubeconfig(name string) []byte {
	ca := strings.Repeat("LS0tLS1CRUdJTiBDRVJUSUZJQ0FURS0tLS0tCk1JSUJkekNDQVIyZ0F3SUJBZ0lJ", 12)
	return []byte(fmt.Sprintf("apiVersion: v1\nkind: Config\nclusters:\n- name: cluster\n  cluster:\n    server: https://api.%s.%s:6443\n    certificate-authority-data: %s\ncontexts:\n- name: admin\n  context:\n    cluster: cluster\n    user: admin\n    namespace: default\ncurrent-context: admin\nusers:\n- name: admin\n  user:\n    token: sha256~%s\n",
		name, simulator.AppsDomain, ca, strings.Repeat("x", 43)))
}

// --- the summary table ---

var report struct {
	mu   sync.Mutex
	cols []string
	rows []string
	vals map[string]map[string]string
}

// record sets one cell of the summary table (the last run of a benchmark wins: it has the largest b.N).
func record(col, row, val string) {
	report.mu.Lock()
	defer report.mu.Unlock()
	if report.vals == nil {
		report.vals = map[string]map[string]string{}
	}
	if !slices.Contains(report.cols, col) {
		report.cols = append(report.cols, col)
	}
	if !slices.Contains(report.rows, row) {
		report.rows = append(report.rows, row)
	}
	if report.vals[row] == nil {
		report.vals[row] = map[string]string{}
	}
	report.vals[row][col] = val
}

// writeBenchReport prints the table (markdown) to stdout and to $BENCH_REPORT, if any benchmark recorded figures.
func writeBenchReport() {
	report.mu.Lock()
	defer report.mu.Unlock()
	if len(report.rows) == 0 {
		return
	}
	var sb strings.Builder
	fmt.Fprintf(&sb, "\n### acm-cluster-sp benchmarks (%s)\n\n", time.Now().UTC().Format("2006-01-02 15:04 MST"))
	fmt.Fprintf(&sb, "Machine: %s, %d CPUs (GOMAXPROCS %d), %s. SP: %s. Command: `make bench`.\n\n", cpuModel(), runtime.NumCPU(), runtime.GOMAXPROCS(0), runtime.Version(), spMode())
	sb.WriteString("| clusters |")
	for _, c := range report.cols {
		sb.WriteString(" " + c + " |")
	}
	sb.WriteString("\n|---|")
	for range report.cols {
		sb.WriteString("---:|")
	}
	sb.WriteString("\n")
	for _, r := range report.rows {
		sb.WriteString("| " + r + " |")
		for _, c := range report.cols {
			v := report.vals[r][c]
			if v == "" {
				v = "–"
			}
			sb.WriteString(" " + v + " |")
		}
		sb.WriteString("\n")
	}
	fmt.Print(sb.String())
	if path := os.Getenv("BENCH_REPORT"); path != "" {
		_ = os.MkdirAll(filepath.Dir(path), 0o755)
		if err := os.WriteFile(path, []byte(sb.String()), 0o644); err != nil {
			fmt.Fprintln(os.Stderr, "bench report:", err)
		}
	}
}

func spMode() string {
	if os.Getenv("BENCH_INPROCESS") != "" {
		return "in the test process (RSS includes the harness)"
	}
	return "its own process (acm-cluster-sp serve)"
}

func cpuModel() string {
	data, err := os.ReadFile("/proc/cpuinfo")
	if err != nil {
		return runtime.GOARCH
	}
	for _, line := range strings.Split(string(data), "\n") {
		if k, v, ok := strings.Cut(line, ":"); ok && strings.TrimSpace(k) == "model name" {
			return strings.TrimSpace(v)
		}
	}
	return runtime.GOARCH
}
