package app

import (
	"context"
	"fmt"
	"strings"
	"time"

	hyperv1 "github.com/openshift/hypershift/api/hypershift/v1beta1"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"

	"github.com/dcm-sp/acm-cluster-sp/internal/sp/clusters"
	"github.com/dcm-sp/acm-cluster-sp/internal/sp/config"
	"github.com/dcm-sp/acm-cluster-sp/internal/sp/events"
	"github.com/dcm-sp/acm-cluster-sp/internal/sp/health"
	"github.com/dcm-sp/acm-cluster-sp/internal/sp/httpapi"
	"github.com/dcm-sp/acm-cluster-sp/internal/sp/hub"
	"github.com/dcm-sp/acm-cluster-sp/internal/sp/hubapi"
	"github.com/dcm-sp/acm-cluster-sp/internal/sp/leaderloop"
	"github.com/dcm-sp/acm-cluster-sp/internal/sp/platform"
	"github.com/dcm-sp/acm-cluster-sp/internal/sp/provision"
	"github.com/dcm-sp/acm-cluster-sp/internal/sp/reconcile"
	"github.com/dcm-sp/acm-cluster-sp/internal/sp/registration"
	"github.com/dcm-sp/acm-cluster-sp/internal/sp/security"
	"github.com/dcm-sp/acm-cluster-sp/internal/sp/status"
)

// The construction steps of New, in the order New calls them: each builds one component from those built before
// it and registers the notifications between them, so that no constructor registers anything and no callback
// reads a field set later.

// newRegistry is the SP's metrics registry: the Go runtime, the process and the hub client's requests.
func newRegistry(hubMetrics *hub.Metrics) *prometheus.Registry {
	reg := prometheus.NewRegistry()
	reg.MustRegister(collectors.NewGoCollector(), collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}))
	reg.MustRegister(hubMetrics.Collectors()...)
	return reg
}

// buildHub builds the hub access and the platforms it offers; each discovery refreshes the platforms.
func (a *App) buildHub(in *inputs) error {
	cfg := a.Config
	h, err := hub.New(in.restCfg, hub.Options{
		Namespace: cfg.Namespace, Provider: cfg.ProviderName, AgentNamespace: cfg.AgentNamespace, HypershiftNamespace: cfg.HypershiftNamespace,
		DiscoveryInterval: in.interval, DiscoveryTimeout: 5 * time.Second, RequestTimeout: cfg.RequestTimeout, Log: a.log,
	})
	if err != nil {
		return err
	}
	platforms, err := hub.NewPlatforms(h, hub.PlatformOptions{Enabled: cfg.EnabledPlatforms, DefaultInfraEnv: cfg.DefaultInfraEnvName,
		InfraCluster: in.infraCfg})
	if err != nil {
		return err
	}
	h.OnKindChange(func(kind string) {
		if kind == hub.KindDiscovery {
			platforms.Refresh()
		}
	})
	a.Hub, a.Platforms = h, platforms
	return nil
}

// buildService builds the domain service over the hub.
func (a *App) buildService(in *inputs) error {
	cfg, h, platforms, log := a.Config, a.Hub, a.Platforms, a.log
	infraKubeconfig, sshKey, matrix, hubStaleAfter := in.infraKubeconfig, in.sshKey, in.matrix, in.hubStaleAfter
	pullSecret, err := pullSecretSource(cfg, h)
	if err != nil {
		return err
	}
	st := status.Settings{
		DegradedGracePeriod: cfg.DegradedGracePeriod, ProvisioningTimeouts: cfg.ProvisioningTimeouts(),
		DeletionWarnAfter: status.DefaultSettings().DeletionWarnAfter,
	}
	svc := provision.New(provision.Ports{Client: h.Client, Index: h.Index(), Catalog: h, Site: h}, provision.Config{
		Provider: cfg.ProviderName,
		Spec: clusters.SpecContext{Namespace: cfg.Namespace, AgentNamespace: cfg.AgentNamespace, DefaultPlatform: cfg.DefaultPlatform,
			BaseDomain: cfg.BaseDomain, DefaultInfraEnv: cfg.DefaultInfraEnvName},
		ManageACMObjects:               cfg.ManageACMObjects,
		ControlPlaneAvailabilityPolicy: hyperv1.AvailabilityPolicy(cfg.ControlPlaneAvailabilityPolicy),
		DefaultWorkerCount:             int32(cfg.DefaultWorkerCount),
		InfraKubeconfig:                infraKubeconfig, InfraNamespace: cfg.KubevirtInfraNamespace,
		SSHPublicKey: sshKey, PullSecret: pullSecret, Matrix: matrix, Status: st,
		Platforms:         platforms.Available,
		OperationTimeouts: cfg.OperationTimeouts(),
		Vocabulary:        in.vocabulary,
		Observed:          hubObservation(h, hubStaleAfter), DeleteKeyRetention: cfg.DeleteKeyRetention,
	}, log)
	h.Index().OnChange(svc.IndexChanged) // GET and LIST build a changed cluster afresh; a gone one is forgotten
	a.Service = svc
	return nil
}

