package capipods

import (
	"context"
	"errors"
	"fmt"
	"net"
	"slices"
	"sync"
	"time"

	"github.com/go-logr/logr"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/rest"
	"k8s.io/utils/ptr"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/builder"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/controller"
	"sigs.k8s.io/controller-runtime/pkg/controller/controllerutil"
	"sigs.k8s.io/controller-runtime/pkg/event"
	"sigs.k8s.io/controller-runtime/pkg/handler"
	"sigs.k8s.io/controller-runtime/pkg/predicate"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"
	"sigs.k8s.io/controller-runtime/pkg/source"
)

// KubeletFinalizer holds a simulated Pod object while its manager still runs: a deleted Pod stays (terminating)
// until the player has stopped what it ran, as a kubelet keeps a Pod until its containers have stopped.
const KubeletFinalizer = "capipods.capi-private.dcm.io/kubelet"

// ModeOf is the mode of a pod: Proxied when one of its containers points its in-cluster client at loopback
// (KUBERNETES_SERVICE_HOST 127.0.0.1, ::1 or localhost — a sidecar in the pod answers there), else Direct (the
// kubelet's service address, kube-apiserver itself).
func ModeOf(spec corev1.PodSpec) Mode {
	for _, c := range spec.Containers {
		for _, e := range c.Env {
			if e.Name != "KUBERNETES_SERVICE_HOST" || e.ValueFrom != nil {
				continue
			}
			if ip := net.ParseIP(e.Value); e.Value == "localhost" || (ip != nil && ip.IsLoopback()) {
				return Proxied
			}
		}
	}
	return Direct
}

// RoleOf is what a simulated pod runs: its RoleLabel (the simulated Deployments put it on their pod templates).
func RoleOf(pod *corev1.Pod) string { return pod.Labels[RoleLabel] }

// DeploymentPlayerOptions configure a DeploymentPlayer.
type DeploymentPlayerOptions struct {
	// Config is the rest.Config of a pod of role in namespace running in mode. An error leaves the pod not Ready
	// and retried (e.g. Proxied before a proxy exists).
	Config func(mode Mode, role, namespace string) (*rest.Config, error)
	// Components is what a pod of role runs in namespace; none makes an idle pod (a Pod object, no manager).
	Components func(role, namespace string) []Component
	// Log receives the player's and the pods' logs (default: discarded).
	Log logr.Logger
}

// DeploymentPlayer plays the kubelet for the Pods labelled SimulateLabel. kube-controller-manager's deployment and
// ReplicaSet controllers (capihub runs them) create those Pods from their Deployments through the API server, so
// admission webhooks (the sidecar injector among them) shape them as in a cluster; the player runs each admitted
// Pod as a simulated pod — a Manager in this process, Direct or Proxied after ModeOf its spec, with the role's
// Components, leader-elected per role — and writes the Pod's status (Ready once the manager is). Every Pod it runs
// carries KubeletFinalizer, which it removes only after the manager has stopped: "the Deployment's pods are gone"
// means their controllers write nothing any more. A manager that exits on its own is restarted (restartCount).
type DeploymentPlayer struct {
	opts    DeploymentPlayerOptions
	client  client.Client
	mgr     *Manager
	crashes chan event.TypedGenericEvent[*corev1.Pod]
	done    chan struct{} // closed by Stop

	mu      sync.Mutex
	pods    map[types.NamespacedName]*simPod
	stopped bool
}

type simPod struct {
	name       string
	deployment types.NamespacedName // its ReplicaSet's owner ("" name when it has none)
	mode       Mode
	mgr        *Manager // nil for an idle pod, or while it fails to start
	ready      bool
	restarts   int32
	lastErr    error
	stopping   bool
}

