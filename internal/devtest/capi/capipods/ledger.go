package capipods

import (
	"context"
	"fmt"
	"maps"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"
)

// ProviderIDPrefix starts every providerID the ledger hands out: kubevirt://ledger-<n>.
const ProviderIDPrefix = "kubevirt://"

// Instance is one machine instance of the ledger's "cloud". The ledger knows instances by providerID only: a twin
// KubevirtMachine that carries the same providerID is the same instance, whatever its UID or API group.
type Instance struct {
	// ProviderID is kubevirt://<Node>.
	ProviderID string
	// Node is the name of the instance's Node in the workload cluster (ledger-<n>).
	Node string
	// Namespace and Name are those of the KubevirtMachine that asked for the instance (for reports only).
	Namespace, Name string
	Created         time.Time
}

// Stats are the ledger's counters. Creates and Deletes never decrease; Live = Creates - Deletes.
type Stats struct {
	Creates, Deletes, Live int
	// RepeatedDeletes counts Delete calls for a providerID that is not live (already deleted, or never created):
	// harmless retries, but worth seeing.
	RepeatedDeletes int
}

func (s Stats) String() string {
	return fmt.Sprintf("creates=%d deletes=%d live=%d repeatedDeletes=%d", s.Creates, s.Deletes, s.Live, s.RepeatedDeletes)
}

// Ledger is the infrastructure the ledger provider manages: it hands out providerIDs and counts instance creates and
// deletes. Its counters are the proof of "no instance churn" (a migration must leave Creates and Deletes unchanged).
// It outlives every manager: it is the cloud, not a pod. Safe for concurrent use.
type Ledger struct {
	mu       sync.Mutex
	next     int
	live     map[string]Instance
	stats    Stats
	perNS    map[string]*Stats
	changed  chan struct{} // closed and replaced on every change
	createdC *prometheus.CounterVec
	deletedC *prometheus.CounterVec
	liveDesc *prometheus.Desc
}

// NewLedger returns an empty ledger.
func NewLedger() *Ledger {
	return &Ledger{
		live:    map[string]Instance{},
		perNS:   map[string]*Stats{},
		changed: make(chan struct{}),
		createdC: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "capitest_ledger_instance_creates_total", Help: "Instances the ledger created, by namespace of the KubevirtMachine.",
		}, []string{"namespace"}),
		deletedC: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "capitest_ledger_instance_deletes_total", Help: "Instances the ledger deleted, by namespace of the KubevirtMachine that created them.",
		}, []string{"namespace"}),
		liveDesc: prometheus.NewDesc("capitest_ledger_instances", "Live instances of the ledger.", nil, nil),
	}
}

// Create creates an instance for the KubevirtMachine namespace/name and returns it with a new providerID.
func (l *Ledger) Create(namespace, name string) Instance {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.next++
	node := "ledger-" + strconv.Itoa(l.next)
	in := Instance{ProviderID: ProviderIDPrefix + node, Node: node, Namespace: namespace, Name: name, Created: time.Now()}
	l.live[in.ProviderID] = in
	l.stats.Creates++
	l.ns(namespace).Creates++
	l.createdC.WithLabelValues(namespace).Inc()
	l.notifyLocked()
	return in
}

// Delete deletes the instance with providerID. It reports whether the instance was live; deleting an instance
// that is not live changes nothing but RepeatedDeletes.
func (l *Ledger) Delete(providerID string) bool {
	l.mu.Lock()
	defer l.mu.Unlock()
	in, ok := l.live[providerID]
	if !ok {
		l.stats.RepeatedDeletes++
		l.notifyLocked()
		return false
	}
	delete(l.live, providerID)
	l.stats.Deletes++
	l.ns(in.Namespace).Deletes++
	l.deletedC.WithLabelValues(in.Namespace).Inc()
	l.notifyLocked()
	return true
}

func (l *Ledger) ns(namespace string) *Stats {
	s := l.perNS[namespace]
	if s == nil {
		s = &Stats{}
		l.perNS[namespace] = s
	}
	return s
}

func (l *Ledger) notifyLocked() {
	close(l.changed)
	l.changed = make(chan struct{})
}

// Changed returns a channel closed at the ledger's next change.
func (l *Ledger) Changed() <-chan struct{} {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.changed
}

// Lookup returns the live instance with providerID.
func (l *Ledger) Lookup(providerID string) (Instance, bool) {
	l.mu.Lock()
	defer l.mu.Unlock()
	in, ok := l.live[providerID]
	return in, ok
}

