package events

import (
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/dcm-sp/acm-cluster-sp/internal/sp/status"
)

func TestPublishAt(t *testing.T) {
	t0 := time.Date(2026, 12, 7, 0, 0, 0, 0, time.UTC)
	ms := func(n int) time.Time { return t0.Add(time.Duration(n) * time.Millisecond) }
	const settle, debounce = 250 * time.Millisecond, time.Second
	for _, c := range []struct {
		name                  string
		now, since, notBefore time.Time
		settle, debounce      time.Duration
		want                  time.Time
	}{
		{"a first change waits for the status to settle", ms(0), ms(0), time.Time{}, settle, debounce, ms(250)},
		{"a later change of the burst moves the publish", ms(40), ms(0), time.Time{}, settle, debounce, ms(290)},
		{"a cluster that keeps changing is published a window after its first change", ms(900), ms(0), time.Time{}, settle, debounce, ms(1000)},
		{"no sooner than the window's end", ms(100), ms(100), ms(1000), settle, debounce, ms(1000)},
		{"settled after the window's end", ms(2000), ms(2000), ms(1000), settle, debounce, ms(2250)},
		{"overdue (a retried publish): now", ms(5000), ms(0), time.Time{}, settle, debounce, ms(5000)},
		{"no settle: at once", ms(0), ms(0), time.Time{}, 0, debounce, ms(0)},
		{"no settle, within the window: its end", ms(300), ms(300), ms(1000), 0, debounce, ms(1000)},
		{"no debounce: at once", ms(40), ms(0), ms(20), settle, 0, ms(40)},
	} {
		if got := publishAt(c.now, c.since, c.notBefore, c.settle, c.debounce); !got.Equal(c.want) {
			t.Errorf("%s: %v, want %v", c.name, got.Sub(t0), c.want.Sub(t0))
		}
	}
}

func TestWindowEnd(t *testing.T) {
	t0 := time.Date(2026, 12, 7, 0, 0, 0, 0, time.UTC)
	ms := func(n int) time.Time { return t0.Add(time.Duration(n) * time.Millisecond) }
	const debounce = time.Second
	for _, c := range []struct {
		name       string
		last, prev time.Time
		news       bool
		debounce   time.Duration
		want       time.Time
	}{
		{"nothing published yet: no window", time.Time{}, time.Time{}, false, debounce, time.Time{}},
		{"after a new message: a window", ms(5000), ms(1000), false, debounce, ms(6000)},
		{"after a cluster's first status: its burst follows", ms(5000), time.Time{}, true, debounce, ms(5000)},
		{"after a new status a window or more after the one before: its burst follows", ms(5000), ms(4000), true, debounce, ms(5000)},
		{"after a new status that was itself the early one: a window", ms(5000), ms(4500), true, debounce, ms(6000)},
		{"no debounce: no window", ms(5000), ms(4990), false, 0, ms(5000)},
	} {
		if got := windowEnd(c.last, c.prev, c.news, c.debounce); !got.Equal(c.want) {
			t.Errorf("%s: %v, want %v", c.name, got.Sub(t0), c.want.Sub(t0))
		}
	}
}

func TestSettleFor(t *testing.T) {
	const settle = 250 * time.Millisecond
	provisioning := &state{status: "PROVISIONING", message: "a"}
	for _, c := range []struct {
		name  string
		acked *state
		s     state
		want  time.Duration
	}{
		{"a cluster's first status: at once", nil, state{status: "PENDING"}, 0},
		{"a new status: at once", provisioning, state{status: "READY", message: "a"}, 0},
		{"a new message of the same status: settles", provisioning, state{status: "PROVISIONING", message: "b"}, settle},
	} {
		if got := settleFor(c.acked, c.s, settle); got != c.want {
			t.Errorf("%s: %v, want %v", c.name, got, c.want)
		}
	}
}

