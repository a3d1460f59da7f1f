package plan

import (
	"fmt"
	"strings"
	"time"
)

// Report is the one-line reason `capi-private migrate status` shows for a HostedCluster in state s at now: a
// rollback under way and its cause, a stalled phase, a failure (and twins left for the next run), or what blocks
// a legacy HostedCluster and for how long ("-" when there is nothing to say).
func Report(s State, now time.Time) string {
	var parts []string
	switch {
	case s.Phase == PhaseRollingBack:
		parts = append(parts, "rolling back: "+s.Rollback)
	case s.Failed != "":
		parts = append(parts, s.Failed)
	case s.Blocked != "" && !s.InRun() && s.Legacy:
		b := s.Blocked
		overdue := strings.HasPrefix(b, OverduePrefix)
		b = strings.TrimPrefix(b, OverduePrefix)
		what := "blocked"
		if !s.BlockedSince.IsZero() {
			what += " " + now.Sub(s.BlockedSince).Truncate(time.Second).String()
		}
		if overdue {
			what += " (overdue)"
		}
		parts = append(parts, what+": "+b)
		if len(s.Override) > 0 {
			parts = append(parts, "override: "+strings.Join(s.Override, ","))
		}
	}
	if s.Stalled != "" {
		parts = append(parts, "stalled: "+s.Stalled)
	}
	if len(s.LeftoverRuns) > 0 {
		parts = append(parts, fmt.Sprintf("twins of run(s) %s left for the next run", strings.Join(s.LeftoverRuns, ",")))
	}
	if len(parts) == 0 {
		return "-"
	}
	return strings.Join(parts, "; ")
}
