package simulator

import (
	"strings"
	"testing"
	"time"

	configv1 "github.com/openshift/api/config/v1"
	hyperv1 "github.com/openshift/hypershift/api/hypershift/v1beta1"
	apimeta "k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/api/resource"
	"k8s.io/utils/ptr"

	"github.com/dcm-sp/acm-cluster-sp/internal/sp/inventory"
	"github.com/dcm-sp/acm-cluster-sp/internal/sp/status"
)

const img418 = "quay.io/openshift-release-dev/ocp-release:4.18.22-multi"

// installed is a world whose install completed at 1.0 R, walked to 1.1 R.
func installed(t *testing.T, example, mode string) (*world, time.Time) {
	t.Helper()
	w := newWorld(example, mode)
	if example == "baremetal" {
		for _, n := range []string{"a1", "a2", "a3", "a4", "a5"} {
			w.agents = append(w.agents, inventory.Agent{Name: n, Approved: true, Validated: true})
		}
	}
	end := 1.1
	if example == "baremetal" {
		end = 2.1
	}
	for f := 0.0; f <= end; f += 0.05 {
		w.at(frac(f))
	}
	if w.nps[0].Status.Version == "" || w.hc.Status.Version.History[0].State != configv1.CompletedUpdate {
		t.Fatalf("not installed: %+v", w.hc.Status.Version)
	}
	return w, frac(end)
}

// walk steps the world every 0.05 R until until, calling each after every step.
func (w *world) walk(from time.Time, d time.Duration, each func(time.Time)) time.Time {
	end := from.Add(d)
	for t := from; !t.After(end); t = t.Add(tl.ReadyAfter / 20) {
		w.at(t)
		if each != nil {
			each(t)
		}
	}
	return end
}

func hcCond(w *world, t hyperv1.ConditionType) string {
	c := apimeta.FindStatusCondition(w.hc.Status.Conditions, string(t))
	if c == nil {
		return ""
	}
	return string(c.Status) + " " + c.Reason + " " + c.Message
}

func npCond(np *hyperv1.NodePool, t string) string {
	for _, c := range np.Status.Conditions {
		if c.Type == t {
			return string(c.Status) + " " + c.Reason + " " + c.Message
		}
	}
	return ""
}

// A control-plane upgrade: Partial prepended (the old entry kept), "Working towards", a Degraded blip, then
// Completed with the CVO's words and a current observedGeneration; the NodePool is untouched meanwhile.
func TestUpgradeControlPlane(t *testing.T) {
	w, now := installed(t, "kubevirt-minimal", "")
	w.hc.Spec.Release.Image, w.hc.Generation = img418, w.hc.Generation+1
	var sawWorking, sawDegraded, sawProgressing bool
	now = w.walk(now, 2*tl.ReadyAfter, func(time.Time) {
		sawWorking = sawWorking || strings.Contains(hcCond(w, hyperv1.ClusterVersionProgressing), "Working towards 4.18.22")
		sawDegraded = sawDegraded || strings.HasPrefix(hcCond(w, hyperv1.HostedClusterDegraded), "True UnavailableReplicas")
		sawProgressing = sawProgressing || strings.HasPrefix(hcCond(w, hyperv1.HostedClusterProgressing), "True")
	})
	h := w.hc.Status.Version.History
	if len(h) != 2 || h[0].Version != "4.18.22" || h[0].State != configv1.CompletedUpdate || h[0].CompletionTime == nil || h[1].Version != "4.17.12" {
		t.Fatalf("history %+v", h)
	}
	if w.hc.Status.Version.ObservedGeneration != w.hc.Generation || !sawWorking || !sawDegraded || !sawProgressing {
		t.Fatalf("observedGeneration %d/%d, working %v degraded %v progressing %v", w.hc.Status.Version.ObservedGeneration, w.hc.Generation, sawWorking, sawDegraded, sawProgressing)
	}
	if c := hcCond(w, hyperv1.ClusterVersionProgressing); !strings.Contains(c, "Cluster version is 4.18.22") || !strings.Contains(hcCond(w, hyperv1.ClusterVersionAvailable), "Done applying 4.18.22") {
		t.Fatalf("CVO conditions: %s / %s", c, hcCond(w, hyperv1.ClusterVersionAvailable))
	}
	if w.nps[0].Status.Version != "4.17.12" {
		t.Fatalf("NodePool moved without its spec changing: %s", w.nps[0].Status.Version)
	}
	// Then the NodePool: a Replace rollout surges to spec+1, reports UpdatingVersion, and sets the version at the end.
	w.nps[0].Spec.Release.Image, w.nps[0].Generation = img418, w.nps[0].Generation+1
	surge, updating := false, false
	w.walk(now, 2*tl.ReadyAfter, func(time.Time) {
		surge = surge || w.nps[0].Status.Replicas == *w.nps[0].Spec.Replicas+1
		updating = updating || strings.Contains(npCond(w.nps[0], hyperv1.NodePoolUpdatingVersionConditionType), "Target version: 4.18.22")
		if w.nps[0].Status.Version == "4.18.22" && strings.HasPrefix(npCond(w.nps[0], hyperv1.NodePoolUpdatingVersionConditionType), "True") {
			t.Fatal("version reported while still updating")
		}
	})
	if !surge || !updating || w.nps[0].Status.Version != "4.18.22" || !strings.HasPrefix(npCond(w.nps[0], hyperv1.NodePoolUpdatingVersionConditionType), "False") {
		t.Fatalf("rollout: surge %v updating %v version %s %s", surge, updating, w.nps[0].Status.Version, npCond(w.nps[0], hyperv1.NodePoolUpdatingVersionConditionType))
	}
}

