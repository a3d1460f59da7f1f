package events

import (
	"context"
	"encoding/json"
	"net"
	"strconv"
	"strings"
	"testing"
	"time"

	cloudevents "github.com/cloudevents/sdk-go/v2"
	"github.com/google/uuid"
	"github.com/nats-io/nats.go"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"

	"github.com/dcm-sp/acm-cluster-sp/internal/devhub"
	"github.com/dcm-sp/acm-cluster-sp/internal/status"
)

// startNATS runs an embedded JetStream server on loopback for one test.
func startNATS(t *testing.T, port int, stream bool) (url string, stop func()) {
	t.Helper()
	s, err := devhub.StartNATSWith(context.Background(), devhub.NATSOptions{StoreDir: t.TempDir(), Port: port, NoStream: !stream})
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

func freePort(t *testing.T) int {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	return l.Addr().(*net.TCPAddr).Port
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
func consume(t *testing.T, url, subject string, want int, within time.Duration) []cloudevents.Event {
	t.Helper()
	r, err := devhub.NewEventReader(context.Background(), url, subject)
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

func data(t *testing.T, ev cloudevents.Event) Data {
	var d Data
	if err := ev.DataAs(&d); err != nil {
		t.Fatal(err)
	}
	return d
}

func TestStructuredCloudEvent(t *testing.T) {
	url, _ := startNATS(t, 0, true)
	p := startPublisher(t, Options{URL: url})
	p.Report("inst-1", status.Ready, "Cluster is ready; workers 3/3 ready")
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
	url, _ := startNATS(t, 0, true)
	p := startPublisher(t, Options{URL: url, Naming: n})
	p.Report("inst-2", status.Pending, "waiting")
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

// A burst within the debounce window is coalesced: the first change goes out at once, the latest of the rest at
// the end of the window; nothing in between.
func TestDebounceLatestWins(t *testing.T) {
	url, _ := startNATS(t, 0, true)
	p := startPublisher(t, Options{URL: url, Debounce: 400 * time.Millisecond})
	p.Report("inst-3", status.Pending, "a")
	waitTrue(t, func() bool { return p.Delivered("inst-3", status.Pending) })
	for i, m := range []string{"b", "c", "d"} {
		st := status.Provisioning
		if i == 2 {
			st = status.Ready
		}
		p.Report("inst-3", st, m)
	}
	evs := consume(t, url, "dcm.providers.test-sp.cluster.instances.inst-3.status", 3, 2*time.Second)
	var got []string
	for _, e := range evs {
		got = append(got, data(t, e).Message)
	}
	if strings.Join(got, ",") != "a,d" {
		t.Fatalf("published %v, want a,d", got)
	}
	// Reporting the delivered state again publishes nothing; after Resync it is published once more.
	p.Report("inst-3", status.Ready, "d")
	time.Sleep(600 * time.Millisecond)
	p.Resync()
	p.Report("inst-3", status.Ready, "d")
	evs = consume(t, url, "dcm.providers.test-sp.cluster.instances.inst-3.status", 4, 2*time.Second)
	if len(evs) != 3 {
		t.Fatalf("%d events after an unchanged report and a resync, want 3", len(evs))
	}
}

// With no stream capturing the subject the event still reaches core NATS subscribers.
func TestNoStreamFallsBackToCorePublish(t *testing.T) {
	url, _ := startNATS(t, 0, false)
	nc, err := nats.Connect(url)
	if err != nil {
		t.Fatal(err)
	}
	defer nc.Close()
	sub, err := nc.SubscribeSync("dcm.providers.test-sp.cluster.instances.inst-4.status")
	if err != nil {
		t.Fatal(err)
	}
	_ = nc.Flush()
	p := startPublisher(t, Options{URL: url})
	p.Report("inst-4", status.Failed, "ValidReleaseImage: bad")
	msg, err := sub.NextMsg(5 * time.Second)
	if err != nil {
		t.Fatal(err)
	}
	ev := cloudevents.NewEvent()
	if err := json.Unmarshal(msg.Data, &ev); err != nil || data(t, ev).Status != "FAILED" {
		t.Fatalf("%v %s", err, msg.Data)
	}
	waitTrue(t, func() bool { return p.Delivered("inst-4", status.Failed) })
}

// An unreachable server does not lose anything: statuses wait (latest wins) and are delivered once it is up.
func TestOutageDeliversLatest(t *testing.T) {
	port := freePort(t)
	reg := prometheus.NewRegistry()
	p := startPublisher(t, Options{URL: "nats://127.0.0.1:" + itoa(port), Registry: reg})
	p.Report("inst-5", status.Pending, "p")
	p.Report("inst-6", status.Pending, "p")
	time.Sleep(300 * time.Millisecond)
	p.Report("inst-5", status.Provisioning, "q")
	if ok, _ := p.Connected(); ok {
		t.Fatal("connected to nothing")
	}
	if got := testutil.ToFloat64(p.m.failed); got == 0 {
		t.Fatal("no failed attempts recorded while the server is down")
	}
	if got := p.pendingCount(); got != 2 {
		t.Fatalf("pending %v, want 2", got)
	}
	url, _ := startNATS(t, port, true)
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
	deadline := time.Now().Add(10 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatal("condition not met within 10s")
		}
		time.Sleep(20 * time.Millisecond)
	}
}

func itoa(i int) string { return strconv.Itoa(i) }
