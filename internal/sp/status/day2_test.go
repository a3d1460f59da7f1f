package status

import (
	"strings"
	"testing"
	"time"

	hyperv1 "github.com/openshift/hypershift/api/hypershift/v1beta1"
	corev1 "k8s.io/api/core/v1"

	"github.com/dcm-sp/acm-cluster-sp/internal/sp/operation"
)

func (b *hcBuilder) op(r operation.Record) *hcBuilder {
	if b.hc.Annotations == nil {
		b.hc.Annotations = map[string]string{}
	}
	b.hc.Annotations[operation.Annotation] = r.Encode()
	return b
}

func (b *hcBuilder) image(img string) *hcBuilder {
	b.hc.Spec.Release.Image = img
	return b
}

func upgradeTo(phase operation.Phase) operation.Record {
	return operation.Record{ID: "op1", Kind: operation.Upgrade, From: "4.17.12", To: "4.18.22", Phase: phase, Message: "last words",
		StartedAt: now.Add(-10 * time.Minute), Deadline: now.Add(80 * time.Minute), ReleaseImage: "quay.io/x:4.18.22-multi", Replicas: 3}
}

// Day-2 rows (docs/day2.md, section "Status"): an open operation reads UPDATING with its progress, never PROVISIONING;
// its failure, its deadline and a long control-plane outage are FAILED and UNAVAILABLE; a surge or autoscaling after
// the operation is READY.
func TestMapDuringOperations(t *testing.T) {
	s := DefaultSettings()
	surge := np(3, 4, corev1.ConditionTrue, "AsExpected")
	auto := np(3, 4, corev1.ConditionTrue, "AsExpected")
	auto.Spec.Replicas, auto.Spec.AutoScaling = nil, &hyperv1.NodePoolAutoScaling{Min: 2, Max: 5}
	scaling := np(5, 4, corev1.ConditionFalse, "WaitingForAvailableMachines")
	expired := upgradeTo(operation.PhaseNodePools)
	expired.Deadline = now.Add(-time.Second)
	cases := []struct {
		name   string
		hc     *hcBuilder
		nps    []*hyperv1.NodePool
		want   Status
		msgHas string
	}{
		{"upgrade, control plane progressing", newHC(5*time.Hour).done().op(upgradeTo(operation.PhaseControlPlane)).image("quay.io/x:4.18.22-multi").cond("ClusterVersionProgressing", "True", "", "Working towards 4.18.22: 10 of 40 done (25% complete)", 0), []*hyperv1.NodePool{np3()}, Updating, "Upgrading control plane to 4.18.22: Working towards 4.18.22: 10 of 40 done (25% complete)"},
		{"upgrade, workers rolling", newHC(5 * time.Hour).done().op(upgradeTo(operation.PhaseNodePools)), []*hyperv1.NodePool{surge}, Updating, "Upgrading workers to 4.18.22: 0/3 nodes updated"},
		{"scale up, not every worker yet", newHC(5 * time.Hour).done().op(operation.Record{Kind: operation.Scale, From: "3", To: "5", Phase: operation.PhaseWorkers, Replicas: 5, Deadline: now.Add(time.Hour)}), []*hyperv1.NodePool{scaling}, Updating, "Scaling workers 3→5: 4/5 ready"},
		{"upgrade failed (recorded)", newHC(5 * time.Hour).done().op(func() operation.Record {
			r := upgradeTo(operation.PhaseFailed)
			r.Message = "Upgrade blocked: AdminAckRequired"
			return r
		}()), []*hyperv1.NodePool{np3()}, Failed, "Upgrade blocked: AdminAckRequired"},
		{"deadline passed", newHC(5 * time.Hour).done().op(expired), []*hyperv1.NodePool{np3()}, Failed, "Upgrade did not finish within 9m59s: last words"},
		{"control plane unavailable within the grace", newHC(5*time.Hour).done().op(upgradeTo(operation.PhaseControlPlane)).cond("Available", "False", "x", "KAS rolling", time.Minute), []*hyperv1.NodePool{np3()}, Updating, "Upgrading control plane"},
		{"control plane unavailable past the grace", newHC(5*time.Hour).done().op(upgradeTo(operation.PhaseControlPlane)).cond("Available", "False", "x", "KAS down", 6*time.Minute), []*hyperv1.NodePool{np3()}, Unavailable, "KAS down"},
		{"degraded long during an operation: the deadline decides", newHC(5*time.Hour).done().op(upgradeTo(operation.PhaseControlPlane)).cond("Degraded", "True", "UnavailableReplicas", "", 20*time.Minute), []*hyperv1.NodePool{np3()}, Updating, ""},
		{"deleting beats the operation", newHC(5 * time.Hour).done().op(upgradeTo(operation.PhaseControlPlane)).deleting(), []*hyperv1.NodePool{np3()}, Deleting, ""},
		{"operation done, surge left over", newHC(5 * time.Hour).done().op(upgradeTo(operation.PhaseDone)), []*hyperv1.NodePool{surge}, Ready, "workers 4/3"},
		{"autoscaling within bounds", newHC(5 * time.Hour).done(), []*hyperv1.NodePool{auto}, Ready, ""},
	}
	for _, tc := range cases {
		got := Map(tc.hc.hc, tc.nps, now, s)
		if got.Status != tc.want || !strings.Contains(got.Message, tc.msgHas) {
			t.Errorf("%s: %s %q, want %s containing %q", tc.name, got.Status, got.Message, tc.want, tc.msgHas)
		}
	}
	// The deadline is a re-check time: nothing changes on the objects when it passes.
	got := Map(newHC(5*time.Hour).done().op(upgradeTo(operation.PhaseControlPlane)).hc, []*hyperv1.NodePool{np3()}, now, s)
	if want := now.Add(80 * time.Minute); !got.RecheckAt.Equal(want) {
		t.Errorf("RecheckAt %v, want the deadline %v", got.RecheckAt, want)
	}
}
