package plan

import "time"

// Config holds the state machine's windows, deadlines and back-off. Start from DefaultConfig; WithDefaults fills
// the zero fields of a partial one.
type Config struct {
	QuietWindow  time.Duration // Quiescing: how long nothing but the migrator may write the standard objects
	HealthWindow time.Duration // Resuming: how long the cluster must stay continuously green

	// Per-phase deadlines, counted from the phase's persisted start (Deadline).
	QuiesceTimeout  time.Duration // Locked and Quiescing: legacy pods gone and the quiet window held
	CopyTimeout     time.Duration // Copying: every twin created, with status and managedFields
	RepointTimeout  time.Duration // Repointing: every dependent re-pointed
	VerifyTimeout   time.Duration // Verifying
	SwitchTimeout   time.Duration // Switching: the proxied workloads Available
	ResumeTimeout   time.Duration // Resuming: green (plus HealthWindow to stay green)
	RollbackTimeout time.Duration // RollingBack: past it the rollback gives up safely
	CleanupTimeout  time.Duration // Committed and CleaningUp: past it the phase is reported stalled

	WebhookGrace   time.Duration // a locked phase waits this long for an unhealthy webhook before rolling back
	BlockedTimeout time.Duration // a blocked legacy HostedCluster is reported overdue after this long
	Poll           time.Duration // how soon a Wait is re-evaluated at most
	MaxBackoff     time.Duration // the longest wait between retries of a stalled phase

	// EnhancementRollbackOrder replaces the safe rollback order with the enhancement's (delete the private copies
	// while the proxied controllers still run). It exists only so a test can show that order deletes instances;
	// never set it anywhere else.
	EnhancementRollbackOrder bool
}

// DefaultConfig is the production timing (docs/capi-private-migration.md says why each deadline is what it is).
func DefaultConfig() Config {
	return Config{
		QuietWindow: 15 * time.Second, HealthWindow: 30 * time.Second,
		QuiesceTimeout: 5 * time.Minute, CopyTimeout: 10 * time.Minute, RepointTimeout: 5 * time.Minute,
		VerifyTimeout: 2 * time.Minute, SwitchTimeout: 10 * time.Minute, ResumeTimeout: 5 * time.Minute,
		RollbackTimeout: 10 * time.Minute, CleanupTimeout: 15 * time.Minute,
		WebhookGrace: 2 * time.Minute, BlockedTimeout: 30 * time.Minute, Poll: 10 * time.Second, MaxBackoff: 5 * time.Minute,
	}
}

// WithDefaults returns c with every zero duration taken from DefaultConfig.
func (c Config) WithDefaults() Config {
	d := DefaultConfig()
	for _, f := range []struct{ v, def *time.Duration }{
		{&c.QuietWindow, &d.QuietWindow}, {&c.HealthWindow, &d.HealthWindow}, {&c.QuiesceTimeout, &d.QuiesceTimeout},
		{&c.CopyTimeout, &d.CopyTimeout}, {&c.RepointTimeout, &d.RepointTimeout}, {&c.VerifyTimeout, &d.VerifyTimeout},
		{&c.SwitchTimeout, &d.SwitchTimeout}, {&c.ResumeTimeout, &d.ResumeTimeout}, {&c.RollbackTimeout, &d.RollbackTimeout},
		{&c.CleanupTimeout, &d.CleanupTimeout}, {&c.WebhookGrace, &d.WebhookGrace}, {&c.BlockedTimeout, &d.BlockedTimeout},
		{&c.Poll, &d.Poll}, {&c.MaxBackoff, &d.MaxBackoff},
	} {
		if *f.v == 0 {
			*f.v = *f.def
		}
	}
	return c
}

// Deadline is how long phase p may take, from its persisted start (0 for phases without one).
func (c Config) Deadline(p Phase) time.Duration {
	switch p {
	case PhaseLocked, PhaseQuiescing:
		return c.QuiesceTimeout
	case PhaseCopying:
		return c.CopyTimeout
	case PhaseRepointing:
		return c.RepointTimeout
	case PhaseVerifying:
		return c.VerifyTimeout
	case PhaseSwitching:
		return c.SwitchTimeout
	case PhaseResuming:
		return c.ResumeTimeout + c.HealthWindow
	case PhaseRollingBack:
		return c.RollbackTimeout
	case PhaseCommitted, PhaseCleaningUp:
		return c.CleanupTimeout
	}
	return 0
}

// Overdue is how far past its deadline s's phase is at now (≤ 0: not overdue; a phase without a deadline or
// without a recorded start is never overdue).
func Overdue(s State, now time.Time, c Config) time.Duration {
	d := c.Deadline(s.Phase)
	if d == 0 || s.PhaseStarted.IsZero() {
		return 0
	}
	return now.Sub(s.PhaseStarted) - d
}

// Retry is how long to wait before retrying in s's phase: Poll until the deadline, then a quarter of the time
// past it, between Poll and MaxBackoff — the waits grow by a quarter each retry, an exponential back-off that
// needs no retry counter.
func Retry(s State, now time.Time, c Config) time.Duration {
	over := Overdue(s, now, c)
	if over <= 0 {
		return c.Poll
	}
	return min(max(over/4, c.Poll), c.MaxBackoff)
}

// timeoutReason is the rollback reason of a phase past its deadline.
func timeoutReason(p Phase) string {
	switch p {
	case PhaseLocked:
		return ReasonLockTimeout
	case PhaseQuiescing:
		return ReasonQuiesceTimeout
	case PhaseCopying:
		return ReasonCopyTimeout
	case PhaseRepointing:
		return ReasonRepointTimeout
	case PhaseVerifying:
		return ReasonVerifyTimeout
	case PhaseSwitching:
		return ReasonSwitchTimeout
	}
	return ReasonHealthCheckTimeout
}
