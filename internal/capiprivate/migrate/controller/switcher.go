package controller

import (
	"context"
	"fmt"
	"strconv"
	"strings"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/dcm-sp/acm-cluster-sp/internal/capiprivate/inject"
	"github.com/dcm-sp/acm-cluster-sp/internal/capiprivate/migrate/plan"
)

// DefaultDeployments are the per-control-plane Deployments a migration quiesces (scales to 0 before the copy and
// back at the switch): the ones that write CAPI objects, and the control-plane-operator.
var DefaultDeployments = []string{"cluster-api", "capi-provider", "cluster-autoscaler", "machine-approver", "control-plane-operator"}

// Workloads is what the migrator needs to know of the controllers acting on a hosted cluster's CAPI objects: the
// quiesced Deployments and the Pods of the CAPI-dependent components (the injector's selection, which includes
// readers such as the hosted-cluster-config-operator and karpenter-operator that are restarted but not quiesced).
// Pod counts include Pods being deleted: a terminating Pod still runs.
type Workloads struct {
	// Present are the quiesced Deployments that exist.
	Present int
	// Marked: the namespace carries the injector's marker (inject.MarkerLabel).
	Marked bool
	// LegacyScaledDown: every quiesced Deployment has recorded its replicas and is at 0.
	LegacyScaledDown bool
	// LegacyPods and ProxiedPods are Pods of the quiesced Deployments without and with the sidecar.
	LegacyPods, ProxiedPods int
	// UninjectedPods are Pods of CAPI-dependent components without the sidecar: they still see the standard
	// groups. StalePods are those of them not yet deleted.
	UninjectedPods, StalePods int
	// InjectedPods are Pods of CAPI-dependent components with the sidecar; Restarts sums their containers'
	// restart counts (the sidecar's included).
	InjectedPods int
	Restarts     int32
	// ProxiedReplicas is the desired replicas of the quiesced Deployments while the namespace is marked.
	ProxiedReplicas int
	// Switched: marked, no recorded count left, and no CAPI-dependent Pod without the sidecar that is not already
	// being deleted (every new Pod carries it).
	Switched bool
	// Available: every quiesced Deployment is Available with all its replicas updated.
	Available bool
	// Restored: not marked, no recorded count, and no CAPI-dependent Pod with the sidecar left.
	Restored bool
	// Fingerprint changes whenever the spec of one of the quiesced Deployments changes or its recorded replica count
	// does (name, generation and that annotation of each): a quiet window restarts when someone undoes the quiesce.
	// The deployment controller's status writes (the scaled-down pods going away) do not change it: they are no
	// external writer.
	Fingerprint string
}

// Switcher moves a hosted cluster's controllers between legacy and proxied mode.
type Switcher interface {
	// Observe reports the workloads of the hosted control plane namespace.
	Observe(ctx context.Context, namespace string) (Workloads, error)
	// ScaleDownLegacy records the replicas of every quiesced Deployment and scales it to 0.
	ScaleDownLegacy(ctx context.Context, namespace string) error
	// Switch marks the namespace for injection, restarts the CAPI-dependent Pods without the sidecar and restores
	// the recorded replicas.
	Switch(ctx context.Context, namespace string) error
	// StopProxied records the replicas of every quiesced Deployment and scales it to 0 (rollback).
	StopProxied(ctx context.Context, namespace string) error
	// RestoreLegacy unmarks the namespace, restarts the CAPI-dependent Pods with the sidecar and restores the
	// recorded replicas.
	RestoreLegacy(ctx context.Context, namespace string) error
}

// RolloutSwitcher is the built-in Switcher: a rollout through the sidecar injector. HyperShift owns and re-renders
// its Deployments (a template edit would be reverted), so the proxy is never put into a Deployment: the switch
// sets the injector's marker on the hosted control plane namespace and deletes the Pods of the CAPI-dependent
// components; their ReplicaSets recreate them, and the injector adds the sidecar at admission. Rollback removes the
// marker and deletes the injected Pods. Replicas of the quiesced Deployments are recorded in
// plan.OriginalReplicasAnnotation.
type RolloutSwitcher struct {
	Client client.Client
	// Names of the quiesced Deployments (default DefaultDeployments).
	Names []string
	// Selection decides which Pods belong to a CAPI-dependent component: the injector's own configuration
	// (inject.Config.Target; nil: inject.DefaultConfig's component table).
	Selection *inject.Config
}