// StartDeploymentPlayer starts the player's own manager (the "kubelet") on cfg, an admin config straight to
// kube-apiserver.
func StartDeploymentPlayer(cfg *rest.Config, opts DeploymentPlayerOptions) (*DeploymentPlayer, error) {
	if opts.Log.GetSink() == nil {
		opts.Log = logr.Discard()
	}
	p := &DeploymentPlayer{
		opts:    opts,
		crashes: make(chan event.TypedGenericEvent[*corev1.Pod], 16),
		done:    make(chan struct{}),
		pods:    map[types.NamespacedName]*simPod{},
	}
	m, err := StartManager(cfg, ManagerOptions{Name: "deployment-player", Components: []Component{p}, Log: opts.Log.WithName("deployment-player")})
	if err != nil {
		return nil, err
	}
	p.mgr = m
	return p, nil
}

// Setup implements Component.
func (p *DeploymentPlayer) Setup(_ context.Context, mgr ctrl.Manager) error {
	p.client = mgr.GetClient()
	simulated, err := predicate.LabelSelectorPredicate(metav1.LabelSelector{MatchLabels: map[string]string{SimulateLabel: "true"}})
	if err != nil {
		return err
	}
	return ctrl.NewControllerManagedBy(mgr).Named("deployment-player").
		For(&corev1.Pod{}, builder.WithPredicates(simulated)).
		WatchesRawSource(source.Channel(p.crashes, &handler.TypedEnqueueRequestForObject[*corev1.Pod]{})).
		WithOptions(controller.Options{MaxConcurrentReconciles: 4}).
		Complete(p)
}

// WaitReady waits until the player's caches are synced.
func (p *DeploymentPlayer) WaitReady(ctx context.Context) error { return p.mgr.WaitReady(ctx) }

// PodStatus describes a simulated pod.
type PodStatus struct {
	Name     string
	Mode     Mode
	Ready    bool
	Restarts int32
	Err      error
	// Manager is the pod's manager (nil for an idle pod or one that failed to start).
	Manager *Manager
}

// Pods returns the running simulated pods of a Deployment (not those stopping), by name.
func (p *DeploymentPlayer) Pods(deployment types.NamespacedName) []PodStatus {
	p.mu.Lock()
	defer p.mu.Unlock()
	var out []PodStatus
	for _, sp := range p.pods {
		if sp.deployment == deployment && !sp.stopping {
			out = append(out, PodStatus{Name: sp.name, Mode: sp.mode, Ready: sp.ready, Restarts: sp.restarts, Err: sp.lastErr, Manager: sp.mgr})
		}
	}
	slices.SortFunc(out, func(a, b PodStatus) int { return cmpString(a.Name, b.Name) })
	return out
}

func cmpString(a, b string) int {
	switch {
	case a < b:
		return -1
	case a > b:
		return 1
	}
	return 0
}

// update changes a pod's fields under the lock Pods reads them with.
func (p *DeploymentPlayer) update(f func()) {
	p.mu.Lock()
	defer p.mu.Unlock()
	f()
}

// Reconcile runs or stops what a Pod object says. Reconciles of one Pod never run concurrently.
func (p *DeploymentPlayer) Reconcile(ctx context.Context, req reconcile.Request) (reconcile.Result, error) {
	pod := &corev1.Pod{}
	err := p.client.Get(ctx, req.NamespacedName, pod)
	if err != nil && !apierrors.IsNotFound(err) {
		return reconcile.Result{}, err
	}
	p.mu.Lock()
	sp, stopped := p.pods[req.NamespacedName], p.stopped
	p.mu.Unlock()
	switch {
	case apierrors.IsNotFound(err):
		if sp != nil {
			p.stopPod(sp)
			p.forget(req.NamespacedName)
		}
		return reconcile.Result{}, nil
	case !pod.DeletionTimestamp.IsZero():
		if sp != nil {
			p.stopPod(sp)
			p.forget(req.NamespacedName)
		}
		return reconcile.Result{}, p.removeFinalizer(ctx, pod)
	case stopped:
		return reconcile.Result{}, nil
	case !controllerutil.ContainsFinalizer(pod, KubeletFinalizer):
		orig := pod.DeepCopy()
		controllerutil.AddFinalizer(pod, KubeletFinalizer)
		return reconcile.Result{}, p.client.Patch(ctx, pod, client.MergeFromWithOptions(orig, client.MergeFromWithOptimisticLock{}))
	}
	if sp == nil {
		sp = &simPod{name: pod.Name, mode: ModeOf(pod.Spec), deployment: p.deploymentOf(ctx, pod)}
		p.update(func() { p.pods[req.NamespacedName] = sp })
		p.opts.Log.Info("starting pod", "pod", req.NamespacedName, "mode", sp.mode, "role", RoleOf(pod))
	}
	retry := p.run(ctx, req.NamespacedName, RoleOf(pod), sp)
	if err := p.writePodStatus(ctx, pod, sp); err != nil {
		return reconcile.Result{}, err
	}
	if retry {
		return reconcile.Result{RequeueAfter: 2 * time.Second}, nil
	}
	return reconcile.Result{}, nil
}

