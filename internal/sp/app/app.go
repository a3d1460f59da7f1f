// Package app assembles the service from its configuration — hub access, domain service, reconciler, status
// events, registration, health and the HTTP server — and runs it. `serve`, `dev` and the integration tests all
// start the SP through here, so they run the same thing.
package app

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"io/fs"
	"log/slog"
	"net"
	"net/http"
	"os"
	"strings"
	"sync"
	"time"

	hyperv1 "github.com/openshift/hypershift/api/hypershift/v1beta1"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/dcm-sp/acm-cluster-sp/internal/loopback"
	"github.com/dcm-sp/acm-cluster-sp/internal/sp/clusters"
	"github.com/dcm-sp/acm-cluster-sp/internal/sp/config"
	"github.com/dcm-sp/acm-cluster-sp/internal/sp/events"
	"github.com/dcm-sp/acm-cluster-sp/internal/sp/health"
	"github.com/dcm-sp/acm-cluster-sp/internal/sp/httpapi"
	"github.com/dcm-sp/acm-cluster-sp/internal/sp/hub"
	"github.com/dcm-sp/acm-cluster-sp/internal/sp/provision"
	"github.com/dcm-sp/acm-cluster-sp/internal/sp/reconcile"
	"github.com/dcm-sp/acm-cluster-sp/internal/sp/registration"
	"github.com/dcm-sp/acm-cluster-sp/internal/sp/security"
	"github.com/dcm-sp/acm-cluster-sp/internal/sp/status"
	"github.com/dcm-sp/acm-cluster-sp/internal/sp/versions"
)

// App is an assembled SP.
type App struct {
	Config     *config.Config
	Hub        *hub.Hub
	Service    *provision.Service
	Reconciler *reconcile.Reconciler
	Publisher  *events.Publisher
	Registrar  *registration.Registrar
	Health     *health.Checker
	Platforms  *Platforms
	Registry   *prometheus.Registry
	Guard      *security.Guard

	log      *slog.Logger
	server   *httpapi.Server
	listener net.Listener
	leader   *leader
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
	// Reconciler tunes the reconciler (workers, orphan grace period); its resync period is config resyncPeriod
	// unless set here.
	Reconciler reconcile.Options
	// RegistrationBackoff and RegistrationMaxBackoff override the registration retry bounds (1s, 5m; tests).
	RegistrationBackoff, RegistrationMaxBackoff time.Duration
}

