package inject

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/http"
	"time"

	"github.com/go-logr/logr"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
	"github.com/prometheus/client_golang/prometheus/promhttp"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/apimachinery/pkg/runtime"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"
	"k8s.io/client-go/rest"
	"k8s.io/utils/ptr"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/cache"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/config"
	metricsserver "sigs.k8s.io/controller-runtime/pkg/metrics/server"

	"github.com/dcm-sp/acm-cluster-sp/internal/capiprivate/webhook"
)

// Defaults of RunOptions. The webhook listens on loopback unless told otherwise (the command defaults --listen to
// the pod's IP): it never listens on every interface by itself.
const (
	DefaultListen        = "127.0.0.1:9443"
	DefaultMetricsListen = "127.0.0.1:9444"
	LeaderElectionID     = "capi-private-inject"
	DefaultKeyNamespace  = "capi-private"
)

// RunOptions configure Run: the `capi-private inject` command.
type RunOptions struct {
	Config Config
	Policy CertPolicy
	// Kube reaches kube-apiserver (Namespaces and HostedClusters read; LoopbackSecret read and written; Leases with
	// LeaderElection).
	Kube *rest.Config
	// Listen is the webhook's HTTPS address (Path); CertFile and KeyFile its key pair, reloaded when they change.
	Listen            string
	CertFile, KeyFile string
	// MetricsListen is the plain HTTP address of /metrics, /healthz and /readyz (loopback by default).
	MetricsListen string
	// KeyNamespace is where the loopback CAs' keys are kept (DefaultKeyNamespace): the injector's own namespace,
	// which must exist.
	KeyNamespace string
	// LeaderElection elects one certificate controller (Lease LeaderElectionID); every replica serves the webhook.
	LeaderElection          bool
	LeaderElectionNamespace string
	// Listener and MetricsListener, when set, are used instead of Listen and MetricsListen.
	Listener, MetricsListener net.Listener
	// Resync bounds the time between two checks of a namespace's Secret (default DefaultResync); Now is the
	// certificate controller's clock (tests).
	Resync time.Duration
	Now    func() time.Time
	Log    logr.Logger
	// SkipNameValidation lets one process run Run more than once (tests, dev).
	SkipNameValidation bool
	// Ready, if set, is called with the listeners' addresses once they serve.
	Ready func(webhookAddr, metricsAddr net.Addr)
}

// Run serves the injector and runs the certificate controller until ctx ends.
func Run(ctx context.Context, o RunOptions) error {
	if err := o.Config.Validate(); err != nil {
		return err
	}
	if o.CertFile == "" || o.KeyFile == "" {
		return errors.New("the webhook needs --tls-cert-file and --tls-private-key-file")
	}
	if o.LeaderElection && o.LeaderElectionNamespace == "" {
		return errors.New("leader election needs a namespace")
	}
	reg := prometheus.NewRegistry()
	reg.MustRegister(collectors.NewGoCollector(), collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}))
	m, err := NewMetrics(reg)
	if err != nil {
		return err
	}
	actions, err := NewCertActions(reg)
	if err != nil {
		return err
	}
	mgr, err := newManager(o)
	if err != nil {
		return err
	}
	if err := IndexControlPlaneNamespace(ctx, mgr.GetFieldIndexer()); err != nil {
		return err
	}
	routes := &Routes{Cache: mgr.GetCache(), Live: mgr.GetAPIReader()}
	cc := &CertController{Client: mgr.GetClient(), Keys: mgr.GetAPIReader(), KeyNamespace: orDefault(o.KeyNamespace, DefaultKeyNamespace),
		Routes: routes, Policy: o.Policy, Now: o.Now, Resync: o.Resync, Actions: actions}
	if err := cc.SetupWithManager(mgr); err != nil {
		return err
	}
	l, ml, err := listeners(o)
	if err != nil {
		return err
	}
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	errs := make(chan error, 3)
	go func() { errs <- mgr.Start(ctx) }()
	go func() {
		errs <- webhook.ServeTLS(ctx, l, o.CertFile, o.KeyFile, webhookMux(NewHandler(&o.Config, routes, m)), podReviewLimits)
	}()
	msrv := &http.Server{Handler: healthMux(reg), ReadHeaderTimeout: 10 * time.Second}
	go func() { errs <- msrv.Serve(ml) }()
	if o.Ready != nil {
		o.Ready(l.Addr(), ml.Addr())
	}
	var runErr error
	select {
	case <-ctx.Done():
	case runErr = <-errs:
	}
	cancel()
	sctx, scancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer scancel()
	_ = msrv.Shutdown(sctx)
	if runErr != nil && !errors.Is(runErr, http.ErrServerClosed) && !errors.Is(runErr, context.Canceled) {
		return runErr
	}
	return nil
}