func (p *DeploymentPlayer) forget(key types.NamespacedName) {
	p.update(func() { delete(p.pods, key) })
}

// run starts what is not running (a new pod, one that failed to start, one whose manager exited on its own) and
// reports whether to retry.
func (p *DeploymentPlayer) run(ctx context.Context, key types.NamespacedName, role string, sp *simPod) bool {
	if m := sp.mgr; m != nil {
		select {
		case <-m.Done():
			p.opts.Log.Info("pod's manager exited, restarting", "pod", key, "error", m.Err())
			p.update(func() {
				sp.lastErr = fmt.Errorf("manager exited: %v", m.Err())
				sp.mgr, sp.ready = nil, false
				sp.restarts++
			})
		default:
		}
	}
	if sp.ready {
		return false
	}
	if err := p.startPod(ctx, key, role, sp); err != nil {
		p.update(func() { sp.lastErr = err })
		p.opts.Log.Info("pod not ready", "pod", key, "error", err.Error())
		return true
	}
	return false
}

// deploymentOf is the Deployment owning pod's ReplicaSet (empty when there is none).
func (p *DeploymentPlayer) deploymentOf(ctx context.Context, pod *corev1.Pod) types.NamespacedName {
	ref := metav1.GetControllerOf(pod)
	if ref == nil || ref.Kind != "ReplicaSet" {
		return types.NamespacedName{}
	}
	rs := &appsv1.ReplicaSet{}
	if err := p.client.Get(ctx, types.NamespacedName{Namespace: pod.Namespace, Name: ref.Name}, rs); err != nil {
		return types.NamespacedName{}
	}
	if d := metav1.GetControllerOf(rs); d != nil && d.Kind == "Deployment" {
		return types.NamespacedName{Namespace: pod.Namespace, Name: d.Name}
	}
	return types.NamespacedName{}
}

// startPod starts the pod's manager (unless the role runs nothing) and waits until it is ready.
func (p *DeploymentPlayer) startPod(ctx context.Context, key types.NamespacedName, role string, sp *simPod) error {
	components := p.opts.Components(role, key.Namespace)
	if len(components) == 0 {
		p.update(func() { sp.ready, sp.lastErr = true, nil })
		return nil
	}
	if sp.mgr == nil {
		cfg, err := p.opts.Config(sp.mode, role, key.Namespace)
		if err != nil {
			return err
		}
		m, err := StartManager(cfg, ManagerOptions{
			Name: sp.name, Namespace: key.Namespace, Components: components, LeaderElectionID: role + "-leader",
			Log: p.opts.Log.WithName(sp.name),
		})
		if err != nil {
			return err
		}
		p.update(func() { sp.mgr = m })
		go p.watchExit(key, sp, m)
	}
	readyCtx, cancel := context.WithTimeout(ctx, 2*time.Minute)
	defer cancel()
	if err := sp.mgr.WaitReady(readyCtx); err != nil {
		return err
	}
	p.update(func() { sp.ready, sp.lastErr = true, nil })
	return nil
}