// New assembles the SP; nothing runs until Run.
func New(cfg *config.Config, o Options) (*App, error) {
	log := o.Log
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	restCfg := o.RestConfig
	if restCfg == nil {
		var err error
		if restCfg, err = loadRestConfig(cfg.HubKubeconfig); err != nil {
			return nil, err
		}
	}
	restCfg = rest.CopyConfig(restCfg)
	if restCfg.QPS == 0 {
		restCfg.QPS, restCfg.Burst = float32(cfg.HubQPS), cfg.HubBurst
		if cfg.HubQPS == 0 {
			restCfg.QPS = -1 // client-go: no rate limiter
		}
	}
	hubMetrics := hub.NewMetrics()
	hubMetrics.Instrument(restCfg)
	var infraCfg *rest.Config
	var infraKubeconfig []byte
	if cfg.KubevirtInfraCluster != "" {
		var err error
		if infraKubeconfig, err = os.ReadFile(cfg.KubevirtInfraCluster); err != nil {
			return nil, kubeconfigError("kubevirtInfraCluster", cfg.KubevirtInfraCluster, err)
		}
		if infraCfg, err = clientcmd.RESTConfigFromKubeConfig(infraKubeconfig); err != nil {
			return nil, kubeconfigError("kubevirtInfraCluster", cfg.KubevirtInfraCluster, err)
		}
	}
	matrix, err := loadMatrix(cfg.VersionMatrixFile)
	if err != nil {
		return nil, err
	}
	sshKey := ""
	if cfg.SSHPublicKeyFile != "" {
		data, err := os.ReadFile(cfg.SSHPublicKeyFile)
		if err != nil {
			return nil, fmt.Errorf("config: sshPublicKeyFile: %w", err)
		}
		sshKey = strings.TrimSpace(string(data))
	}

	interval := o.HealthInterval
	if interval == 0 {
		interval = 10 * time.Second
	}
	// The hub health check's threshold: without an answer from the hub's API server for longer, the SP's view of
	// the clusters is not current (health says so, and the dcm-2026 vocabulary reports them UNAVAILABLE).
	hubStaleAfter := 3*interval + 5*time.Second
	h, err := hub.New(restCfg, hub.Options{
		Namespace: cfg.Namespace, Provider: cfg.ProviderName, AgentNamespace: cfg.AgentNamespace, HypershiftNamespace: cfg.HypershiftNamespace,
		DiscoveryInterval: interval, DiscoveryTimeout: 5 * time.Second, RequestTimeout: cfg.RequestTimeout, Log: log,
	})
	if err != nil {
		return nil, err
	}
	platforms, err := NewPlatforms(cfg, h, infraCfg)
	if err != nil {
		return nil, err
	}
	h.OnKindChange(func(kind string) {
		if kind == hub.KindDiscovery {
			platforms.Refresh()
		}
	})
	pullSecret, err := pullSecretSource(cfg, h)
	if err != nil {
		return nil, err
	}
	st := status.Settings{
		DegradedGracePeriod: cfg.DegradedGracePeriod, ProvisioningTimeoutKubeVirt: cfg.ProvisioningTimeoutKubevirt,
		ProvisioningTimeoutBareMetal: cfg.ProvisioningTimeoutBaremetal, DeletionWarnAfter: status.DefaultSettings().DeletionWarnAfter,
	}
	svc := provision.New(h, provision.Config{
		Provider: cfg.ProviderName,
		Spec: clusters.SpecContext{Namespace: cfg.Namespace, AgentNamespace: cfg.AgentNamespace, DefaultPlatform: cfg.DefaultPlatform,
			BaseDomain: cfg.BaseDomain, DefaultInfraEnv: cfg.DefaultInfraEnvName},
		ManageACMObjects:               cfg.ManageACMObjects,
		ControlPlaneAvailabilityPolicy: hyperv1.AvailabilityPolicy(cfg.ControlPlaneAvailabilityPolicy),
		DefaultWorkerCount:             int32(cfg.DefaultWorkerCount),
		KubeVirtInfraKubeconfig:        infraKubeconfig, KubeVirtInfraNamespace: cfg.KubevirtInfraNamespace,
		SSHPublicKey: sshKey, PullSecret: pullSecret, Matrix: matrix, Status: st,
		Platforms:                platforms.Available,
		OperationTimeoutKubeVirt: cfg.OperationTimeoutKubevirt, OperationTimeoutBareMetal: cfg.OperationTimeoutBaremetal,
		Vocabulary: status.Vocabulary{Name: cfg.StatusVocabulary, Active: status.Status(cfg.ActiveStatus)},
		Observed:   hubObservation(h, hubStaleAfter), DeleteKeyRetention: cfg.DeleteKeyRetention,
	}, log)

	reg := prometheus.NewRegistry()
	reg.MustRegister(collectors.NewGoCollector(), collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}))
	reg.MustRegister(hubMetrics.Collectors()...)

	a := &App{Config: cfg, Hub: h, Service: svc, Platforms: platforms, Registry: reg, log: log, listener: o.Listener}
	var reporter reconcile.Reporter
	if cfg.NATSURL != "" {
		naming, err := events.ResolveNaming(cfg.StatusPreset, events.Naming{Subject: cfg.StatusSubject, Type: cfg.StatusType, Source: cfg.StatusSource})
		if err != nil {
			return nil, fmt.Errorf("config: %w", err)
		}
		a.Publisher = events.New(events.Options{URL: cfg.NATSURL, ProviderName: cfg.ProviderName, Naming: naming,
			Credentials: events.Credentials{CredsFile: cfg.NATSCredsFile, NkeySeedFile: cfg.NATSNkeySeedFile, User: cfg.NATSUser,
				PasswordFile: cfg.NATSPasswordFile, CAFile: cfg.NATSCAFile, CertFile: cfg.NATSCertFile, KeyFile: cfg.NATSKeyFile},
			Debounce: cfg.StatusDebounce, UpdatingStatus: cfg.UpdatingStatus, CreateStream: cfg.StatusCreateStream, StreamMaxAge: cfg.StatusStreamMaxAge, Registry: reg, Log: log,
			Fence: func() bool { return a.leader.Holds() }})
		reporter = a.Publisher
	} else {
		log.Warn("natsURL is not set: status events are disabled")
	}
	ro := o.Reconciler
	if ro.ResyncPeriod == 0 {
		ro.ResyncPeriod = cfg.ResyncPeriod
	}
	ro.WaitForSync, ro.Log, ro.Registry = h.WaitForSync, log, reg
	ro.CatchUp = func(ctx context.Context) error { return h.CatchUp(ctx, 10*time.Second) }
	a.Reconciler = reconcile.New(h.Index(), svc, reporter, ro)
	h.Index().OnChange(a.Reconciler.Enqueue)
	if a.Publisher != nil {
		a.Publisher.OnDelivered(func(id string, st status.Status) {
			if st == status.Deleted {
				a.Reconciler.Enqueue(id) // the status finalizer can go now
			}
		})
	}

	if cfg.RegistrationURL != "" {
		httpClient, err := registration.NewHTTPClient(cfg.RegistrationTokenFile, cfg.RegistrationCAFile)
		if err != nil {
			return nil, err
		}
		a.Registrar, err = registration.New(registration.Options{
			HTTPClient:  httpClient,
			RegistryURL: cfg.RegistrationURL, Name: cfg.ProviderName, DisplayName: cfg.DisplayName, ProviderID: cfg.ProviderID,
			Endpoint: strings.TrimSuffix(cfg.APIHost, "/") + "/api/v1alpha1/clusters",
			Capabilities: func(ctx context.Context) registration.Capabilities {
				return registration.Capabilities{Platforms: platforms.Available(), KubernetesVersions: svc.KubernetesVersions(ctx)}
			},
			MinBackoff: o.RegistrationBackoff, MaxBackoff: o.RegistrationMaxBackoff,
			Registry: reg, Log: log,
		})
		if err != nil {
			return nil, err
		}
		h.OnKindChange(func(kind string) {
			if kind == "clusterimagesets" || kind == "supported-versions" {
				a.Registrar.Trigger()
			}
		})
		platforms.OnChange(a.Registrar.Trigger)
	} else {
		log.Info("registrationURL is not set: not registering with DCM")
	}

	checks := []health.Check{
		health.HubCheck(h, hubStaleAfter),
		health.HyperShiftCheck(h, cfg.HypershiftNamespace),
		health.PlatformCheck(string(clusters.KubeVirt), platforms.KubeVirtState),
		health.PlatformCheck(string(clusters.BareMetal), platforms.BareMetalState),
	}
	if a.Publisher != nil {
		checks = append(checks, health.InformationalCheck("nats", a.Publisher.Connected),
			health.Check{Name: "events", Run: a.Publisher.StreamHealth})
	}
	if a.Registrar != nil {
		checks = append(checks, health.InformationalCheck("registration", a.Registrar.Status))
	}
	a.Health = health.New(checks, health.Options{Interval: interval, Timeout: o.HealthCheckTimeout, Ready: h.Synced})
	reg.MustRegister(a.Health.Collector())
	a.Guard, err = security.New(security.Options{Mode: cfg.Auth, Anonymous: cfg.AuthAnonymous, ClientCAFile: cfg.ClientCAFile,
		APIAudiences: cfg.APIAudiences, APIGroup: cfg.AuthAPIGroup, Namespace: cfg.Namespace, Hub: restCfg, Registry: reg, Log: log})
	if err != nil {
		return nil, err
	}
	a.server = httpapi.NewServer(svc, a.Health, a.Guard, httpapi.Options{Log: log, RequestTimeout: cfg.RequestTimeout,
		ProblemTypeURIs: cfg.ProblemTypes == config.ProblemTypeURIs})
	a.observeEvery = interval

	a.leader, err = newLeader(restCfg, cfg.LeaderElection, cfg.ProviderName+"-leader", cfg.LeaseNamespace(), cfg.LeaseDuration, log)
	if err != nil {
		return nil, fmt.Errorf("leader election: %w", err)
	}
	tracked := func(component string, n func() int) prometheus.Collector {
		return prometheus.NewGaugeFunc(prometheus.GaugeOpts{Name: "acm_sp_tracked_instances", ConstLabels: prometheus.Labels{"component": component},
			Help: "Instances a component holds per-cluster state for (follows the live clusters; 0 on a follower)."}, func() float64 { return float64(n()) })
	}
	reg.MustRegister(tracked("reconciler", a.Reconciler.Remembered), tracked("provision", a.Service.Remembered))
	if a.Publisher != nil {
		reg.MustRegister(tracked("publisher", a.Publisher.Tracked))
	}
	reg.MustRegister(prometheus.NewGaugeFunc(prometheus.GaugeOpts{Name: "acm_sp_leader", Help: "1 while this replica runs the leader's tasks (reconciler, status events, registration)."},
		func() float64 {
			if a.leader.Leading() {
				return 1
			}
			return 0
		}))
	a.leader.add(a.Reconciler)
	if a.Publisher != nil {
		a.leader.add(a.Publisher)
	}
	if a.Registrar != nil {
		a.leader.add(a.Registrar)
	}
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
		a.leader.run(ctx)
	}()
	if a.Config.StatusVocabulary == config.VocabularyDCM2026 {
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
	// One budget for the whole shutdown (shutdownTimeout): requests in flight, the leader's tasks, NATS.
	began := time.Now()
	shutdownCtx, stop := context.WithTimeout(context.WithoutCancel(ctx), a.Config.ShutdownTimeout)
	defer stop()
	// Requests in flight get most of the budget to finish; those still running then are cancelled, which they
	// answer with a 503 (retry) in the time left; whatever is still open at the end is closed.
	drain, endDrain := context.WithTimeout(shutdownCtx, a.Config.ShutdownTimeout-min(a.Config.ShutdownTimeout/4, time.Second))
	err = srv.Shutdown(drain)
	endDrain()
	if err != nil {
		a.log.Warn("shutdown: cancelling the requests still in flight", "budget", a.Config.ShutdownTimeout.String())
		cancelRequests()
		if srv.Shutdown(shutdownCtx) != nil {
			_ = srv.Close()
		}
	}
	stopped := make(chan struct{})
	go func() { wg.Wait(); close(stopped) }()
	select {
	case <-stopped:
	case <-shutdownCtx.Done():
		a.log.Warn("shutdown: the budget is spent; exiting while leader tasks still stop", "budget", a.Config.ShutdownTimeout.String())
	}
	if a.Publisher != nil {
		a.Publisher.Close()
	}
	a.log.Info("stopped", "took", time.Since(began).Round(time.Millisecond).String())
	return runErr
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
	go func() {
		t := time.NewTicker(unauthenticatedWarningEvery)
		defer t.Stop()
		for {
			select {
			case <-ctx.Done():
				return
			case <-t.C:
				warn()
			}
		}
	}()
}

