package provision

import (
	"sync"
	"time"
)

// expectFor is how long a child this process created is expected to show in the index before the reconciler may
// create it again (it was deleted before the cache saw it). Informers lag by milliseconds on a quiet hub and by
// seconds under load.
const expectFor = time.Minute

// child names one object of an instance by kind (kindOf) and name.
type child struct{ kind, name string }

// The kinds of the children a replica creates (what kindOf says of them).
const (
	kindSecret         = "Secret"
	kindNodePool       = "NodePool"
	kindManagedCluster = "ManagedCluster"
)

// expectations are the children this process created that its index has not shown yet, per instance. The
// reconciler converges from the index: without them, a cluster whose create has just finished — its HostedCluster
// already in the cache, a child not yet — would have that child created again (the hub refuses it as already there,
// after the reads that precede every reconciler create).
type expectations struct {
	mu sync.Mutex
	m  map[string]map[child]time.Time // instance → child → when it was created
}

// add expects child c of instance id, created at now.
func (e *expectations) add(id string, c child, now time.Time) {
	e.mu.Lock()
	defer e.mu.Unlock()
	if e.m == nil {
		e.m = map[string]map[child]time.Time{}
	}
	if e.m[id] == nil {
		e.m[id] = map[child]time.Time{}
	}
	e.m[id][c] = now
}

// pending reports whether child c of instance id is still expected: this process created it, the index does not
// show it (shown is whether it does now), and it was created less than expectFor before now. A met or expired
// expectation is dropped.
func (e *expectations) pending(id string, c child, shown bool, now time.Time) bool {
	e.mu.Lock()
	defer e.mu.Unlock()
	at, ok := e.m[id][c]
	if !ok {
		return false
	}
	if !shown && now.Sub(at) < expectFor {
		return true
	}
	e.remove(id, c)
	return false
}

// drop ends the expectation of child c of instance id (its create failed).
func (e *expectations) drop(id string, c child) {
	e.mu.Lock()
	defer e.mu.Unlock()
	e.remove(id, c)
}

// remove deletes the expectation of child c of instance id, and the instance once it has none (e.mu held).
func (e *expectations) remove(id string, c child) {
	delete(e.m[id], c)
	if len(e.m[id]) == 0 {
		delete(e.m, id)
	}
}

// observed drops the expectations of instance id that the index now shows (shows) or that expired: the index
// reports every change of an instance, so an expectation ends when the child reaches the cache even if it is deleted
// before the reconciler looks again (and a follower, which never reconciles, keeps none).
func (e *expectations) observed(id string, shows func(child) bool, now time.Time) {
	e.mu.Lock()
	defer e.mu.Unlock()
	for c, at := range e.m[id] {
		if now.Sub(at) >= expectFor || shows(c) {
			e.remove(id, c)
		}
	}
}

// forget drops every expectation of instance id.
func (e *expectations) forget(id string) {
	e.mu.Lock()
	defer e.mu.Unlock()
	delete(e.m, id)
}

// instances is how many instances have expectations.
func (e *expectations) instances() int {
	e.mu.Lock()
	defer e.mu.Unlock()
	return len(e.m)
}
