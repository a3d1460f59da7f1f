package hub

import (
	"slices"
	"sort"
	"strings"
	"sync"
	"time"

	"github.com/google/btree"
	hyperv1 "github.com/openshift/hypershift/api/hypershift/v1beta1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	clusterv1 "open-cluster-management.io/api/cluster/v1"

	"github.com/dcm-sp/acm-cluster-sp/internal/sp/clusters"
	"github.com/dcm-sp/acm-cluster-sp/internal/sp/meta"
)

type entry struct {
	hc  *hyperv1.HostedCluster
	nps map[string]*hyperv1.NodePool
	// sorted is nps by name, rebuilt on every change of nps: the views share it (read-only), so a GET or a LIST
	// page allocates no slice per cluster.
	sorted []*hyperv1.NodePool
	key    clusters.Key
}

// sortNodePools rebuilds e.sorted after a change of e.nps (under the write lock). A new slice each time: views
// handed out before keep the one they have.
func (e *entry) sortNodePools() {
	e.sorted = nil
	if len(e.nps) == 0 {
		return
	}
	sorted := make([]*hyperv1.NodePool, 0, len(e.nps))
	for _, np := range e.nps {
		sorted = append(sorted, np)
	}
	slices.SortFunc(sorted, func(a, b *hyperv1.NodePool) int { return strings.Compare(a.Name, b.Name) })
	e.sorted = sorted
}

// Index is the SP's read model: the cached objects of every cluster, by instance id and in list order. It is fed
// by informer event handlers and notifies listeners of the instance ids that changed.
type Index struct {
	provider  string // objects labelled for another provider are not ours (meta.Ours)
	mu        sync.RWMutex
	byID      map[string]*entry
	byName    map[string]string // HostedCluster name → id
	order     *btree.BTreeG[clusters.Key]
	secrets   map[string]*metav1.PartialObjectMetadata // every Secret of the namespace, metadata only, by name
	mcs       map[string]*clusterv1.ManagedCluster
	listeners []func(id string)
}

// NewIndex returns an empty index of provider's clusters.
func NewIndex(provider string) *Index {
	return &Index{
		provider: provider,
		byID:     map[string]*entry{},
		byName:   map[string]string{},
		order:    btree.NewG(32, func(a, b clusters.Key) bool { return a.Less(b) }),
		secrets:  map[string]*metav1.PartialObjectMetadata{},
		mcs:      map[string]*clusterv1.ManagedCluster{},
	}
}

// ours tells whether an object belongs to this index's provider and has an instance id.
func (x *Index) ours(l map[string]string) (string, bool) {
	id := meta.InstanceID(l)
	return id, id != "" && meta.Ours(x.provider, l)
}

// OnChange registers f to be called (outside the lock) with the instance id of every changed cluster.
func (x *Index) OnChange(f func(id string)) {
	x.mu.Lock()
	x.listeners = append(x.listeners, f)
	x.mu.Unlock()
}

func (x *Index) notify(ids ...string) {
	x.mu.RLock()
	ls := x.listeners
	x.mu.RUnlock()
	for _, id := range ids {
		if id == "" {
			continue
		}
		for _, f := range ls {
			f(id)
		}
	}
}

func (x *Index) entry(id string) *entry {
	e := x.byID[id]
	if e == nil {
		e = &entry{nps: map[string]*hyperv1.NodePool{}}
		x.byID[id] = e
	}
	return e
}

func (x *Index) gc(id string) {
	if e := x.byID[id]; e != nil && e.hc == nil && len(e.nps) == 0 {
		delete(x.byID, id)
	}
}

// PutHostedCluster records an added or updated HostedCluster.
func (x *Index) PutHostedCluster(hc *hyperv1.HostedCluster) {
	id, ok := x.ours(hc.Labels)
	if !ok {
		x.DeleteHostedCluster(hc) // relabelled for another provider: not ours any more
		return
	}
	x.mu.Lock()
	e := x.entry(id)
	if e.hc != nil {
		x.order.Delete(e.key)
		if e.hc.Name != hc.Name {
			delete(x.byName, e.hc.Name)
		}
	}
	e.hc = hc
	e.key = clusters.Key{Created: hc.CreationTimestamp.Time, ID: id}
	x.order.ReplaceOrInsert(e.key)
	x.byName[hc.Name] = id
	x.mu.Unlock()
	x.notify(id)
}

