//go:build chaos

package chaos

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"math/rand/v2"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"sort"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	cloudevents "github.com/cloudevents/sdk-go/v2"
	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
	hyperv1 "github.com/openshift/hypershift/api/hypershift/v1beta1"
	corev1 "k8s.io/api/core/v1"
	apimeta "k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/runtime/schema"
	toolscache "k8s.io/client-go/tools/cache"
	clusterv1 "open-cluster-management.io/api/cluster/v1"
	"sigs.k8s.io/controller-runtime/pkg/cache"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/dcm-sp/acm-cluster-sp/internal/devtest/sp/simulator"
	"github.com/dcm-sp/acm-cluster-sp/internal/devtest/sp/sphub"
	"github.com/dcm-sp/acm-cluster-sp/internal/devtest/sp/spprocess"
	"github.com/dcm-sp/acm-cluster-sp/internal/devtest/testwait"
	"github.com/dcm-sp/acm-cluster-sp/internal/sp/config"
	"github.com/dcm-sp/acm-cluster-sp/internal/sp/events"
	"github.com/dcm-sp/acm-cluster-sp/internal/sp/hubapi"
	"github.com/dcm-sp/acm-cluster-sp/internal/sp/meta"
	"github.com/dcm-sp/acm-cluster-sp/internal/sp/platform"
	"github.com/dcm-sp/acm-cluster-sp/internal/sp/status"
)

const (
	ns       = "clusters"
	provider = "chaos-sp"
)

var (
	testHub    *sphub.Hub
	spBin      string
	pullSecret string
	logDir     string
	natsPort   int
	natsStore  string
	watch      *hubWatch
)

// timeline is the simulated operator's pace: a cluster is READY 3 s after its HostedCluster appears.
var timeline = simulator.Timeline{ReadyAfter: 3 * time.Second, DeleteAfter: time.Second, BareMetalFactor: 1.5}

func TestMain(m *testing.M) {
	spBin = os.Getenv("CHAOS_SP_BIN")
	if spBin == "" {
		fmt.Fprintln(os.Stderr, "chaos: CHAOS_SP_BIN must name the acm-cluster-sp binary (make chaos builds it)")
		os.Exit(2)
	}
	logDir = os.Getenv("CHAOS_LOG_DIR")
	if logDir == "" {
		logDir, _ = os.MkdirTemp("", "acm-sp-chaos-")
	}
	_ = os.MkdirAll(logDir, 0o755)
	os.Exit(sphub.RunTests(m, sphub.Options{}, func(h *sphub.Hub) func() {
		testHub = h
		var err error
		if pullSecret, err = sphub.WritePullSecret(h.StateDir); err != nil {
			fmt.Fprintln(os.Stderr, err)
			os.Exit(1)
		}
		natsStore = filepath.Join(h.StateDir, "nats")
		natsPort = h.NATS.Addr().(*net.TCPAddr).Port
		stopSim, err := simulator.Start(context.Background(), h.Config, simulator.Options{Timeline: timeline, Namespaces: []string{ns}})
		if err != nil {
			fmt.Fprintln(os.Stderr, err)
			os.Exit(1)
		}
		if watch, err = startHubWatch(h); err != nil {
			fmt.Fprintln(os.Stderr, err)
			os.Exit(1)
		}
		return func() { watch.stop(); stopSim() }
	}))
}

// env is a variable of the SP's configuration.
func env(key, value string) string { return config.EnvName(key) + "=" + value }

// baseEnv is the configuration both replicas run with.
func baseEnv(kubeconfig string) []string {
	return []string{
		env("hubKubeconfig", kubeconfig), env("namespace", ns), env("providerName", provider),
		env("natsURL", fmt.Sprintf("nats://127.0.0.1:%d", natsPort)), env("listenAddress", "127.0.0.1:0"),
		env("auth", "none"), env("logFormat", "json"), env("logLevel", "info"), env("pullSecretFile", pullSecret),
		env("enabledPlatforms", "kubevirt"), env("defaultPlatform", "kubevirt"), env("leaseDuration", "4s"),
		env("resyncPeriod", "1m"), env("statusDebounce", "500ms"),
	}
}

// replica is one SP process.
type replica struct {
	name string
	env  []string

	mu    sync.Mutex
	cmd   *exec.Cmd
	url   string
	done  chan struct{}
	kills int
}

