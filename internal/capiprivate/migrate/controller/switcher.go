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

	"github.com/dcm-sp/acm-cluster-sp/internal/capiprivate/migrate/plan"
)

// DefaultDeployments are the per-control-plane Deployments a migration scales to 0 while it quiesces and brings back
// through the proxy when it switches (--deployments replaces them).
var DefaultDeployments = []string{"cluster-api", "capi-provider", "cluster-autoscaler", "machine-approver", "control-plane-operator"}

// Workloads is what the migrator needs to know of the controllers acting on a hosted cluster's CAPI objects.
type Workloads struct {
	// Present are the quiesced Deployments that exist.
	Present int
	// LegacyScaledDown: every Deployment without the proxy has recorded its replicas and is at 0.
	LegacyScaledDown bool
	// LegacyPods and ProxiedPods are pods of those Deployments, without and with the proxy.
	LegacyPods, ProxiedPods int
	// ProxiedReplicas is the desired replicas of Deployments with the proxy.
	ProxiedReplicas int
	// Switched: every Deployment has the proxy and its replicas back (no recorded count left).
	Switched bool
	// Available: every Deployment is Available with all its replicas updated.
	Available bool
	// Restored: no Deployment has the proxy or a recorded count.
	Restored bool
	// Fingerprint changes whenever one of the Deployments is written (name and resourceVersion of each): a quiet
	// window restarts when someone undoes the quiesce.
	Fingerprint string
}

// Switcher moves a hosted cluster's controllers between legacy and proxied mode. The built-in DeploymentSwitcher
// patches Deployments; CPO-managed workloads need the CPO's cooperation, which is not built.
type Switcher interface {
	// Observe reports the workloads of the hosted control plane namespace.
	Observe(ctx context.Context, namespace string) (Workloads, error)
	// ScaleDownLegacy records the replicas of every Deployment without the proxy and scales it to 0.
	ScaleDownLegacy(ctx context.Context, namespace string) error
	// Switch injects the proxy and restores the recorded replicas.
	Switch(ctx context.Context, namespace string) error
	// StopProxied records the replicas of every Deployment with the proxy and scales it to 0.
	StopProxied(ctx context.Context, namespace string) error
	// RestoreLegacy removes the proxy and restores the recorded replicas.
	RestoreLegacy(ctx context.Context, namespace string) error
}

// DeploymentSwitcher is the built-in Switcher: the proxy is "injected" by the pod template annotation
// plan.ProxyAnnotation (a deployment that honours it runs the proxy sidecar), and replicas are recorded in
// plan.OriginalReplicasAnnotation on the Deployment.
type DeploymentSwitcher struct {
	Client client.Client
	// Names of the Deployments (default DefaultDeployments).
	Names []string
}

func (s DeploymentSwitcher) names() []string {
	if len(s.Names) == 0 {
		return DefaultDeployments
	}
	return s.Names
}

func injected(d *appsv1.Deployment) bool {
	return d.Spec.Template.Annotations[plan.ProxyAnnotation] == plan.ProxyInjected
}

func replicas(d *appsv1.Deployment) int32 {
	if d.Spec.Replicas == nil {
		return 1
	}
	return *d.Spec.Replicas
}

func (s DeploymentSwitcher) list(ctx context.Context, namespace string) ([]*appsv1.Deployment, error) {
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

// Observe implements Switcher.
func (s DeploymentSwitcher) Observe(ctx context.Context, namespace string) (Workloads, error) {
	ds, err := s.list(ctx, namespace)
	if err != nil {
		return Workloads{}, err
	}
	w := Workloads{Present: len(ds), LegacyScaledDown: true, Switched: true, Available: true, Restored: true}
	var fp []string
	for _, d := range ds {
		fp = append(fp, d.Name+"@"+d.ResourceVersion)
		_, recorded := d.Annotations[plan.OriginalReplicasAnnotation]
		if injected(d) {
			w.ProxiedReplicas += int(replicas(d))
			w.Restored = false
		} else {
			w.Switched = false
			if !recorded || replicas(d) != 0 {
				w.LegacyScaledDown = false
			}
		}
		if recorded {
			w.Switched, w.Restored = false, false
		}
		st := d.Status
		want := replicas(d)
		if st.ObservedGeneration < d.Generation || st.Replicas != want || st.UpdatedReplicas != want || st.AvailableReplicas != want {
			w.Available = false
		}
		sel, err := labels.ValidatedSelectorFromSet(d.Spec.Selector.MatchLabels)
		if err != nil {
			return Workloads{}, err
		}
		pods := &corev1.PodList{}
		if err := s.Client.List(ctx, pods, client.InNamespace(namespace), client.MatchingLabelsSelector{Selector: sel}); err != nil {
			return Workloads{}, err
		}
		for _, p := range pods.Items {
			if p.Annotations[plan.ProxyAnnotation] == plan.ProxyInjected {
				w.ProxiedPods++
			} else {
				w.LegacyPods++
			}
		}
	}
	w.Fingerprint = strings.Join(fp, ",") // in the fixed order of the names
	return w, nil
}

// patch merge-patches a Deployment: replicas (nil: unchanged), the recorded count ("" removes it, "-" leaves
// it) and the proxy annotation of the pod template (nil: unchanged).
func (s DeploymentSwitcher) patch(ctx context.Context, d *appsv1.Deployment, replicas *int32, recorded string, proxy *bool) error {
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
	if proxy != nil {
		var v any
		if *proxy {
			v = plan.ProxyInjected
		}
		spec["template"] = map[string]any{"metadata": map[string]any{"annotations": map[string]any{plan.ProxyAnnotation: v}}}
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

func (s DeploymentSwitcher) scaleDown(ctx context.Context, namespace string, proxied bool) error {
	ds, err := s.list(ctx, namespace)
	if err != nil {
		return err
	}
	zero := int32(0)
	for _, d := range ds {
		if injected(d) != proxied {
			continue
		}
		rec := "-"
		if _, ok := d.Annotations[plan.OriginalReplicasAnnotation]; !ok {
			rec = strconv.Itoa(int(replicas(d)))
		} else if replicas(d) == 0 {
			continue
		}
		if err := s.patch(ctx, d, &zero, rec, nil); err != nil {
			return fmt.Errorf("scaling Deployment %s to 0: %w", d.Name, err)
		}
	}
	return nil
}

// ScaleDownLegacy implements Switcher.
func (s DeploymentSwitcher) ScaleDownLegacy(ctx context.Context, namespace string) error {
	return s.scaleDown(ctx, namespace, false)
}

// StopProxied implements Switcher.
func (s DeploymentSwitcher) StopProxied(ctx context.Context, namespace string) error {
	return s.scaleDown(ctx, namespace, true)
}

func (s DeploymentSwitcher) restore(ctx context.Context, namespace string, proxy bool) error {
	ds, err := s.list(ctx, namespace)
	if err != nil {
		return err
	}
	for _, d := range ds {
		n, ok := recordedReplicas(d)
		if !ok && injected(d) == proxy {
			continue
		}
		var r *int32
		if ok {
			r = &n
		}
		if err := s.patch(ctx, d, r, "", &proxy); err != nil {
			return fmt.Errorf("switching Deployment %s (proxy %v): %w", d.Name, proxy, err)
		}
	}
	return nil
}

// Switch implements Switcher.
func (s DeploymentSwitcher) Switch(ctx context.Context, namespace string) error {
	return s.restore(ctx, namespace, true)
}

// RestoreLegacy implements Switcher.
func (s DeploymentSwitcher) RestoreLegacy(ctx context.Context, namespace string) error {
	return s.restore(ctx, namespace, false)
}
