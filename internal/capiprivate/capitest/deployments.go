package capitest

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"hash/fnv"
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

// PodTemplateHashLabel is the label of a simulated Pod naming its Deployment's template (as the ReplicaSet
// controller's pod-template-hash).
const PodTemplateHashLabel = "pod-template-hash"

// TemplateHash is a short digest of a pod template: a Deployment whose template changes gets new pods.
func TemplateHash(t corev1.PodTemplateSpec) string {
	b, err := json.Marshal(t)
	if err != nil {
		panic(err) // a PodTemplateSpec always marshals
	}
	h := fnv.New32a()
	_, _ = h.Write(b)
	return fmt.Sprintf("%08x", h.Sum32())
}

// ModeOf is the mode of a pod template's pods: Proxied when the proxy sidecar is injected (ProxyAnnotation).
func ModeOf(t corev1.PodTemplateSpec) Mode {
	if t.Annotations[ProxyAnnotation] == ProxyInjected {
		return Proxied
	}
	return Direct
}

// RoleOf is what a simulated Deployment's pods run: its RoleLabel, else its name.
func RoleOf(d *appsv1.Deployment) string {
	if r := d.Labels[RoleLabel]; r != "" {
		return r
	}
	return d.Name
}

// podState is what planPods needs of a running pod.
type podState struct {
	Hash string
}

// planPods decides, Recreate-style, which pods stop (indexes into pods: every pod of an old template, then the
// newest excess ones) and how many pods of the desired template start.
func planPods(desiredHash string, replicas int, pods []podState) (stop []int, start int) {
	current := 0
	for i, p := range pods {
		if p.Hash != desiredHash {
			stop = append(stop, i)
		}
	}
	if len(stop) > 0 { // Recreate: the new template starts only once every old pod is gone
		for i := range pods {
			if pods[i].Hash == desiredHash {
				current++
			}
		}
		if current > replicas {
			stop = append(stop, excess(desiredHash, replicas, pods)...)
			current = replicas
		}
		return stop, max(replicas-current, 0)
	}
	if len(pods) > replicas {
		return excess(desiredHash, replicas, pods), 0
	}
	return nil, replicas - len(pods)
}

// excess are the newest pods of hash beyond the first replicas.
func excess(hash string, replicas int, pods []podState) []int {
	var out []int
	kept := 0
	for i, p := range pods {
		if p.Hash != hash {
			continue
		}
		if kept < replicas {
			kept++
			continue
		}
		out = append(out, i)
	}
	return out
}

// podSummary is what deploymentStatus needs of a running pod.
type podSummary struct {
	Hash  string
	Ready bool
}

// deploymentStatus is the Deployment's status for its pods, as the deployment controller reports it.
func deploymentStatus(generation int64, desiredHash string, replicas int32, pods []podSummary) appsv1.DeploymentStatus {
	st := appsv1.DeploymentStatus{ObservedGeneration: generation, Replicas: int32(len(pods))}
	for _, p := range pods {
		if p.Hash == desiredHash {
			st.UpdatedReplicas++
		}
		if p.Ready {
			st.ReadyReplicas++
			st.AvailableReplicas++
		}
	}
	st.UnavailableReplicas = max(replicas-st.AvailableReplicas, 0)
	available := metav1.ConditionTrue
	availableReason := "MinimumReplicasAvailable"
	if st.AvailableReplicas < replicas {
		available, availableReason = metav1.ConditionFalse, "MinimumReplicasUnavailable"
	}
	progressingReason := "NewReplicaSetAvailable"
	if st.UpdatedReplicas != replicas || st.Replicas != replicas || st.AvailableReplicas != replicas {
		progressingReason = "ReplicaSetUpdated"
	}
	st.Conditions = []appsv1.DeploymentCondition{
		{Type: appsv1.DeploymentAvailable, Status: corev1.ConditionStatus(available), Reason: availableReason},
		{Type: appsv1.DeploymentProgressing, Status: corev1.ConditionTrue, Reason: progressingReason},
	}
	return st
}

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

