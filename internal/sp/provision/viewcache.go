package provision

import (
	"sync"
	"time"

	"github.com/dcm-sp/acm-cluster-sp/internal/sp/clusters"
)

// viewCache keeps each cluster's resource as last built, so GET and LIST do not rebuild (status function, stored
// spec parsing) and re-encode an unchanged cluster on every request. An entry is dropped when the index reports a
// change of its cluster and expires at the resource's RecheckAt (a status that changes with time alone).
//
// A build is stored only if no change of its cluster was reported since the caller read the change sequence, before
// it read the view: a build from a view that a change has overtaken is never kept.
type viewCache struct {
	mu         sync.Mutex
	seq        uint64 // changes reported so far
	lastRemove uint64 // seq of the last removal (a store into a missing slot must be newer)
	slots      map[string]*viewSlot
}

type viewSlot struct {
	changed uint64            // seq of the last change of this cluster
	c       *clusters.Cluster // nil: not built since that change
	built   time.Time
}

func newViewCache() *viewCache { return &viewCache{slots: map[string]*viewSlot{}} }

// changed records a change of a cluster; gone drops it altogether (nothing is known about it any more).
func (vc *viewCache) changed(id string, gone bool) {
	vc.mu.Lock()
	defer vc.mu.Unlock()
	vc.seq++
	if gone {
		delete(vc.slots, id)
		vc.lastRemove = vc.seq
		return
	}
	vc.slots[id] = &viewSlot{changed: vc.seq}
}

// sequence is read before reading views whose builds may be stored with put.
func (vc *viewCache) sequence() uint64 {
	vc.mu.Lock()
	defer vc.mu.Unlock()
	return vc.seq
}

// get returns the cached resource if it is still valid at now (shared: never changed).
func (vc *viewCache) get(id string, now time.Time) (*clusters.Cluster, bool) {
	vc.mu.Lock()
	defer vc.mu.Unlock()
	sl := vc.slots[id]
	if sl == nil || sl.c == nil || now.Before(sl.built) || (!sl.c.RecheckAt.IsZero() && !now.Before(sl.c.RecheckAt)) {
		return nil, false
	}
	return sl.c, true
}

// put stores a resource built at now from a view read after sequence() returned since.
func (vc *viewCache) put(id string, since uint64, c *clusters.Cluster, now time.Time) {
	vc.mu.Lock()
	defer vc.mu.Unlock()
	sl := vc.slots[id]
	if sl == nil {
		if vc.lastRemove > since {
			return
		}
		sl = &viewSlot{}
		vc.slots[id] = sl
	}
	if sl.changed > since {
		return
	}
	sl.c, sl.built = c, now
}

// len is the number of clusters with a slot (tests: memory follows the live clusters).
func (vc *viewCache) len() int {
	vc.mu.Lock()
	defer vc.mu.Unlock()
	return len(vc.slots)
}