// A new status goes out at once; a burst of new messages within it is one event, the last of them, sent once it has
// settled; a cluster whose message keeps changing is still reported, a debounce window after its first change.
func TestSettleCoalescesABurst(t *testing.T) {
	const settle, debounce = 200 * time.Millisecond, time.Second
	p, url := termStarted(t, settle, debounce)
	var mu sync.Mutex
	var delivered []string
	at := map[string]time.Time{}
	p.OnDelivered(func(id string, st status.Status) {
		mu.Lock()
		delivered = append(delivered, id+"/"+string(st))
		at[id] = time.Now()
		mu.Unlock()
	})
	count := func(id string) int {
		mu.Lock()
		defer mu.Unlock()
		n := 0
		for _, d := range delivered {
			if strings.HasPrefix(d, id+"/") {
				n++
			}
		}
		return n
	}

	// A new status (TestSettleFor: it does not settle).
	p.Report("burst", status.Report{Status: status.Provisioning, Message: "starting"})
	waitTrue(t, func() bool { return p.Delivered("burst", status.Provisioning) })
	// Three new messages of that status, after the window: one event, the last, once it has settled.
	time.Sleep(debounce) // the window after the first publish ends (this part is about settling, not the window)
	p.Report("burst", status.Report{Status: status.Provisioning, Message: "a"})
	p.Report("burst", status.Report{Status: status.Provisioning, Message: "b"})
	last := time.Now() // no later than the last change's report
	p.Report("burst", status.Report{Status: status.Provisioning, Message: "c"})
	waitTrue(t, func() bool { return count("burst") == 2 && p.Delivered("burst", status.Provisioning) })
	mu.Lock()
	sent := at["burst"]
	mu.Unlock()
	if sent.Sub(last) < settle {
		t.Fatalf("published %v after the burst's last change, before it settled (%v)", sent.Sub(last), settle)
	}
	evs := consume(t, url, "dcm.providers.test-sp.cluster.instances.burst.status", 3, 5*time.Second)
	if got := messages(t, evs); got != "starting,c" {
		t.Fatalf("messages published %v, want starting,c", got)
	}

	// A new message every 50 ms, faster than it settles: delivered while the changes go on.
	p.Report("busy", status.Report{Status: status.Provisioning, Message: "start"})
	waitTrue(t, func() bool { return count("busy") == 1 })
	time.Sleep(debounce) // past the window after that publish
	begin := time.Now()
	for i := 0; count("busy") == 1; i++ {
		if time.Since(begin) > 10*debounce {
			t.Fatal("a cluster that keeps changing was never reported")
		}
		p.Report("busy", status.Report{Status: status.Provisioning, Message: fmt.Sprintf("step %d", i)})
		time.Sleep(50 * time.Millisecond) // the changes' pace
	}
	mu.Lock()
	sent = at["busy"]
	mu.Unlock()
	if d := sent.Sub(begin); d < debounce {
		t.Fatalf("a busy cluster reported %v after its first change, before the window ended", d)
	}
}

// A new status goes out at once and the burst of messages it begins follows as one event once settled, without
// waiting for the window; the event after that waits for it (at most two events in a window).
func TestNewStatusBurstFollowsSettled(t *testing.T) {
	const settle, debounce = 100 * time.Millisecond, 2 * time.Second
	p, url := termStarted(t, settle, debounce)
	var mu sync.Mutex
	var sent []time.Time
	delivered := func(n int) bool {
		mu.Lock()
		defer mu.Unlock()
		return len(sent) >= n
	}
	p.OnDelivered(func(id string, _ status.Status) {
		if id != "x" {
			return
		}
		mu.Lock()
		sent = append(sent, time.Now())
		mu.Unlock()
	})

	p.Report("x", status.Report{Status: status.Provisioning, Message: "starting"})
	waitTrue(t, func() bool { return delivered(1) })
	for _, m := range []string{"a", "b", "c"} {
		p.Report("x", status.Report{Status: status.Provisioning, Message: m})
	}
	last := time.Now()
	waitTrue(t, func() bool { return delivered(2) })
	p.Report("x", status.Report{Status: status.Provisioning, Message: "d"})
	waitTrue(t, func() bool { return delivered(3) })
	mu.Lock()
	first, second, third := sent[0], sent[1], sent[2]
	mu.Unlock()
	if d := second.Sub(last); d < settle {
		t.Errorf("the burst's event came %v after its last change, before it settled (%v)", d, settle)
	}
	if d := second.Sub(first); d >= debounce {
		t.Errorf("the burst's event came %v after the new status: it waited for the window (%v)", d, debounce)
	}
	if d := third.Sub(second); d < debounce {
		t.Errorf("a third event %v after the second: want a window (%v)", d, debounce)
	}
	evs := consume(t, url, "dcm.providers.test-sp.cluster.instances.x.status", 3, 5*time.Second)
	if got := messages(t, evs); got != "starting,c,d" {
		t.Fatalf("messages published %v, want starting,c,d", got)
	}
}

// termStarted starts a publisher with settle and debounce on its own JetStream (at url) and returns it once its
// leadership term runs: a status reported before the term begins goes out when it begins, settled or not, which the
// tests of the schedule must not mistake for the schedule's doing.
func termStarted(t *testing.T, settle, debounce time.Duration) (p *Publisher, url string) {
	t.Helper()
	url, _ = startNATS(t, true)
	p = startPublisher(t, Options{URL: url, Settle: settle, Debounce: debounce})
	p.Report("warm", status.Report{Status: status.Ready})
	waitTrue(t, func() bool { return p.Delivered("warm", status.Ready) })
	return p, url
}