func newReplica(name string, env []string) *replica { return &replica{name: name, env: env} }

// start runs the process and waits until it serves and is ready.
func (r *replica) start() error {
	logf, err := os.OpenFile(filepath.Join(logDir, r.name+".log"), os.O_CREATE|os.O_APPEND|os.O_WRONLY, 0o644)
	if err != nil {
		return err
	}
	p, err := spprocess.Start(spBin, append(append([]string{}, os.Environ()...), r.env...), logf, 2*time.Minute)
	if err != nil {
		_ = logf.Close()
		return fmt.Errorf("%s: %w (see %s)", r.name, err, filepath.Join(logDir, r.name+".log"))
	}
	go func() { <-p.Done; _ = logf.Close() }()
	r.mu.Lock()
	r.cmd, r.url, r.done = p.Cmd, p.URL, p.Done
	r.mu.Unlock()
	if !testwait.Poll(2*time.Minute, func() bool { return r.get("/readyz") == http.StatusOK }) {
		return fmt.Errorf("%s not ready within 2m", r.name)
	}
	return nil
}

// kill sends SIGKILL and reaps the process.
func (r *replica) kill() {
	r.mu.Lock()
	cmd, done := r.cmd, r.done
	r.kills++
	r.mu.Unlock()
	if cmd == nil {
		return
	}
	_ = cmd.Process.Signal(syscall.SIGKILL)
	<-done
}

// stop sends SIGTERM and waits.
func (r *replica) stop() {
	r.mu.Lock()
	cmd, done := r.cmd, r.done
	r.mu.Unlock()
	if cmd == nil {
		return
	}
	_ = cmd.Process.Signal(syscall.SIGTERM)
	select {
	case <-done:
	case <-time.After(time.Minute):
		_ = cmd.Process.Kill()
		<-done
	}
}

func (r *replica) base() string {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.url
}

func (r *replica) pid() int {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.cmd == nil {
		return 0
	}
	return r.cmd.Process.Pid
}

func (r *replica) get(path string) int {
	c := http.Client{Timeout: 5 * time.Second}
	resp, err := c.Get(r.base() + path)
	if err != nil {
		return 0
	}
	_, _ = io.Copy(io.Discard, resp.Body)
	resp.Body.Close()
	return resp.StatusCode
}

// metric reads a metric from /metrics, its series summed (-1 when unreachable or absent).
func (r *replica) metric(name string) float64 {
	c := http.Client{Timeout: 5 * time.Second}
	resp, err := c.Get(r.base() + "/metrics")
	if err != nil {
		return -1
	}
	defer resp.Body.Close()
	sc := bufio.NewScanner(resp.Body)
	sc.Buffer(make([]byte, 1<<20), 1<<20)
	total, found := 0.0, false
	for sc.Scan() {
		// name, or name{labels}: the series are summed
		if f := strings.Fields(sc.Text()); len(f) == 2 && (f[0] == name || strings.HasPrefix(f[0], name+"{")) {
			v, _ := strconv.ParseFloat(f[1], 64)
			total, found = total+v, true
		}
	}
	if !found {
		return -1
	}
	return total
}

func (r *replica) leading() bool { return r.metric("acm_sp_leader") == 1 }

// rssMiB is the process's resident set (VmRSS).
func (r *replica) rssMiB() float64 {
	data, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", r.pid()))
	if err != nil {
		return 0
	}
	for _, l := range strings.Split(string(data), "\n") {
		if f := strings.Fields(l); len(f) >= 2 && f[0] == "VmRSS:" {
			kb, _ := strconv.ParseFloat(f[1], 64)
			return kb / 1024
		}
	}
	return 0
}

// pair is two replicas of one SP.
type pair []*replica

func startPair(t *testing.T, scenario string, env []string) pair {
	t.Helper()
	p := pair{newReplica(scenario+"-a", env), newReplica(scenario+"-b", env)}
	for _, r := range p {
		if err := r.start(); err != nil {
			t.Fatal(err)
		}
	}
	t.Cleanup(func() {
		for _, r := range p {
			r.stop()
		}
	})
	if !testwait.Poll(time.Minute, func() bool { return p.leader() != nil }) {
		t.Fatal("no leader within 1m")
	}
	return p
}

func (p pair) leader() *replica {
	for _, r := range p {
		if r.leading() {
			return r
		}
	}
	return nil
}

