// Package testjournal is the ordered record in-memory collaborators of unit tests keep of the calls they receive,
// with when each was made, so a test can assert the order and the spacing of what the code under test did.
// Test-only.
package testjournal

import (
	"fmt"
	"slices"
	"sync"
	"time"
)

// Journal is safe for concurrent use; the zero value is empty.
type Journal struct {
	mu      sync.Mutex
	entries []string
	at      []time.Time // when each entry was made
}

// Add records one entry, formatted as fmt.Sprintf does.
func (j *Journal) Add(format string, args ...any) {
	j.mu.Lock()
	defer j.mu.Unlock()
	j.entries = append(j.entries, fmt.Sprintf(format, args...))
	j.at = append(j.at, time.Now())
}

// All is every entry so far, in order.
func (j *Journal) All() []string {
	j.mu.Lock()
	defer j.mu.Unlock()
	return slices.Clone(j.entries)
}

// Times is when each entry equal to entry was made.
func (j *Journal) Times(entry string) []time.Time {
	j.mu.Lock()
	defer j.mu.Unlock()
	var out []time.Time
	for i, e := range j.entries {
		if e == entry {
			out = append(out, j.at[i])
		}
	}
	return out
}

// Count is how many entries equal entry.
func (j *Journal) Count(entry string) int { return len(j.Times(entry)) }

// Has reports whether an entry equals entry.
func (j *Journal) Has(entry string) bool { return j.Count(entry) > 0 }

// Reset forgets every entry.
func (j *Journal) Reset() {
	j.mu.Lock()
	defer j.mu.Unlock()
	j.entries, j.at = nil, nil
}
