package provision

import "sync"

// inFlight is the set of instances whose create this process is writing now. The reconciler leaves such an
// instance to its create: converging the same children at the same time, from a cache that has not seen the
// create's writes yet, only races it — every child it tries again is a write the API server refuses and a read to
// tell whose the object is.
type inFlight struct {
	mu  sync.Mutex
	ids map[string]int
}

// begin marks id in flight until the returned function is called.
func (f *inFlight) begin(id string) (end func()) {
	f.mu.Lock()
	if f.ids == nil {
		f.ids = map[string]int{}
	}
	f.ids[id]++
	f.mu.Unlock()
	return func() {
		f.mu.Lock()
		if f.ids[id]--; f.ids[id] <= 0 {
			delete(f.ids, id)
		}
		f.mu.Unlock()
	}
}

// has reports whether a create of id is in flight.
func (f *inFlight) has(id string) bool {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.ids[id] > 0
}
