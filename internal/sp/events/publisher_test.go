package events

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	cloudevents "github.com/cloudevents/sdk-go/v2"
	"github.com/google/uuid"
	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"

	"github.com/dcm-sp/acm-cluster-sp/internal/devtest/sp/faultproxy"
	"github.com/dcm-sp/acm-cluster-sp/internal/devtest/sp/sphub"
	"github.com/dcm-sp/acm-cluster-sp/internal/devtest/testwait"
	"github.com/dcm-sp/acm-cluster-sp/internal/sp/status"
)

// startNATS runs an embedded JetStream server on loopback for one test.
func startNATS(t *testing.T, stream bool) (url string, stop func()) {
	t.Helper()
	s, err := sphub.StartNATSWith(context.Background(), sphub.NATSOptions{StoreDir: t.TempDir(), NoStream: !stream})
	if err != nil {
		t.Fatal(err)
	}
	stopped := false
	stop = func() {
		if !stopped {
			stopped = true
			s.Shutdown()
			s.WaitForShutdown()
		}
	}
	t.Cleanup(stop)
	return s.ClientURL(), stop
}

func startPublisher(t *testing.T, o Options) *Publisher {
	t.Helper()
	if o.ProviderName == "" {
		o.ProviderName = "test-sp"
	}
	if o.Naming.Subject == "" {
		o.Naming = Presets["design"]
	}
	if o.RetryMin == 0 {
		o.RetryMin = 50 * time.Millisecond
		o.RetryMax = 200 * time.Millisecond
	}
	o.Timeout = time.Second
	p := New(o)
	if err := p.Connect(); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { _ = p.Start(ctx); close(done) }()
	t.Cleanup(func() { cancel(); <-done })
	return p
}

// consume reads up to want events on subject from the status stream (a plain JetStream consumer, parsed with the
// CloudEvents SDK).
func consume(t *testing.T, url, subject string, want int, within time.Duration, opts ...nats.Option) []cloudevents.Event {
	t.Helper()
	r, err := sphub.NewEventReader(context.Background(), url, subject, opts...)
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	var out []cloudevents.Event
	deadline := time.Now().Add(within)
	for len(out) < want && time.Now().Before(deadline) {
		ev, ok, err := r.Next(200 * time.Millisecond)
		if err != nil {
			t.Fatal(err)
		}
		if ok {
			out = append(out, ev)
		}
	}
	return out
}

// messages are the events' messages, joined with commas.
func messages(t *testing.T, evs []cloudevents.Event) string {
	var out []string
	for _, e := range evs {
		out = append(out, data(t, e).Message)
	}
	return strings.Join(out, ",")
}

func data(t *testing.T, ev cloudevents.Event) Data {
	var d Data
	if err := ev.DataAs(&d); err != nil {
		t.Fatal(err)
	}
	return d
}

func TestStructuredCloudEvent(t *testing.T) {
	url, _ := startNATS(t, true)
	p := startPublisher(t, Options{URL: url})
	p.Report("inst-1", status.Report{Status: status.Ready, Message: "Cluster is ready; workers 3/3 ready"})
	evs := consume(t, url, "dcm.providers.test-sp.cluster.instances.inst-1.status", 1, 5*time.Second)
	if len(evs) != 1 {
		t.Fatalf("%d events", len(evs))
	}
	ev := evs[0]
	if ev.SpecVersion() != "1.0" || ev.Source() != "test-sp" || ev.Type() != "dcm.providers.test-sp.status.update" ||
		ev.Subject() != "dcm.providers.test-sp.cluster.instances.inst-1.status" || ev.DataContentType() != "application/json" {
		t.Fatalf("attributes: %s", ev)
	}
	if _, err := uuid.Parse(ev.ID()); err != nil || ev.Time().IsZero() || time.Since(ev.Time()) > time.Minute {
		t.Fatalf("id %q / time %v", ev.ID(), ev.Time())
	}
	if d := data(t, ev); d != (Data{ID: "inst-1", Status: "READY", Message: "Cluster is ready; workers 3/3 ready"}) {
		t.Fatalf("data %+v", d)
	}
	waitTrue(t, func() bool { return p.Delivered("inst-1", status.Ready) })
}

