package httpapi

import "sync"

// minGeneration is the fewest lookups a generation of the encoding cache lasts.
const minGeneration = 64

// encodingCache keeps each cluster's JSON as LIST shows it, for the build it was encoded from
// (clusters.Cluster.Build), so that an unchanged cluster is not encoded again on every request.
//
// Memory follows the clusters still asked for: entries live in two generations. A hit in the previous generation
// copies the entry into the current one. A generation lasts twice as many lookups as the previous one kept entries
// (at least minGeneration), so a LIST of every cluster fits in one; then the current generation becomes the
// previous and the old previous is dropped — with the entries of the clusters nobody asked for during a whole
// generation (deleted ones, say).
type encodingCache struct {
	mu        sync.Mutex
	cur, prev map[string]encoded
	lookups   int // in the current generation
}

type encoded struct {
	build uint64
	doc   *cachedJSON // kept behind a pointer: answered as a GET's response object without a copy
}

func newEncodingCache() *encodingCache {
	return &encodingCache{cur: map[string]encoded{}, prev: map[string]encoded{}}
}

// get returns the encoding kept for a cluster's build (nil: none, or build 0, which is never kept).
func (ec *encodingCache) get(id string, build uint64) *cachedJSON {
	if build == 0 {
		return nil
	}
	ec.mu.Lock()
	defer ec.mu.Unlock()
	if ec.lookups++; ec.lookups >= max(2*len(ec.prev), minGeneration) {
		ec.prev, ec.cur, ec.lookups = ec.cur, make(map[string]encoded, len(ec.cur)), 0
	}
	if e, ok := ec.cur[id]; ok && e.build == build {
		return e.doc
	}
	if e, ok := ec.prev[id]; ok && e.build == build {
		ec.cur[id] = e
		return e.doc
	}
	return nil
}

// put keeps the encoding of a cluster's build (nothing for build 0) and returns it as get will.
func (ec *encodingCache) put(id string, build uint64, b []byte) *cachedJSON {
	doc := (*cachedJSON)(&b)
	if build == 0 {
		return doc
	}
	ec.mu.Lock()
	defer ec.mu.Unlock()
	ec.cur[id] = encoded{build: build, doc: doc}
	return doc
}

// len is the number of entries kept (tests).
func (ec *encodingCache) len() int {
	ec.mu.Lock()
	defer ec.mu.Unlock()
	n := len(ec.prev)
	for id := range ec.cur {
		if _, ok := ec.prev[id]; !ok {
			n++
		}
	}
	return n
}