// DeploymentPlayer plays the deployment controller and the kubelet for the Deployments labelled SimulateLabel: for each
// replica of the current pod template it runs a simulated pod, a Manager in this process (Direct or Proxied after
// ModeOf, with the role's Components, leader-elected per role), and writes a Pod object (labels, annotations and spec
// of the template, owned by the Deployment) and the Deployment's status. A template change replaces every pod
// (Recreate); scaling down stops the newest. A pod's Pod object is deleted only after its manager has stopped, so "the
// Deployment's pods are gone" means its controllers write nothing any more. A manager that exits on its own is
// restarted (restartCount).
type DeploymentPlayer struct {
	opts    DeploymentPlayerOptions
	client  client.Client
	mgr     *Manager
	crashes chan event.TypedGenericEvent[*appsv1.Deployment]
	done    chan struct{} // closed by Stop

	mu          sync.Mutex
	deployments map[types.NamespacedName][]*simPod
	stopped     bool
}

type simPod struct {
	name, hash string
	mode       Mode
	mgr        *Manager // nil for an idle pod, or while it fails to start
	ready      bool
	restarts   int32
	lastErr    error
	stopping   bool
}

// StartDeploymentPlayer starts the player's own manager (the "kube-controller-manager") on cfg, an admin config
// straight to kube-apiserver.
func StartDeploymentPlayer(cfg *rest.Config, opts DeploymentPlayerOptions) (*DeploymentPlayer, error) {
	if opts.Log.GetSink() == nil {
		opts.Log = logr.Discard()
	}
	p := &DeploymentPlayer{
		opts:        opts,
		crashes:     make(chan event.TypedGenericEvent[*appsv1.Deployment], 16),
		done:        make(chan struct{}),
		deployments: map[types.NamespacedName][]*simPod{},
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
		For(&appsv1.Deployment{}, builder.WithPredicates(simulated)).
		WatchesRawSource(source.Channel(p.crashes, &handler.TypedEnqueueRequestForObject[*appsv1.Deployment]{})).
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

// Pods returns the running simulated pods of a Deployment.
func (p *DeploymentPlayer) Pods(deployment types.NamespacedName) []PodStatus {
	p.mu.Lock()
	defer p.mu.Unlock()
	var out []PodStatus
	for _, sp := range p.deployments[deployment] {
		out = append(out, PodStatus{Name: sp.name, Mode: sp.mode, Ready: sp.ready, Restarts: sp.restarts, Err: sp.lastErr, Manager: sp.mgr})
	}
	return out
}

func (p *DeploymentPlayer) pods(key types.NamespacedName) []*simPod {
	p.mu.Lock()
	defer p.mu.Unlock()
	return append([]*simPod(nil), p.deployments[key]...)
}

func (p *DeploymentPlayer) setPods(key types.NamespacedName, pods []*simPod) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if len(pods) == 0 {
		delete(p.deployments, key)
		return
	}
	p.deployments[key] = pods
}

// Reconcile makes the running pods match the Deployment. Reconciles of one Deployment never run concurrently.
func (p *DeploymentPlayer) Reconcile(ctx context.Context, req reconcile.Request) (reconcile.Result, error) {
	log := p.opts.Log.WithValues("deployment", req.NamespacedName)
	d := &appsv1.Deployment{}
	err := p.client.Get(ctx, req.NamespacedName, d)
	if err != nil && !apierrors.IsNotFound(err) {
		return reconcile.Result{}, err
	}
	pods := p.pods(req.NamespacedName)
	if apierrors.IsNotFound(err) || !d.DeletionTimestamp.IsZero() {
		for _, sp := range pods {
			p.stopPod(ctx, req.Namespace, sp)
		}
		p.setPods(req.NamespacedName, nil)
		return reconcile.Result{}, nil
	}
	p.mu.Lock()
	stopped := p.stopped
	p.mu.Unlock()
	if stopped {
		return reconcile.Result{}, nil
	}

	hash, mode, role := TemplateHash(d.Spec.Template), ModeOf(d.Spec.Template), RoleOf(d)
	replicas := int(ptr.Deref(d.Spec.Replicas, 1))
	states := make([]podState, len(pods))
	for i, sp := range pods {
		states[i] = podState{Hash: sp.hash}
	}
	stop, start := planPods(hash, replicas, states)
	if len(stop) > 0 {
		stopSet := map[int]bool{}
		for _, i := range stop {
			stopSet[i] = true
			log.Info("stopping pod", "pod", pods[i].name)
			p.stopPod(ctx, req.Namespace, pods[i])
		}
		var kept []*simPod
		for i, sp := range pods {
			if !stopSet[i] {
				kept = append(kept, sp)
			}
		}
		pods = kept
		p.setPods(req.NamespacedName, pods)
	}
	for range start {
		sp := &simPod{name: fmt.Sprintf("%s-%s-%s", d.Name, hash, randomSuffix()), hash: hash, mode: mode}
		if err := p.createPodObject(ctx, d, sp); err != nil {
			return reconcile.Result{}, err
		}
		pods = append(pods, sp)
		p.setPods(req.NamespacedName, pods)
		log.Info("starting pod", "pod", sp.name, "mode", mode, "role", role)
	}

	// Start what is not running: new pods, pods that failed to start, pods whose manager exited on its own.
	retry := false
	for _, sp := range pods {
		if m := sp.mgr; m != nil {
			select {
			case <-m.Done():
				log.Info("pod's manager exited, restarting", "pod", sp.name, "error", m.Err())
				p.update(func() {
					sp.lastErr = fmt.Errorf("manager exited: %v", m.Err())
					sp.mgr, sp.ready = nil, false
					sp.restarts++
				})
			default:
			}
		}
		if sp.ready {
			continue
		}
		if err := p.startPod(ctx, req.NamespacedName, role, sp); err != nil {
			p.update(func() { sp.lastErr = err })
			log.Info("pod not ready", "pod", sp.name, "error", err.Error())
			retry = true
		}
		if err := p.writePodStatus(ctx, req.Namespace, sp); err != nil {
			return reconcile.Result{}, err
		}
	}

	summaries := make([]podSummary, len(pods))
	for i, sp := range pods {
		summaries[i] = podSummary{Hash: sp.hash, Ready: sp.ready}
	}
	st := deploymentStatus(d.Generation, hash, int32(replicas), summaries)
	if !deploymentStatusEqual(d.Status, st) {
		orig := d.DeepCopy()
		d.Status = st
		if err := p.client.Status().Patch(ctx, d, client.MergeFrom(orig)); err != nil {
			return reconcile.Result{}, err
		}
	}
	if retry {
		return reconcile.Result{RequeueAfter: 2 * time.Second}, nil
	}
	return reconcile.Result{}, nil
}

func deploymentStatusEqual(a, b appsv1.DeploymentStatus) bool {
	strip := func(s appsv1.DeploymentStatus) appsv1.DeploymentStatus {
		s = *s.DeepCopy()
		for i := range s.Conditions {
			s.Conditions[i].LastUpdateTime, s.Conditions[i].LastTransitionTime, s.Conditions[i].Message = metav1.Time{}, metav1.Time{}, ""
		}
		return s
	}
	return equality.Semantic.DeepEqual(strip(a), strip(b))
}

// update changes a pod's fields under the lock Pods reads them with.
func (p *DeploymentPlayer) update(f func()) {
	p.mu.Lock()
	defer p.mu.Unlock()
	f()
}

func randomSuffix() string {
	b := make([]byte, 3)
	_, _ = rand.Read(b)
	return hex.EncodeToString(b)[:5]
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
		go func() {
			<-m.Done()
			p.mu.Lock()
			stopping := sp.stopping || p.stopped
			p.mu.Unlock()
			if !stopping {
				select {
				case p.crashes <- event.TypedGenericEvent[*appsv1.Deployment]{Object: &appsv1.Deployment{ObjectMeta: metav1.ObjectMeta{Namespace: key.Namespace, Name: key.Name}}}:
				case <-p.done:
				}
			}
		}()
	}
	readyCtx, cancel := context.WithTimeout(ctx, 2*time.Minute)
	defer cancel()
	if err := sp.mgr.WaitReady(readyCtx); err != nil {
		return err
	}
	p.update(func() { sp.ready, sp.lastErr = true, nil })
	return nil
}