func (s RolloutSwitcher) names() []string {
	if len(s.Names) == 0 {
		return DefaultDeployments
	}
	return s.Names
}

func (s RolloutSwitcher) selection() *inject.Config {
	if s.Selection == nil {
		c := inject.DefaultConfig("")
		return &c
	}
	return s.Selection
}

// dependent reports whether pod belongs to a CAPI-dependent component.
func (s RolloutSwitcher) dependent(pod *corev1.Pod) bool {
	_, _, ok := s.selection().Target(pod)
	return ok
}

func replicas(d *appsv1.Deployment) int32 {
	if d.Spec.Replicas == nil {
		return 1
	}
	return *d.Spec.Replicas
}

func (s RolloutSwitcher) list(ctx context.Context, namespace string) ([]*appsv1.Deployment, error) {
	var out []*appsv1.Deployment
	for _, n := range s.names() {
		d := &appsv1.Deployment{}
		if err := s.Client.Get(ctx, types.NamespacedName{Namespace: namespace, Name: n}, d); err != nil {
			if apierrors.IsNotFound(err) {
				continue
			}
			return nil, err
		}
		out = append(out, d)
	}
	return out, nil
}

func (s RolloutSwitcher) marked(ctx context.Context, namespace string) (bool, error) {
	ns := &corev1.Namespace{}
	if err := s.Client.Get(ctx, types.NamespacedName{Name: namespace}, ns); err != nil {
		return false, err
	}
	return ns.Labels[inject.MarkerLabel] == inject.MarkerValue, nil
}

// Observe implements Switcher.
func (s RolloutSwitcher) Observe(ctx context.Context, namespace string) (Workloads, error) {
	ds, err := s.list(ctx, namespace)
	if err != nil {
		return Workloads{}, err
	}
	marked, err := s.marked(ctx, namespace)
	if err != nil {
		return Workloads{}, err
	}
	pods := &corev1.PodList{}
	if err := s.Client.List(ctx, pods, client.InNamespace(namespace)); err != nil {
		return Workloads{}, err
	}
	w := Workloads{Present: len(ds), Marked: marked, LegacyScaledDown: true, Available: true}
	recorded := false
	var fp []string
	for _, d := range ds {
		orig, rec := d.Annotations[plan.OriginalReplicasAnnotation]
		fp = append(fp, fmt.Sprintf("%s@%d/%s", d.Name, d.Generation, orig))
		recorded = recorded || rec
		if !rec || replicas(d) != 0 {
			w.LegacyScaledDown = false
		}
		if marked {
			w.ProxiedReplicas += int(replicas(d))
		}
		st, want := d.Status, replicas(d)
		if st.ObservedGeneration < d.Generation || st.Replicas != want || st.UpdatedReplicas != want || st.AvailableReplicas != want {
			w.Available = false
		}
		if err := countDeploymentPods(d, pods.Items, &w); err != nil {
			return Workloads{}, err
		}
	}
	for i := range pods.Items {
		p := &pods.Items[i]
		if !s.dependent(p) {
			continue
		}
		switch {
		case inject.PodInjected(p):
			w.InjectedPods++
			w.Restarts += restarts(p)
		case p.DeletionTimestamp == nil:
			w.UninjectedPods++
			w.StalePods++
		default:
			w.UninjectedPods++
		}
	}
	w.Switched = marked && !recorded && w.StalePods == 0
	w.Restored = !marked && !recorded && w.InjectedPods == 0
	w.Fingerprint = strings.Join(fp, ",") // in the fixed order of the names
	return w, nil
}

// countDeploymentPods counts d's Pods with and without the sidecar.
func countDeploymentPods(d *appsv1.Deployment, pods []corev1.Pod, w *Workloads) error {
	sel, err := labels.ValidatedSelectorFromSet(d.Spec.Selector.MatchLabels)
	if err != nil {
		return err
	}
	for i := range pods {
		if !sel.Matches(labels.Set(pods[i].Labels)) {
			continue
		}
		if inject.PodInjected(&pods[i]) {
			w.ProxiedPods++
		} else {
			w.LegacyPods++
		}
	}
	return nil
}

func restarts(p *corev1.Pod) int32 {
	var n int32
	for _, list := range [][]corev1.ContainerStatus{p.Status.InitContainerStatuses, p.Status.ContainerStatuses} {
		for _, c := range list {
			n += c.RestartCount
		}
	}
	return n
}

