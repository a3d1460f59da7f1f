package capipods

import (
	"context"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	storagev1 "k8s.io/api/storage/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/selection"
	"k8s.io/apimachinery/pkg/util/sets"
	"k8s.io/client-go/util/workqueue"
	clusterv1 "sigs.k8s.io/cluster-api/api/core/v1beta2"
	"sigs.k8s.io/cluster-api/api/core/v1beta2/index"
	"sigs.k8s.io/cluster-api/controllers"
	"sigs.k8s.io/cluster-api/controllers/clustercache"
	"sigs.k8s.io/cluster-api/controllers/remote"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/controller"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"
	"sigs.k8s.io/controller-runtime/pkg/source"
)

// clusterNameLabelExists selects objects labelled cluster.x-k8s.io/cluster-name (the label key is never renamed).
var clusterNameLabelExists = func() labels.Selector {
	req, err := labels.NewRequirement(clusterv1.ClusterNameLabel, selection.Exists, nil)
	if err != nil {
		panic(err)
	}
	return labels.NewSelector().Add(*req)
}()

// CAPI is the upstream Cluster API core manager, set up as upstream's main.go does it: the default indexes, the
// ClusterCache (Node providerID index, no caching of Secrets, ConfigMaps, Pods, DaemonSets, VolumeAttachments and
// PersistentVolumes of workload clusters), and the Cluster, Machine, MachineSet (no preflight checks),
// MachineDeployment and MachineHealthCheck reconcilers. No webhooks, no topology, no MachinePools, no
// ClusterResourceSets, no runtime extensions.
type CAPI struct {
	// Concurrency is each controller's MaxConcurrentReconciles (default 2: tests share two cores).
	Concurrency int
}

// Upstream's flag defaults (--remote-connection-grace-period, --remote-conditions-grace-period).
const (
	remoteConnectionGracePeriod = 50 * time.Second
	remoteConditionsGracePeriod = 5 * time.Minute
)

// Setup implements Component.
func (c CAPI) Setup(ctx context.Context, mgr ctrl.Manager) error {
	opts := controller.Options{MaxConcurrentReconciles: c.Concurrency}
	if opts.MaxConcurrentReconciles == 0 {
		opts.MaxConcurrentReconciles = 2
	}
	if err := index.AddDefaultIndexes(ctx, mgr); err != nil {
		return err
	}
	secretCachingClient, err := client.New(mgr.GetConfig(), client.Options{
		HTTPClient: mgr.GetHTTPClient(),
		Scheme:     mgr.GetScheme(),
		Mapper:     mgr.GetRESTMapper(),
		Cache:      &client.CacheOptions{Reader: mgr.GetCache()},
	})
	if err != nil {
		return err
	}
	clusterCache, err := clustercache.SetupWithManager(ctx, mgr, clustercache.Options{
		SecretClient: secretCachingClient,
		Cache:        clustercache.CacheOptions{Indexes: []clustercache.CacheOptionsIndex{clustercache.NodeProviderIDIndex}},
		Client: clustercache.ClientOptions{
			UserAgent: remote.DefaultClusterAPIUserAgent("capitest-cluster-api"),
			Cache: clustercache.ClientCacheOptions{DisableFor: []client.Object{
				&corev1.ConfigMap{}, &corev1.Secret{}, &corev1.Pod{}, &appsv1.DaemonSet{},
				&storagev1.VolumeAttachment{}, &corev1.PersistentVolume{},
			}},
		},
	}, opts)
	if err != nil {
		return err
	}
	// Upstream's ClusterCache sends to its cluster sources on unbuffered channels and can block a shutdown for the
	// whole grace period when a controller stopped reading first; its workload-cluster caches run on
	// context.Background and are never stopped in a manager (a process exit ends them). Here many managers come
	// and go in one process: the sources keep draining until the manager has returned (ctx ends then), and the
	// caches are shut down after it.
	if s, ok := clusterCache.(interface{ Shutdown() }); ok {
		context.AfterFunc(ctx, s.Shutdown)
	}
	clusterCache = drainingClusterCache{ClusterCache: clusterCache, drain: ctx}
	if err := (&controllers.ClusterReconciler{
		Client: mgr.GetClient(), APIReader: mgr.GetAPIReader(), ClusterCache: clusterCache,
		RemoteConnectionGracePeriod: remoteConnectionGracePeriod,
	}).SetupWithManager(ctx, mgr, opts); err != nil {
		return err
	}
	if err := (&controllers.MachineReconciler{
		Client: mgr.GetClient(), APIReader: mgr.GetAPIReader(), ClusterCache: clusterCache,
		RemoteConditionsGracePeriod: remoteConditionsGracePeriod,
	}).SetupWithManager(ctx, mgr, opts); err != nil {
		return err
	}
	if err := (&controllers.MachineSetReconciler{
		Client: mgr.GetClient(), APIReader: mgr.GetAPIReader(), ClusterCache: clusterCache,
		PreflightChecks: sets.Set[clusterv1.MachineSetPreflightCheck]{},
	}).SetupWithManager(ctx, mgr, opts); err != nil {
		return err
	}
	if err := (&controllers.MachineDeploymentReconciler{
		Client: mgr.GetClient(), APIReader: mgr.GetAPIReader(),
	}).SetupWithManager(ctx, mgr, opts); err != nil {
		return err
	}
	return (&controllers.MachineHealthCheckReconciler{
		Client: mgr.GetClient(), ClusterCache: clusterCache,
	}).SetupWithManager(ctx, mgr, opts)
}

// drainingClusterCache hands out cluster sources that keep reading until drain ends, whatever the controller that
// started them does.
type drainingClusterCache struct {
	clustercache.ClusterCache
	drain context.Context
}

func (c drainingClusterCache) GetClusterSource(controllerName string, mapFunc func(context.Context, client.Object) []ctrl.Request, opts ...clustercache.GetClusterSourceOption) source.Source {
	return drainingSource{inner: c.ClusterCache.GetClusterSource(controllerName, mapFunc, opts...), drain: c.drain}
}

type drainingSource struct {
	inner source.Source
	drain context.Context
}

// Start starts the source on the drain context: after the controller stops, events go to its shut-down queue,
// which drops them.
func (s drainingSource) Start(_ context.Context, q workqueue.TypedRateLimitingInterface[reconcile.Request]) error {
	return s.inner.Start(s.drain, q)
}
