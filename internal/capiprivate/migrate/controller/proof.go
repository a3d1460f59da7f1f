package controller

import (
	"context"
	"fmt"

	hyperv1 "github.com/openshift/hypershift/api/hypershift/v1beta1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/dcm-sp/acm-cluster-sp/internal/capiprivate/migrate/plan"
)

// controlPlaneProof is why the migrator may not act on hc's control plane namespace ("" when it may): the
// namespace must carry HyperShift's label and hold a HostedControlPlane whose annotation names hc. A
// HostedCluster's annotations can be written by anyone who may patch it, so a run's namespace is proved, not
// derived: a HostedCluster whose <namespace>-<name> is an unrelated namespace, or another cluster's control plane,
// is refused before anything there is read or changed.
func (m *Migrator) controlPlaneProof(ctx context.Context, hc *hyperv1.HostedCluster) (string, error) {
	cp := ControlPlaneNamespace(hc)
	ns := &corev1.Namespace{}
	if err := m.c.Get(ctx, types.NamespacedName{Name: cp}, ns); err != nil {
		if apierrors.IsNotFound(err) {
			return fmt.Sprintf("its control plane namespace %s does not exist", cp), nil
		}
		return "", err
	}
	if ns.Labels[plan.HostedControlPlaneLabel] != "true" {
		return fmt.Sprintf("namespace %s is not a hosted control plane namespace (no %s=true)", cp, plan.HostedControlPlaneLabel), nil
	}
	hcps := &hyperv1.HostedControlPlaneList{}
	if err := m.c.List(ctx, hcps, client.InNamespace(cp)); err != nil {
		return "", err
	}
	for _, hcp := range hcps.Items {
		if plan.Designates(hcp.Annotations, hc.Namespace, hc.Name) {
			return "", nil
		}
	}
	return fmt.Sprintf("namespace %s holds no HostedControlPlane of %s/%s (annotation %s)", cp, hc.Namespace, hc.Name, plan.HostedClusterAnnotation), nil
}

// refuse reports a HostedCluster the migrator will not act on: a Warning event (a repeated one is counted by the
// recorder, not repeated) and a log line.
func (m *Migrator) refuse(hc *hyperv1.HostedCluster, why string) {
	m.opts.Log.Info("refused: not acting on this HostedCluster", "hostedcluster", hc.Namespace+"/"+hc.Name, "why", why,
		"phase", hc.Annotations[plan.PhaseAnnotation])
	if m.opts.Recorder != nil {
		m.opts.Recorder.Event(hc, corev1.EventTypeWarning, ReasonRefused, "capi-private migrate refuses to act: "+why)
	}
}

// ReasonRefused is the event reason of refuse.
const ReasonRefused = "MigrationRefused"
