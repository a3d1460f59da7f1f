// Package capipods runs Cluster API the way HyperShift runs it, on capi-private's test hub (package capihub): per
// simulated pod a controller-runtime manager in this process with the upstream CAPI controllers, the ledger
// infrastructure provider or a fake HyperShift operator, reaching kube-apiserver either directly (legacy mode: the
// standard CRDs) or through the capi-private proxy (private mode); the ledger that counts instance creates and deletes;
// a deployment player — the kubelet stand-in — that runs those managers for the Pods kube-controller-manager's
// deployment and ReplicaSet controllers create (admitted by the API server's webhooks, the sidecar injector among
// them); and builders of a hosted cluster's object graph of each platform in either group set.
//
// It is test and dev machinery: import it only from tests and the dev command, never from a production path.
package capipods

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/url"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/go-logr/logr"
	hyperv1 "github.com/openshift/hypershift/api/hypershift/v1beta1"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/rest"
	"sigs.k8s.io/controller-runtime/pkg/client"
)

// Options configure a Harness.
type Options struct {
	// Direct is an admin config straight to kube-apiserver: the harness's own client, the deployment player, and
	// pods in Direct mode.
	Direct *rest.Config
	// Proxied is the config of pods in Proxied mode (the proxy's URL and a bearer token). Nil until a proxy exists:
	// proxied pods then stay not Ready, retried (SetProxied supplies it later).
	Proxied *rest.Config
	// WorkloadKubeconfig is the workload cluster's kubeconfig the fake control-plane-operator writes to
	// <infraID>-kubeconfig: the hub itself, directly (required).
	WorkloadKubeconfig []byte
	// Ledger is the provider's cloud (default: a new one).
	Ledger *Ledger
	// Log receives every manager's log (default: discarded).
	Log logr.Logger
	// Platforms are the platforms whose kinds the ledger provider reconciles (default: all, Platforms). A
	// provider running with one platform's RBAC (HyperShift's capi-provider Role for KubeVirt, say) must watch only
	// that platform's kinds, or its caches never sync.
	Platforms []Platform
}

// Harness runs hosted clusters' simulated pods on a hub. Create it with New and Stop it when done.
type Harness struct {
	// Client is an admin client straight to kube-apiserver with NewScheme (CAPI objects of either group set are
	// unstructured; see Get and List).
	Client client.Client
	// Ledger counts instance creates and deletes.
	Ledger *Ledger
	// Reconciles is the log every fake HostedCluster operator started by StartOperator writes.
	Reconciles *ReconcileLog
	// Player plays the simulated Deployments.
	Player *DeploymentPlayer

	opts     Options
	endpoint hyperv1.APIEndpoint

	mu      sync.Mutex
	proxied *rest.Config
}

// New starts a harness: its deployment player runs every Pod labelled SimulateLabel.
func New(ctx context.Context, o Options) (*Harness, error) {
	if o.Direct == nil || len(o.WorkloadKubeconfig) == 0 {
		return nil, errors.New("capipods: Options.Direct and Options.WorkloadKubeconfig are required")
	}
	if o.Ledger == nil {
		o.Ledger = NewLedger()
	}
	if o.Log.GetSink() == nil {
		o.Log = logr.Discard()
	}
	c, err := client.New(o.Direct, client.Options{Scheme: NewScheme()})
	if err != nil {
		return nil, err
	}
	endpoint, err := endpointOf(o.Direct.Host)
	if err != nil {
		return nil, err
	}
	h := &Harness{Client: c, Ledger: o.Ledger, Reconciles: &ReconcileLog{}, opts: o, endpoint: endpoint, proxied: o.Proxied}
	h.Player, err = StartDeploymentPlayer(o.Direct, DeploymentPlayerOptions{Config: h.Config, Components: h.Components, Log: o.Log})
	if err != nil {
		return nil, err
	}
	if err := h.Player.WaitReady(ctx); err != nil {
		_ = h.Player.Stop()
		return nil, err
	}
	return h, nil
}

// endpointOf is the host and port of an https URL (the HostedControlPlane's controlPlaneEndpoint).
func endpointOf(host string) (hyperv1.APIEndpoint, error) {
	u, err := url.Parse(host)
	if err != nil {
		return hyperv1.APIEndpoint{}, err
	}
	h, p, err := net.SplitHostPort(u.Host)
	if err != nil {
		return hyperv1.APIEndpoint{}, fmt.Errorf("API server address %q: %w", host, err)
	}
	port, err := strconv.Atoi(p)
	if err != nil {
		return hyperv1.APIEndpoint{}, err
	}
	return hyperv1.APIEndpoint{Host: h, Port: int32(port)}, nil
}

