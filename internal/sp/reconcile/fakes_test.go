package reconcile

import (
	"context"
	"maps"
	"slices"
	"sync"
	"time"

	configv1 "github.com/openshift/api/config/v1"
	hyperv1 "github.com/openshift/hypershift/api/hypershift/v1beta1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"

	"github.com/dcm-sp/acm-cluster-sp/internal/devtest/testjournal"
	"github.com/dcm-sp/acm-cluster-sp/internal/sp/clusters"
	"github.com/dcm-sp/acm-cluster-sp/internal/sp/meta"
	"github.com/dcm-sp/acm-cluster-sp/internal/sp/status"
)

// The in-memory collaborators of these tests. They record what the Reconciler asks of them, in order, in one
// shared journal, and answer from what the test put into them; none of them decides anything the Reconciler
// decides.

var now = time.Date(2026, 11, 22, 12, 0, 0, 0, time.UTC)

// journal is the ordered record of calls, shared by the provisioner and the reporter.
type journal = testjournal.Journal

// memIndex is an Index held in a map; set and drop notify like the hub's informers do, hide does not (a change
// the reconciler only learns on a resync).
type memIndex struct {
	mu       sync.Mutex
	views    map[string]clusters.View
	onChange func(string)
}

func newIndex(views ...clusters.View) *memIndex {
	ix := &memIndex{views: map[string]clusters.View{}}
	for _, v := range views {
		ix.views[v.ID] = v
	}
	return ix
}

func (ix *memIndex) Get(id string) (clusters.View, bool) {
	ix.mu.Lock()
	defer ix.mu.Unlock()
	v, ok := ix.views[id]
	return v, ok
}

func (ix *memIndex) IDs() []string {
	ix.mu.Lock()
	defer ix.mu.Unlock()
	return slices.Sorted(maps.Keys(ix.views))
}

func (ix *memIndex) Len() int {
	ix.mu.Lock()
	defer ix.mu.Unlock()
	return len(ix.views)
}

func (ix *memIndex) OnChange(f func(id string)) {
	ix.mu.Lock()
	defer ix.mu.Unlock()
	ix.onChange = f
}

func (ix *memIndex) notify(id string) {
	ix.mu.Lock()
	f := ix.onChange
	ix.mu.Unlock()
	if f != nil {
		f(id)
	}
}

func (ix *memIndex) set(v clusters.View) {
	ix.mu.Lock()
	ix.views[v.ID] = v
	ix.mu.Unlock()
	ix.notify(v.ID)
}

func (ix *memIndex) drop(id string) {
	ix.hide(id)
	ix.notify(id)
}

func (ix *memIndex) hide(id string) {
	ix.mu.Lock()
	delete(ix.views, id)
	ix.mu.Unlock()
}

// memProv is a Provisioner that journals its calls and fails where the test says.
type memProv struct {
	j    *journal
	mu   sync.Mutex
	fail map[string]error // by method name: the next calls fail with it
	// failTimes: how many more calls of a method fail (absent: as long as fail holds it).
	failTimes map[string]int
	live      map[string]clusters.View // LiveView's answers by id (absent: the HostedCluster is gone)
	known     func(id string) bool     // the last SweepOrphans' known function
	grace     time.Duration            // the last SweepOrphans' grace
	creating  map[string]bool          // instances a create of this process is writing
}

func newProv(j *journal) *memProv {
	return &memProv{j: j, fail: map[string]error{}, failTimes: map[string]int{}, live: map[string]clusters.View{}, creating: map[string]bool{}}
}

func (p *memProv) failing(method string, err error, times int) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.fail[method] = err
	if times > 0 {
		p.failTimes[method] = times
	}
}

func (p *memProv) err(method string) error {
	p.mu.Lock()
	defer p.mu.Unlock()
	err := p.fail[method]
	if n, ok := p.failTimes[method]; ok && err != nil {
		if n <= 1 {
			delete(p.fail, method)
			delete(p.failTimes, method)
		} else {
			p.failTimes[method] = n - 1
		}
	}
	return err
}

func (p *memProv) Converge(_ context.Context, hc *hyperv1.HostedCluster) error {
	p.j.Add("converge %s", hc.Name)
	return p.err("Converge")
}

