package reconcile

import (
	"context"
	"errors"
	"slices"
	"testing"
	"time"

	"github.com/dcm-sp/acm-cluster-sp/internal/sp/clusters"
)

// fixture is a Reconciler over in-memory collaborators; nothing runs until the test calls it.
type fixture struct {
	j    *journal
	ix   *memIndex
	prov *memProv
	rep  *memReporter
	r    *Reconciler
}

func newFixture(t *testing.T, withReporter bool, views ...clusters.View) *fixture {
	t.Helper()
	j := &journal{}
	f := &fixture{j: j, ix: newIndex(views...), prov: newProv(j), rep: newReporter(j)}
	var rep Reporter
	if withReporter {
		rep = f.rep
	}
	f.r = New(f.ix, f.prov, rep, Options{})
	f.ix.OnChange(f.r.Enqueue) // as app.New wires it
	return f
}

// reconcileOnce reconciles id and returns when to look again, the calls it made and the error.
func (f *fixture) reconcileOnce(t *testing.T, id string) (time.Duration, []string, error) {
	t.Helper()
	f.j.Reset()
	d, err := f.r.reconcile(context.Background(), id)
	return d, f.j.All(), err
}

var errHub = errors.New("hub says no")

// reconcileCase is one instance as the index holds it, and what one reconcile of it must do.
type reconcileCase struct {
	name    string
	view    *clusters.View // nil: the index does not know the id
	noRep   bool           // without status events
	live    *clusters.View // LiveView's answer (nil: gone)
	fail    string         // a Provisioner method that fails
	create  bool           // a create of this process is writing the instance
	requeue time.Duration
	err     bool
	calls   []string
}

var reconcileCases = []reconcileCase{
	{name: "unknown and never seen: nothing (the orphan sweep handles leftovers)", calls: nil},
	{name: "NodePools without a HostedCluster, never seen: nothing", view: ptrTo(view("a", nil, readyPool("np"))), calls: nil},
	{name: "pending: reported, converged, looked at again at the provisioning timeout",
		view: ptrTo(view("a", pending("c-a"))), requeue: 44*time.Minute + 10*time.Millisecond,
		calls: []string{"report a PENDING", "converge c-a"}},
	{name: "ready: reported, converged, no deadline",
		view:  ptrTo(view("a", ready("c-a"), readyPool("np"))),
		calls: []string{"report a READY", "converge c-a"}},
	{name: "a create of this process is writing it: reported, left to the create, looked at again shortly",
		view: ptrTo(view("a", pending("c-a"))), create: true, requeue: createRecheck,
		calls: []string{"report a PENDING"}},
	{name: "ready without status events: converged only",
		view: ptrTo(view("a", ready("c-a"), readyPool("np"))), noRep: true,
		calls: []string{"converge c-a"}},
	{name: "converge fails: reported first, the error is returned",
		view: ptrTo(view("a", ready("c-a"), readyPool("np"))), fail: "Converge", err: true,
		calls: []string{"report a READY", "converge c-a"}},
	{name: "being deleted by HyperShift: DELETING, the un-ownable objects go, no converge, warn deadline",
		view: ptrTo(view("a", deleting("c-a"))), requeue: 14*time.Minute + 10*time.Millisecond,
		calls: []string{"report a DELETING", `delete-acm a name="c-a"`}},
	{name: "being deleted, ACM objects fail: the error is returned",
		view: ptrTo(view("a", deleting("c-a"))), fail: "DeleteACMObjects", err: true,
		calls: []string{"report a DELETING", `delete-acm a name="c-a"`}},
	{name: "stepped back: confirmed against the API server, the live view is reported",
		view: ptrTo(view("a", ready("c-a"))), live: ptrTo(view("a", ready("c-a"), readyPool("np"))),
		calls: []string{"live a", "report a READY", "converge c-a"}},
	{name: "stepped back and still short of workers live: PROVISIONING is reported",
		view: ptrTo(view("a", ready("c-a"))), live: ptrTo(view("a", ready("c-a"))),
		calls: []string{"live a", "report a PROVISIONING", "converge c-a"}},
	{name: "stepped back, gone live: nothing reported (the delete event finishes it)",
		view: ptrTo(view("a", ready("c-a"))), calls: []string{"live a"}},
	{name: "stepped back, the API server does not answer: nothing reported, retried",
		view: ptrTo(view("a", ready("c-a"))), fail: "LiveView", err: true, calls: []string{"live a"}},
	{name: "stepped back without status events: nothing to confirm",
		view: ptrTo(view("a", ready("c-a"))), noRep: true, calls: []string{"converge c-a"}},
	{name: "released by HyperShift, DELETED not yet acknowledged: clean up, keep the finalizer, safety-net recheck",
		view: ptrTo(view("a", released("c-a"))), requeue: 30 * time.Second,
		calls: []string{"report a DELETED", `delete-acm a name="c-a"`, "release-agents a"}},
	{name: "released without status events: clean up and let it go",
		view: ptrTo(view("a", released("c-a"))), noRep: true,
		calls: []string{`delete-acm a name="c-a"`, "release-agents a", "remove-finalizer c-a"}},
	{name: "released, ACM objects fail: agents and finalizer wait",
		view: ptrTo(view("a", released("c-a"))), fail: "DeleteACMObjects", err: true,
		calls: []string{"report a DELETED", `delete-acm a name="c-a"`}},
	{name: "released, agents fail: the finalizer waits",
		view: ptrTo(view("a", released("c-a"))), noRep: true, fail: "ReleaseAgents", err: true,
		calls: []string{`delete-acm a name="c-a"`, "release-agents a"}},
	{name: "released, the finalizer cannot be removed: the error is returned",
		view: ptrTo(view("a", released("c-a"))), noRep: true, fail: "RemoveStatusFinalizer", err: true,
		calls: []string{`delete-acm a name="c-a"`, "release-agents a", "remove-finalizer c-a"}},
}

