package capipods

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"sync"
	"time"

	"github.com/go-logr/logr"
	hyperv1 "github.com/openshift/hypershift/api/hypershift/v1beta1"
	corev1 "k8s.io/api/core/v1"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	"k8s.io/apimachinery/pkg/runtime"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"
	"k8s.io/client-go/rest"
	"k8s.io/utils/ptr"
	clusterv1 "sigs.k8s.io/cluster-api/api/core/v1beta2"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/cache"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/config"
	metricsserver "sigs.k8s.io/controller-runtime/pkg/metrics/server"
)

// Mode is how a simulated pod reaches kube-apiserver.
type Mode string

const (
	// Direct talks to kube-apiserver itself and sees the standard groups as stored: legacy mode, where CAPI's
	// objects live in the platform's standard CRDs.
	Direct Mode = "direct"
	// Proxied talks through the capi-private proxy: the standard groups it sees are stored in the private CRDs.
	Proxied Mode = "proxied"
)

// NewScheme is the scheme every simulated pod uses: client-go's types, apiextensions.k8s.io/v1, Cluster API core
// v1beta2 (standard groups: that is what both a direct and a proxied client see) and HyperShift v1beta1. CAPK
// objects are unstructured.
func NewScheme() *runtime.Scheme {
	s := runtime.NewScheme()
	for _, add := range []func(*runtime.Scheme) error{clientgoscheme.AddToScheme, apiextensionsv1.AddToScheme, clusterv1.AddToScheme, hyperv1.AddToScheme} {
		if err := add(s); err != nil {
			panic(err)
		}
	}
	return s
}

// Component is what runs in a simulated pod's manager: the upstream CAPI controllers, the ledger provider, a fake
// operator. Setup registers its controllers; ctx ends after the manager has returned (not when it is asked to
// stop), for what the component runs beside the manager's runnables.
type Component interface {
	Setup(ctx context.Context, mgr ctrl.Manager) error
}

// ManagerOptions configure one simulated pod's controller-runtime manager.
type ManagerOptions struct {
	// Name names the pod in logs and in its User-Agent (UserAgentPrefix + Name).
	Name string
	// Namespace is the only namespace the manager watches (HyperShift runs its CAPI pods with --namespace); ""
	// watches all.
	Namespace string
	// Components run in the manager.
	Components []Component
	// LeaderElectionID enables leader election with this Lease name in Namespace (required then), released on
	// Stop so a successor takes over at once; "" disables it.
	LeaderElectionID string
	// Log receives the manager's and its controllers' logs (default: discarded).
	Log logr.Logger
}

// Manager is a running simulated pod: a controller-runtime manager started in this process.
type Manager struct {
	name   string
	mgr    ctrl.Manager
	cancel context.CancelFunc
	done   chan struct{}
	err    error
	once   sync.Once
	kill   *killSwitch
}

// Leader-election timings: controller-runtime's defaults, as the real components run them. Shorter ones lose the
// lease on a loaded machine (a renewal slower than the deadline), and a lost lease exits the manager: a container
// restart, which the migration's health check rightly counts. A stopped pod releases its lease, so a successor
// takes over at once; only a pod killed without releasing keeps it for LeaseDuration.
var (
	leaseDuration = 15 * time.Second
	renewDeadline = 10 * time.Second
	retryPeriod   = 2 * time.Second
)

// StartManager builds a manager on cfg, sets up the components and starts it. Call Stop (or watch Done).
func StartManager(cfg *rest.Config, o ManagerOptions) (*Manager, error) {
	if o.Log.GetSink() == nil {
		o.Log = logr.Discard()
	}
	if o.LeaderElectionID != "" && o.Namespace == "" {
		return nil, errors.New("leader election needs a namespace")
	}
	opts := ctrl.Options{
		Scheme: NewScheme(),
		Logger: o.Log,
		// One process runs many managers with the same controllers: names repeat by design.
		Controller: config.Controller{SkipNameValidation: ptr.To(true)},
		Metrics:    metricsserver.Options{BindAddress: "0"},
		Cache: cache.Options{
			// Like upstream CAPI's main: only Secrets labelled with a cluster name are cached (for the kubeconfig
			// lookups of the cluster cache); the manager's client reads Secrets and ConfigMaps live.
			ByObject: map[client.Object]cache.ByObject{&corev1.Secret{}: {Label: clusterNameLabelExists}},
		},
		Client: client.Options{Cache: &client.CacheOptions{
			DisableFor:   []client.Object{&corev1.ConfigMap{}, &corev1.Secret{}},
			Unstructured: true,
		}},
		// HyperShift's CAPI pods have terminationGracePeriodSeconds 10; after it the kill switch cuts the pod off.
		GracefulShutdownTimeout: ptr.To(10 * time.Second),
	}
	if o.Namespace != "" {
		opts.Cache.DefaultNamespaces = map[string]cache.Config{o.Namespace: {}}
	}
	if o.LeaderElectionID != "" {
		opts.LeaderElection = true
		opts.LeaderElectionID = o.LeaderElectionID
		opts.LeaderElectionNamespace = o.Namespace
		opts.LeaderElectionReleaseOnCancel = true
		opts.LeaseDuration, opts.RenewDeadline, opts.RetryPeriod = &leaseDuration, &renewDeadline, &retryPeriod
	}
	cfg = rest.CopyConfig(cfg)
	cfg.UserAgent = UserAgentPrefix + o.Name // the audit log tells the pods apart
	kill := newKillSwitch()
	cfg.Wrap(kill.wrap)
	mgr, err := ctrl.NewManager(cfg, opts)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", o.Name, err)
	}
	// Components get a context that ends only once the manager has returned, so what they start beside the
	// manager (sources, caches of workload clusters) outlives every controller and is cleaned up after them.
	setupCtx, endSetup := context.WithCancel(context.Background())
	for _, c := range o.Components {
		if err := c.Setup(setupCtx, mgr); err != nil {
			endSetup()
			return nil, fmt.Errorf("%s: setting up %T: %w", o.Name, c, err)
		}
	}
	runCtx, cancel := context.WithCancel(context.Background())
	m := &Manager{name: o.Name, mgr: mgr, cancel: cancel, done: make(chan struct{}), kill: kill}
	go func() {
		defer close(m.done)
		m.err = mgr.Start(runCtx)
		// Like a SIGKILL after the grace period: whatever still runs can no longer reach kube-apiserver.
		kill.kill()
		endSetup()
	}()
	return m, nil
}