// SetProxied sets (or replaces) the config of Proxied pods; pods started before keep theirs.
func (h *Harness) SetProxied(cfg *rest.Config) {
	h.mu.Lock()
	defer h.mu.Unlock()
	h.proxied = cfg
}

// Config is the rest.Config of a pod in mode (role and namespace are for callers that want one identity per
// component; the harness uses one per mode).
func (h *Harness) Config(mode Mode, _, _ string) (*rest.Config, error) {
	switch mode {
	case Direct:
		return rest.CopyConfig(h.opts.Direct), nil
	case Proxied:
		h.mu.Lock()
		defer h.mu.Unlock()
		if h.proxied == nil {
			return nil, errors.New("no proxy: Proxied pods cannot start (Options.Proxied or SetProxied)")
		}
		return rest.CopyConfig(h.proxied), nil
	}
	return nil, fmt.Errorf("unknown mode %q", mode)
}

// Components is what a pod of role runs: RoleCAPI the upstream CAPI controllers, RoleProvider the ledger
// provider, RoleControlPlaneOperator the fake control-plane-operator; any other role nothing.
func (h *Harness) Components(role, _ string) []Component {
	switch role {
	case RoleCAPI:
		return []Component{CAPI{}}
	case RoleProvider:
		return []Component{Provider{Ledger: h.Ledger, Platforms: h.opts.Platforms}}
	case RoleControlPlaneOperator:
		return []Component{ControlPlaneOperator{Endpoint: h.endpoint, WorkloadKubeconfig: h.opts.WorkloadKubeconfig}}
	}
	return nil
}

// StartPod starts one simulated pod of role in namespace, outside any Deployment (no Pod object, no leader
// election), and waits until it is ready. Stop it with Manager.Stop.
func (h *Harness) StartPod(ctx context.Context, mode Mode, role, namespace string) (*Manager, error) {
	cfg, err := h.Config(mode, role, namespace)
	if err != nil {
		return nil, err
	}
	components := h.Components(role, namespace)
	if len(components) == 0 {
		return nil, fmt.Errorf("role %q runs nothing", role)
	}
	m, err := StartManager(cfg, ManagerOptions{
		Name: fmt.Sprintf("%s/%s-%s", namespace, role, mode), Namespace: namespace, Components: components,
		Log: h.opts.Log.WithName(role),
	})
	if err != nil {
		return nil, err
	}
	if err := m.WaitReady(ctx); err != nil {
		_ = m.Stop()
		return nil, err
	}
	return m, nil
}

// StartOperator starts a cluster-wide fake HyperShift operator named name in mode without HyperShift's scoping,
// reconciling the HostedClusters accept selects (nil: all) and logging to Reconciles (StartHyperShiftOperator with
// a nil environment). Stop it with Manager.Stop.
func (h *Harness) StartOperator(ctx context.Context, name string, mode Mode, accept func(*hyperv1.HostedCluster) bool) (*Manager, error) {
	return h.StartHyperShiftOperator(ctx, name, mode, nil, accept)
}

// Stop stops the deployment player and every simulated pod it runs.
func (h *Harness) Stop() error { return h.Player.Stop() }

// HostedCluster is a hosted cluster CreateHostedCluster wrote.
type HostedCluster struct {
	Spec HostedClusterSpec
	h    *Harness
}

// CreateHostedCluster writes the hosted cluster's objects (HostedClusterSpec.Objects) in order, creating the
// HostedCluster's namespace if needed, as the HyperShift operator would. Managers are started by the Deployments
// (spec.Deployments) or by the caller.
func (h *Harness) CreateHostedCluster(ctx context.Context, spec HostedClusterSpec) (*HostedCluster, error) {
	if err := h.Client.Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: spec.Namespace}}); err != nil && !apierrors.IsAlreadyExists(err) {
		return nil, err
	}
	for _, o := range spec.Objects() {
		if err := h.Client.Create(ctx, o); err != nil {
			return nil, fmt.Errorf("creating %T %s/%s: %w", o, o.GetNamespace(), o.GetName(), err)
		}
	}
	return &HostedCluster{Spec: spec, h: h}, nil
}

// Namespace is the hosted control plane namespace, where the Cluster API objects live.
func (hc *HostedCluster) Namespace() string { return hc.Spec.ControlPlaneNamespace() }

