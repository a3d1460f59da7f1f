package app

import (
	"context"
	"fmt"
	"net/http"
	"slices"
	"strings"
	"testing"
	"time"

	cloudevents "github.com/cloudevents/sdk-go/v2"
	hyperv1 "github.com/openshift/hypershift/api/hypershift/v1beta1"
	"github.com/prometheus/client_golang/prometheus"
	dto "github.com/prometheus/client_model/go"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/dcm-sp/acm-cluster-sp/internal/devtest/sp/faultproxy"
	"github.com/dcm-sp/acm-cluster-sp/internal/devtest/sp/simulator"
	"github.com/dcm-sp/acm-cluster-sp/internal/devtest/sp/sphub"
	"github.com/dcm-sp/acm-cluster-sp/internal/sp/config"
	"github.com/dcm-sp/acm-cluster-sp/internal/sp/events"
	"github.com/dcm-sp/acm-cluster-sp/internal/sp/meta"
)

// eventsConfig is testConfig with status events on natsURL (200 ms debounce, to keep the tests short), each change
// published at once (no settle time), so that the tests see every status of a lifecycle; what the settle time
// coalesces is events.TestSettleCoalescesABurst's.
func eventsConfig(namespace, provider, natsURL string) config.Config {
	cfg := testConfig(namespace)
	cfg.ProviderName = provider
	cfg.NATSURL = natsURL
	cfg.StatusDebounce = 200 * time.Millisecond
	cfg.StatusSettle = 0
	return cfg
}

// statusStream reads one instance's events and collapses repeated statuses.
type statusStream struct {
	t      testing.TB
	r      *sphub.EventReader
	events []cloudevents.Event
}

func watchEvents(t testing.TB, natsURL, provider, id string) *statusStream {
	t.Helper()
	r, err := sphub.NewEventReader(context.Background(), natsURL, fmt.Sprintf("dcm.providers.%s.cluster.instances.%s.status", provider, id))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(r.Close)
	return &statusStream{t: t, r: r}
}

// read reads the next event before deadline (false: none came).
func (s *statusStream) read(deadline time.Time) (events.Data, bool) {
	s.t.Helper()
	for time.Now().Before(deadline) {
		ev, ok, err := s.r.Next(200 * time.Millisecond)
		if err != nil {
			s.t.Fatal(err)
		}
		if ok {
			s.events = append(s.events, ev)
			return eventData(s.t, ev), true
		}
	}
	return events.Data{}, false
}

// until reads events until one has the status, and returns the collapsed status sequence so far.
func (s *statusStream) until(status string, within time.Duration) ([]string, events.Data) {
	s.t.Helper()
	deadline := time.Now().Add(within)
	for {
		d, ok := s.read(deadline)
		if !ok {
			s.t.Fatalf("no %s event within %v; saw %v", status, within, s.statuses())
		}
		if d.Status == status {
			return s.statuses(), d
		}
	}
}

// next reads the next event, whatever its status.
func (s *statusStream) next(within time.Duration) events.Data {
	s.t.Helper()
	d, ok := s.read(time.Now().Add(within))
	if !ok {
		s.t.Fatalf("no event within %v", within)
	}
	return d
}

func (s *statusStream) statuses() []string {
	var out []string
	for _, ev := range s.events {
		st := eventData(s.t, ev).Status
		if len(out) == 0 || out[len(out)-1] != st {
			out = append(out, st)
		}
	}
	return out
}

func eventData(t testing.TB, ev cloudevents.Event) events.Data {
	var d events.Data
	if err := ev.DataAs(&d); err != nil {
		t.Fatalf("event data: %v", err)
	}
	return d
}

// failMode sets the simulator's failure-injection annotation on a cluster's HostedCluster.
func failMode(t testing.TB, namespace, name, mode string) {
	t.Helper()
	patch := fmt.Sprintf(`{"metadata":{"annotations":{%q:%q}}}`, simulator.AnnotationFail, mode)
	hc := &hyperv1.HostedCluster{}
	hc.Namespace, hc.Name = namespace, name
	if err := testHub.Client.Patch(context.Background(), hc, client.RawPatch(types.MergePatchType, []byte(patch))); err != nil {
		t.Fatal(err)
	}
}