// watchExit requeues the pod when its manager exits on its own.
func (p *DeploymentPlayer) watchExit(key types.NamespacedName, sp *simPod, m *Manager) {
	<-m.Done()
	p.mu.Lock()
	stopping := sp.stopping || p.stopped
	p.mu.Unlock()
	if stopping {
		return
	}
	select {
	case p.crashes <- event.TypedGenericEvent[*corev1.Pod]{Object: &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: key.Namespace, Name: key.Name}}}:
	case <-p.done:
	}
}

// stopPod stops the pod's manager and waits until it has returned.
func (p *DeploymentPlayer) stopPod(sp *simPod) {
	p.update(func() { sp.stopping = true })
	if sp.mgr != nil {
		if err := sp.mgr.Stop(); err != nil {
			p.opts.Log.Info("pod's manager stopped with an error", "pod", sp.name, "error", err.Error())
		}
	}
}

func (p *DeploymentPlayer) removeFinalizer(ctx context.Context, pod *corev1.Pod) error {
	if !controllerutil.ContainsFinalizer(pod, KubeletFinalizer) {
		return nil
	}
	orig := pod.DeepCopy()
	controllerutil.RemoveFinalizer(pod, KubeletFinalizer)
	return client.IgnoreNotFound(p.client.Patch(ctx, pod, client.MergeFromWithOptions(orig, client.MergeFromWithOptimisticLock{})))
}

func (p *DeploymentPlayer) writePodStatus(ctx context.Context, pod *corev1.Pod, sp *simPod) error {
	orig := pod.DeepCopy()
	p.mu.Lock()
	ready, restarts, lastErr := sp.ready, sp.restarts, sp.lastErr
	p.mu.Unlock()
	cond, phase, msg := corev1.ConditionFalse, corev1.PodPending, ""
	if ready {
		cond, phase = corev1.ConditionTrue, corev1.PodRunning
	}
	if lastErr != nil {
		msg = lastErr.Error()
	}
	pod.Status.Phase = phase
	pod.Status.Message = msg
	pod.Status.Conditions = []corev1.PodCondition{{Type: corev1.PodReady, Status: cond}, {Type: corev1.ContainersReady, Status: cond}}
	for i := range pod.Status.Conditions {
		pod.Status.Conditions[i].LastTransitionTime = transitionTime(orig.Status.Conditions, pod.Status.Conditions[i])
	}
	if ready && pod.Status.StartTime == nil {
		pod.Status.StartTime = ptr.To(metav1.Now())
	}
	container := corev1.ContainerStatus{Name: pod.Spec.Containers[0].Name, Ready: ready, RestartCount: restarts, Image: pod.Spec.Containers[0].Image}
	if ready {
		container.Started = ptr.To(true)
		container.State.Running = &corev1.ContainerStateRunning{StartedAt: *pod.Status.StartTime}
	} else {
		container.State.Waiting = &corev1.ContainerStateWaiting{Reason: "ManagerNotReady", Message: msg}
	}
	pod.Status.ContainerStatuses = []corev1.ContainerStatus{container}
	if equality.Semantic.DeepEqual(orig.Status, pod.Status) {
		return nil
	}
	return client.IgnoreNotFound(p.client.Status().Patch(ctx, pod, client.MergeFrom(orig)))
}

// transitionTime keeps a condition's lastTransitionTime while its status is unchanged.
func transitionTime(old []corev1.PodCondition, c corev1.PodCondition) metav1.Time {
	for _, o := range old {
		if o.Type == c.Type && o.Status == c.Status && !o.LastTransitionTime.IsZero() {
			return o.LastTransitionTime
		}
	}
	return metav1.Now()
}

// Stop stops the player and then every simulated pod (their Pod objects keep KubeletFinalizer: nothing runs them
// any more).
func (p *DeploymentPlayer) Stop() error {
	p.mu.Lock()
	p.stopped = true
	p.mu.Unlock()
	close(p.done)
	err := p.mgr.Stop()
	p.mu.Lock()
	all := p.pods
	p.pods = map[types.NamespacedName]*simPod{}
	p.mu.Unlock()
	for _, sp := range all {
		p.stopPod(sp)
	}
	if errors.Is(err, context.Canceled) {
		err = nil
	}
	return err
}
