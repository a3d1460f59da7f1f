package provision

import (
	"sort"
	"sync"
)

// keyedLocks serializes operations per key (instance id, cluster name) inside the process; the API server's
// AlreadyExists on the names is the guard across processes.
type keyedLocks struct {
	mu    sync.Mutex
	locks map[string]*keyedLock
}

type keyedLock struct {
	sync.Mutex
	refs int
}

// lock takes every key's lock (in sorted order, so two callers never deadlock) and returns the unlock function.
func (k *keyedLocks) lock(keys ...string) func() {
	sorted := append([]string(nil), keys...)
	sort.Strings(sorted)
	held := make([]*keyedLock, 0, len(sorted))
	for _, key := range sorted {
		k.mu.Lock()
		if k.locks == nil {
			k.locks = map[string]*keyedLock{}
		}
		l := k.locks[key]
		if l == nil {
			l = &keyedLock{}
			k.locks[key] = l
		}
		l.refs++
		k.mu.Unlock()
		l.Lock()
		held = append(held, l)
	}
	return func() {
		for i := len(held) - 1; i >= 0; i-- {
			held[i].Unlock()
			k.mu.Lock()
			held[i].refs--
			if held[i].refs == 0 {
				delete(k.locks, sorted[i])
			}
			k.mu.Unlock()
		}
	}
}
