// Package app assembles the service from its configuration — hub access, domain service, reconciler, status
// events, registration, health and the HTTP server — and runs it. `serve`, `dev` and the integration tests all
// start the SP through here, so they run the same thing.
package app

import (
	"context"
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

	"github.com/dcm-sp/acm-cluster-sp/internal/clusters"
	"github.com/dcm-sp/acm-cluster-sp/internal/config"
	"github.com/dcm-sp/acm-cluster-sp/internal/events"
	"github.com/dcm-sp/acm-cluster-sp/internal/health"
	"github.com/dcm-sp/acm-cluster-sp/internal/httpapi"
	"github.com/dcm-sp/acm-cluster-sp/internal/hub"
	"github.com/dcm-sp/acm-cluster-sp/internal/registration"
	"github.com/dcm-sp/acm-cluster-sp/internal/status"
	"github.com/dcm-sp/acm-cluster-sp/internal/versions"
)

// App is an assembled SP.
type App struct {
	Config     *config.Config
	Hub        *hub.Hub
	Service    *clusters.Service
	Reconciler *clusters.Reconciler
	Publisher  *events.Publisher
	Registrar  *registration.Registrar
	Health     *health.Checker
	Platforms  *Platforms
	Registry   *prometheus.Registry

	log      *slog.Logger
	server   *httpapi.Server
	listener net.Listener
	leader   *leader
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
	// Reconciler tunes the clean-up/status reconciler (workers, resync period, orphan grace period).
	Reconciler clusters.ReconcilerOptions
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
		restCfg.QPS, restCfg.Burst = 100, 200
	}
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
	h, err := hub.New(restCfg, hub.Options{
		Namespace: cfg.Namespace, AgentNamespace: cfg.AgentNamespace, HypershiftNamespace: cfg.HypershiftNamespace,
		DiscoveryInterval: interval, DiscoveryTimeout: 5 * time.Second, Log: log,
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
			platforms.Refresh(context.Background())
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
	svc := clusters.New(h, clusters.Config{
		Spec: clusters.SpecContext{Namespace: cfg.Namespace, AgentNamespace: cfg.AgentNamespace, DefaultPlatform: cfg.DefaultPlatform,
			BaseDomain: cfg.BaseDomain, DefaultInfraEnv: cfg.DefaultInfraEnvName},
		ManageACMObjects:               cfg.ManageACMObjects,
		ControlPlaneAvailabilityPolicy: hyperv1.AvailabilityPolicy(cfg.ControlPlaneAvailabilityPolicy),
		DefaultWorkerCount:             int32(cfg.DefaultWorkerCount),
		KubeVirtInfraKubeconfig:        infraKubeconfig, KubeVirtInfraNamespace: cfg.KubevirtInfraNamespace,
		SSHPublicKey: sshKey, PullSecret: pullSecret, Matrix: matrix, Status: st,
		Platforms: platforms.Available,
	}, log)

	reg := prometheus.NewRegistry()
	reg.MustRegister(collectors.NewGoCollector(), collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}))

	a := &App{Config: cfg, Hub: h, Service: svc, Platforms: platforms, Registry: reg, log: log, listener: o.Listener}
	var reporter clusters.Reporter
	if cfg.NATSURL != "" {
		naming, err := events.ResolveNaming(cfg.StatusPreset, events.Naming{Subject: cfg.StatusSubject, Type: cfg.StatusType, Source: cfg.StatusSource})
		if err != nil {
			return nil, fmt.Errorf("config: %w", err)
		}
		a.Publisher = events.New(events.Options{URL: cfg.NATSURL, ProviderName: cfg.ProviderName, Naming: naming,
			Debounce: cfg.StatusDebounce, Registry: reg, Log: log})
		reporter = a.Publisher
	} else {
		log.Warn("natsURL is not set: status events are disabled")
	}
	a.Reconciler = clusters.NewReconciler(svc, reporter, o.Reconciler, log)
	if a.Publisher != nil {
		a.Publisher.OnDelivered(func(id string, st status.Status) {
			if st == status.Deleted {
				a.Reconciler.Enqueue(id) // the status finalizer can go now
			}
		})
	}

	if cfg.RegistrationURL != "" {
		a.Registrar, err = registration.New(registration.Options{
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
		health.HubCheck(h, 3*interval+5*time.Second),
		health.HyperShiftCheck(h, cfg.HypershiftNamespace),
		health.PlatformCheck("kubevirt", platforms.KubeVirtState),
		health.PlatformCheck("baremetal", platforms.BareMetalState),
	}
	if a.Publisher != nil {
		checks = append(checks, health.InformationalCheck("nats", a.Publisher.Connected))
	}
	if a.Registrar != nil {
		checks = append(checks, health.InformationalCheck("registration", a.Registrar.Status))
	}
	a.Health = health.New(checks, health.Options{Interval: interval, Ready: h.Synced})
	a.server = httpapi.NewServer(svc, a.Health, log)

	a.leader, err = newLeader(restCfg, cfg.LeaderElection, cfg.ProviderName+"-leader", cfg.LeaseNamespace(), cfg.LeaseDuration, log)
	if err != nil {
		return nil, fmt.Errorf("leader election: %w", err)
	}
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
	a.Hub.Start(ctx)
	if a.Publisher != nil {
		// Every replica connects (the health check reports it); only the leader publishes.
		if err := a.Publisher.Connect(); err != nil {
			return err
		}
	}

	srv := &http.Server{Handler: handler, ReadHeaderTimeout: 10 * time.Second, ReadTimeout: time.Minute, WriteTimeout: 2 * time.Minute, IdleTimeout: 2 * time.Minute}
	errs := make(chan error, 3)
	var wg sync.WaitGroup
	wg.Add(3)
	go func() {
		defer wg.Done()
		if err := srv.Serve(a.listener); err != nil && !errors.Is(err, http.ErrServerClosed) {
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
	a.log.Info("serving", "address", a.listener.Addr().String(), "namespace", a.Config.Namespace, "platformsEnabled", a.Config.EnabledPlatforms)

	var runErr error
	select {
	case <-ctx.Done():
	case runErr = <-errs:
		cancel()
	}
	shutdownCtx, stop := context.WithTimeout(context.Background(), 10*time.Second)
	defer stop()
	_ = srv.Shutdown(shutdownCtx)
	wg.Wait()
	if a.Publisher != nil {
		a.Publisher.Close()
	}
	return runErr
}

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

// pullSecretSource returns where each cluster's pull secret comes from: the configured file or inline value
// (checked now), or the named Secret in the namespace (read at each create, so a rotation is picked up).
func pullSecretSource(cfg *config.Config, h *hub.Hub) (func(context.Context) ([]byte, error), error) {
	switch {
	case cfg.PullSecretFile != "":
		data, err := os.ReadFile(cfg.PullSecretFile)
		if err != nil {
			return nil, fmt.Errorf("config: pullSecretFile: %w", err)
		}
		if err := config.CheckPullSecret(data); err != nil {
			return nil, fmt.Errorf("config: pullSecretFile %s: %w", cfg.PullSecretFile, err)
		}
		return func(context.Context) ([]byte, error) { return data, nil }, nil
	case cfg.PullSecret != "":
		data, err := cfg.InlinePullSecret()
		if err != nil {
			return nil, fmt.Errorf("config: pullSecret: %w", err)
		}
		return func(context.Context) ([]byte, error) { return data, nil }, nil
	case cfg.PullSecretName != "":
		return func(ctx context.Context) ([]byte, error) {
			var s corev1.Secret
			if err := h.Client.Get(ctx, client.ObjectKey{Namespace: cfg.Namespace, Name: cfg.PullSecretName}, &s); err != nil {
				return nil, fmt.Errorf("pull secret %s/%s: %w", cfg.Namespace, cfg.PullSecretName, err)
			}
			data := s.Data[corev1.DockerConfigJsonKey]
			if err := config.CheckPullSecret(data); err != nil {
				return nil, fmt.Errorf("pull secret %s/%s: %w", cfg.Namespace, cfg.PullSecretName, err)
			}
			return data, nil
		}, nil
	}
	return func(context.Context) ([]byte, error) {
		return nil, errors.New("no pull secret configured (pullSecretFile, pullSecretName or pullSecret)")
	}, nil
}