// ----- status events -----

type event struct {
	status string
	at     time.Time
}

// recorder consumes every status event of the chaos SP from the stream, from its start, across NATS outages.
type recorder struct {
	nc   *nats.Conn
	cc   jetstream.ConsumeContext
	mu   sync.Mutex
	byID map[string][]event
}

func startRecorder(t *testing.T) *recorder {
	t.Helper()
	nc, err := nats.Connect(fmt.Sprintf("nats://127.0.0.1:%d", natsPort), nats.MaxReconnects(-1), nats.ReconnectWait(250*time.Millisecond))
	if err != nil {
		t.Fatal(err)
	}
	js, err := jetstream.New(nc)
	if err != nil {
		t.Fatal(err)
	}
	subject := events.Presets["design"].SubjectFor(provider, "*")
	cons, err := js.OrderedConsumer(context.Background(), sphub.StatusStream, jetstream.OrderedConsumerConfig{FilterSubjects: []string{subject}})
	if err != nil {
		t.Fatal(err)
	}
	r := &recorder{nc: nc, byID: map[string][]event{}}
	r.cc, err = cons.Consume(func(msg jetstream.Msg) {
		ev := cloudevents.NewEvent()
		var d events.Data
		if json.Unmarshal(msg.Data(), &ev) != nil || ev.DataAs(&d) != nil {
			return
		}
		r.mu.Lock()
		r.byID[d.ID] = append(r.byID[d.ID], event{status: d.Status, at: time.Now()})
		r.mu.Unlock()
	})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { r.cc.Stop(); nc.Close() })
	return r
}

// first is when the first event with the status arrived for id (zero: none yet).
func (r *recorder) first(id, st string) time.Time {
	r.mu.Lock()
	defer r.mu.Unlock()
	for _, e := range r.byID[id] {
		if e.status == st {
			return e.at
		}
	}
	return time.Time{}
}

func (r *recorder) has(id, st string) bool { return !r.first(id, st).IsZero() }

// sequence is id's statuses with repeats collapsed, and how many events repeated the one before.
func (r *recorder) sequence(id string) (seq []string, repeats int) {
	r.mu.Lock()
	defer r.mu.Unlock()
	for _, e := range r.byID[id] {
		if len(seq) > 0 && seq[len(seq)-1] == e.status {
			repeats++
			continue
		}
		seq = append(seq, e.status)
	}
	return seq, repeats
}

// ----- the hub as the SP should see it -----

// hubWatch records, per instance, when its HostedCluster first mapped to READY and when the operator was done
// with its deletion (the moment DELETED is due), and every HostedCluster UID it had (duplicates).
type hubWatch struct {
	cancel context.CancelFunc
	mu     sync.Mutex
	ready  map[string]time.Time
	gone   map[string]time.Time
	uids   map[string]map[string]bool // live HostedClusters per instance
	dups   map[string]bool
	nps    map[string][]*hyperv1.NodePool
	npsMu  sync.Mutex
}

func startHubWatch(h *sphub.Hub) (*hubWatch, error) {
	ca, err := cache.New(h.Config, cache.Options{Scheme: sphub.Scheme(), DefaultNamespaces: map[string]cache.Config{ns: {}},
		DefaultLabelSelector: labels.SelectorFromSet(labels.Set{meta.LabelProvider: provider})})
	if err != nil {
		return nil, err
	}
	ctx, cancel := context.WithCancel(context.Background())
	w := &hubWatch{cancel: cancel, ready: map[string]time.Time{}, gone: map[string]time.Time{}, uids: map[string]map[string]bool{}, dups: map[string]bool{}, nps: map[string][]*hyperv1.NodePool{}}
	hcInf, err := ca.GetInformer(ctx, &hyperv1.HostedCluster{})
	if err != nil {
		cancel()
		return nil, err
	}
	npInf, err := ca.GetInformer(ctx, &hyperv1.NodePool{})
	if err != nil {
		cancel()
		return nil, err
	}
	_, _ = npInf.AddEventHandler(toolscache.ResourceEventHandlerFuncs{
		AddFunc:    func(o any) { w.putNP(o.(*hyperv1.NodePool)) },
		UpdateFunc: func(_, o any) { w.putNP(o.(*hyperv1.NodePool)) },
	})
	_, _ = hcInf.AddEventHandler(toolscache.ResourceEventHandlerFuncs{
		AddFunc:    func(o any) { w.putHC(o.(*hyperv1.HostedCluster)) },
		UpdateFunc: func(_, o any) { w.putHC(o.(*hyperv1.HostedCluster)) },
		DeleteFunc: func(o any) {
			if t, ok := o.(toolscache.DeletedFinalStateUnknown); ok {
				o = t.Obj
			}
			if hc, ok := o.(*hyperv1.HostedCluster); ok {
				id := meta.InstanceID(hc.Labels)
				w.mark(w.gone, id)
				w.mu.Lock()
				delete(w.uids[id], string(hc.UID))
				w.mu.Unlock()
			}
		},
	})
	go func() { _ = ca.Start(ctx) }()
	if !ca.WaitForCacheSync(ctx) {
		cancel()
		return nil, fmt.Errorf("hub watch did not sync")
	}
	return w, nil
}

