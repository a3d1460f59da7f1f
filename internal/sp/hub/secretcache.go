package hub

import (
	"sync"
	"time"

	"github.com/dcm-sp/acm-cluster-sp/internal/sp/clusters"
)

// secretCache keeps recently read Secret contents for a short time, keyed by name and resourceVersion (a changed
// Secret is read again), bounded in size.
type secretCache struct {
	ttl time.Duration
	max int
	now func() time.Time

	mu      sync.Mutex
	entries map[string]cachedSecret
}

type cachedSecret struct {
	rv   string
	data []byte
	at   time.Time
}

func newSecretCache(ttl time.Duration, max int) *secretCache {
	return &secretCache{ttl: ttl, max: max, now: time.Now, entries: map[string]cachedSecret{}}
}

func (c *secretCache) get(ref clusters.SecretRef) ([]byte, bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	e, ok := c.entries[ref.Name]
	if !ok || e.rv != ref.ResourceVersion || c.now().Sub(e.at) > c.ttl {
		return nil, false
	}
	return e.data, true
}

func (c *secretCache) put(ref clusters.SecretRef, data []byte) {
	c.mu.Lock()
	defer c.mu.Unlock()
	now := c.now()
	if len(c.entries) >= c.max {
		for name, e := range c.entries {
			if now.Sub(e.at) > c.ttl {
				delete(c.entries, name)
			}
		}
		if len(c.entries) >= c.max {
			c.entries = map[string]cachedSecret{} // all fresh: start over rather than grow
		}
	}
	c.entries[ref.Name] = cachedSecret{rv: ref.ResourceVersion, data: data, at: now}
}