// Name is the pod's name.
func (m *Manager) Name() string { return m.name }

// Client is the manager's (cached) client.
func (m *Manager) Client() client.Client { return m.mgr.GetClient() }

// WaitReady waits until the manager's caches are synced (the pod is Ready), or it exited, or ctx ended.
func (m *Manager) WaitReady(ctx context.Context) error {
	synced := make(chan bool, 1)
	syncCtx, cancel := context.WithCancel(ctx)
	defer cancel()
	go func() { synced <- m.mgr.GetCache().WaitForCacheSync(syncCtx) }()
	select {
	case ok := <-synced:
		if !ok {
			return fmt.Errorf("%s: caches not synced: %w", m.name, ctx.Err())
		}
		return nil
	case <-m.done:
		return fmt.Errorf("%s exited: %v", m.name, m.err)
	}
}

// Elected is closed when the manager leads (at once without leader election).
func (m *Manager) Elected() <-chan struct{} { return m.mgr.Elected() }

// Done is closed when the manager has stopped, by Stop or on its own (an error, a lost Lease).
func (m *Manager) Done() <-chan struct{} { return m.done }

// Err is the manager's exit error once Done is closed (nil after a Stop).
func (m *Manager) Err() error {
	select {
	case <-m.done:
		return m.err
	default:
		return nil
	}
}

// stopTimeout bounds Stop: the manager's grace period and some. A manager whose caches never synced (its identity
// is refused a list) never returns from Start: controller-runtime waits for the sync without watching its context.
var stopTimeout = 15 * time.Second

// Stop stops the manager and waits until every controller has returned, at most the 10 s grace period, after which
// the pod's transport refuses and cancels every request: after Stop, the pod sends nothing. A manager still
// running after stopTimeout is cut off the same way (like a pod killed after its grace period) and Stop reports it.
func (m *Manager) Stop() error {
	m.once.Do(m.cancel)
	select {
	case <-m.done:
		return m.err
	case <-time.After(stopTimeout):
		m.kill.kill()
		return fmt.Errorf("%s did not stop within %s (caches never synced?): cut off from kube-apiserver", m.name, stopTimeout)
	}
}

// killSwitch cuts a pod off kube-apiserver: once killed, its transport refuses new requests and cancels the ones in
// flight (watches included).
type killSwitch struct {
	ctx    context.Context
	cancel context.CancelFunc
}

func newKillSwitch() *killSwitch {
	ctx, cancel := context.WithCancel(context.Background())
	return &killSwitch{ctx: ctx, cancel: cancel}
}

func (k *killSwitch) kill() { k.cancel() }

var errPodKilled = errors.New("capipods: the pod was stopped")

func (k *killSwitch) wrap(rt http.RoundTripper) http.RoundTripper {
	return roundTripperFunc(func(req *http.Request) (*http.Response, error) {
		if k.ctx.Err() != nil {
			return nil, errPodKilled
		}
		ctx, cancel := context.WithCancel(req.Context())
		stop := context.AfterFunc(k.ctx, cancel)
		resp, err := rt.RoundTrip(req.WithContext(ctx))
		if err != nil {
			stop()
			cancel()
			return nil, err
		}
		resp.Body = &releasingBody{ReadCloser: resp.Body, release: func() { stop(); cancel() }}
		return resp, nil
	})
}

type roundTripperFunc func(*http.Request) (*http.Response, error)

func (f roundTripperFunc) RoundTrip(req *http.Request) (*http.Response, error) { return f(req) }

type releasingBody struct {
	io.ReadCloser
	once    sync.Once
	release func()
}

func (b *releasingBody) Close() error {
	err := b.ReadCloser.Close()
	b.once.Do(b.release)
	return err
}