// The simulator's record of an upgrade can be lost between its writes (the record's removal lands, the status write
// that completes the upgrade does not): the CVO's own history still says the upgrade runs, and it completes. A record
// left behind by an upgrade that ended is removed.
func TestUpgradeCompletesWithoutItsRecord(t *testing.T) {
	w, now := installed(t, "kubevirt-minimal", "")
	w.hc.Spec.Release.Image, w.hc.Generation = img418, w.hc.Generation+1
	now = w.walk(now, tl.ReadyAfter/2, nil)
	if h := w.hc.Status.Version.History[0]; h.State != configv1.PartialUpdate || h.Version != "4.18.22" {
		t.Fatalf("upgrade not running at 0.5 R: %+v", h)
	}
	delete(w.hc.Annotations, AnnotationUpgrade)
	now = w.walk(now, 2*tl.ReadyAfter, nil)
	if h := w.hc.Status.Version.History[0]; h.State != configv1.CompletedUpdate || h.Version != "4.18.22" {
		t.Fatalf("upgrade without its record did not complete: %+v", h)
	}
	if c := hcCond(w, hyperv1.ClusterVersionProgressing); !strings.Contains(c, "Cluster version is 4.18.22") {
		t.Fatalf("ClusterVersionProgressing %s", c)
	}
	stale := (&Transition{Kind: "upgrade", From: "4.17.12", To: "4.18.22", Image: img418, Started: now}).encode()
	w.hc.Annotations[AnnotationUpgrade] = stale
	w.walk(now, tl.ReadyAfter/10, nil)
	if a, ok := w.hc.Annotations[AnnotationUpgrade]; ok {
		t.Fatalf("the record of an ended upgrade stayed: %s", a)
	}
}

// A NodePool minor above the last Completed control plane is held by ValidReleaseImage=False.
func TestNodePoolAheadOfControlPlaneIsHeld(t *testing.T) {
	w, now := installed(t, "kubevirt-minimal", "")
	w.nps[0].Spec.Release.Image = img418
	w.walk(now, tl.ReadyAfter, nil)
	if c := npCond(w.nps[0], hyperv1.NodePoolValidReleaseImageConditionType); !strings.HasPrefix(c, "False") || w.nps[0].Status.Version != "4.17.12" {
		t.Fatalf("ValidReleaseImage %q, version %s", c, w.nps[0].Status.Version)
	}
}