func (w *hubWatch) stop() { w.cancel() }

func (w *hubWatch) putNP(np *hyperv1.NodePool) {
	w.npsMu.Lock()
	w.nps[meta.InstanceID(np.Labels)] = []*hyperv1.NodePool{np}
	w.npsMu.Unlock()
}

func (w *hubWatch) putHC(hc *hyperv1.HostedCluster) {
	id := meta.InstanceID(hc.Labels)
	w.mu.Lock()
	if w.uids[id] == nil {
		w.uids[id] = map[string]bool{}
	}
	w.uids[id][string(hc.UID)] = true
	if len(w.uids[id]) > 1 {
		w.dups[id] = true // two HostedClusters of one instance alive at once
	}
	w.mu.Unlock()
	if hc.DeletionTimestamp != nil {
		if len(hc.Finalizers) == 1 && hc.Finalizers[0] == meta.FinalizerStatus {
			w.mark(w.gone, id)
		}
		return
	}
	w.npsMu.Lock()
	nps := w.nps[id]
	w.npsMu.Unlock()
	if status.Map(hc, nps, time.Now(), status.Settings{DegradedGracePeriod: time.Hour,
		ProvisioningTimeouts: map[platform.Name]time.Duration{platform.KubeVirt: time.Hour, platform.BareMetal: time.Hour}}).Status == status.Ready {
		w.mark(w.ready, id)
	}
}

func (w *hubWatch) mark(m map[string]time.Time, id string) {
	w.mu.Lock()
	if _, ok := m[id]; !ok {
		m[id] = time.Now()
	}
	w.mu.Unlock()
}

func (w *hubWatch) at(m map[string]time.Time, id string) time.Time {
	w.mu.Lock()
	defer w.mu.Unlock()
	return m[id]
}

func (w *hubWatch) duplicated(id string) bool {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.dups[id]
}

// ----- DCM -----

// dcm is DCM's side: it sends each request to a replica at random and retries what the contract says to retry.
type dcm struct {
	p  pair
	mu sync.Mutex
	// answers counts every HTTP answer by code (0: no answer — the replica was gone); odd lists the answers the
	// API does not document for the request (a 409 to a retry of the same create, a 500, a non-problem error).
	answers map[int]int
	odd     []string
	lat     map[string][]time.Duration
}

func newDCM(p pair) *dcm {
	return &dcm{p: p, answers: map[int]int{}, lat: map[string][]time.Duration{}}
}

func (d *dcm) send(ctx context.Context, op, method, path string, body []byte) (int, []byte) {
	r := d.p[rand.IntN(len(d.p))]
	req, err := http.NewRequestWithContext(ctx, method, r.base()+path, bytes.NewReader(body))
	if err != nil {
		return 0, nil
	}
	if body != nil {
		req.Header.Set("Content-Type", "application/json")
	}
	began := time.Now()
	resp, err := (&http.Client{Timeout: 60 * time.Second}).Do(req)
	if err != nil {
		d.record(op, 0, 0, nil, "")
		return 0, nil
	}
	defer resp.Body.Close()
	raw, _ := io.ReadAll(resp.Body)
	d.record(op, resp.StatusCode, time.Since(began), raw, resp.Header.Get("Content-Type"))
	return resp.StatusCode, raw
}

