package app

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

// leaderTask is a component that runs on the leader only (reconciler, publisher, registrar). Start runs until ctx
// ends and may be called again for a later leadership term.
type leaderTask interface {
	Start(ctx context.Context) error
}

// leader runs the leader-only tasks of several replicas through a Lease: one replica at a time runs them. Losing
// the lease (e.g. the hub's API server is unreachable for longer than the renew deadline) stops the tasks and the
// replica campaigns again; it never takes the process — and the API it serves from its caches — down with it.
type leader struct {
	enabled             bool
	lock                resourcelock.Interface
	lease, renew, retry time.Duration
	tasks               []leaderTask
	log                 *slog.Logger
	leading             atomic.Bool
	mu                  sync.Mutex
	elected             chan struct{}
}

func newLeader(cfg *rest.Config, enabled bool, name, namespace string, lease time.Duration, log *slog.Logger) (*leader, error) {
	l := &leader{enabled: enabled, lease: lease, renew: lease * 2 / 3, retry: lease / 5, log: log, elected: make(chan struct{})}
	if !enabled {
		return l, nil
	}
	cs, err := kubernetes.NewForConfig(cfg)
	if err != nil {
		return nil, err
	}
	host, _ := os.Hostname()
	l.lock, err = resourcelock.New(resourcelock.LeasesResourceLock, namespace, name, cs.CoreV1(), cs.CoordinationV1(),
		resourcelock.ResourceLockConfig{Identity: host + "_" + uuid.NewString()})
	if err != nil {
		return nil, err
	}
	return l, nil
}

func (l *leader) add(t leaderTask) { l.tasks = append(l.tasks, t) }

// Leading reports whether this replica runs the leader-only tasks now.
func (l *leader) Leading() bool { return l.leading.Load() }

// Elected is closed the first time this replica becomes the leader.
func (l *leader) Elected() <-chan struct{} { return l.elected }

// run campaigns and runs the tasks during each term until ctx ends.
func (l *leader) run(ctx context.Context) {
	if !l.enabled {
		l.term(ctx)
		return
	}
	for ctx.Err() == nil {
		var wg sync.WaitGroup
		le, err := leaderelection.NewLeaderElector(leaderelection.LeaderElectionConfig{
			Lock: l.lock, LeaseDuration: l.lease, RenewDeadline: l.renew, RetryPeriod: l.retry, ReleaseOnCancel: true,
			Name: l.lock.Describe(),
			Callbacks: leaderelection.LeaderCallbacks{
				OnStartedLeading: func(tctx context.Context) {
					wg.Add(1)
					defer wg.Done()
					l.term(tctx)
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
		le.Run(ctx)
		wg.Wait() // the previous term's tasks have stopped before a new campaign
		select {
		case <-ctx.Done():
		case <-time.After(l.retry):
		}
	}
}

// term runs every task until ctx ends.
func (l *leader) term(ctx context.Context) {
	l.leading.Store(true)
	defer l.leading.Store(false)
	l.mu.Lock()
	select {
	case <-l.elected:
	default:
		close(l.elected)
	}
	l.mu.Unlock()
	l.log.Info("leading: running the reconciler, status events and registration")
	var wg sync.WaitGroup
	for _, t := range l.tasks {
		wg.Add(1)
		go func(t leaderTask) {
			defer wg.Done()
			if err := t.Start(ctx); err != nil && ctx.Err() == nil {
				l.log.Error("leader task stopped", "error", err)
			}
		}(t)
	}
	wg.Wait()
}