// stopPod stops the pod's manager, waits until it has returned, then deletes its Pod object.
func (p *DeploymentPlayer) stopPod(ctx context.Context, namespace string, sp *simPod) {
	p.mu.Lock()
	sp.stopping = true
	p.mu.Unlock()
	if sp.mgr != nil {
		if err := sp.mgr.Stop(); err != nil {
			p.opts.Log.Info("pod's manager stopped with an error", "pod", sp.name, "error", err.Error())
		}
	}
	pod := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: namespace, Name: sp.name}}
	if err := p.client.Delete(ctx, pod, client.GracePeriodSeconds(0)); err != nil && !apierrors.IsNotFound(err) {
		p.opts.Log.Info("deleting a Pod", "pod", sp.name, "error", err.Error())
	}
}

func (p *DeploymentPlayer) createPodObject(ctx context.Context, d *appsv1.Deployment, sp *simPod) error {
	pod := &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{
			Namespace: d.Namespace, Name: sp.name,
			Labels:      map[string]string{PodTemplateHashLabel: sp.hash},
			Annotations: d.Spec.Template.Annotations,
		},
		Spec: *d.Spec.Template.Spec.DeepCopy(),
	}
	for k, v := range d.Spec.Template.Labels {
		pod.Labels[k] = v
	}
	if err := controllerutil.SetControllerReference(d, pod, p.client.Scheme()); err != nil {
		return err
	}
	return p.client.Create(ctx, pod)
}