func (d *dcm) record(op string, code int, took time.Duration, raw []byte, ctype string) {
	d.mu.Lock()
	defer d.mu.Unlock()
	d.answers[code]++
	if code != 0 {
		d.lat[op] = append(d.lat[op], took)
	}
	if code >= 400 && !strings.HasPrefix(ctype, "application/problem+json") {
		d.odd = append(d.odd, fmt.Sprintf("%s %d without a problem document: %s", op, code, raw))
	}
	if code >= 500 && code != http.StatusServiceUnavailable && code != http.StatusGatewayTimeout {
		d.odd = append(d.odd, fmt.Sprintf("%s %d: %s", op, code, raw))
	}
}

func (d *dcm) flag(s string) {
	d.mu.Lock()
	d.odd = append(d.odd, s)
	d.mu.Unlock()
}

// retryable answers: none (the replica went away), 503, 504.
func retryable(code int) bool {
	return code == 0 || code == http.StatusServiceUnavailable || code == http.StatusGatewayTimeout
}

func pause(attempt int) time.Duration {
	return min(time.Duration(attempt+1)*200*time.Millisecond, 2*time.Second)
}

// create retries until the cluster is accepted (201, or 200 for a retry that had landed).
func (d *dcm) create(ctx context.Context, id, name string) bool {
	return d.createWith(ctx, id, name, "create")
}

func (d *dcm) createWith(ctx context.Context, id, name, op string) bool {
	body := fmt.Appendf(nil, `{"spec":{"service_type":"cluster","version":"1.30","metadata":{"name":%q},"nodes":{"workers":{"count":1,"cpu":4,"memory":"16GB","storage":"120GB"}},"provider_hints":{"acm":{"platform":"kubevirt"}}}}`, name)
	for attempt := 0; ctx.Err() == nil; attempt++ {
		code, raw := d.send(ctx, op, http.MethodPost, "/api/v1alpha1/clusters?id="+id, body)
		switch {
		case code == http.StatusCreated || code == http.StatusOK:
			return true
		case retryable(code):
			time.Sleep(pause(attempt))
		default:
			d.flag(fmt.Sprintf("create %s: %d %s", id, code, raw))
			return false
		}
	}
	return false
}

// remove retries until the deletion is accepted (204) or the cluster is unknown (404).
func (d *dcm) remove(ctx context.Context, id string) bool {
	for attempt := 0; ctx.Err() == nil; attempt++ {
		code, raw := d.send(ctx, "delete", http.MethodDelete, "/api/v1alpha1/clusters/"+id, nil)
		switch {
		case code == http.StatusNoContent || code == http.StatusNotFound:
			return true
		case retryable(code):
			time.Sleep(pause(attempt))
		default:
			d.flag(fmt.Sprintf("delete %s: %d %s", id, code, raw))
			return false
		}
	}
	return false
}

// lifecycles runs create → READY → delete → DELETED for n new clusters, c at a time, and returns their ids.
func (d *dcm) lifecycles(ctx context.Context, rec *recorder, prefix string, n, c int, within time.Duration) []string {
	ids := make([]string, n)
	sem := make(chan struct{}, c)
	var wg sync.WaitGroup
	for i := range n {
		name := fmt.Sprintf("%s-%d-%d", prefix, i, rand.IntN(1e6))
		ids[i] = "inst-" + name
		wg.Add(1)
		sem <- struct{}{}
		go func(id, name string) {
			defer wg.Done()
			defer func() { <-sem }()
			cctx, cancel := context.WithTimeout(ctx, within)
			defer cancel()
			if !d.create(cctx, id, name) {
				return
			}
			if !testwait.Poll(within, func() bool { return rec.has(id, "READY") }) {
				return // counted as lost by the caller
			}
			if !d.remove(cctx, id) {
				return
			}
			testwait.Poll(within, func() bool { return rec.has(id, "DELETED") })
		}(ids[i], name)
	}
	wg.Wait()
	return ids
}

// ----- figures -----

type row struct {
	scenario, faults string
	clusters         int
	expected, got    int // READY and DELETED events
	repeats          int
	maxLatency       time.Duration
	duplicates       int // instances with more than one HostedCluster
	orphans          []string
	answers          string
	odd              []string
	took             time.Duration
}

func (r row) lost() int { return r.expected - r.got }

