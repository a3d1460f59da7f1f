// Package installtest runs parts of capi-private's install in this process, for the dev command and the tests:
// the migrator's classifier alone, as `capi-private migrate` runs it, where a test or the demo needs HostedClusters
// classified without migrating any.
package installtest

import (
	"context"
	"errors"
	"time"

	"github.com/go-logr/logr"
	"k8s.io/client-go/rest"
	"k8s.io/utils/ptr"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/config"
	metricsserver "sigs.k8s.io/controller-runtime/pkg/metrics/server"

	migratecontroller "github.com/dcm-sp/acm-cluster-sp/internal/capiprivate/migrate/controller"
)

// StartClassifier runs the classifier for the HostedClusters of namespace ("" = all) with cfg until the returned
// stop is called.
func StartClassifier(cfg *rest.Config, namespace string, log logr.Logger) (stop func() error, err error) {
	mgr, err := ctrl.NewManager(cfg, ctrl.Options{
		Scheme: migratecontroller.Scheme(), Logger: log,
		Metrics: metricsserver.Options{BindAddress: "0"}, HealthProbeBindAddress: "0",
		Controller: config.Controller{SkipNameValidation: ptr.To(true)},
	})
	if err != nil {
		return nil, err
	}
	uncached, err := client.New(cfg, client.Options{Scheme: migratecontroller.Scheme()})
	if err != nil {
		return nil, err
	}
	if err := (&migratecontroller.Classifier{Client: uncached, Namespace: namespace, Log: log}).SetupWithManager(mgr); err != nil {
		return nil, err
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- mgr.Start(ctx) }()
	return func() error {
		cancel()
		select {
		case err := <-done:
			if errors.Is(err, context.Canceled) {
				return nil
			}
			return err
		case <-time.After(15 * time.Second):
			return errors.New("the classifier did not stop within 15 s")
		}
	}, nil
}