// The "spm" preset is today's DCM registry naming, one setting away.
func TestSPMPreset(t *testing.T) {
	n, err := ResolveNaming("spm", Naming{})
	if err != nil {
		t.Fatal(err)
	}
	url, _ := startNATS(t, true)
	p := startPublisher(t, Options{URL: url, Naming: n})
	p.Report("inst-2", status.Report{Status: status.Pending, Message: "waiting"})
	evs := consume(t, url, "dcm.cluster", 1, 5*time.Second)
	if len(evs) != 1 || evs[0].Type() != "dcm.status.cluster" || evs[0].Source() != "dcm/providers/test-sp" || data(t, evs[0]).ID != "inst-2" {
		t.Fatalf("spm preset events %v", evs)
	}
	if _, err := ResolveNaming("other", Naming{}); err == nil {
		t.Fatal("unknown preset accepted")
	}
	o, _ := ResolveNaming("design", Naming{Subject: "custom.{instanceId}"})
	if o.Subject != "custom.{instanceId}" || o.Type != Presets["design"].Type {
		t.Fatalf("override %+v", o)
	}
}

// A burst of messages within the debounce window is coalesced: the latest goes out at the end of the window, nothing
// in between. The window starts at a publish that was no news: a cluster's first event is news, and the rest of the
// burst a new status begins follows it at once (windowEnd), so with "b" right after "a" whether the publisher's
// worker read "b" before "c" and "d" were reported would decide the outcome (a,b,d in CI). "a2" is published at
// once after "a" for that reason, and starts a window of its own.
func TestDebounceLatestWins(t *testing.T) {
	const window = 1500 * time.Millisecond
	url, _ := startNATS(t, true)
	p := startPublisher(t, Options{URL: url, Debounce: window})
	p.Report("inst-3", status.Report{Status: status.Pending, Message: "a"})
	waitTrue(t, func() bool { return p.Delivered("inst-3", status.Pending) })
	p.Report("inst-3", status.Report{Status: status.Pending, Message: "a2"})
	waitTrue(t, func() bool { return p.pendingCount() == 0 })
	for _, m := range []string{"b", "c", "d"} {
		p.Report("inst-3", status.Report{Status: status.Pending, Message: m})
	}
	evs := consume(t, url, "dcm.providers.test-sp.cluster.instances.inst-3.status", 4, window+2*time.Second)
	if got := messages(t, evs); got != "a,a2,d" {
		t.Fatalf("published %v, want a,a2,d", got)
	}
	// Reporting the delivered state again publishes nothing; after Resync it is published once more.
	p.Report("inst-3", status.Report{Status: status.Pending, Message: "d"})
	if n := p.pendingCount(); n != 0 { // Report decides synchronously
		t.Fatalf("an unchanged report left %v pending", n)
	}
	p.Resync()
	p.Report("inst-3", status.Report{Status: status.Pending, Message: "d"})
	evs = consume(t, url, "dcm.providers.test-sp.cluster.instances.inst-3.status", 5, window+2*time.Second)
	if len(evs) != 4 {
		t.Fatalf("%d events after an unchanged report and a resync, want 4", len(evs))
	}
}

// With no stream capturing the subject nothing counts as delivered — not even when a core subscriber receives the
// publish (which once made a DELETED count as delivered with nothing stored): the status is held and retried, the
// events check is unhealthy with the reason and the metric says so; once a stream exists, it is delivered.
func TestNoStreamHoldsStatuses(t *testing.T) {
	url, _ := startNATS(t, false)
	const subject = "dcm.providers.test-sp.cluster.instances.inst-4.status"
	nc, err := nats.Connect(url)
	if err != nil {
		t.Fatal(err)
	}
	defer nc.Close()
	sub, err := nc.SubscribeSync(subject) // a core subscriber: receives, never acks
	if err != nil {
		t.Fatal(err)
	}
	_ = nc.Flush()
	reg := prometheus.NewRegistry()
	p := startPublisher(t, Options{URL: url, Registry: reg})
	p.Report("inst-4", status.Report{Status: status.Deleted, Message: "Cluster deleted"})
	if _, err := sub.NextMsg(5 * time.Second); err != nil {
		t.Fatalf("the publish never reached the subject: %v", err)
	}
	// The publisher has had its chances: two attempts failed.
	waitTrue(t, func() bool { return testutil.ToFloat64(p.m.failed) >= 2 })
	if p.Delivered("inst-4", status.Deleted) {
		t.Fatal("DELETED counted as delivered with no stream to store it")
	}
	ok, msg := p.StreamHealth(context.Background())
	if ok || !strings.Contains(msg, "no JetStream stream captures dcm.providers.test-sp.cluster.instances.*.status") || !strings.Contains(msg, "1 status(es) held") {
		t.Fatalf("events check %v %q", ok, msg)
	}
	if got := gauge(t, reg, "acm_sp_events_no_stream"); got != 1 {
		t.Fatalf("acm_sp_events_no_stream %v, want 1", got)
	}

	if err := sphub.EnsureStatusStream(context.Background(), url); err != nil {
		t.Fatal(err)
	}
	evs := consume(t, url, subject, 1, 10*time.Second)
	if len(evs) != 1 || data(t, evs[0]).Status != "DELETED" {
		t.Fatalf("stored after the stream appeared: %v", evs)
	}
	waitTrue(t, func() bool { return p.Delivered("inst-4", status.Deleted) })
	if ok, msg := p.StreamHealth(context.Background()); !ok || !strings.Contains(msg, "stream dcm-status stores") {
		t.Fatalf("events check with the stream: %v %q", ok, msg)
	}
	if got := gauge(t, reg, "acm_sp_events_no_stream"); got != 0 {
		t.Fatalf("acm_sp_events_no_stream %v, want 0", got)
	}
}

