package operation

import (
	"strings"
	"testing"
	"time"

	configv1 "github.com/openshift/api/config/v1"
	hyperv1 "github.com/openshift/hypershift/api/hypershift/v1beta1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
)

var now = time.Date(2026, 11, 23, 12, 0, 0, 0, time.UTC)

const image = "quay.io/openshift-release-dev/ocp-release:4.18.22-multi"

func hc(img string, gen, observed int64, history ...configv1.UpdateHistory) *hyperv1.HostedCluster {
	h := &hyperv1.HostedCluster{ObjectMeta: metav1.ObjectMeta{Name: "c1", Generation: gen}}
	h.Spec.Release.Image = img
	h.Status.Version = &hyperv1.ClusterVersionStatus{History: history, ObservedGeneration: observed}
	return h
}

func entry(state configv1.UpdateState, v string) configv1.UpdateHistory {
	return configv1.UpdateHistory{State: state, Version: v}
}

func np(img string, spec, ready int32, version string, gen int64, conds ...hyperv1.NodePoolCondition) *hyperv1.NodePool {
	p := &hyperv1.NodePool{ObjectMeta: metav1.ObjectMeta{Name: "c1", Generation: gen}}
	p.Spec.Release.Image, p.Spec.Replicas = img, ptr.To(spec)
	p.Status.Replicas, p.Status.Version, p.Status.Conditions = ready, version, conds
	return p
}

func cond(t string, st corev1.ConditionStatus, reason, msg string, gen int64) hyperv1.NodePoolCondition {
	return hyperv1.NodePoolCondition{Type: t, Status: st, Reason: reason, Message: msg, ObservedGeneration: gen}
}

