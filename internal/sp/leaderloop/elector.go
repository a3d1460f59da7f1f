package leaderloop

import (
	"context"
	"log/slog"
	"os"
	"sync"
	"sync/atomic"
	"time"

	"github.com/google/uuid"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/leaderelection"
	"k8s.io/client-go/tools/leaderelection/resourcelock"
)

// Task is a component that runs on the leader only (the SP's reconciler, publisher, registrar). Start runs until
// ctx ends and may be called again for a later leadership term; each of them runs its term on a Loop.
type Task interface {
	Start(ctx context.Context) error
}

// Elector runs the leader-only tasks of several replicas through a Lease: one replica at a time runs them. Losing
// the lease (e.g. the hub's API server is unreachable for longer than the renew deadline) stops the tasks and the
// replica campaigns again; it never takes the process — and the API it serves from its caches — down with it.
type Elector struct {
	enabled             bool
	lock                resourcelock.Interface
	lease, renew, retry time.Duration
	tasks               []Task
	log                 *slog.Logger
	leading             atomic.Bool
	mu                  sync.Mutex
	elected             chan struct{}
	// terms serializes leadership terms: client-go calls OnStartedLeading on a goroutine of its own, which may
	// still be starting when its elector has already returned; a term runs only while holding terms, and only if
	// its context is still live, so a late or overlapping term never runs beside the next one.
	terms sync.Mutex
	fence *fencedLock
}

// fencedLock records when this replica last wrote the Lease as its holder. Another replica can acquire the Lease
// only a full lease duration (as written in the record) after it last saw it change, so this replica's leadership is
// certain until its last successful write's start plus the lease duration — whatever client-go's renew loop, slowed
// by a struggling API server, still believes. Publishing stops at that bound (less a margin for clock rates and transit): two terms
// on two replicas may overlap, their publishing does not.
type fencedLock struct {
	resourcelock.Interface
	lease time.Duration
	mu    sync.Mutex
	until time.Time
}

func (f *fencedLock) Create(ctx context.Context, r resourcelock.LeaderElectionRecord) error {
	return f.write(ctx, r, f.Interface.Create)
}

func (f *fencedLock) Update(ctx context.Context, r resourcelock.LeaderElectionRecord) error {
	return f.write(ctx, r, f.Interface.Update)
}

func (f *fencedLock) write(ctx context.Context, r resourcelock.LeaderElectionRecord, do func(context.Context, resourcelock.LeaderElectionRecord) error) error {
	began := time.Now()
	ours := r.HolderIdentity == f.Identity()
	if !ours { // releasing: not ours from the moment we ask
		f.mu.Lock()
		f.until = time.Time{}
		f.mu.Unlock()
	}
	err := do(ctx, r)
	if err == nil && ours {
		// The others wait the duration written in the record, whole seconds (client-go truncates 1.5s to 1s),
		// not the one configured here.
		d := min(f.lease, time.Duration(r.LeaseDurationSeconds)*time.Second)
		f.mu.Lock()
		if u := began.Add(d - d/10); u.After(f.until) {
			f.until = u
		}
		f.mu.Unlock()
	}
	return err
}

// holds reports whether no other replica can hold the Lease now.
func (f *fencedLock) holds() bool {
	f.mu.Lock()
	defer f.mu.Unlock()
	return time.Now().Before(f.until)
}

// NewElector returns the election of the Lease namespace/name (lease: its duration) for the replica whose hub
// client configuration is cfg; disabled, the replica leads at once and alone.
func NewElector(cfg *rest.Config, enabled bool, name, namespace string, lease time.Duration, log *slog.Logger) (*Elector, error) {
	l := &Elector{enabled: enabled, lease: lease, renew: lease * 2 / 3, retry: lease / 5, log: log, elected: make(chan struct{})}
	if !enabled {
		return l, nil
	}
	cs, err := kubernetes.NewForConfig(cfg)
	if err != nil {
		return nil, err
	}
	host, _ := os.Hostname()
	lock, err := resourcelock.New(resourcelock.LeasesResourceLock, namespace, name, cs.CoreV1(), cs.CoordinationV1(),
		resourcelock.ResourceLockConfig{Identity: host + "_" + uuid.NewString()})
	if err != nil {
		return nil, err
	}
	l.fence = &fencedLock{Interface: lock, lease: lease}
	l.lock = l.fence
	return l, nil
}

