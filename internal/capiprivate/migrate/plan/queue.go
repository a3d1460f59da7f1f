package plan

import (
	"cmp"
	"slices"
	"strings"
	"time"
)

// Candidate is one HostedCluster as the ordering policy sees it.
type Candidate struct {
	Namespace, Name string
	Created         time.Time
	State           State
}

// Key is "namespace/name".
func (c Candidate) Key() string { return c.Namespace + "/" + c.Name }

// InRun reports whether a migration run holds this HostedCluster (locked, or a phase persisted).
func (s State) InRun() bool { return s.Locked || s.Phase != PhaseNone }

// Queue is the ordering policy (one migration at a time): a HostedCluster whose run is under way comes first (it
// is resumed, whatever its age); then the legacy HostedClusters that may start — not failed, not being deleted,
// not already private — oldest first (creationTimestamp, then namespace and name). Everything else is left out.
// The migrator tries the queue in order and starts the first one whose preconditions hold, so a cluster that is
// not ready does not hold up the ones behind it.
func Queue(cs []Candidate) []Candidate {
	var running, waiting []Candidate
	for _, c := range cs {
		switch {
		case c.State.InRun():
			running = append(running, c)
		case c.State.Legacy && !c.State.PrivateTypes && c.State.Failed == "" && !c.State.Deleting:
			waiting = append(waiting, c)
		}
	}
	order := func(a, b Candidate) int {
		return cmp.Or(a.Created.Compare(b.Created), strings.Compare(a.Namespace, b.Namespace), strings.Compare(a.Name, b.Name))
	}
	slices.SortFunc(running, order)
	slices.SortFunc(waiting, order)
	return append(running, waiting...)
}
