package controller

import (
	"context"
	"errors"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"k8s.io/client-go/discovery"
	"k8s.io/client-go/rest"
	"k8s.io/utils/ptr"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/config"
	"sigs.k8s.io/controller-runtime/pkg/healthz"
	"sigs.k8s.io/controller-runtime/pkg/manager"
	metricsserver "sigs.k8s.io/controller-runtime/pkg/metrics/server"
)

// RunOptions configure Start.
type RunOptions struct {
	Options
	// LeaderElection elects one migrator (Lease LeaderElectionID in LeaderElectionNamespace).
	LeaderElection          bool
	LeaderElectionNamespace string
	// LeaseDuration is the leader's lease (0: controller-runtime's 15 s). The leader renews it every 2 s and gives
	// it up when a renewal has not succeeded within two thirds of it; the migrator then stops, and its Deployment
	// starts it again. Tests on a loaded machine take a longer one.
	LeaseDuration time.Duration
	// MetricsAddr and HealthAddr serve /metrics and /healthz, /readyz ("0" or "": off).
	MetricsAddr, HealthAddr string
	// Registry the migration metrics are registered with (nil: controller-runtime's, served on MetricsAddr).
	Registry prometheus.Registerer
	// SkipNameValidation lets one process start the manager more than once (tests, dev): controller-runtime
	// otherwise refuses a second controller of the same name.
	SkipNameValidation bool
	// Client, when set, replaces the uncached client built from the config (tests inject faults through it).
	Client client.Client
}

// Running is a started migrate manager.
type Running struct {
	Migrator *Migrator
	Manager  manager.Manager
	cancel   context.CancelFunc
	done     chan struct{} // closed when the manager has stopped
	err      error         // why it stopped (set before done is closed)
}

// Start builds the manager of `capi-private migrate` — the classifier and the migrator, leader-elected together —
// and runs it until ctx ends or Stop. cfg must reach kube-apiserver directly.
func Start(ctx context.Context, cfg *rest.Config, o RunOptions) (*Running, error) {
	mopts := manager.Options{
		Scheme:  Scheme(),
		Metrics: metricsserver.Options{BindAddress: orOff(o.MetricsAddr)},
		HealthProbeBindAddress: func() string {
			if o.HealthAddr == "" {
				return "0"
			}
			return o.HealthAddr
		}(),
		LeaderElection: o.LeaderElection, LeaderElectionID: LeaderElectionID,
		LeaderElectionNamespace: o.LeaderElectionNamespace, LeaderElectionReleaseOnCancel: true,
		Logger:     o.Log,
		Controller: config.Controller{SkipNameValidation: ptr.To(o.SkipNameValidation)},
	}
	if o.LeaseDuration > 0 {
		mopts.LeaseDuration, mopts.RenewDeadline = ptr.To(o.LeaseDuration), ptr.To(o.LeaseDuration*2/3)
	}
	if o.Log.GetSink() == nil {
		mopts.Logger = ctrl.Log.WithName("capi-private-migrate")
		o.Log = mopts.Logger
	}
	mgr, err := ctrl.NewManager(cfg, mopts)
	if err != nil {
		return nil, err
	}
	if o.Metrics == nil {
		reg := o.Registry
		if reg == nil {
			reg = ctrlRegistry()
		}
		o.Metrics = NewMetrics(reg)
	}
	c := o.Client
	if c == nil {
		if c, err = client.New(cfg, client.Options{Scheme: Scheme()}); err != nil {
			return nil, err
		}
	}
	disc, err := discovery.NewDiscoveryClientForConfig(cfg)
	if err != nil {
		return nil, err
	}
	if o.Recorder == nil {
		//lint:ignore SA1019 the core/v1 Events recorder: its replacement writes events.k8s.io/v1 (other RBAC and another Eventf); kept until that move
		o.Recorder = mgr.GetEventRecorderFor("capi-private-migrate")
	}
	if o.ProxyClient == nil {
		if o.ProxyClient, err = ProxyClient(cfg, o.Mapping); err != nil {
			return nil, err
		}
	}
	m := NewWithClient(c, disc, o.Options)
	cl := &Classifier{Client: c, Namespace: o.Namespace, Mapping: m.opts.Mapping, Recorder: o.Recorder, Log: o.Log.WithName("classifier")}
	if err := cl.SetupWithManager(mgr); err != nil {
		return nil, err
	}
	if err := m.SetupWithManager(mgr); err != nil {
		return nil, err
	}
	if err := mgr.AddHealthzCheck("ping", healthz.Ping); err != nil {
		return nil, err
	}
	if err := mgr.AddReadyzCheck("ping", healthz.Ping); err != nil {
		return nil, err
	}
	runCtx, cancel := context.WithCancel(ctx)
	r := &Running{Migrator: m, Manager: mgr, cancel: cancel, done: make(chan struct{})}
	go func() {
		r.err = mgr.Start(runCtx)
		close(r.done)
	}()
	return r, nil
}

func orOff(addr string) string {
	if addr == "" {
		return "0"
	}
	return addr
}

// Done is closed when the manager stops (Stop, the context, or a lost leader election: the process should then
// exit and be restarted; the run resumes from what it persisted).
func (r *Running) Done() <-chan struct{} { return r.done }

// Err is why the manager stopped (nil while it runs, and after a clean stop).
func (r *Running) Err() error {
	select {
	case <-r.done:
		if errors.Is(r.err, context.Canceled) {
			return nil
		}
		return r.err
	default:
		return nil
	}
}

// Stop stops the manager and waits (at most 30 s) for it.
func (r *Running) Stop() error {
	r.cancel()
	select {
	case <-r.done:
		return r.Err()
	case <-time.After(30 * time.Second):
		return errors.New("migrate manager did not stop within 30s")
	}
}