// A cluster's events arrive in order PENDING → PROVISIONING → READY, and DELETE yields DELETING then DELETED;
// each is a CloudEvent with the instance id in its data, parsed by the SDK from a plain JetStream consumer.
func TestStatusEventsLifecycle(t *testing.T) {
	t.Parallel()
	sp := startSP(t, eventsConfig("events", "sp-events", testHub.NATSURL), Options{})
	name := uniqueName("ev")
	id := "inst-" + name
	stream := watchEvents(t, testHub.NATSURL, "sp-events", id)
	if code, _, raw := sp.create(t, id, kubevirtBody(name, 2)); code != http.StatusCreated {
		t.Fatalf("%d %s", code, raw)
	}
	seq, d := stream.until("READY", 90*time.Second)
	if strings.Join(seq, ",") != "PENDING,PROVISIONING,READY" || d.ID != id || !strings.Contains(d.Message, "workers 2/2 ready") {
		t.Fatalf("sequence %v, last %+v", seq, d)
	}
	ev := stream.events[len(stream.events)-1]
	if ev.Type() != "dcm.providers.sp-events.status.update" || ev.Source() != "sp-events" || ev.Subject() != "dcm.providers.sp-events.cluster.instances."+id+".status" {
		t.Fatalf("event attributes %s", ev)
	}
	// The event and a GET agree (one status function).
	if _, c := sp.get(t, id); string(c.Status) != d.Status || c.StatusMessage != d.Message {
		t.Fatalf("GET says %s %q, the event %s %q", c.Status, c.StatusMessage, d.Status, d.Message)
	}
	if resp, err := sp.Client.DeleteClusterWithResponse(context.Background(), id, nil); err != nil || resp.StatusCode() != http.StatusNoContent {
		t.Fatalf("DELETE: %v", err)
	}
	seq, _ = stream.until("DELETED", 90*time.Second)
	if strings.Join(seq[len(seq)-2:], ",") != "DELETING,DELETED" {
		t.Fatalf("deletion sequence %v", seq)
	}
}

// Simulator failure modes surface as FAILED (with the condition's message) and UNAVAILABLE.
func TestStatusEventsFailures(t *testing.T) {
	t.Parallel()
	sp := startSP(t, eventsConfig("events", "sp-events-fail", testHub.NATSURL), Options{})
	// after: the failure is injected once the SP published this status (the simulated operator's clock runs
	// whether or not the SP looked: injected at once, a short READY could pass unseen on a loaded machine).
	cases := []struct {
		mode, after, want, msgPrefix string
	}{
		{simulator.FailInvalidRelease, "", "FAILED", "ValidReleaseImage: failed to pull release image"},
		{simulator.FailUnavailableAfterReady, "READY", "UNAVAILABLE", "Control plane unavailable:"},
	}
	for _, c := range cases {
		t.Run(c.mode, func(t *testing.T) {
			t.Parallel()
			name := uniqueName("evf")
			id := "inst-" + name
			stream := watchEvents(t, testHub.NATSURL, "sp-events-fail", id)
			if code, _, raw := sp.create(t, id, kubevirtBody(name, 1)); code != http.StatusCreated {
				t.Fatalf("%d %s", code, raw)
			}
			if c.after != "" {
				stream.until(c.after, 30*time.Second)
			}
			failMode(t, "events", name, c.mode)
			seq, d := stream.until(c.want, 30*time.Second)
			if !strings.HasPrefix(d.Message, c.msgPrefix) {
				t.Fatalf("%s message %q, want prefix %q (sequence %v)", c.want, d.Message, c.msgPrefix, seq)
			}
			if c.want == "UNAVAILABLE" && !slices.Contains(seq, "READY") {
				t.Fatalf("UNAVAILABLE without READY before: %v", seq)
			}
		})
	}
}

// A NATS outage during transitions ends with every cluster's latest status delivered.
func TestStatusEventsSurviveNATSOutage(t *testing.T) {
	t.Parallel()
	// The SP dials a forwarder that keeps the server's address while the server goes away and comes back.
	fwd, err := faultproxy.NewTCP("")
	if err != nil {
		t.Fatal(err)
	}
	defer fwd.Close()
	store := t.TempDir()
	srv, err := sphub.StartNATSWith(context.Background(), sphub.NATSOptions{StoreDir: store})
	if err != nil {
		t.Fatal(err)
	}
	fwd.SetUpstream(strings.TrimPrefix(srv.ClientURL(), "nats://"))
	sp := startSP(t, eventsConfig("faults", "sp-outage", "nats://"+fwd.Addr), Options{})
	var ids []string
	for i := 0; i < 3; i++ {
		name := uniqueName(fmt.Sprintf("out%d", i))
		id := "inst-" + name
		if code, _, raw := sp.create(t, id, kubevirtBody(name, 1)); code != http.StatusCreated {
			t.Fatalf("%d %s", code, raw)
		}
		ids = append(ids, id)
	}
	for _, id := range ids {
		watchEvents(t, srv.ClientURL(), "sp-outage", id).until("PENDING", 10*time.Second)
	}
	fwd.SetUpstream("") // the bus goes away while the clusters provision
	srv.Shutdown()
	srv.WaitForShutdown()
	for _, id := range ids {
		sp.waitStatus(t, id, "READY", 90*time.Second)
	}
	waitFor(t, 60*time.Second, "health reports NATS down", func() bool {
		for _, c := range sp.App.Health.Report().Checks {
			if c.Name == "nats" {
				return c.Status == "unhealthy"
			}
		}
		return false
	})
	// The publisher has tried, and failed, to deliver what changed during the outage.
	failedBefore := counter(t, sp.App.Registry, "acm_sp_events_failed_total")
	waitFor(t, 60*time.Second, "failed publish attempts during the outage", func() bool {
		return counter(t, sp.App.Registry, "acm_sp_events_failed_total") > failedBefore
	})
	srv, err = sphub.StartNATSWith(context.Background(), sphub.NATSOptions{StoreDir: store}) // same store
	if err != nil {
		t.Fatal(err)
	}
	defer srv.Shutdown()
	fwd.SetUpstream(strings.TrimPrefix(srv.ClientURL(), "nats://"))
	for _, id := range ids {
		seq, _ := watchEvents(t, srv.ClientURL(), "sp-outage", id).until("READY", 90*time.Second)
		t.Logf("%s: %v", id, seq)
	}
}