// Holds reports whether this replica certainly holds leadership now (always, without leader election): the
// publisher sends nothing when it does not, so a replica whose term overlaps the next leader's stays silent.
func (l *Elector) Holds() bool { return !l.enabled || l.leading.Load() && l.fence.holds() }

// Lease describes the election: the Lease it campaigns for (namespace/name; "" when disabled) and its duration.
func (l *Elector) Lease() (string, time.Duration) {
	if !l.enabled {
		return "", l.lease
	}
	return l.lock.Describe(), l.lease
}

// Add adds a task, before Run: the tasks start in this order and stop one after the other in the same order.
func (l *Elector) Add(t Task) { l.tasks = append(l.tasks, t) }

// Leading reports whether this replica runs the leader-only tasks now.
func (l *Elector) Leading() bool { return l.leading.Load() }

// Elected is closed the first time this replica becomes the leader.
func (l *Elector) Elected() <-chan struct{} { return l.elected }

// Run campaigns and runs the tasks during each term until ctx ends.
func (l *Elector) Run(ctx context.Context) {
	if !l.enabled {
		l.term(ctx)
		return
	}
	for ctx.Err() == nil {
		le, err := leaderelection.NewLeaderElector(leaderelection.LeaderElectionConfig{
			Lock: l.lock, LeaseDuration: l.lease, RenewDeadline: l.renew, RetryPeriod: l.retry, ReleaseOnCancel: true,
			Name: l.lock.Describe(),
			Callbacks: leaderelection.LeaderCallbacks{
				OnStartedLeading: func(tctx context.Context) {
					l.terms.Lock()
					defer l.terms.Unlock()
					if tctx.Err() == nil { // else this term ended before it could start
						l.term(tctx)
					}
				},
				OnStoppedLeading: func() {
					if l.leading.Load() && ctx.Err() == nil {
						l.log.Warn("lost leadership; stopping leader tasks and campaigning again")
					}
				},
			},
		})
		if err != nil {
			l.log.Error("leader election misconfigured", "error", err)
			return
		}
		le.Run(ctx) // returns with the term's context cancelled
		// The term's tasks have stopped before a new campaign: a running term holds terms until they have; one
		// that had not started yet sees its context cancelled and does nothing.
		l.waitForTerm()

		select {
		case <-ctx.Done():
		case <-time.After(l.retry):
		}
	}
}

// waitForTerm returns once no term is running.
func (l *Elector) waitForTerm() {
	l.terms.Lock()
	defer l.terms.Unlock()
}

// term runs every task until ctx ends, then stops them one after the other in the order they were added, each
// only after the one before has returned: the reconciler reports no status after the publisher ended its term
// (which would be published, stale, at the start of a later one).
func (l *Elector) term(ctx context.Context) {
	l.leading.Store(true)
	defer l.leading.Store(false)
	l.mu.Lock()
	select {
	case <-l.elected:
	default:
		close(l.elected)
	}
	l.mu.Unlock()
	l.log.Info("leading: running the leader's tasks", "tasks", len(l.tasks))
	stops := make([]context.CancelFunc, len(l.tasks))
	dones := make([]chan struct{}, len(l.tasks))
	for i, t := range l.tasks {
		tctx, cancel := context.WithCancel(context.WithoutCancel(ctx))
		stops[i], dones[i] = cancel, make(chan struct{})
		go func() {
			defer close(dones[i])
			if err := t.Start(tctx); err != nil && tctx.Err() == nil {
				l.log.Error("leader task stopped", "error", err)
			}
		}()
	}
	<-ctx.Done()
	for i := range l.tasks {
		stops[i]()
		<-dones[i]
	}
}