// CAPIVersions are the served versions the harness reads Cluster API kinds at (core v1beta2, each platform's
// kinds at its Platform.Version).
var CAPIVersions = capiVersions()

func capiVersions() map[string]string {
	m := map[string]string{
		"Cluster": "v1beta2", "MachineDeployment": "v1beta2", "MachineSet": "v1beta2", "Machine": "v1beta2",
		"MachineHealthCheck": "v1beta2",
	}
	for _, p := range Platforms {
		for _, k := range p.Kinds() {
			m[k] = p.Version
		}
	}
	return m
}

// standardGroupOf is the standard group of a Cluster API kind.
func standardGroupOf(kind string) string {
	if p, ok := platformOf(kind); ok {
		return p.Group
	}
	return ClusterGroup
}

// NewCAPIObject is an empty unstructured Cluster API object of kind in g (at CAPIVersions' version).
func NewCAPIObject(g Groups, kind string) *unstructured.Unstructured {
	u := &unstructured.Unstructured{}
	u.SetAPIVersion(g.APIVersion(standardGroupOf(kind), CAPIVersions[kind]))
	u.SetKind(kind)
	return u
}

// ListCAPI lists the Cluster API objects of kind in namespace ("" for all), in g, with c.
func ListCAPI(ctx context.Context, c client.Client, g Groups, kind, namespace string, opts ...client.ListOption) ([]unstructured.Unstructured, error) {
	list := &unstructured.UnstructuredList{}
	list.SetAPIVersion(g.APIVersion(standardGroupOf(kind), CAPIVersions[kind]))
	list.SetKind(kind + "List")
	if err := c.List(ctx, list, append([]client.ListOption{client.InNamespace(namespace)}, opts...)...); err != nil {
		return nil, err
	}
	return list.Items, nil
}

// List lists the Cluster API objects of kind in the hosted cluster's namespace, in g, with c.
func (hc *HostedCluster) List(ctx context.Context, c client.Client, g Groups, kind string, opts ...client.ListOption) ([]unstructured.Unstructured, error) {
	return ListCAPI(ctx, c, g, kind, hc.Namespace(), opts...)
}

// Get reads the Cluster API object kind/name of the hosted cluster's namespace, in g, with c.
func (hc *HostedCluster) Get(ctx context.Context, c client.Client, g Groups, kind, name string) (*unstructured.Unstructured, error) {
	u := NewCAPIObject(g, kind)
	return u, c.Get(ctx, client.ObjectKey{Namespace: hc.Namespace(), Name: name}, u)
}

// ScaleMachineDeployment sets a MachineDeployment's spec.replicas (merge patch), in g, with c.
func (hc *HostedCluster) ScaleMachineDeployment(ctx context.Context, c client.Client, g Groups, name string, replicas int32) error {
	md := NewCAPIObject(g, "MachineDeployment")
	md.SetNamespace(hc.Namespace())
	md.SetName(name)
	patch := fmt.Appendf(nil, `{"spec":{"replicas":%d}}`, replicas)
	return c.Patch(ctx, md, client.RawPatch(types.MergePatchType, patch))
}

// ScaleDeployment sets a simulated Deployment's replicas (e.g. RoleCAPI to 0 stops the CAPI manager).
func (hc *HostedCluster) ScaleDeployment(ctx context.Context, role string, replicas int32) error {
	d := &appsv1.Deployment{ObjectMeta: metav1.ObjectMeta{Namespace: hc.Namespace(), Name: role}}
	return hc.h.Client.Patch(ctx, d, client.RawPatch(types.MergePatchType, fmt.Appendf(nil, `{"spec":{"replicas":%d}}`, replicas)))
}

// SetDeploymentProxied points (or stops pointing) the main container of a simulated Deployment's pod template at
// a sidecar on loopback (ProxiedEnv), which replaces its pods with ones in the other mode.
func (hc *HostedCluster) SetDeploymentProxied(ctx context.Context, role string, proxied bool) error {
	d := &appsv1.Deployment{}
	if err := hc.h.Client.Get(ctx, types.NamespacedName{Namespace: hc.Namespace(), Name: role}, d); err != nil {
		return err
	}
	ct := &d.Spec.Template.Spec.Containers[0]
	ct.Env = slices.DeleteFunc(ct.Env, func(e corev1.EnvVar) bool {
		return slices.ContainsFunc(ProxiedEnv, func(p corev1.EnvVar) bool { return p.Name == e.Name })
	})
	if proxied {
		ct.Env = append(ct.Env, ProxiedEnv...)
	}
	return hc.h.Client.Update(ctx, d)
}