// Without a stream for the status subjects, a deleted cluster's DELETED is held — and its HostedCluster with it,
// by the SP's finalizer — while the events check says why; once a stream exists, DELETED is stored and the
// HostedCluster goes. (The publisher once fell back to core NATS, counted DELETED delivered and let it go.)
func TestDeletedHeldWithoutStream(t *testing.T) {
	t.Parallel()
	srv, err := sphub.StartNATSWith(context.Background(), sphub.NATSOptions{StoreDir: t.TempDir(), NoStream: true})
	if err != nil {
		t.Fatal(err)
	}
	defer srv.Shutdown()
	url := srv.ClientURL()
	sp := startSP(t, eventsConfig("faults", "sp-nostream", url), Options{})
	name := uniqueName("nost")
	id := "inst-" + name
	if code, _, raw := sp.create(t, id, kubevirtBody(name, 1)); code != http.StatusCreated {
		t.Fatalf("%d %s", code, raw)
	}
	sp.waitStatus(t, id, "READY", 90*time.Second)
	if resp, err := sp.Client.DeleteClusterWithResponse(context.Background(), id, nil); err != nil || resp.StatusCode() != http.StatusNoContent {
		t.Fatalf("DELETE: %v", err)
	}
	hc := &hyperv1.HostedCluster{}
	key := client.ObjectKey{Namespace: "faults", Name: name}
	waitFor(t, 60*time.Second, "the operator is done and only the SP's finalizer holds the HostedCluster", func() bool {
		return testHub.Client.Get(context.Background(), key, hc) == nil && hc.DeletionTimestamp != nil &&
			slices.Equal(hc.Finalizers, []string{meta.FinalizerStatus})
	})
	// DELETED was reported and tried: the publisher failed more than once since. Its retries back off per
	// instance up to 30 s, and this instance has failed since its first status (no stream captures any of them):
	// on a loaded machine two more attempts can take two full backoff periods.
	failed := counter(t, sp.App.Registry, "acm_sp_events_failed_total")
	waitFor(t, 75*time.Second, "two more failed attempts", func() bool {
		return counter(t, sp.App.Registry, "acm_sp_events_failed_total") >= failed+2
	})
	if testHub.Client.Get(context.Background(), key, hc) != nil {
		t.Fatal("the HostedCluster went without DELETED stored anywhere")
	}
	var check string
	waitFor(t, 60*time.Second, "the events check unhealthy", func() bool {
		h := sp.App.Health.Report()
		for _, c := range h.Checks {
			if c.Name == "events" && c.Status == "unhealthy" {
				check = c.Message
				return h.Status == "unhealthy"
			}
		}
		return false
	})
	if !strings.Contains(check, "no JetStream stream captures dcm.providers.sp-nostream.cluster.instances.*.status") {
		t.Fatalf("events check: %q", check)
	}
	if gauge(t, sp.App.Registry, "acm_sp_events_no_stream") != 1 {
		t.Fatal("acm_sp_events_no_stream is not 1")
	}

	if err := sphub.EnsureStatusStream(context.Background(), url); err != nil {
		t.Fatal(err)
	}
	watchEvents(t, url, "sp-nostream", id).until("DELETED", 45*time.Second)
	waitFor(t, 60*time.Second, "HostedCluster gone", func() bool {
		return testHub.Client.Get(context.Background(), key, &hyperv1.HostedCluster{}) != nil
	})
}

