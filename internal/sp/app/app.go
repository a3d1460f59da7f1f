// Package app assembles the service from its configuration — hub access, domain service, reconciler, status
// events, registration, health and the HTTP server — and runs it. `serve`, `dev` and the integration tests all
// start the SP through here, so they run the same thing.
package app

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"k8s.io/client-go/rest"

	"github.com/dcm-sp/acm-cluster-sp/internal/loopback"
	"github.com/dcm-sp/acm-cluster-sp/internal/sp/config"
	"github.com/dcm-sp/acm-cluster-sp/internal/sp/events"
	"github.com/dcm-sp/acm-cluster-sp/internal/sp/health"
	"github.com/dcm-sp/acm-cluster-sp/internal/sp/httpapi"
	"github.com/dcm-sp/acm-cluster-sp/internal/sp/hub"
	"github.com/dcm-sp/acm-cluster-sp/internal/sp/leaderloop"
	"github.com/dcm-sp/acm-cluster-sp/internal/sp/provision"
	"github.com/dcm-sp/acm-cluster-sp/internal/sp/reconcile"
	"github.com/dcm-sp/acm-cluster-sp/internal/sp/registration"
	"github.com/dcm-sp/acm-cluster-sp/internal/sp/security"
)

// App is an assembled SP.
type App struct {
	Config     *config.Config
	Hub        *hub.Hub
	Service    provision.Services
	Reconciler *reconcile.Reconciler
	Publisher  *events.Publisher
	Registrar  *registration.Registrar
	Health     *health.Checker
	Platforms  *hub.Platforms
	Registry   *prometheus.Registry
	Guard      *security.Guard

	log      *slog.Logger
	server   *httpapi.Server
	listener net.Listener
	leader   *leaderloop.Elector
	// observeEvery is how often the hub's observability is compared (dcm-2026: a change re-reports every cluster).
	observeEvery time.Duration
}

// Options are the non-configuration inputs of New.
type Options struct {
	// RestConfig is the hub's config; nil loads cfg.HubKubeconfig (or the in-cluster service account).
	RestConfig *rest.Config
	Log        *slog.Logger
	// Listener serves the API; nil listens on cfg.ListenAddress.
	Listener net.Listener
	// HealthInterval overrides the 10 s health refresh (tests).
	HealthInterval time.Duration
	// HealthCheckTimeout overrides each health check's 2 s timeout (tests).
	HealthCheckTimeout time.Duration
	// HubStaleAfter overrides the hub health check's threshold (3 health intervals + 5 s; tests): without an
	// answer from the hub's API server for longer, health is unhealthy and dcm-2026 says UNAVAILABLE.
	HubStaleAfter time.Duration
	// Reconciler tunes the reconciler (workers, orphan grace period); its resync period is config resyncPeriod
	// unless set here.
	Reconciler reconcile.Options
	// RegistrationBackoff and RegistrationMaxBackoff override the registration retry bounds (1s, 5m; tests).
	RegistrationBackoff, RegistrationMaxBackoff time.Duration
}

// New assembles the SP; nothing runs until Run. It builds the components in dependency order, each from those
// built before it, and registers every notification between them where both exist (wiring.go).
func New(cfg *config.Config, o Options) (*App, error) {
	log := o.Log
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	in, err := readInputs(cfg, o)
	if err != nil {
		return nil, err
	}
	a := &App{Config: cfg, Registry: newRegistry(in.hubMetrics), log: log, listener: o.Listener, observeEvery: in.interval}
	if err := a.buildHub(in); err != nil {
		return nil, err
	}
	if err := a.buildService(in); err != nil {
		return nil, err
	}
	if err := a.buildLeader(in); err != nil {
		return nil, err
	}
	if err := a.buildPublisher(in); err != nil {
		return nil, err
	}
	a.buildReconciler(o)
	if err := a.buildRegistrar(o); err != nil {
		return nil, err
	}
	if err := a.buildServer(in, o); err != nil {
		return nil, err
	}
	a.addLeaderTasks()
	return a, nil
}

// Addr is the address the API listens on (after Run has started listening).
func (a *App) Addr() string {
	if a.listener == nil {
		return ""
	}
	return a.listener.Addr().String()
}

// Listen opens the API listener now (so callers learn the address before Run).
func (a *App) Listen() error {
	if a.listener != nil {
		return nil
	}
	l, err := net.Listen("tcp", a.Config.ListenAddress)
	if err != nil {
		return fmt.Errorf("listening on %s: %w", a.Config.ListenAddress, err)
	}
	a.listener = l
	return nil
}

// Elected is closed when this instance first becomes the leader (at once without leader election).
func (a *App) Elected() <-chan struct{} { return a.leader.Elected() }

// Leading reports whether this instance runs the leader-only tasks now.
func (a *App) Leading() bool { return a.leader.Leading() }

