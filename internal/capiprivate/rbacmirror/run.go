package rbacmirror

import (
	"context"
	"errors"
	"net"
	"net/http"
	"time"

	"github.com/go-logr/logr"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/promhttp"
	rbacv1 "k8s.io/api/rbac/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/runtime"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"
	"k8s.io/client-go/rest"
	"k8s.io/utils/ptr"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/config"
	ctrlmetrics "sigs.k8s.io/controller-runtime/pkg/metrics"
	metricsserver "sigs.k8s.io/controller-runtime/pkg/metrics/server"

	"github.com/dcm-sp/acm-cluster-sp/internal/capiprivate/groups"
)

// Defaults of RunOptions.
const (
	DefaultMetricsListen = "127.0.0.1:9446"
	LeaderElectionID     = "capi-private-rbac-mirror"
)

// RunOptions configure Run: the `capi-private rbac-mirror` command.
type RunOptions struct {
	// Kube reaches kube-apiserver with the identity Rules describes.
	Kube *rest.Config
	// NamespaceSelector selects the namespaces whose Roles and RoleBindings are mirrored (default
	// DefaultNamespaceSelector); ClusterRoles names the ClusterRoles mirrored (default DefaultClusterRoles).
	NamespaceSelector labels.Selector
	ClusterRoles      []string
	// MetricsListen is the plain HTTP address of /metrics, /healthz and /readyz (loopback by default);
	// MetricsListener, when set, is used instead.
	MetricsListen   string
	MetricsListener net.Listener
	// LeaderElection elects one mirror (Lease LeaderElectionID in LeaderElectionNamespace).
	LeaderElection          bool
	LeaderElectionNamespace string
	Log                     logr.Logger
	// SkipNameValidation lets one process run Run more than once (tests, dev).
	SkipNameValidation bool
	// Ready, if set, is called with the metrics address once it serves.
	Ready func(metricsAddr net.Addr)
}

// Rules is the RBAC of `capi-private rbac-mirror` (a ClusterRole bound to its identity): read namespaces; read and
// write Roles, ClusterRoles and their bindings; and every verb on every resource of the private groups, because
// that is the most a twin grants (HyperShift's cluster-api and capi-provider Roles grant every verb on the standard
// groups) and kube-apiserver lets an identity without escalate or bind write only the Roles, and bind only the Roles,
// whose every permission it holds. It has neither: with them its token could bind itself to cluster-admin. A twin
// that grants more than this (a rule naming CRDs, say) is refused by kube-apiserver and never written. Events: a
// squatter on a twin's name is reported on the original.
func Rules() []rbacv1.PolicyRule {
	var private []string
	for _, r := range groups.Default.Rows() {
		private = append(private, r.Private)
	}
	return []rbacv1.PolicyRule{
		{APIGroups: []string{""}, Resources: []string{"namespaces"}, Verbs: []string{"get", "list", "watch"}},
		{APIGroups: []string{rbacv1.GroupName}, Resources: []string{"roles", "clusterroles", "rolebindings", "clusterrolebindings"},
			Verbs: []string{"get", "list", "watch", "create", "update", "delete"}},
		{APIGroups: private, Resources: []string{rbacv1.ResourceAll}, Verbs: []string{rbacv1.VerbAll}},
		// A squatter is reported on the original, in its namespace.
		{APIGroups: []string{"", "events.k8s.io"}, Resources: []string{"events"}, Verbs: []string{"create", "patch"}},
	}
}

// Run runs the mirror until ctx ends.
func Run(ctx context.Context, o RunOptions) error {
	if o.LeaderElection && o.LeaderElectionNamespace == "" {
		return errors.New("leader election needs a namespace")
	}
	if o.NamespaceSelector == nil {
		o.NamespaceSelector, _ = labels.Parse(DefaultNamespaceSelector)
	}
	if o.ClusterRoles == nil {
		o.ClusterRoles = DefaultClusterRoles
	}
	log := o.Log
	if log.GetSink() == nil {
		log = ctrl.Log.WithName("capi-private-rbac-mirror")
	}
	scheme := runtime.NewScheme()
	if err := clientgoscheme.AddToScheme(scheme); err != nil {
		return err
	}
	mgr, err := ctrl.NewManager(o.Kube, ctrl.Options{
		Scheme: scheme, Logger: log,
		Metrics: metricsserver.Options{BindAddress: "0"}, HealthProbeBindAddress: "0",
		LeaderElection: o.LeaderElection, LeaderElectionID: LeaderElectionID,
		LeaderElectionNamespace: o.LeaderElectionNamespace, LeaderElectionReleaseOnCancel: true,
		Controller: config.Controller{SkipNameValidation: ptr.To(o.SkipNameValidation)},
	})
	if err != nil {
		return err
	}
	squatted, err := NewSquatted(ctrlmetrics.Registry)
	if are := (prometheus.AlreadyRegisteredError{}); errors.As(err, &are) {
		squatted, err = are.ExistingCollector.(*prometheus.CounterVec), nil // a second Run in one process (tests, dev)
	}
	if err != nil {
		return err
	}
	c := &Controller{Client: mgr.GetClient(), Mirror: New(groups.Default), NamespaceSelector: o.NamespaceSelector, ClusterRoles: o.ClusterRoles,
		//lint:ignore SA1019 the core/v1 Events recorder: its replacement writes events.k8s.io/v1 (other RBAC and another Eventf); kept until that move
		Recorder: mgr.GetEventRecorderFor("capi-private-rbac-mirror"), Squatted: squatted}
	if err := c.SetupWithManager(mgr); err != nil {
		return err
	}
	ml := o.MetricsListener
	if ml == nil {
		addr := o.MetricsListen
		if addr == "" {
			addr = DefaultMetricsListen
		}
		if ml, err = net.Listen("tcp", addr); err != nil {
			return err
		}
	}
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	mux := http.NewServeMux()
	mux.Handle("GET /metrics", promhttp.HandlerFor(prometheus.Gatherers{ctrlmetrics.Registry}, promhttp.HandlerOpts{}))
	mux.HandleFunc("GET /healthz", func(w http.ResponseWriter, _ *http.Request) { _, _ = w.Write([]byte("ok")) })
	mux.HandleFunc("GET /readyz", func(w http.ResponseWriter, r *http.Request) {
		ctx, cancel := context.WithTimeout(r.Context(), time.Second)
		defer cancel()
		if !mgr.GetCache().WaitForCacheSync(ctx) {
			http.Error(w, "caches not synced", http.StatusServiceUnavailable)
			return
		}
		_, _ = w.Write([]byte("ok"))
	})
	msrv := &http.Server{Handler: mux, ReadHeaderTimeout: 10 * time.Second}
	go func() { _ = msrv.Serve(ml) }()
	defer func() {
		sctx, scancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer scancel()
		_ = msrv.Shutdown(sctx)
	}()
	if o.Ready != nil {
		o.Ready(ml.Addr())
	}
	return mgr.Start(ctx)
}