func (p *DeploymentPlayer) writePodStatus(ctx context.Context, namespace string, sp *simPod) error {
	pod := &corev1.Pod{}
	if err := p.client.Get(ctx, client.ObjectKey{Namespace: namespace, Name: sp.name}, pod); err != nil {
		return client.IgnoreNotFound(err)
	}
	orig := pod.DeepCopy()
	ready, phase, msg := corev1.ConditionFalse, corev1.PodPending, ""
	if sp.ready {
		ready, phase = corev1.ConditionTrue, corev1.PodRunning
	}
	if sp.lastErr != nil {
		msg = sp.lastErr.Error()
	}
	pod.Status.Phase = phase
	pod.Status.Message = msg
	pod.Status.Conditions = []corev1.PodCondition{{Type: corev1.PodReady, Status: ready}, {Type: corev1.ContainersReady, Status: ready}}
	if sp.ready && pod.Status.StartTime == nil {
		pod.Status.StartTime = ptr.To(metav1.Now())
	}
	container := corev1.ContainerStatus{Name: "manager", Ready: sp.ready, RestartCount: sp.restarts, Image: pod.Spec.Containers[0].Image}
	if sp.ready {
		container.Started = ptr.To(true)
		container.State.Running = &corev1.ContainerStateRunning{StartedAt: *pod.Status.StartTime}
	} else {
		container.State.Waiting = &corev1.ContainerStateWaiting{Reason: "ManagerNotReady", Message: msg}
	}
	pod.Status.ContainerStatuses = []corev1.ContainerStatus{container}
	if equality.Semantic.DeepEqual(orig.Status, pod.Status) {
		return nil
	}
	return p.client.Status().Patch(ctx, pod, client.MergeFrom(orig))
}

// Stop stops the player and then every simulated pod (deleting their Pod objects).
func (p *DeploymentPlayer) Stop() error {
	p.mu.Lock()
	p.stopped = true
	p.mu.Unlock()
	close(p.done)
	err := p.mgr.Stop()
	p.mu.Lock()
	all := p.deployments
	p.deployments = map[types.NamespacedName][]*simPod{}
	p.mu.Unlock()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	for key, pods := range all {
		for _, sp := range pods {
			p.stopPod(ctx, key.Namespace, sp)
		}
	}
	if errors.Is(err, context.Canceled) {
		err = nil
	}
	return err
}