func TestNext(t *testing.T) {
	upgrade := func(p Phase) *Record {
		return &Record{Kind: Upgrade, From: "4.17.12", To: "4.18.22", Phase: p, ReleaseImage: image, Replicas: 3, HCGeneration: 2,
			StartedAt: now.Add(-time.Hour), Deadline: now.Add(time.Hour), Message: "previous"}
	}
	scale := &Record{Kind: Scale, From: "3", To: "5", Phase: PhaseWorkers, Replicas: 5, StartedAt: now.Add(-time.Hour), Deadline: now.Add(time.Hour)}
	old := "quay.io/openshift-release-dev/ocp-release:4.17.12-multi"
	ready := cond("Ready", "True", "AsExpected", "", 3)
	atImage := func(np *hyperv1.NodePool) bool { return np.Spec.Release.Image == image }
	atFive := func(np *hyperv1.NodePool) bool { return *np.Spec.Replicas == 5 }
	blocked := hc(image, 3, 3, entry(configv1.CompletedUpdate, "4.17.12"))
	blocked.Status.Conditions = []metav1.Condition{
		{Type: "Progressing", Status: "False", Reason: "Blocked", Message: "cluster version is not upgradeable", ObservedGeneration: 3},
		{Type: "ClusterVersionUpgradeable", Status: "False", Reason: "AdminAckRequired", Message: "ack needed"}}
	cases := []struct {
		name      string
		rec       *Record
		hc        *hyperv1.HostedCluster
		nps       []*hyperv1.NodePool
		inSpec    NodePoolsInSpec
		phase     Phase
		msgHas    string
		setImage  bool
		syncPools bool
	}{
		{"control plane first: the image is set", upgrade(PhaseControlPlane), hc(old, 2, 2, entry(configv1.CompletedUpdate, "4.17.12")), []*hyperv1.NodePool{np(old, 3, 3, "4.17.12", 3, ready)}, atImage, PhaseControlPlane, "starting", true, false},
		{"a stale Completed entry (old observedGeneration) is not done", upgrade(PhaseControlPlane), hc(image, 3, 2, entry(configv1.CompletedUpdate, "4.18.22")), []*hyperv1.NodePool{np(old, 3, 3, "4.17.12", 3, ready)}, atImage, PhaseControlPlane, "Upgrading control plane to 4.18.22", false, false},
		{"Partial at the target: still the control plane, NodePools untouched", upgrade(PhaseControlPlane), hc(image, 3, 3, entry(configv1.PartialUpdate, "4.18.22"), entry(configv1.CompletedUpdate, "4.17.12")), []*hyperv1.NodePool{np(old, 3, 3, "4.17.12", 3, ready)}, atImage, PhaseControlPlane, "control plane", false, false},
		{"control plane Completed: NodePools next", upgrade(PhaseControlPlane), hc(image, 3, 3, entry(configv1.CompletedUpdate, "4.18.22"), entry(configv1.CompletedUpdate, "4.17.12")), []*hyperv1.NodePool{np(old, 3, 3, "4.17.12", 3, ready)}, atImage, PhaseNodePools, "Upgrading workers to 4.18.22: 0/3", false, true},
		{"NodePool rolling", upgrade(PhaseNodePools), hc(image, 3, 3, entry(configv1.CompletedUpdate, "4.18.22")), []*hyperv1.NodePool{np(image, 3, 4, "4.17.12", 4, ready, cond("UpdatingVersion", "True", "AsExpected", "Updating version in progress. Target version: 4.18.22", 4))}, atImage, PhaseNodePools, "0/3 nodes updated", false, false},
		{"NodePool at the target and Ready: done", upgrade(PhaseNodePools), hc(image, 3, 3, entry(configv1.CompletedUpdate, "4.18.22")), []*hyperv1.NodePool{np(image, 3, 3, "4.18.22", 3, ready, cond("UpdatingVersion", "False", "AsExpected", "", 3))}, atImage, PhaseDone, "completed", false, false},
		{"blocked by the CVO", upgrade(PhaseControlPlane), blocked, nil, atImage, PhaseFailed, "Upgrade blocked: cluster version is not upgradeable: AdminAckRequired: ack needed", false, false},
		{"scale: the NodePool is patched", scale, hc(old, 2, 2, entry(configv1.CompletedUpdate, "4.17.12")), []*hyperv1.NodePool{np(old, 3, 3, "4.17.12", 3, ready)}, atFive, PhaseWorkers, "Scaling workers 3→5: 3/3 ready", false, true},
		{"scale: Ready but the operator has not seen the generation", scale, hc(old, 2, 2, entry(configv1.CompletedUpdate, "4.17.12")), []*hyperv1.NodePool{np(old, 5, 5, "4.17.12", 4, ready)}, atFive, PhaseWorkers, "5/5 ready", false, false},
		{"scale: converged", scale, hc(old, 2, 2, entry(configv1.CompletedUpdate, "4.17.12")), []*hyperv1.NodePool{np(old, 5, 5, "4.17.12", 3, ready)}, atFive, PhaseDone, "Scale to 5 completed", false, false},
		{"stuck NodePool: the deadline fails it with the last message", func() *Record { r := upgrade(PhaseNodePools); r.Deadline = now.Add(-time.Second); return r }(), hc(image, 3, 3, entry(configv1.CompletedUpdate, "4.18.22")), nil, atImage, PhaseFailed, "did not finish within 59m59s: previous", false, false},
		{"invalid machine template fails it", scale, hc(old, 2, 2, entry(configv1.CompletedUpdate, "4.17.12")), []*hyperv1.NodePool{np(old, 5, 3, "4.17.12", 3, cond("ValidMachineConfig", "False", "x", "bad config", 3))}, atFive, PhaseFailed, "ValidMachineConfig: bad config", false, false},
	}
	for _, tc := range cases {
		v := Next(tc.rec, tc.hc, tc.nps, tc.inSpec, now)
		if v.Phase != tc.phase || !strings.Contains(v.Message, tc.msgHas) || (v.Action.SetControlPlaneImage != "") != tc.setImage || v.Action.SyncNodePools != tc.syncPools {
			t.Errorf("%s: %+v, want phase %s containing %q, setImage %v, sync %v", tc.name, v, tc.phase, tc.msgHas, tc.setImage, tc.syncPools)
		}
	}
}

func TestRecordRoundTrip(t *testing.T) {
	r := &Record{ID: "x", Kind: Scale, From: "2", To: "4", Phase: PhaseWorkers, StartedAt: now, Deadline: now.Add(time.Hour), Replicas: 4}
	h := &hyperv1.HostedCluster{ObjectMeta: metav1.ObjectMeta{Annotations: map[string]string{Annotation: r.Encode()}}}
	got := Decode(h)
	if got == nil || *got != *r {
		t.Fatalf("round trip: %+v vs %+v", got, r)
	}
	h.Annotations[Annotation] = "{not json"
	if Decode(h) != nil {
		t.Fatal("an unreadable record must decode as none")
	}
}