// DeleteHostedCluster records a deleted HostedCluster.
func (x *Index) DeleteHostedCluster(hc *hyperv1.HostedCluster) {
	id := meta.InstanceID(hc.Labels)
	x.mu.Lock()
	if e := x.byID[id]; e != nil && e.hc != nil && e.hc.UID == hc.UID {
		x.order.Delete(e.key)
		delete(x.byName, e.hc.Name)
		e.hc = nil
		x.gc(id)
	}
	x.mu.Unlock()
	x.notify(id)
}

// PutNodePool records an added or updated NodePool.
func (x *Index) PutNodePool(np *hyperv1.NodePool) {
	id, ok := x.ours(np.Labels)
	if !ok {
		x.DeleteNodePool(np)
		return
	}
	x.mu.Lock()
	e := x.entry(id)
	e.nps[np.Name] = np
	e.sortNodePools()
	x.mu.Unlock()
	x.notify(id)
}

// DeleteNodePool records a deleted NodePool.
func (x *Index) DeleteNodePool(np *hyperv1.NodePool) {
	id := meta.InstanceID(np.Labels)
	x.mu.Lock()
	if e := x.byID[id]; e != nil {
		delete(e.nps, np.Name)
		e.sortNodePools()
		x.gc(id)
	}
	x.mu.Unlock()
	x.notify(id)
}

// PutSecret records an added or updated Secret of the namespace (metadata only).
func (x *Index) PutSecret(s *metav1.PartialObjectMetadata) {
	x.mu.Lock()
	x.secrets[s.Name] = s
	x.mu.Unlock()
	x.notifySecret(s)
}

// DeleteSecret records a deleted Secret.
func (x *Index) DeleteSecret(s *metav1.PartialObjectMetadata) {
	x.mu.Lock()
	delete(x.secrets, s.Name)
	x.mu.Unlock()
	x.notifySecret(s)
}

// notifySecret tells listeners about the cluster a Secret belongs to: by its label, or — for an unlabelled admin
// kubeconfig — by the HostedCluster that names it.
func (x *Index) notifySecret(s *metav1.PartialObjectMetadata) {
	if id, ok := x.ours(s.Labels); ok {
		x.notify(id)
		return
	}
	for _, o := range s.OwnerReferences {
		if o.Kind == "HostedCluster" {
			x.NotifyName(o.Name)
		}
	}
}

// PutManagedCluster records an added or updated ManagedCluster.
func (x *Index) PutManagedCluster(mc *clusterv1.ManagedCluster) {
	if _, ok := x.ours(mc.Labels); !ok {
		x.DeleteManagedCluster(mc)
		return
	}
	x.mu.Lock()
	x.mcs[mc.Name] = mc
	x.mu.Unlock()
	x.notify(meta.InstanceID(mc.Labels))
}

// DeleteManagedCluster records a deleted ManagedCluster.
func (x *Index) DeleteManagedCluster(mc *clusterv1.ManagedCluster) {
	x.mu.Lock()
	delete(x.mcs, mc.Name)
	x.mu.Unlock()
	x.notify(meta.InstanceID(mc.Labels))
}

// NotifyName tells listeners that something named after a cluster changed (ACM's namespace of that name).
func (x *Index) NotifyName(name string) {
	x.mu.RLock()
	id := x.byName[name]
	x.mu.RUnlock()
	x.notify(id)
}

// Get returns the view of one instance; ok is false when nothing at all is known about it.
func (x *Index) Get(id string) (clusters.View, bool) {
	x.mu.RLock()
	defer x.mu.RUnlock()
	e := x.byID[id]
	if e == nil {
		return clusters.View{ID: id}, false
	}
	return x.view(id, e), true
}

// IDByName returns the instance id of the HostedCluster with this name.
func (x *Index) IDByName(name string) (string, bool) {
	x.mu.RLock()
	defer x.mu.RUnlock()
	id, ok := x.byName[name]
	return id, ok
}

