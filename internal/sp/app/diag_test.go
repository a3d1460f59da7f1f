package app

import (
	"context"
	"fmt"
	"strings"
	"time"

	hyperv1 "github.com/openshift/hypershift/api/hypershift/v1beta1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/dcm-sp/acm-cluster-sp/internal/sp/meta"
)

// hubDiagnosis describes what the hub holds for an instance — the HostedCluster's release, version history,
// conditions and annotations, and its NodePools — so that a status wait that times out says which side stalled
// (the SP's decision or the simulated operator's progress).
func hubDiagnosis(id string) string {
	if testHub == nil {
		return ""
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	var hcs hyperv1.HostedClusterList
	if err := testHub.Client.List(ctx, &hcs, client.MatchingLabels{meta.LabelInstanceID: id}); err != nil {
		return "hub: " + err.Error()
	}
	var b strings.Builder
	for _, hc := range hcs.Items {
		fmt.Fprintf(&b, "\nHostedCluster %s/%s generation %d release %s deleting=%t", hc.Namespace, hc.Name, hc.Generation,
			hc.Spec.Release.Image, hc.DeletionTimestamp != nil)
		for k, v := range hc.Annotations {
			fmt.Fprintf(&b, "\n  annotation %s=%s", k, v)
		}
		if v := hc.Status.Version; v != nil {
			fmt.Fprintf(&b, "\n  version desired %s observedGeneration %d", v.Desired.Image, v.ObservedGeneration)
			for _, h := range v.History {
				fmt.Fprintf(&b, "\n  history %s %s %s", h.Version, h.State, h.Image)
			}
		}
		for _, c := range hc.Status.Conditions {
			fmt.Fprintf(&b, "\n  condition %s=%s %s (%s) generation %d", c.Type, c.Status, c.Reason, c.Message, c.ObservedGeneration)
		}
		var nps hyperv1.NodePoolList
		if err := testHub.Client.List(ctx, &nps, client.InNamespace(hc.Namespace)); err == nil {
			for _, np := range nps.Items {
				if np.Spec.ClusterName == hc.Name {
					fmt.Fprintf(&b, "\n  NodePool %s replicas %v status %d version %s", np.Name, np.Spec.Replicas, np.Status.Replicas, np.Status.Version)
				}
			}
		}
	}
	return b.String()
}