// buildLeader builds the leader election; it is built before the publisher, whose fence it is. Its tasks are
// added last (addLeaderTasks).
func (a *App) buildLeader(in *inputs) error {
	cfg := a.Config
	l, err := leaderloop.NewElector(in.restCfg, cfg.LeaderElection, cfg.ProviderName+"-leader", cfg.LeaseNamespace(), cfg.LeaseDuration, a.log)
	if err != nil {
		return fmt.Errorf("leader election: %w", err)
	}
	a.leader = l
	a.Registry.MustRegister(prometheus.NewGaugeFunc(prometheus.GaugeOpts{Name: "acm_sp_leader", Help: "1 while this replica runs the leader's tasks (reconciler, status events, registration)."},
		func() float64 {
			if l.Leading() {
				return 1
			}
			return 0
		}))
	return nil
}

// buildPublisher builds the status events publisher when natsURL is set; it publishes only while the leader
// certainly holds the lease.
func (a *App) buildPublisher(in *inputs) error {
	cfg := a.Config
	if cfg.NATSURL == "" {
		a.log.Warn("natsURL is not set: status events are disabled")
		return nil
	}
	naming, err := events.ResolveNaming(cfg.StatusPreset, events.Naming{Subject: cfg.StatusSubject, Type: cfg.StatusType, Source: cfg.StatusSource})
	if err != nil {
		return fmt.Errorf("config: %w", err)
	}
	a.Publisher = events.New(events.Options{URL: cfg.NATSURL, ProviderName: cfg.ProviderName, Naming: naming,
		Credentials: events.Credentials{CredsFile: cfg.NATSCredsFile, NkeySeedFile: cfg.NATSNkeySeedFile, User: cfg.NATSUser,
			PasswordFile: cfg.NATSPasswordFile, CAFile: cfg.NATSCAFile, CertFile: cfg.NATSCertFile, KeyFile: cfg.NATSKeyFile},
		Debounce: cfg.StatusDebounce, Settle: cfg.StatusSettle, Vocabulary: in.vocabulary, CreateStream: cfg.StatusCreateStream, StreamMaxAge: cfg.StatusStreamMaxAge,
		Registry: a.Registry, Log: a.log, Fence: a.leader.Holds})
	return nil
}

// buildReconciler builds the reconciler over the hub's index, reporting to the publisher (if any); the index's
// changes and the publisher's acknowledgements of DELETED enqueue the instance.
func (a *App) buildReconciler(o Options) {
	h := a.Hub
	ro := o.Reconciler
	if ro.ResyncPeriod == 0 {
		ro.ResyncPeriod = a.Config.ResyncPeriod
	}
	ro.WaitForSync, ro.Log, ro.Registry = h.WaitForSync, a.log, a.Registry
	ro.CatchUp = func(ctx context.Context) error { return h.CatchUp(ctx, 10*time.Second) }
	var reporter reconcile.Reporter
	if a.Publisher != nil {
		reporter = a.Publisher
	}
	r := reconcile.New(h.Index(), a.Service.Converger, reporter, ro)
	h.Index().OnChange(r.Enqueue)
	if a.Publisher != nil {
		a.Publisher.OnDelivered(func(id string, st status.Status) {
			if st == status.Deleted {
				r.Enqueue(id) // the status finalizer can go now
			}
		})
	}
	a.Reconciler = r
}