// The SP is down while a cluster's HostedCluster is being deleted; started again, it still delivers DELETED
// (its finalizer kept the HostedCluster until then) and cleans up.
func TestDeletedDeliveredAfterRestart(t *testing.T) {
	t.Parallel()
	cfg := eventsConfig("faults", "sp-restart", testHub.NATSURL)
	first := launchSP(t, cfg, Options{})
	name := uniqueName("rst")
	id := "inst-" + name
	stream := watchEvents(t, testHub.NATSURL, "sp-restart", id)
	if code, _, raw := first.create(t, id, kubevirtBody(name, 1)); code != http.StatusCreated {
		t.Fatalf("%d %s", code, raw)
	}
	stream.until("READY", 90*time.Second)
	first.stop() // the SP goes away…

	hc := &hyperv1.HostedCluster{}
	if err := testHub.Client.Get(context.Background(), client.ObjectKey{Namespace: "faults", Name: name}, hc); err != nil {
		t.Fatal(err)
	}
	if err := testHub.Client.Delete(context.Background(), hc); err != nil { // …and the cluster is deleted meanwhile
		t.Fatal(err)
	}
	waitFor(t, 60*time.Second, "the operator is done and only the SP's finalizer holds the HostedCluster", func() bool {
		if err := testHub.Client.Get(context.Background(), client.ObjectKeyFromObject(hc), hc); err != nil {
			return false
		}
		return len(hc.Finalizers) == 1 && hc.Finalizers[0] == meta.FinalizerStatus
	})

	startSP(t, cfg, Options{}) // the SP comes back
	stream.until("DELETED", 90*time.Second)
	waitFor(t, 60*time.Second, "HostedCluster gone", func() bool {
		return testHub.Client.Get(context.Background(), client.ObjectKeyFromObject(hc), &hyperv1.HostedCluster{}) != nil
	})
}

// Two replicas: both serve the API, only the leader publishes; when the leader stops the other takes over.
func TestOnlyTheLeaderPublishes(t *testing.T) {
	t.Parallel()
	cfg := eventsConfig("leader", "sp-leader", testHub.NATSURL)
	a := launchSP(t, cfg, Options{})
	defer a.stop()
	select {
	case <-a.App.Elected():
	case <-time.After(60 * time.Second):
		t.Fatal("the first replica was not elected")
	}
	b := startSP(t, cfg, Options{})

	name := uniqueName("ldr")
	id := "inst-" + name
	stream := watchEvents(t, testHub.NATSURL, "sp-leader", id)
	if code, _, raw := b.create(t, id, kubevirtBody(name, 1)); code != http.StatusCreated { // through the follower
		t.Fatalf("%d %s", code, raw)
	}
	stream.until("READY", 90*time.Second)
	if published(t, a.App.Registry) == 0 || published(t, b.App.Registry) != 0 {
		t.Fatalf("leader published %v, follower %v", published(t, a.App.Registry), published(t, b.App.Registry))
	}

	a.stop()
	select {
	case <-b.App.Elected():
	case <-time.After(60 * time.Second):
		t.Fatal("the second replica did not take over")
	}
	name2 := uniqueName("ldr2")
	id2 := "inst-" + name2
	stream2 := watchEvents(t, testHub.NATSURL, "sp-leader", id2)
	if code, _, raw := b.create(t, id2, kubevirtBody(name2, 1)); code != http.StatusCreated {
		t.Fatalf("%d %s", code, raw)
	}
	stream2.until("READY", 90*time.Second)
	if published(t, b.App.Registry) == 0 {
		t.Fatal("the new leader published nothing")
	}
}

// published sums acm_sp_events_published_total.
func published(t testing.TB, reg *prometheus.Registry) float64 {
	return counter(t, reg, "acm_sp_events_published_total")
}

// counter sums a counter's series; gauge sums a gauge's.
func counter(t testing.TB, reg *prometheus.Registry, name string) float64 {
	return sum(t, reg, name, false)
}

func gauge(t testing.TB, reg *prometheus.Registry, name string) float64 {
	return sum(t, reg, name, true)
}

// counterWhere is a counter's value for the series whose label is value.
func counterWhere(t testing.TB, reg *prometheus.Registry, name, label, value string) float64 {
	return sum(t, reg, name, false, label, value)
}

// sum adds a metric's series; where, when given, is a label name and value a series must have.
func sum(t testing.TB, reg *prometheus.Registry, name string, isGauge bool, where ...string) float64 {
	t.Helper()
	mfs, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	total := 0.0
	for _, mf := range mfs {
		if mf.GetName() == name {
			for _, m := range mf.GetMetric() {
				if len(where) == 2 && !slices.ContainsFunc(m.GetLabel(), func(l *dto.LabelPair) bool {
					return l.GetName() == where[0] && l.GetValue() == where[1]
				}) {
					continue
				}
				if isGauge {
					total += m.GetGauge().GetValue()
				} else {
					total += m.GetCounter().GetValue()
				}
			}
		}
	}
	return total
}