// unauthenticatedWarningEvery is how often warnIfUnauthenticated repeats itself.
var unauthenticatedWarningEvery = time.Hour

func loadRestConfig(kubeconfig string) (*rest.Config, error) {
	if kubeconfig == "" {
		cfg, err := rest.InClusterConfig()
		if err != nil {
			return nil, fmt.Errorf("config: hubKubeconfig is empty and no in-cluster service account is available: %w", err)
		}
		return cfg, nil
	}
	cfg, err := clientcmd.BuildConfigFromFlags("", kubeconfig)
	if err != nil {
		return nil, kubeconfigError("hubKubeconfig", kubeconfig, err)
	}
	return cfg, nil
}

// kubeconfigError reports an unusable kubeconfig file without the parser's text, which can quote the file's
// content (credentials must never reach an error message or a log line).
func kubeconfigError(key, path string, err error) error {
	if errors.Is(err, fs.ErrNotExist) || errors.Is(err, fs.ErrPermission) {
		return fmt.Errorf("config: %s: cannot read %s: %v", key, path, errors.Unwrap(err))
	}
	return fmt.Errorf("config: %s: %s is not a valid kubeconfig", key, path)
}

func loadMatrix(file string) (versions.Matrix, error) {
	if file == "" {
		return versions.DefaultMatrix(), nil
	}
	data, err := os.ReadFile(file)
	if err != nil {
		return versions.Matrix{}, fmt.Errorf("config: versionMatrixFile: %w", err)
	}
	overrides, err := versions.ParseMatrixFile(data)
	if err != nil {
		return versions.Matrix{}, fmt.Errorf("config: versionMatrixFile %s: %w", file, err)
	}
	m, err := versions.NewMatrix(overrides)
	if err != nil {
		return versions.Matrix{}, fmt.Errorf("config: versionMatrixFile %s: %w", file, err)
	}
	return m, nil
}