// tally computes a scenario's delivery figures.
func tally(rec *recorder, ids []string) (r row) {
	r.clusters = len(ids)
	for _, id := range ids {
		r.expected += 2
		for _, st := range []string{"READY", "DELETED"} {
			if at := rec.first(id, st); !at.IsZero() {
				r.got++
				due := watch.at(watch.ready, id)
				if st == "DELETED" {
					due = watch.at(watch.gone, id)
				}
				if !due.IsZero() && at.Sub(due) > r.maxLatency {
					r.maxLatency = at.Sub(due)
				}
			}
		}
		_, rep := rec.sequence(id)
		r.repeats += rep
		if watch.duplicated(id) {
			r.duplicates++
		}
	}
	return r
}

func (d *dcm) summary() (string, []string) {
	d.mu.Lock()
	defer d.mu.Unlock()
	codes := make([]int, 0, len(d.answers))
	for c := range d.answers {
		codes = append(codes, c)
	}
	sort.Ints(codes)
	var parts []string
	for _, c := range codes {
		name := strconv.Itoa(c)
		if c == 0 {
			name = "no answer"
		}
		parts = append(parts, fmt.Sprintf("%s: %d", name, d.answers[c]))
	}
	return strings.Join(parts, ", "), append([]string(nil), d.odd...)
}

// orphans lists what of these instances is left on the hub, waiting (bounded) for the garbage collector.
func orphans(t *testing.T, ids []string) []string {
	t.Helper()
	var left []string
	testwait.Poll(2*time.Minute, func() bool {
		left = scan(t, ids)
		return len(left) == 0
	})
	return left
}

// scan lists the hub objects of the chaos provider that belong to one of ids (Agents: their reservations).
func scan(t *testing.T, ids []string) []string {
	t.Helper()
	ctx := context.Background()
	sel := client.MatchingLabels{meta.LabelProvider: provider}
	var out []string
	must := func(err error) {
		if err != nil {
			t.Fatalf("scanning the hub for orphans: %v", err)
		}
	}
	lists := []struct {
		kind string
		list client.ObjectList
		opts []client.ListOption
	}{
		{"HostedCluster", &hyperv1.HostedClusterList{}, []client.ListOption{client.InNamespace(ns), sel}},
		{"NodePool", &hyperv1.NodePoolList{}, []client.ListOption{client.InNamespace(ns), sel}},
		{"Secret", &corev1.SecretList{}, []client.ListOption{client.InNamespace(ns), sel}},
		{"ConfigMap", &corev1.ConfigMapList{}, []client.ListOption{client.InNamespace(ns), sel}},
		{"ManagedCluster", &clusterv1.ManagedClusterList{}, []client.ListOption{sel}},
	}
	for _, l := range lists {
		must(testHub.Client.List(ctx, l.list, l.opts...))
		objs, err := apimeta.ExtractList(l.list)
		must(err)
		for _, o := range objs {
			a, err := apimeta.Accessor(o)
			must(err)
			if slices.Contains(ids, meta.InstanceID(a.GetLabels())) {
				out = append(out, l.kind+"/"+a.GetName())
			}
		}
	}
	for _, gvk := range []schema.GroupVersionKind{hubapi.KlusterletAddonConfigGVK, hubapi.AgentGVK} {
		var u unstructured.UnstructuredList
		u.SetGroupVersionKind(gvk.GroupVersion().WithKind(gvk.Kind + "List"))
		must(testHub.Client.List(ctx, &u, sel))
		for _, o := range u.Items {
			if slices.Contains(ids, meta.InstanceID(o.GetLabels())) {
				out = append(out, gvk.Kind+"/"+o.GetNamespace()+"/"+o.GetName())
			}
		}
	}
	return out
}

// table renders the rows as Markdown.
func table(rows []row) string {
	var b strings.Builder
	fmt.Fprintln(&b, "| scenario | faults | clusters | final statuses expected / received | lost | repeated events | max status→event | duplicate clusters | orphans | answers | took |")
	fmt.Fprintln(&b, "|---|---|---|---|---|---|---|---|---|---|---|")
	for _, r := range rows {
		fmt.Fprintf(&b, "| %s | %s | %d | %d / %d | %d | %d | %s | %d | %d | %s | %s |\n", r.scenario, r.faults, r.clusters, r.expected, r.got,
			r.lost(), r.repeats, r.maxLatency.Round(10*time.Millisecond), r.duplicates, len(r.orphans), r.answers, r.took.Round(time.Second))
	}
	return b.String()
}