// CreateStream creates the SP's own stream for its subjects, with the stated retention, and delivers into it;
// where another stream already captures the subjects it creates nothing.
func TestCreateStream(t *testing.T) {
	url, _ := startNATS(t, false)
	p := startPublisher(t, Options{URL: url, CreateStream: true, StreamMaxAge: 2 * time.Hour})
	p.Report("inst-7", status.Report{Status: status.Ready, Message: "ready"})
	waitTrue(t, func() bool { return p.Delivered("inst-7", status.Ready) })
	js := jetStream(t, url)
	s, err := js.Stream(context.Background(), "acm-cluster-sp-test-sp")
	if err != nil {
		t.Fatal(err)
	}
	info, err := s.Info(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	if info.Config.MaxAge != 2*time.Hour || len(info.Config.Subjects) != 1 || info.Config.Subjects[0] != "dcm.providers.test-sp.cluster.instances.*.status" ||
		info.Config.Storage != jetstream.FileStorage || info.State.Msgs != 1 {
		t.Fatalf("stream %+v state %+v", info.Config, info.State)
	}
	if ok, msg := p.StreamHealth(context.Background()); !ok || !strings.Contains(msg, "stream acm-cluster-sp-test-sp stores") {
		t.Fatalf("events check %v %q", ok, msg)
	}

	// DCM's stream captures dcm.providers.>: nothing of our own.
	url2, _ := startNATS(t, true)
	p2 := startPublisher(t, Options{URL: url2, CreateStream: true})
	p2.Report("inst-8", status.Report{Status: status.Ready, Message: "ready"})
	waitTrue(t, func() bool { return p2.Delivered("inst-8", status.Ready) })
	names := jetStream(t, url2).StreamNames(context.Background())
	var got []string
	for n := range names.Name() {
		got = append(got, n)
	}
	if strings.Join(got, ",") != "dcm-status" {
		t.Fatalf("streams %v, want only dcm-status", got)
	}
}

func jetStream(t *testing.T, url string) jetstream.JetStream {
	t.Helper()
	nc, err := nats.Connect(url)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(nc.Close)
	js, err := jetstream.New(nc)
	if err != nil {
		t.Fatal(err)
	}
	return js
}

func gauge(t *testing.T, reg *prometheus.Registry, name string) float64 {
	t.Helper()
	mfs, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	for _, mf := range mfs {
		if mf.GetName() == name {
			return mf.GetMetric()[0].GetGauge().GetValue()
		}
	}
	t.Fatalf("no metric %s", name)
	return 0
}

// Leadership terms never overlap: a second Start waits for the first to end, and the first's end does not take
// the second's queue away (it once did, and statuses reported in the new term were not published until a retry).
func TestTermsDoNotOverlap(t *testing.T) {
	url, _ := startNATS(t, true)
	p := New(Options{URL: url, ProviderName: "test-sp", Naming: Presets["design"], RetryMin: time.Hour, RetryMax: time.Hour, Timeout: time.Second})
	if err := p.Connect(); err != nil {
		t.Fatal(err)
	}
	defer p.Close()
	ctx1, end1 := context.WithCancel(context.Background())
	done1 := make(chan struct{})
	go func() { _ = p.Start(ctx1); close(done1) }()
	waitTrue(t, func() bool { return p.loop.Running() })
	ctx2, end2 := context.WithCancel(context.Background())
	defer end2()
	started2 := make(chan struct{})
	done2 := make(chan struct{})
	go func() { close(started2); _ = p.Start(ctx2); close(done2) }()
	<-started2
	end1()
	<-done1
	waitTrue(t, func() bool { return p.loop.Running() }) // the first term cleared its queue before it returned
	p.Report("inst-9", status.Report{Status: status.Ready, Message: "ready"})
	evs := consume(t, url, "dcm.providers.test-sp.cluster.instances.inst-9.status", 1, 5*time.Second)
	if len(evs) != 1 {
		t.Fatal("a status reported in the second term was not published")
	}
	end2()
	<-done2
	if p.loop.Running() || p.Tracked() != 0 {
		t.Fatalf("after the last term: running %v, %d instances tracked", p.loop.Running(), p.Tracked())
	}
}

// An unreachable server does not lose anything: statuses wait (latest wins) and are delivered once it is up.
func TestOutageDeliversLatest(t *testing.T) {
	fwd, err := faultproxy.NewTCP("") // the server's address, with nothing behind it yet
	if err != nil {
		t.Fatal(err)
	}
	defer fwd.Close()
	reg := prometheus.NewRegistry()
	p := startPublisher(t, Options{URL: "nats://" + fwd.Addr, Registry: reg})
	p.Report("inst-5", status.Report{Status: status.Pending, Message: "p"})
	p.Report("inst-6", status.Report{Status: status.Pending, Message: "p"})
	waitTrue(t, func() bool { return testutil.ToFloat64(p.m.failed) >= 2 })
	p.Report("inst-5", status.Report{Status: status.Provisioning, Message: "q"})
	if ok, _ := p.Connected(); ok {
		t.Fatal("connected to nothing")
	}
	if got := testutil.ToFloat64(p.m.failed); got == 0 {
		t.Fatal("no failed attempts recorded while the server is down")
	}
	if got := p.pendingCount(); got != 2 {
		t.Fatalf("pending %v, want 2", got)
	}
	url, _ := startNATS(t, true)
	fwd.SetUpstream(strings.TrimPrefix(url, "nats://"))
	evs5 := consume(t, url, "dcm.providers.test-sp.cluster.instances.inst-5.status", 1, 10*time.Second)
	evs6 := consume(t, url, "dcm.providers.test-sp.cluster.instances.inst-6.status", 1, 10*time.Second)
	if len(evs5) != 1 || data(t, evs5[0]).Status != "PROVISIONING" || len(evs6) != 1 || data(t, evs6[0]).Status != "PENDING" {
		t.Fatalf("after the outage: %v %v", evs5, evs6)
	}
	if testutil.ToFloat64(p.m.retried) == 0 {
		t.Fatal("retries not counted")
	}
	waitTrue(t, func() bool { return p.pendingCount() == 0 })
}

func waitTrue(t *testing.T, cond func() bool) {
	t.Helper()
	testwait.For(t, 10*time.Second, "the condition", cond)
}

// An event carries the vocabulary's word for a status: the seed's UPDATING as is by default, as DCM's PROGRESSING
// with updatingStatus: PROGRESSING; no other status is renamed; no vocabulary, the status itself.
func TestUpdatingStatusOnTheWire(t *testing.T) {
	for _, tc := range []struct {
		v    status.Vocabulary
		st   status.Status
		want string
	}{
		{nil, status.Updating, "UPDATING"},
		{status.Seed{}, status.Updating, "UPDATING"},
		{status.Seed{UpdatingInEvents: status.Progressing}, status.Updating, "PROGRESSING"},
		{status.Seed{UpdatingInEvents: status.Progressing}, status.Ready, "READY"},
		{status.DCM2026{Active: status.Running}, status.Running, "RUNNING"},
	} {
		p := New(Options{URL: "nats://127.0.0.1:1", ProviderName: "test-sp", Naming: Presets["design"], Vocabulary: tc.v})
		ev, _, err := p.Event("inst-1", status.Report{Status: tc.st, Message: "Scaling workers 2→3: 2/3 ready"})
		if err != nil {
			t.Fatal(err)
		}
		var d Data
		if err := ev.DataAs(&d); err != nil || d.Status != tc.want {
			t.Errorf("%#v, %s: published %q (%v), want %q", tc.v, tc.st, d.Status, err, tc.want)
		}
	}
}

// A resync re-publishes every unchanged status; a real change reported meanwhile must not queue behind all of them
// (at 10,000 clusters that was a 38 s wait): it goes out after at most a few, and every re-publish still goes out.
func TestResyncDoesNotDelayAChange(t *testing.T) {
	const n = 1000
	url, _ := startNATS(t, true)
	p := startPublisher(t, Options{URL: url})
	id := func(i int) string { return fmt.Sprintf("inst-%04d", i) }
	for i := 0; i < n; i++ {
		p.Report(id(i), status.Report{Status: status.Provisioning, Message: "before"})
	}
	waitTrue(t, func() bool { return p.pendingCount() == 0 })

	r, err := sphub.NewEventReader(context.Background(), url, "dcm.providers.test-sp.cluster.instances.*.status", nats.Name("resync-reader"))
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	skip := n // the first round, replayed by the stream
	p.Resync()
	for i := 0; i < n; i++ {
		p.Report(id(i), status.Report{Status: status.Provisioning, Message: "before"}) // unchanged: re-published
	}
	doneBefore := n - int(p.pendingCount())                                       // re-publishes acked before the change is reported
	p.Report(id(n-1), status.Report{Status: status.Ready, Message: "the change"}) // the last one resynced, changed right after
	if !p.Delivered(id(0), status.Provisioning) {
		t.Fatal("a status waiting only to be re-published no longer counts as delivered")
	}
	republished, changeAt := 0, -1
	// Reading 2,000 events (the replayed round, then the resync) takes a second on a quiet machine; under -race on
	// a loaded CI machine 30 s were not enough to read past the replay.
	deadline := time.Now().Add(2 * time.Minute)
	for (changeAt < 0 || republished < n-1) && time.Now().Before(deadline) {
		ev, ok, err := r.Next(200 * time.Millisecond)
		if err != nil {
			t.Fatal(err)
		}
		if !ok {
			continue
		}
		if skip > 0 {
			skip--
			continue
		}
		if d := data(t, ev); d.Message == "the change" {
			changeAt = republished
		} else {
			republished++
		}
	}
	if changeAt < 0 {
		t.Fatalf("the change was not delivered (%d re-publishes were)", republished)
	}
	if republished < n-1 {
		t.Fatalf("%d of %d re-publishes delivered", republished, n-1)
	}
	// Ahead of it, besides those already acked when it came, at most what the queue and the workers held then:
	// 2 × Workers (a plain FIFO queue would have put all n-1 ahead).
	ahead := changeAt - doneBefore
	if limit := 2 * p.Options().Workers; ahead > limit {
		t.Fatalf("the change went out after %d re-publishes reported before it (%d were out already), want at most %d", ahead, doneBefore, limit)
	}
	t.Logf("the change went out after %d of %d re-publishes (%d of them acked before it was reported)", changeAt, n-1, doneBefore)
}

// output_spec carries what the cluster produced — its API endpoint and console URL — next to the fields SPM and
// the control plane read; a change of the output alone is published; without output there is no output_spec key;
// and nothing but the two endpoints can be in it (the payload has no place for a kubeconfig).
func TestOutputSpec(t *testing.T) {
	url, _ := startNATS(t, true)
	n, _ := ResolveNaming("spm", Naming{})
	p := startPublisher(t, Options{URL: url, Naming: n, Debounce: time.Millisecond})
	p.Report("inst-out", status.Report{Status: status.Progressing, Message: "Control plane starting"})
	waitTrue(t, func() bool { return p.Delivered("inst-out", status.Progressing) })
	out := status.Output{APIEndpoint: "https://api.out.example.com:6443"}
	p.Report("inst-out", status.Report{Status: status.Active, Message: "Cluster is ready", Output: out})
	waitTrue(t, func() bool { return p.Delivered("inst-out", status.Active) })
	out.ConsoleURL = "https://console-openshift-console.apps.out.example.com"
	p.Report("inst-out", status.Report{Status: status.Active, Message: "Cluster is ready", Output: out}) // the console URL became known
	evs := consume(t, url, "dcm.cluster", 3, 5*time.Second)
	if len(evs) != 3 {
		t.Fatalf("%d events, want 3", len(evs))
	}
	var raw []map[string]any
	for _, ev := range evs {
		var m map[string]any
		if err := ev.DataAs(&m); err != nil {
			t.Fatal(err)
		}
		raw = append(raw, m)
	}
	if _, ok := raw[0]["output_spec"]; ok || raw[0]["id"] != "inst-out" || raw[0]["status"] != "PROGRESSING" {
		t.Fatalf("first event %v: no output yet, no output_spec", raw[0])
	}
	if d := data(t, evs[1]); d.Status != "ACTIVE" || d.OutputSpec == nil || *d.OutputSpec != (status.Output{APIEndpoint: "https://api.out.example.com:6443"}) {
		t.Fatalf("second event %+v", raw[1])
	}
	spec, _ := raw[2]["output_spec"].(map[string]any)
	if len(spec) != 2 || spec["api_endpoint"] != out.APIEndpoint || spec["console_url"] != out.ConsoleURL || raw[2]["message"] != "Cluster is ready" {
		t.Fatalf("third event %v: want both endpoints and nothing else in output_spec", raw[2])
	}
}