// Run serves until ctx ends: hub caches, HTTP API, health checks, and — on the leader — the reconciler.
func (a *App) Run(ctx context.Context) error {
	if err := a.Listen(); err != nil {
		return err
	}
	handler, err := a.server.Handler(a.Registry)
	if err != nil {
		return err
	}
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	listener := a.listener
	if a.Config.TLS() {
		tlsCfg, err := a.Guard.ServingTLS(ctx, a.Config.TLSCertFile, a.Config.TLSKeyFile)
		if err != nil {
			return err
		}
		listener = tls.NewListener(listener, tlsCfg)
	}
	go a.Guard.Run(ctx)
	a.warnIfUnauthenticated(ctx)
	a.Hub.Start(ctx)
	if a.Publisher != nil {
		// Every replica connects (the health check reports it); only the leader publishes.
		if err := a.Publisher.Connect(); err != nil {
			return err
		}
	}

	// Requests run under their own context, cancelled only when the shutdown budget is spent (not when ctx ends:
	// requests in flight are answered first).
	reqCtx, cancelRequests := context.WithCancel(context.WithoutCancel(ctx))
	defer cancelRequests()
	srv := &http.Server{Handler: handler, ReadHeaderTimeout: 10 * time.Second, ReadTimeout: time.Minute, WriteTimeout: 2 * time.Minute, IdleTimeout: 2 * time.Minute,
		BaseContext: func(net.Listener) context.Context { return reqCtx }}
	errs := make(chan error, 3)
	var wg sync.WaitGroup
	wg.Add(3)
	go func() {
		defer wg.Done()
		if err := srv.Serve(listener); err != nil && !errors.Is(err, http.ErrServerClosed) {
			errs <- fmt.Errorf("http server: %w", err)
		}
	}()
	go func() {
		defer wg.Done()
		// Health runs from the start, whatever state the hub is in; once the caches have synced it is refreshed at
		// once rather than at the next tick.
		go func() {
			if a.Hub.WaitForSync(ctx) {
				a.Health.Refresh()
			}
		}()
		_ = a.Health.Run(ctx)
	}()
	go func() {
		defer wg.Done()
		a.leader.Run(ctx)
	}()
	if a.Service.Settings().Vocabulary.FollowsObservation() {
		go a.followObservation(ctx)
	}
	a.log.Info("serving", "address", a.listener.Addr().String(), "tls", a.Config.TLS(), "auth", a.Config.Auth,
		"anonymous", a.Config.AuthAnonymous, "namespace", a.Config.Namespace, "platformsEnabled", a.Config.EnabledPlatforms)

	var runErr error
	select {
	case <-ctx.Done():
	case runErr = <-errs:
		cancel()
	}
	a.shutdown(ctx, srv, cancelRequests, &wg)
	return runErr
}

// shutdown stops what Run started within one budget (shutdownTimeout): requests in flight, the leader's tasks
// (running waits for them), NATS.
func (a *App) shutdown(ctx context.Context, srv *http.Server, cancelRequests context.CancelFunc, running *sync.WaitGroup) {
	began := time.Now()
	shutdownCtx, stop := context.WithTimeout(context.WithoutCancel(ctx), a.Config.ShutdownTimeout)
	defer stop()
	// Requests in flight get three quarters of the budget to finish (all but 5 s of a longer one); those still
	// running then are cancelled, which they answer with a 503 (retry) in the time left; whatever is still open at
	// the end is closed.
	drain, endDrain := context.WithTimeout(shutdownCtx, a.Config.ShutdownTimeout-min(a.Config.ShutdownTimeout/4, 5*time.Second))
	err := srv.Shutdown(drain)
	endDrain()
	if err != nil {
		a.log.Warn("shutdown: cancelling the requests still in flight", "budget", a.Config.ShutdownTimeout.String())
		cancelRequests()
		if srv.Shutdown(shutdownCtx) != nil {
			_ = srv.Close()
		}
	}
	stopped := make(chan struct{})
	go func() { running.Wait(); close(stopped) }()
	select {
	case <-stopped:
	case <-shutdownCtx.Done():
		a.log.Warn("shutdown: the budget is spent; exiting while leader tasks still stop", "budget", a.Config.ShutdownTimeout.String())
	}
	if a.Publisher != nil {
		a.Publisher.Close()
	}
	a.log.Info("stopped", "took", time.Since(began).Round(time.Millisecond).String())
}

// warnIfUnauthenticated says loudly, at start and every hour, that the API is open to anyone who can reach a
// non-loopback address (auth none with allowUnauthenticated).
func (a *App) warnIfUnauthenticated(ctx context.Context) {
	if a.Config.Auth != config.AuthNone || loopback.Is(a.Config.ListenAddress) {
		return
	}
	warn := func() {
		a.log.Warn("the API is UNAUTHENTICATED on a non-loopback address: anyone who reaches it can create and delete clusters and read their admin kubeconfigs (auth: none, allowUnauthenticated: true)",
			"address", a.Config.ListenAddress)
	}
	warn()
	go leaderloop.Every(unauthenticatedWarningEvery, func(context.Context) { warn() })(ctx)
}

// unauthenticatedWarningEvery is how often warnIfUnauthenticated repeats itself.
var unauthenticatedWarningEvery = time.Hour