func (x *Index) view(id string, e *entry) clusters.View {
	v := clusters.View{ID: id, HostedCluster: e.hc, NodePools: e.sorted}
	if e.hc != nil {
		if ref := e.hc.Status.KubeConfig; ref != nil {
			if s := x.secrets[ref.Name]; s != nil && KubeconfigBelongs(e.hc.Namespace, e.hc.Name, e.hc.UID, s) {
				v.Kubeconfig = clusters.SecretRef{Name: s.Name, ResourceVersion: s.ResourceVersion, Cluster: e.hc.Name, ClusterUID: e.hc.UID}
			}
		}
		if mc := x.mcs[e.hc.Name]; mc != nil && meta.InstanceID(mc.Labels) == id {
			v.ManagedCluster = mc
		}
	}
	return v
}

// AppendPage appends to dst up to limit views in list order, starting after the key (nil: from the beginning), and
// reports whether more follow. Clusters that are gone for DCM are skipped. A caller that reuses dst (a LIST's page,
// about 6 KB of views) allocates nothing here.
func (x *Index) AppendPage(dst []clusters.View, after *clusters.Key, limit int) (views []clusters.View, more bool) {
	x.mu.RLock()
	defer x.mu.RUnlock()
	views = dst
	n := 0
	visit := func(k clusters.Key) bool {
		if after != nil && !after.Less(k) {
			return true
		}
		e := x.byID[k.ID]
		if e == nil || e.hc == nil {
			return true
		}
		v := x.view(k.ID, e)
		if v.Gone() {
			return true
		}
		if n == limit {
			more = true
			return false
		}
		views = append(views, v)
		n++
		return true
	}
	if after != nil {
		x.order.AscendGreaterOrEqual(*after, visit)
	} else {
		x.order.Ascend(visit)
	}
	return views, more
}

// IDs returns every instance id known to the index (clusters and orphaned NodePools).
func (x *Index) IDs() []string {
	x.mu.RLock()
	defer x.mu.RUnlock()
	out := make([]string, 0, len(x.byID))
	for id := range x.byID {
		out = append(out, id)
	}
	sort.Strings(out)
	return out
}

// SecretsOf returns the names of the cached Secrets labelled with the instance id (this provider's).
func (x *Index) SecretsOf(id string) []string {
	x.mu.RLock()
	defer x.mu.RUnlock()
	var out []string
	for _, s := range x.secrets {
		if got, ok := x.ours(s.Labels); ok && got == id {
			out = append(out, s.Name)
		}
	}
	sort.Strings(out)
	return out
}

// UnownedSecretInstances returns the instance ids (this provider's) of Secrets that no object owns and that were
// created before the given time: leftovers of versions that did not set ownerReferences.
func (x *Index) UnownedSecretInstances(before time.Time) []string {
	x.mu.RLock()
	defer x.mu.RUnlock()
	seen := map[string]bool{}
	for _, s := range x.secrets {
		if id, ok := x.ours(s.Labels); ok && len(s.OwnerReferences) == 0 && s.CreationTimestamp.Time.Before(before) {
			seen[id] = true
		}
	}
	out := make([]string, 0, len(seen))
	for id := range seen {
		out = append(out, id)
	}
	sort.Strings(out)
	return out
}

// Secret returns a cached Secret's metadata.
func (x *Index) Secret(name string) (*metav1.PartialObjectMetadata, bool) {
	x.mu.RLock()
	defer x.mu.RUnlock()
	s, ok := x.secrets[name]
	return s, ok
}

// ManagedClusters returns the cached ManagedClusters of this provider by instance id (for the orphan sweep).
func (x *Index) ManagedClusters() map[string]*clusterv1.ManagedCluster {
	x.mu.RLock()
	defer x.mu.RUnlock()
	out := make(map[string]*clusterv1.ManagedCluster, len(x.mcs))
	for _, mc := range x.mcs {
		if id, ok := x.ours(mc.Labels); ok {
			out[id] = mc
		}
	}
	return out
}

// Len returns the number of clusters with a HostedCluster.
func (x *Index) Len() int {
	x.mu.RLock()
	defer x.mu.RUnlock()
	return x.order.Len()
}