// buildRegistrar builds the registration with DCM when registrationURL is set; new image sets, versions or
// platforms make it compare the capabilities again.
func (a *App) buildRegistrar(o Options) error {
	cfg, h, platforms, svc := a.Config, a.Hub, a.Platforms, a.Service
	if cfg.RegistrationURL == "" {
		a.log.Info("registrationURL is not set: not registering with DCM")
		return nil
	}
	httpClient, err := registration.NewHTTPClient(cfg.RegistrationTokenFile, cfg.RegistrationCAFile)
	if err != nil {
		return err
	}
	r, err := registration.New(registration.Options{
		HTTPClient:  httpClient,
		RegistryURL: cfg.RegistrationURL, Name: cfg.ProviderName, DisplayName: cfg.DisplayName, ProviderID: cfg.ProviderID,
		Endpoint: strings.TrimSuffix(cfg.APIHost, "/") + "/api/v1alpha1/clusters",
		Capabilities: func(ctx context.Context) registration.Capabilities {
			return registration.Capabilities{Platforms: platforms.Available(), KubernetesVersions: svc.KubernetesVersions(ctx)}
		},
		MinBackoff: o.RegistrationBackoff, MaxBackoff: o.RegistrationMaxBackoff,
		Registry: a.Registry, Log: a.log,
	})
	if err != nil {
		return err
	}
	h.OnKindChange(func(kind string) {
		if kind == "clusterimagesets" || kind == "supported-versions" {
			r.Trigger()
		}
	})
	platforms.OnChange(r.Trigger)
	a.Registrar = r
	return nil
}

// buildServer builds the health checks of what was built, the API's guard and the HTTP API.
func (a *App) buildServer(in *inputs, o Options) error {
	cfg, h := a.Config, a.Hub
	checks := []health.Check{
		health.HubCheck(h, in.hubStaleAfter),
		health.HyperShiftCheck(h, cfg.HypershiftNamespace),
	}
	for _, p := range platform.All() { // one check per platform of the table, named by it
		checks = append(checks, health.PlatformCheck(string(p.Name), func(ctx context.Context) (bool, bool, string) {
			return a.Platforms.State(ctx, p.Name)
		}))
	}
	if a.Publisher != nil {
		checks = append(checks, health.InformationalCheck("nats", a.Publisher.Connected),
			health.Check{Name: "events", Run: a.Publisher.StreamHealth})
	}
	if a.Registrar != nil {
		checks = append(checks, health.InformationalCheck("registration", a.Registrar.Status))
	}
	a.Health = health.New(checks, health.Options{Interval: in.interval, Timeout: o.HealthCheckTimeout, Ready: h.Synced})
	a.Registry.MustRegister(a.Health.Collector())
	var err error
	a.Guard, err = security.New(security.Options{Mode: cfg.Auth, Anonymous: cfg.AuthAnonymous, ClientCAFile: cfg.ClientCAFile,
		APIAudiences: cfg.APIAudiences, AcceptHubTokens: cfg.AcceptHubTokens, APIGroup: cfg.AuthAPIGroup, Namespace: cfg.Namespace, Hub: in.restCfg, Registry: a.Registry, Log: a.log})
	if err != nil {
		return err
	}
	a.server = httpapi.NewServer(a.Service, a.Health, a.Guard, httpapi.Options{Log: a.log, RequestTimeout: cfg.RequestTimeout,
		ProblemTypeURIs: cfg.ProblemTypes == config.ProblemTypeURIs, Unclassified: unclassified})
	return nil
}

// addLeaderTasks hands the leader-only loops to the leader, in the order a term stops them (the reconciler
// before the publisher: it reports no status after the publisher's term ended), and exports how many instances
// each component holds state for.
func (a *App) addLeaderTasks() {
	tracked := func(component string, n func() int) prometheus.Collector {
		return prometheus.NewGaugeFunc(prometheus.GaugeOpts{Name: "acm_sp_tracked_instances", ConstLabels: prometheus.Labels{"component": component},
			Help: "Instances a component holds per-cluster state for (follows the live clusters; 0 on a follower)."}, func() float64 { return float64(n()) })
	}
	queued := func(loop string, n func() int) prometheus.Collector {
		return prometheus.NewGaugeFunc(prometheus.GaugeOpts{Name: "acm_sp_queued_instances", ConstLabels: prometheus.Labels{"loop": loop},
			Help: "Instances waiting in a leader loop's queue for a worker (a backlog that does not drain: the SP is behind; 0 on a follower)."}, func() float64 { return float64(n()) })
	}
	a.Registry.MustRegister(tracked("reconciler", a.Reconciler.Remembered), tracked("provision", a.Service.Remembered), queued("reconciler", a.Reconciler.Queued))
	a.leader.Add(a.Reconciler)
	if a.Publisher != nil {
		a.Registry.MustRegister(tracked("publisher", a.Publisher.Tracked), queued("publisher", a.Publisher.Queued))
		a.leader.Add(a.Publisher)
	}
	if a.Registrar != nil {
		a.leader.Add(a.Registrar)
	}
}

// unclassified classifies an error that reached the API without a domain kind as a failure of the hub.
func unclassified(err error) *clusters.Error { return hubapi.Failure(err, "the request failed") }