func TestUpgradeRefusals(t *testing.T) {
	cases := []struct{ name, mode, image, force, cond, want string }{
		{"y-downgrade", "", "quay.io/openshift-release-dev/ocp-release:4.16.42-multi", "", "ValidReleaseImage", "False InvalidImage y-stream downgrade"},
		{"beyond the operator", "", "quay.io/openshift-release-dev/ocp-release:4.21.3-multi", "", "ValidReleaseImage", "the latest version supported is"},
		{"unknown image", "", "quay.io/openshift-release-dev/ocp-release@sha256:abc", "", "ValidReleaseImage", "failed to lookup release image"},
		{"admin ack required", FailUpgradeBlocked, img418, "", "Progressing", "False Blocked cluster version is not upgradeable"},
		{"forced past the ack", FailUpgradeBlocked, img418, img418, "ClusterVersionProgressing", "Working towards 4.18.22"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			w, now := installed(t, "kubevirt-minimal", c.mode)
			w.hc.Spec.Release.Image = c.image
			if c.force != "" {
				w.hc.Annotations[AnnotationForceUpgradeTo] = c.force
			}
			w.walk(now, tl.ReadyAfter/2, nil)
			if got := hcCond(w, hyperv1.ConditionType(c.cond)); !strings.Contains(got, c.want) {
				t.Fatalf("%s = %q, want %q", c.cond, got, c.want)
			}
		})
	}
}

// Scale up joins workers one by one (Ready=False "Minimum availability…" until all joined); scale down.
func TestScale(t *testing.T) {
	w, now := installed(t, "kubevirt-minimal", "")
	w.nps[0].Spec.Replicas, w.nps[0].Generation = ptr.To[int32](4), w.nps[0].Generation+1
	seen := map[int32]bool{}
	now = w.walk(now, tl.ReadyAfter/2, func(time.Time) {
		seen[w.nps[0].Status.Replicas] = true
		if w.nps[0].Status.Replicas < 4 && !strings.Contains(npCond(w.nps[0], hyperv1.NodePoolReadyConditionType), "Minimum availability requires 4 replicas") {
			t.Fatalf("Ready while scaling: %s", npCond(w.nps[0], hyperv1.NodePoolReadyConditionType))
		}
	})
	if !seen[3] || w.nps[0].Status.Replicas != 4 || !strings.HasPrefix(npCond(w.nps[0], hyperv1.NodePoolReadyConditionType), "True") {
		t.Fatalf("scale up: seen %v, now %d", seen, w.nps[0].Status.Replicas)
	}
	w.nps[0].Spec.Replicas = ptr.To[int32](1)
	w.walk(now, tl.ReadyAfter/2, nil)
	if w.nps[0].Status.Replicas != 1 || w.nps[0].Annotations[AnnotationRollout] != "" {
		t.Fatalf("scale down: %d %v", w.nps[0].Status.Replicas, w.nps[0].Annotations)
	}
}

// Agents bind on scale-up and unbind on scale-down; with too few, NoSuitableAgents.
func TestAgentScale(t *testing.T) {
	w, now := installed(t, "baremetal", "")
	bound := func() int {
		n := 0
		for _, a := range w.agents {
			if a.ClusterDeploymentName == w.hc.Name {
				n++
			}
		}
		return n
	}
	w.nps[0].Spec.Replicas = ptr.To[int32](5)
	now = w.walk(now, tl.ReadyAfter, nil)
	if bound() != 5 || w.nps[0].Status.Replicas != 5 {
		t.Fatalf("scale up: %d bound, %d replicas", bound(), w.nps[0].Status.Replicas)
	}
	w.nps[0].Spec.Replicas = ptr.To[int32](2)
	now = w.walk(now, tl.ReadyAfter, nil)
	if bound() != 2 || w.nps[0].Status.Replicas != 2 {
		t.Fatalf("scale down: %d bound, %d replicas", bound(), w.nps[0].Status.Replicas)
	}
	w.nps[0].Spec.Replicas = ptr.To[int32](6)
	w.walk(now, tl.ReadyAfter, nil)
	if c := npCond(w.nps[0], hyperv1.NodePoolAllMachinesReadyConditionType); !strings.Contains(c, "NoSuitableAgents") {
		t.Fatalf("AllMachinesReady %q", c)
	}
}