// patch merge-patches a Deployment: replicas (nil: unchanged) and the recorded count ("" removes it, "-" leaves
// it).
func (s RolloutSwitcher) patch(ctx context.Context, d *appsv1.Deployment, replicas *int32, recorded string) error {
	meta := map[string]any{}
	switch recorded {
	case "-":
	case "":
		meta[plan.OriginalReplicasAnnotation] = nil
	default:
		meta[plan.OriginalReplicasAnnotation] = recorded
	}
	spec := map[string]any{}
	if replicas != nil {
		spec["replicas"] = *replicas
	}
	body := map[string]any{"metadata": map[string]any{"annotations": meta, "resourceVersion": d.ResourceVersion}, "spec": spec}
	return s.Client.Patch(ctx, d, rawMerge(body))
}

func recordedReplicas(d *appsv1.Deployment) (int32, bool) {
	v, ok := d.Annotations[plan.OriginalReplicasAnnotation]
	if !ok {
		return 0, false
	}
	n, err := strconv.ParseInt(v, 10, 32)
	if err != nil {
		return 0, false
	}
	return int32(n), true
}

// scaleDown records the replicas of every quiesced Deployment not recorded yet and scales it to 0.
func (s RolloutSwitcher) scaleDown(ctx context.Context, namespace string) error {
	ds, err := s.list(ctx, namespace)
	if err != nil {
		return err
	}
	zero := int32(0)
	for _, d := range ds {
		rec := "-"
		if _, ok := d.Annotations[plan.OriginalReplicasAnnotation]; !ok {
			rec = strconv.Itoa(int(replicas(d)))
		} else if replicas(d) == 0 {
			continue
		}
		if err := s.patch(ctx, d, &zero, rec); err != nil {
			return fmt.Errorf("scaling Deployment %s to 0: %w", d.Name, err)
		}
	}
	return nil
}

// ScaleDownLegacy implements Switcher.
func (s RolloutSwitcher) ScaleDownLegacy(ctx context.Context, namespace string) error {
	return s.scaleDown(ctx, namespace)
}

// StopProxied implements Switcher.
func (s RolloutSwitcher) StopProxied(ctx context.Context, namespace string) error {
	return s.scaleDown(ctx, namespace)
}

// rollout sets the marker (or removes it), deletes the CAPI-dependent Pods whose sidecar does not match and
// restores the recorded replicas. The marker comes first, so every Pod created from then on is admitted in the
// new mode; a Pod admitted before kube-apiserver saw the marker is deleted again by the next Switch.
func (s RolloutSwitcher) rollout(ctx context.Context, namespace string, proxied bool) error {
	var v any
	if proxied {
		v = inject.MarkerValue
	}
	ns := &corev1.Namespace{}
	ns.Name = namespace
	if err := s.Client.Patch(ctx, ns, rawMerge(map[string]any{"metadata": map[string]any{"labels": map[string]any{inject.MarkerLabel: v}}})); err != nil {
		return fmt.Errorf("marking namespace %s (proxied %v): %w", namespace, proxied, err)
	}
	pods := &corev1.PodList{}
	if err := s.Client.List(ctx, pods, client.InNamespace(namespace)); err != nil {
		return err
	}
	for i := range pods.Items {
		p := &pods.Items[i]
		if p.DeletionTimestamp != nil || !s.dependent(p) || inject.PodInjected(p) == proxied {
			continue
		}
		if err := s.Client.Delete(ctx, p, client.Preconditions{UID: &p.UID}); err != nil && !apierrors.IsNotFound(err) && !apierrors.IsConflict(err) {
			return fmt.Errorf("restarting Pod %s: %w", p.Name, err)
		}
	}
	ds, err := s.list(ctx, namespace)
	if err != nil {
		return err
	}
	for _, d := range ds {
		if n, ok := recordedReplicas(d); ok {
			if err := s.patch(ctx, d, &n, ""); err != nil {
				return fmt.Errorf("restoring Deployment %s: %w", d.Name, err)
			}
		}
	}
	return nil
}

// Switch implements Switcher.
func (s RolloutSwitcher) Switch(ctx context.Context, namespace string) error {
	return s.rollout(ctx, namespace, true)
}

// RestoreLegacy implements Switcher.
func (s RolloutSwitcher) RestoreLegacy(ctx context.Context, namespace string) error {
	return s.rollout(ctx, namespace, false)
}