func (p *memProv) LiveView(_ context.Context, id string, _ *hyperv1.HostedCluster) (clusters.View, error) {
	p.j.Add("live %s", id)
	if err := p.err("LiveView"); err != nil {
		return clusters.View{}, err
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.live[id], nil
}

func (p *memProv) DeleteACMObjects(_ context.Context, id, name string) error {
	p.j.Add("delete-acm %s name=%q", id, name)
	return p.err("DeleteACMObjects")
}

func (p *memProv) ReleaseAgents(_ context.Context, id string) error {
	p.j.Add("release-agents %s", id)
	return p.err("ReleaseAgents")
}

func (p *memProv) RemoveStatusFinalizer(_ context.Context, hc *hyperv1.HostedCluster) error {
	p.j.Add("remove-finalizer %s", hc.Name)
	return p.err("RemoveStatusFinalizer")
}

func (p *memProv) SweepOrphans(_ context.Context, known func(id string) bool, grace time.Duration) {
	p.mu.Lock()
	p.known, p.grace = known, grace
	p.mu.Unlock()
	p.j.Add("sweep")
}

func (p *memProv) sweptWith() (func(string) bool, time.Duration) {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.known, p.grace
}

func (p *memProv) Forget(id string) { p.j.Add("prov-forget %s", id) }
func (p *memProv) Creating(id string) bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.creating[id]
}
func (p *memProv) Now() time.Time                  { return now }
func (p *memProv) StatusSettings() status.Settings { return status.DefaultSettings() }
func (p *memProv) Report(_ clusters.View, r status.Result) status.Report {
	return status.Report{Status: r.Status, Message: r.Message}
}

// memReporter is a Reporter that journals reports and acknowledges what the test says the bus acknowledged.
type memReporter struct {
	j         *journal
	mu        sync.Mutex
	delivered map[string]bool // id → DELETED acknowledged
	resyncs   int
}

func newReporter(j *journal) *memReporter { return &memReporter{j: j, delivered: map[string]bool{}} }

func (r *memReporter) Report(id string, rep status.Report) { r.j.Add("report %s %s", id, rep.Status) }

func (r *memReporter) Delivered(id string, st status.Status) bool {
	r.mu.Lock()
	defer r.mu.Unlock()
	return st == status.Deleted && r.delivered[id]
}

func (r *memReporter) deliver(id string) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.delivered[id] = true
}

func (r *memReporter) Resync() {
	r.mu.Lock()
	r.resyncs++
	r.mu.Unlock()
	r.j.Add("resync")
}

func (r *memReporter) Forget(id string) { r.j.Add("reporter-forget %s", id) }

// HostedCluster fixtures: the conditions HyperShift sets in each phase (as the status package's fixtures).

func hc(name string) *hyperv1.HostedCluster {
	return &hyperv1.HostedCluster{
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: "clusters", CreationTimestamp: metav1.NewTime(now.Add(-time.Minute))},
		Spec:       hyperv1.HostedClusterSpec{Platform: hyperv1.PlatformSpec{Type: hyperv1.KubevirtPlatform}},
	}
}

// pending: just created, nothing started (PENDING until the provisioning timeout).
func pending(name string) *hyperv1.HostedCluster { return hc(name) }

// ready: control plane available, rollout completed (READY with a ready NodePool).
func ready(name string) *hyperv1.HostedCluster {
	h := hc(name)
	h.CreationTimestamp = metav1.NewTime(now.Add(-time.Hour))
	h.Status.Conditions = []metav1.Condition{
		{Type: string(hyperv1.HostedClusterAvailable), Status: metav1.ConditionTrue, LastTransitionTime: metav1.NewTime(now.Add(-time.Hour))},
		{Type: string(hyperv1.HostedClusterDegraded), Status: metav1.ConditionFalse, LastTransitionTime: metav1.NewTime(now.Add(-time.Hour))},
	}
	h.Status.Version = &hyperv1.ClusterVersionStatus{History: []configv1.UpdateHistory{{State: configv1.CompletedUpdate, Version: "4.17.12"}}}
	return h
}

func readyPool(name string) *hyperv1.NodePool {
	return &hyperv1.NodePool{
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: "clusters"},
		Spec:       hyperv1.NodePoolSpec{Replicas: ptr.To[int32](2)},
		Status: hyperv1.NodePoolStatus{Replicas: 2, Conditions: []hyperv1.NodePoolCondition{
			{Type: hyperv1.NodePoolReadyConditionType, Status: corev1.ConditionTrue}}},
	}
}

// deleting: deletion started, HyperShift's own finalizer still there.
func deleting(name string) *hyperv1.HostedCluster {
	h := ready(name)
	h.DeletionTimestamp = ptr.To(metav1.NewTime(now.Add(-time.Minute)))
	h.Finalizers = []string{"hypershift.openshift.io/finalizer", meta.FinalizerStatus}
	return h
}

// released: the operator has finished; only the SP's status finalizer holds the HostedCluster.
func released(name string) *hyperv1.HostedCluster {
	h := deleting(name)
	h.Finalizers = []string{meta.FinalizerStatus}
	return h
}

func view(id string, h *hyperv1.HostedCluster, pools ...*hyperv1.NodePool) clusters.View {
	return clusters.View{ID: id, HostedCluster: h, NodePools: pools}
}