// pullSecretSource returns where each cluster's pull secret comes from: the configured file (checked now, re-read at
// each create so a rotated file is picked up) or the named Secret in the namespace (read at each create). There is
// deliberately no inline value: it would sit in the process's command line, environment and pod spec.
func pullSecretSource(cfg *config.Config, h *hub.Hub) (func(context.Context) ([]byte, error), error) {
	switch {
	case cfg.PullSecretFile != "":
		read := func() ([]byte, error) {
			data, err := os.ReadFile(cfg.PullSecretFile)
			if err != nil {
				return nil, fmt.Errorf("pullSecretFile: %w", err)
			}
			if err := clusters.CheckPullSecret(data); err != nil {
				return nil, fmt.Errorf("pullSecretFile %s: %w", cfg.PullSecretFile, err)
			}
			return data, nil
		}
		if _, err := read(); err != nil {
			return nil, fmt.Errorf("config: %w", err)
		}
		return func(context.Context) ([]byte, error) { return read() }, nil
	case cfg.PullSecretName != "":
		return func(ctx context.Context) ([]byte, error) {
			var s corev1.Secret
			if err := h.Client.Get(ctx, client.ObjectKey{Namespace: cfg.Namespace, Name: cfg.PullSecretName}, &s); err != nil {
				return nil, fmt.Errorf("pull secret %s/%s: %w", cfg.Namespace, cfg.PullSecretName, err)
			}
			data := s.Data[corev1.DockerConfigJsonKey]
			if err := clusters.CheckPullSecret(data); err != nil {
				return nil, fmt.Errorf("pull secret %s/%s: %w", cfg.Namespace, cfg.PullSecretName, err)
			}
			return data, nil
		}, nil
	}
	return func(context.Context) ([]byte, error) {
		return nil, errors.New("no pull secret configured (pullSecretFile or pullSecretName)")
	}, nil
}