// Stats returns the counters over all namespaces.
func (l *Ledger) Stats() Stats {
	l.mu.Lock()
	defer l.mu.Unlock()
	s := l.stats
	s.Live = len(l.live)
	return s
}

// StatsFor returns the counters of instances created for KubevirtMachines in namespace (RepeatedDeletes is not
// kept per namespace).
func (l *Ledger) StatsFor(namespace string) Stats {
	l.mu.Lock()
	defer l.mu.Unlock()
	s := Stats{}
	if p := l.perNS[namespace]; p != nil {
		s = *p
	}
	s.Live = s.Creates - s.Deletes
	return s
}

// Instances returns the live instances, ordered by providerID number.
func (l *Ledger) Instances() []Instance {
	l.mu.Lock()
	out := slices.Collect(maps.Values(l.live))
	l.mu.Unlock()
	slices.SortFunc(out, func(a, b Instance) int { return instanceNumber(a.ProviderID) - instanceNumber(b.ProviderID) })
	return out
}

func instanceNumber(providerID string) int {
	n, _ := strconv.Atoi(strings.TrimPrefix(providerID, ProviderIDPrefix+"ledger-"))
	return n
}

// Describe and Collect make the ledger a prometheus.Collector: capitest_ledger_instance_creates_total and
// capitest_ledger_instance_deletes_total{namespace}, capitest_ledger_instances.
func (l *Ledger) Describe(ch chan<- *prometheus.Desc) {
	l.createdC.Describe(ch)
	l.deletedC.Describe(ch)
	ch <- l.liveDesc
}

// Collect implements prometheus.Collector.
func (l *Ledger) Collect(ch chan<- prometheus.Metric) {
	l.createdC.Collect(ch)
	l.deletedC.Collect(ch)
	ch <- prometheus.MustNewConstMetric(l.liveDesc, prometheus.GaugeValue, float64(l.Stats().Live))
}

// ConfigMapData renders the ledger for a ConfigMap: the counters, one line per live instance, and the counters per
// namespace ("ns.<namespace>": "creates=… deletes=… live=…").
func (l *Ledger) ConfigMapData() map[string]string {
	s := l.Stats()
	data := map[string]string{
		"creates":         strconv.Itoa(s.Creates),
		"deletes":         strconv.Itoa(s.Deletes),
		"live":            strconv.Itoa(s.Live),
		"repeatedDeletes": strconv.Itoa(s.RepeatedDeletes),
	}
	var lines []string
	for _, in := range l.Instances() {
		lines = append(lines, fmt.Sprintf("%s %s/%s", in.ProviderID, in.Namespace, in.Name))
	}
	data["instances"] = strings.Join(lines, "\n")
	l.mu.Lock()
	for ns := range l.perNS {
		p := *l.perNS[ns]
		p.Live = p.Creates - p.Deletes
		data["ns."+ns] = fmt.Sprintf("creates=%d deletes=%d live=%d", p.Creates, p.Deletes, p.Live)
	}
	l.mu.Unlock()
	return data
}

// Publish mirrors the ledger into the ConfigMap key (namespace created if missing) after every change until ctx
// ends, so a process that only sees the API server (kubectl, a subprocess) can read the counters. It returns after
// the first write; later API errors are retried every second.
func (l *Ledger) Publish(ctx context.Context, c client.Client, key types.NamespacedName) error {
	if err := c.Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: key.Namespace}}); err != nil && !apierrors.IsAlreadyExists(err) {
		return err
	}
	changed, err := l.put(ctx, c, key)
	if err != nil {
		return err
	}
	go func() {
		for {
			select {
			case <-ctx.Done():
				return
			case <-changed:
			}
			if changed, err = l.put(ctx, c, key); err != nil {
				retry := make(chan struct{})
				time.AfterFunc(time.Second, func() { close(retry) })
				changed = retry
			}
		}
	}()
	return nil
}

// put writes the ConfigMap and returns the channel of the next change after what it wrote.
func (l *Ledger) put(ctx context.Context, c client.Client, key types.NamespacedName) (<-chan struct{}, error) {
	changed := l.Changed()
	cm := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: key.Name, Namespace: key.Namespace}, Data: l.ConfigMapData()}
	err := c.Update(ctx, cm) // ConfigMaps allow unconditional updates
	if apierrors.IsNotFound(err) {
		err = c.Create(ctx, cm)
	}
	return changed, err
}
