package hub

import (
	"maps"
	"sync"

	"github.com/dcm-sp/acm-cluster-sp/internal/sp/meta"
)

// labelSets lets the cached objects of one cluster share their labels maps. A cluster's HostedCluster and NodePool
// carry the four labels the SP renders (meta.Labels), its Secrets those and two more, and a Go map of them costs
// about 330 bytes: sharing saves four or five maps per cluster. Objects share a map when they carry the same
// instance id label and equal labels, whichever comes first; at most maxSetsPerInstance label sets are kept per
// instance (an object with yet another set keeps its own map). The cached objects are never written (the informers
// hand them out without copies), so neither is a shared map.
//
// An instance's entry is dropped when an object of that instance is deleted. Dropping an entry is always safe (the
// objects keep the maps they have; the next object starts a new entry), and an instance's last deletion drops it,
// so the table holds no more instances than the cache.
type labelSets struct {
	mu   sync.Mutex
	byID map[string][]map[string]string
}

// maxSetsPerInstance bounds the label sets kept for one instance: the rendered set, the Secrets' and the operator's
// Secrets' are three.
const maxSetsPerInstance = 4

func newLabelSets() *labelSets { return &labelSets{byID: map[string][]map[string]string{}} }

// share returns a map equal to l that other objects of l's instance hold, else l.
func (s *labelSets) share(l map[string]string) map[string]string {
	id := meta.InstanceID(l)
	if id == "" {
		return l
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	sets := s.byID[id]
	for _, shared := range sets {
		if maps.Equal(shared, l) {
			return shared
		}
	}
	if len(sets) < maxSetsPerInstance {
		s.byID[id] = append(sets, l)
	}
	return l
}

// forget drops an instance's entry (an object of it was deleted).
func (s *labelSets) forget(id string) {
	s.mu.Lock()
	delete(s.byID, id)
	s.mu.Unlock()
}

func (s *labelSets) len() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return len(s.byID)
}