func newManager(o RunOptions) (ctrl.Manager, error) {
	scheme := runtime.NewScheme()
	if err := clientgoscheme.AddToScheme(scheme); err != nil {
		return nil, err
	}
	log := o.Log
	if log.GetSink() == nil {
		log = ctrl.Log.WithName("capi-private-inject")
	}
	return ctrl.NewManager(o.Kube, ctrl.Options{
		Scheme: scheme, Logger: log,
		Metrics:                metricsserver.Options{BindAddress: "0"},
		HealthProbeBindAddress: "0",
		LeaderElection:         o.LeaderElection, LeaderElectionID: LeaderElectionID,
		LeaderElectionNamespace: o.LeaderElectionNamespace, LeaderElectionReleaseOnCancel: true,
		Controller: config.Controller{SkipNameValidation: ptr.To(o.SkipNameValidation)},
		Cache:      CacheOptions(),
	})
}

// CacheOptions keep in the cache only what the injector reads: Namespaces, HostedClusters' metadata and the Secrets
// named LoopbackSecret (so its RBAC can name that one Secret).
func CacheOptions() cache.Options {
	return cache.Options{ByObject: map[client.Object]cache.ByObject{
		&corev1.Secret{}: {Field: fields.OneTermEqualSelector("metadata.name", LoopbackSecret)},
	}}
}

func listeners(o RunOptions) (net.Listener, net.Listener, error) {
	l, ml := o.Listener, o.MetricsListener
	var err error
	if l == nil {
		if l, err = net.Listen("tcp", orDefault(o.Listen, DefaultListen)); err != nil {
			return nil, nil, err
		}
	}
	if ml == nil {
		if ml, err = net.Listen("tcp", orDefault(o.MetricsListen, DefaultMetricsListen)); err != nil {
			_ = l.Close()
			return nil, nil, fmt.Errorf("metrics listener: %w", err)
		}
	}
	return l, ml, nil
}

func orDefault(v, d string) string {
	if v == "" {
		return d
	}
	return v
}

func webhookMux(h http.Handler) http.Handler {
	mux := http.NewServeMux()
	mux.Handle("POST "+Path, webhook.LimitBody(h, podReviewLimits.MaxRequestBytes, "AdmissionReview"))
	mux.HandleFunc("GET /healthz", func(w http.ResponseWriter, _ *http.Request) { _, _ = w.Write([]byte("ok")) })
	return mux
}

func healthMux(reg *prometheus.Registry) http.Handler {
	mux := http.NewServeMux()
	mux.Handle("GET /metrics", promhttp.HandlerFor(reg, promhttp.HandlerOpts{}))
	ok := func(w http.ResponseWriter, _ *http.Request) { _, _ = w.Write([]byte("ok")) }
	mux.HandleFunc("GET /healthz", ok)
	mux.HandleFunc("GET /readyz", ok)
	return mux
}

// podReviewLimits bound what the injector reads: an AdmissionReview of one Pod (a Pod is far below etcd's 1.5 MiB
// object limit, so 4 MiB holds any review kube-apiserver sends; a larger body is answered 413 unread); the
// timeouts are the conversion webhook's.
var podReviewLimits = webhook.Limits{MaxRequestBytes: 4 << 20}