// What one reconcile of one instance does, by what the index holds: the calls in order and when to look again.
func TestReconcileDecides(t *testing.T) {
	for _, c := range reconcileCases {
		t.Run(c.name, func(t *testing.T) {
			var views []clusters.View
			if c.view != nil {
				views = append(views, *c.view)
			}
			f := newFixture(t, !c.noRep, views...)
			if c.live != nil {
				f.prov.live["a"] = *c.live
			}
			if c.fail != "" {
				f.prov.failing(c.fail, errHub, 0)
			}
			f.prov.creating["a"] = c.create
			requeue, calls, err := f.reconcileOnce(t, "a")
			if (err != nil) != c.err || (err != nil && !errors.Is(err, errHub)) {
				t.Fatalf("error %v, want error=%v", err, c.err)
			}
			if requeue != c.requeue {
				t.Errorf("look again after %v, want %v", requeue, c.requeue)
			}
			if !slices.Equal(calls, c.calls) {
				t.Errorf("calls\n  %q\nwant\n  %q", calls, c.calls)
			}
		})
	}
}

func ptrTo[T any](v T) *T { return &v }

// A deletion is finished in two steps across reconciles: DELETED is reported and the clean-up done, and only once
// the bus has acknowledged DELETED does the HostedCluster go; when it has left the index, what the SP remembered
// about the instance is dropped, on both sides.
func TestDeletionWaitsForDeliveredThenForgets(t *testing.T) {
	f := newFixture(t, true, view("a", ready("c-a"), readyPool("np")))
	if _, _, err := f.reconcileOnce(t, "a"); err != nil {
		t.Fatal(err)
	}
	if f.r.Remembered() != 1 {
		t.Fatalf("remembered %d instances after seeing a HostedCluster, want 1", f.r.Remembered())
	}

	f.ix.set(view("a", released("c-a")))
	requeue, calls, err := f.reconcileOnce(t, "a")
	if err != nil || requeue != 30*time.Second || slices.Contains(calls, "remove-finalizer c-a") {
		t.Fatalf("before the acknowledgement: requeue %v err %v calls %q", requeue, err, calls)
	}

	f.rep.deliver("a")
	requeue, calls, err = f.reconcileOnce(t, "a")
	want := []string{"report a DELETED", `delete-acm a name="c-a"`, "release-agents a", "remove-finalizer c-a"}
	if err != nil || requeue != 0 || !slices.Equal(calls, want) {
		t.Fatalf("after the acknowledgement: requeue %v err %v calls %q, want %q", requeue, err, calls, want)
	}
	if f.r.Remembered() != 1 {
		t.Fatal("forgot the instance while its HostedCluster is still in the index")
	}

	// The HostedCluster left the index: DELETED again (idempotent), the clean-up by id, then everything forgotten.
	f.ix.drop("a")
	requeue, calls, err = f.reconcileOnce(t, "a")
	want = []string{"report a DELETED", `delete-acm a name=""`, "release-agents a", "prov-forget a", "reporter-forget a"}
	if err != nil || requeue != 0 || !slices.Equal(calls, want) {
		t.Fatalf("after it left the index: requeue %v err %v calls %q, want %q", requeue, err, calls, want)
	}
	if f.r.Remembered() != 0 {
		t.Fatalf("remembered %d instances after the deletion finished", f.r.Remembered())
	}

	// Seen no more: a later event for the id is a no-op.
	if _, calls, _ = f.reconcileOnce(t, "a"); len(calls) != 0 {
		t.Fatalf("a finished deletion reconciled again: %q", calls)
	}
}

// A HostedCluster seen only once it is released (an SP that started during a deletion) is finished all the same.
func TestReleasedClusterSeenFirstIsFinished(t *testing.T) {
	f := newFixture(t, true, view("a", released("c-a")))
	f.rep.deliver("a")
	_, calls, err := f.reconcileOnce(t, "a")
	if err != nil || !slices.Contains(calls, "remove-finalizer c-a") {
		t.Fatalf("err %v calls %q", err, calls)
	}
}
