package simulator

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"time"

	"github.com/go-logr/logr"
	hyperv1 "github.com/openshift/hypershift/api/hypershift/v1beta1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/rest"
	"k8s.io/utils/ptr"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/cache"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/config"
	metricsserver "sigs.k8s.io/controller-runtime/pkg/metrics/server"

	"github.com/dcm-sp/acm-cluster-sp/internal/devtest/sp/sphub"
)

// Options configure a running simulator.
type Options struct {
	Timeline   Timeline
	Namespaces []string // HostedCluster namespaces to play the operator in; empty: all
	// OlderOperatorNamespaces play an operator version that creates the admin-kubeconfig Secret without copying the
	// HostedCluster's labels onto it (recent versions copy them).
	OlderOperatorNamespaces []string
	Log                     *slog.Logger
	// Observe, when set, is called after each plan was applied to the hub: tests learn that the simulator had its
	// chance (a plan with RequeueAfter 0 means it has nothing more scheduled for that cluster).
	Observe func(hc types.NamespacedName, p Plan)
}

// Start runs the simulator against the hub at cfg until ctx ends or stop is called. It returns once the
// simulator's caches are synced, so objects created afterwards are picked up.
func Start(ctx context.Context, cfg *rest.Config, o Options) (stop func(), err error) {
	log := o.Log
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	tl := o.Timeline
	if tl.ReadyAfter == 0 {
		tl = DevTimeline()
	}
	var cacheOpts cache.Options
	if len(o.Namespaces) > 0 {
		cacheOpts.ByObject = map[client.Object]cache.ByObject{}
		ns := map[string]cache.Config{}
		for _, n := range o.Namespaces {
			ns[n] = cache.Config{}
		}
		cacheOpts.ByObject[&hyperv1.HostedCluster{}] = cache.ByObject{Namespaces: ns}
		cacheOpts.ByObject[&hyperv1.NodePool{}] = cache.ByObject{Namespaces: ns}
	}
	mgr, err := ctrl.NewManager(cfg, ctrl.Options{
		Cache:                  cacheOpts,
		Scheme:                 sphub.Scheme(),
		Metrics:                metricsserver.Options{BindAddress: "0"},
		HealthProbeBindAddress: "0",
		Logger:                 logr.FromSlogHandler(log.Handler()),
		// Several simulators may run in one test process; controller names need not be unique.
		Controller: config.Controller{SkipNameValidation: ptr.To(true)},
	})
	if err != nil {
		return nil, fmt.Errorf("simulator manager: %w", err)
	}
	if err := (&Simulator{Timeline: tl, Log: log, OlderOperatorNamespaces: o.OlderOperatorNamespaces, Observe: o.Observe}).SetupWithManager(mgr); err != nil {
		return nil, err
	}
	runCtx, cancel := context.WithCancel(ctx)
	done := make(chan error, 1)
	go func() { done <- mgr.Start(runCtx) }()
	syncCtx, syncCancel := context.WithTimeout(ctx, 60*time.Second)
	defer syncCancel()
	if !mgr.GetCache().WaitForCacheSync(syncCtx) {
		cancel()
		return nil, errors.Join(errors.New("simulator caches did not sync"), <-done)
	}
	log.Info("simulator: running", "readyAfter", tl.ReadyAfter, "deleteAfter", tl.DeleteAfter)
	return func() { cancel(); <-done }, nil
}