// A KubeVirt resize rolls every worker through a new template.
func TestResize(t *testing.T) {
	w, now := installed(t, "kubevirt-minimal", "")
	mem := resource.MustParse("32Gi")
	w.nps[0].Spec.Platform.Kubevirt.Compute.Memory = &mem
	updating := false
	w.walk(now, 2*tl.ReadyAfter, func(time.Time) {
		updating = updating || strings.HasPrefix(npCond(w.nps[0], hyperv1.NodePoolUpdatingPlatformMachineTemplateConditionType), "True")
	})
	if !updating || !strings.HasPrefix(npCond(w.nps[0], hyperv1.NodePoolUpdatingPlatformMachineTemplateConditionType), "False") || !strings.Contains(w.nps[0].Annotations[AnnotationTemplate], "memory=32Gi") {
		t.Fatalf("resize: updating %v, %s, %v", updating, npCond(w.nps[0], hyperv1.NodePoolUpdatingPlatformMachineTemplateConditionType), w.nps[0].Annotations)
	}
}

// Autoscaling: AutoscalingEnabled=True and the pool held at its minimum (an idle cluster needs no more).
func TestAutoscaling(t *testing.T) {
	w, now := installed(t, "kubevirt-minimal", "")
	w.nps[0].Spec.Replicas, w.nps[0].Spec.AutoScaling = nil, &hyperv1.NodePoolAutoScaling{Min: 3, Max: 6}
	w.walk(now, tl.ReadyAfter, nil)
	if c := npCond(w.nps[0], hyperv1.NodePoolAutoscalingEnabledConditionType); !strings.HasPrefix(c, "True") || w.nps[0].Status.Replicas != 3 ||
		!strings.HasPrefix(npCond(w.nps[0], hyperv1.NodePoolReadyConditionType), "True") {
		t.Fatalf("AutoscalingEnabled %q, replicas %d, Ready %q", c, w.nps[0].Status.Replicas, npCond(w.nps[0], hyperv1.NodePoolReadyConditionType))
	}
}

// node-lost: an installed pool has one node NotReady — one replica fewer, Ready=False, the Machines' aggregated
// NodeConditionsFailed — for as long as the mode is set (the operator does not heal it by itself); then a
// replacement joins and the pool is Ready again. Through the status function: a running cluster short of a worker
// (PROVISIONING, WhyWorkersShort), then READY.
func TestNodeLost(t *testing.T) {
	w, now := installed(t, "kubevirt-full", "")
	w.hc.Annotations[AnnotationFail] = FailNodeLost
	now = w.walk(now, tl.ReadyAfter, nil)
	np := w.nps[0]
	if np.Status.Replicas != 2 || !strings.HasPrefix(npCond(np, hyperv1.NodePoolReadyConditionType), "False WaitingForAvailableMachines Minimum availability requires 3 replicas, current 2 available") ||
		!strings.HasPrefix(npCond(np, hyperv1.NodePoolAllNodesHealthyConditionType), "False NodeConditionsFailed 1 of 3 machines are not healthy") {
		t.Fatalf("node lost: replicas %d, %v", np.Status.Replicas, np.Status.Conditions)
	}
	r := status.Map(w.hc, w.nps, now, status.DefaultSettings())
	if r.Status != status.Provisioning || r.Why != status.WhyWorkersShort || !strings.Contains(r.Message, "workers 2/3 ready (1 of 3 machines are not") {
		t.Fatalf("status with a node lost: %+v", r)
	}
	delete(w.hc.Annotations, AnnotationFail)
	now = w.walk(now, tl.ReadyAfter/2, nil)
	if np := w.nps[0]; np.Status.Replicas != 3 || !strings.HasPrefix(npCond(np, hyperv1.NodePoolReadyConditionType), "True") {
		t.Fatalf("not healed: %d %s", np.Status.Replicas, npCond(np, hyperv1.NodePoolReadyConditionType))
	}
	if r := status.Map(w.hc, w.nps, now, status.DefaultSettings()); r.Status != status.Ready {
		t.Fatalf("status after the replacement joined: %+v", r)
	}
}