// DeploymentsAvailable reports whether every simulated Deployment of the hosted cluster has observed its
// generation and has all its replicas updated and available (and none left over).
func (hc *HostedCluster) DeploymentsAvailable(ctx context.Context) (bool, error) {
	list := &appsv1.DeploymentList{}
	if err := hc.h.Client.List(ctx, list, client.InNamespace(hc.Namespace()), client.MatchingLabels{SimulateLabel: "true"}); err != nil {
		return false, err
	}
	for _, d := range list.Items {
		want := int32(1)
		if d.Spec.Replicas != nil {
			want = *d.Spec.Replicas
		}
		st := d.Status
		if st.ObservedGeneration < d.Generation || st.Replicas != want || st.UpdatedReplicas != want || st.AvailableReplicas != want {
			return false, nil
		}
	}
	return true, nil
}

// WaitDeploymentsAvailable polls DeploymentsAvailable every 100 ms until true or timeout.
func (hc *HostedCluster) WaitDeploymentsAvailable(ctx context.Context, timeout time.Duration) error {
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	for {
		ok, err := hc.DeploymentsAvailable(ctx)
		if err == nil && ok {
			return nil
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("simulated Deployments of %s not available: %w (last error %v)", hc.Namespace(), ctx.Err(), err)
		case <-time.After(100 * time.Millisecond):
		}
	}
}

// LegacyHostedCluster is a legacy hosted cluster as a migration finds it: in namespace, mds MachineDeployments
// <name>-np<i> of machines Machines each, a MachineHealthCheck per MachineDeployment, in the standard groups, with the
// simulated control plane Deployments running Direct.
func LegacyHostedCluster(namespace, name string, mds, machines int) HostedClusterSpec {
	spec := HostedClusterSpec{
		Namespace: namespace, Name: name, Groups: StandardGroups,
		MachineHealthChecks: true, Deployments: true, DeploymentReplicas: 1,
	}
	for i := range mds {
		spec.MachineDeployments = append(spec.MachineDeployments, MachineDeploymentSpec{Name: fmt.Sprintf("%s-np%d", name, i+1), Replicas: int32(machines)})
	}
	return spec
}

// MachineState is what the harness checks of a Machine.
type MachineState struct {
	Name, Phase, ProviderID, NodeName string
}

// MachineStates reads the hosted cluster's Machines in g, sorted by name.
func (hc *HostedCluster) MachineStates(ctx context.Context, g Groups) ([]MachineState, error) {
	items, err := hc.List(ctx, hc.h.Client, g, "Machine")
	if err != nil {
		return nil, err
	}
	out := make([]MachineState, 0, len(items))
	for _, m := range items {
		s := MachineState{Name: m.GetName()}
		s.Phase, _, _ = unstructured.NestedString(m.Object, "status", "phase")
		s.ProviderID, _, _ = unstructured.NestedString(m.Object, "spec", "providerID")
		s.NodeName, _, _ = unstructured.NestedString(m.Object, "status", "nodeRef", "name")
		out = append(out, s)
	}
	slices.SortFunc(out, func(a, b MachineState) int { return strings.Compare(a.Name, b.Name) })
	return out, nil
}

// MachinesRunning reports whether the hosted cluster has exactly want Machines in g, each Running with a
// providerID of a live ledger instance and a nodeRef to that instance's Node.
func (hc *HostedCluster) MachinesRunning(ctx context.Context, g Groups, want int) (bool, []MachineState, error) {
	ms, err := hc.MachineStates(ctx, g)
	if err != nil || len(ms) != want {
		return false, ms, err
	}
	for _, m := range ms {
		in, ok := hc.h.Ledger.Lookup(m.ProviderID)
		if m.Phase != "Running" || !ok || m.NodeName != in.Node {
			return false, ms, nil
		}
	}
	return true, ms, nil
}

// WaitMachinesRunning polls MachinesRunning every 100 ms until it holds or timeout.
func (hc *HostedCluster) WaitMachinesRunning(ctx context.Context, g Groups, want int, timeout time.Duration) ([]MachineState, error) {
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	for {
		ok, ms, err := hc.MachinesRunning(ctx, g, want)
		if ok {
			return ms, nil
		}
		select {
		case <-ctx.Done():
			return ms, fmt.Errorf("%d Running Machines in %s: %w; last %+v (error %v)", want, hc.Namespace(), ctx.Err(), ms, err)
		case <-time.After(100 * time.Millisecond):
		}
	}
}
