package simulator

import (
	"encoding/json"
	"fmt"
	"strconv"
	"strings"
	"time"

	configv1 "github.com/openshift/api/config/v1"
	hyperv1 "github.com/openshift/hypershift/api/hypershift/v1beta1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// Day-2 behaviour of the operator (docs/day2.md, section "Simulator"), once a cluster is installed. Each change of the
// spec is a transition with its own start, recorded in an annotation when the simulated operator first sees it and
// stepped from there (never from the cluster's creation):
//
//	HostedCluster spec.release.image ≠ status.version.desired.image  → control-plane upgrade
//	NodePool release version ≠ status.version                         → NodePool version rollout
//	NodePool KubeVirt compute/root volume ≠ the last applied template → NodePool template rollout (Replace)
//	NodePool spec.replicas ≠ status.replicas                          → scale
//
// Control-plane upgrade (U = Timeline.ReadyAfter): validation first — a y-downgrade is ValidReleaseImage=False
// (InvalidImage) with Progressing=False (Blocked) and nothing moves; a minor above the operator's latest supported
// one says "the latest version supported is"; an unknown image "failed to lookup release image". A y-stream while
// the failure mode upgrade-blocked is set (ClusterVersionUpgradeable=False, AdminAckRequired) is Blocked unless the
// force-upgrade-to annotation names the image. Accepted: desired changes, a Partial history entry is prepended
// (older ones kept), Progressing=True for that one step, then "Working towards X: n of 40 done (p% complete)" with
// a Degraded=True (UnavailableReplicas) blip between 0.3 U and 0.5 U, and Completed at U with the CVO's "Cluster
// version is X" and "Done applying X". upgrade-stuck never completes ("Unable to apply X: …").
//
// NodePool rollouts replace (KubeVirt, Replace: status.replicas = spec+1 while a surge VM boots) or reboot (Agent,
// InPlace: one node drained at a time, status.replicas = spec−1) one node per 0.2 U, with UpdatingVersion /
// UpdatingPlatformMachineTemplate=True and their operator messages; status.version changes only at the end. A
// NodePool minor above the last Completed control-plane minor is held at ValidReleaseImage=False until the control
// plane completes. np-upgrade-stuck never replaces a node; inplace-failed ends with UpdatingVersion=False
// (InplaceUpgradeFailed).
//
// Scale: one node joins or leaves per 0.1 U, Ready=False "Minimum availability requires N replicas, current M
// available" until they match; an Agent NodePool needs bound Agents (NoSuitableAgents otherwise) and unbinds the
// surplus on scale-down.

// Day-2 annotations and failure modes.
const (
	AnnotationUpgrade  = "simulator.acm-cluster-sp/upgrade"  // HostedCluster: the control-plane transition (JSON)
	AnnotationRollout  = "simulator.acm-cluster-sp/rollout"  // NodePool: the current transition (JSON)
	AnnotationTemplate = "simulator.acm-cluster-sp/template" // NodePool: the platform template last rolled out
	// AnnotationForceUpgradeTo is HyperShift's override of ClusterVersionUpgradeable=False.
	AnnotationForceUpgradeTo = "hypershift.openshift.io/force-upgrade-to"

	FailUpgradeBlocked  = "upgrade-blocked"
	FailUpgradeStuck    = "upgrade-stuck"
	FailNPUpgradeStuck  = "np-upgrade-stuck"
	FailInPlaceFailed   = "inplace-failed"
	FailScaleNoCapacity = "scale-no-capacity"
	// FailNodeLost: an installed NodePool loses one node (its Machine's node goes NotReady) until the annotation is
	// removed; then a replacement machine joins, as a MachineHealthCheck remediation does.
	FailNodeLost = "node-lost"
)

// latestSupportedMinor is the simulated operator's newest OpenShift minor (the seeded supported-versions).
const latestSupportedMinor = 20

// Transition is one spec change the simulated operator is working on.
type Transition struct {
	Kind    string    `json:"kind"` // upgrade | version | template | scale
	From    string    `json:"from"`
	To      string    `json:"to"`
	Image   string    `json:"image,omitempty"`
	Started time.Time `json:"started"`
}

func readTransition(annotations map[string]string, key string) *Transition {
	var t Transition
	if s := annotations[key]; s == "" || json.Unmarshal([]byte(s), &t) != nil {
		return nil
	}
	return &t
}

func (t *Transition) encode() string {
	b, _ := json.Marshal(t)
	return string(b)
}

// imageVersion is what a release lookup of the image says: the version in its tag (4.18.22-multi → 4.18.22);
// ok is false when the image cannot be looked up.
func imageVersion(image string) (string, bool) {
	i := strings.LastIndex(image, ":")
	if i < 0 || strings.Contains(image[i:], "/") {
		return "", false
	}
	tag := image[i+1:]
	for _, arch := range []string{"-multi", "-x86_64", "-aarch64", "-ppc64le", "-s390x"} {
		tag = strings.TrimSuffix(tag, arch)
	}
	if _, ok := minorOf(tag); !ok {
		return "", false
	}
	return tag, true
}

// minorOf reads the y of 4.y.z.
func minorOf(v string) (int, bool) {
	parts := strings.Split(v, ".")
	if len(parts) < 3 || parts[0] != "4" {
		return 0, false
	}
	y, err := strconv.Atoi(parts[1])
	return y, err == nil
}

type condSetter func(t hyperv1.ConditionType, s metav1.ConditionStatus, reason, msg string)

// upgradeControlPlane plays a control-plane upgrade on an installed cluster. It edits st and sets conditions
// through set; it returns the transition annotation to write ("" = unchanged, "-" = remove).
func upgradeControlPlane(o Observed, tl Timeline, st *hyperv1.HostedClusterStatus, set condSetter, schedule func(time.Time), mode string) string {
	hc := o.HC
	tick := tl.ReadyAfter / 10
	tr := readTransition(hc.Annotations, AnnotationUpgrade)
	image := hc.Spec.Release.Image
	if image != st.Version.Desired.Image {
		if tr == nil || tr.Image != image {
			// First sight of the change: record it; the operator acts from its next reconcile (informer lag).
			schedule(o.Now.Add(tick))
			return (&Transition{Kind: "upgrade", From: st.Version.Desired.Version, Image: image, Started: o.Now}).encode()
		}
		to, ok := imageVersion(image)
		from, _ := minorOf(completedVersion(st))
		toMinor, _ := minorOf(to)
		switch {
		case !ok:
			set(hyperv1.ValidReleaseImage, metav1.ConditionFalse, "InvalidImage", fmt.Sprintf("failed to lookup release image: %s: manifest unknown", image))
			set(hyperv1.HostedClusterProgressing, metav1.ConditionFalse, "Blocked", "Release image is invalid")
			return ""
		case toMinor < from:
			set(hyperv1.ValidReleaseImage, metav1.ConditionFalse, "InvalidImage", fmt.Sprintf("y-stream downgrade from %s to %s is not supported", completedVersion(st), to))
			set(hyperv1.HostedClusterProgressing, metav1.ConditionFalse, "Blocked", "Release image is invalid")
			return ""
		case toMinor > latestSupportedMinor:
			set(hyperv1.ValidReleaseImage, metav1.ConditionFalse, "InvalidImage", fmt.Sprintf("the latest version supported is: 4.%d.0. Attempting to use: %s", latestSupportedMinor, to))
			set(hyperv1.HostedClusterProgressing, metav1.ConditionFalse, "Blocked", "Release image is invalid")
			return ""
		case toMinor != from && mode == FailUpgradeBlocked && hc.Annotations[AnnotationForceUpgradeTo] != image:
			set(hyperv1.ClusterVersionUpgradeable, metav1.ConditionFalse, "AdminAckRequired", "Kubernetes 1.31 and therefore OpenShift 4.18 remove several APIs which require admin consideration. Please see the knowledge article https://access.redhat.com/articles/7031404 for details and instructions.")
			set(hyperv1.HostedClusterProgressing, metav1.ConditionFalse, "Blocked", "cluster version is not upgradeable")
			return ""
		}
		// Accepted: the CVO takes the new release.
		st.Version.Desired = configv1.Release{Image: image, Version: to}
		st.Version.History = append([]configv1.UpdateHistory{{State: configv1.PartialUpdate, Version: to, Image: image, StartedTime: metav1.NewTime(o.Now)}}, st.Version.History...)
		st.Version.ObservedGeneration = hc.Generation
		set(hyperv1.HostedClusterProgressing, metav1.ConditionTrue, "AsExpected", "HostedCluster is deploying, upgrading, or reconfiguring")
		set(hyperv1.ClusterVersionProgressing, metav1.ConditionTrue, "ClusterOperatorsUpdating", fmt.Sprintf("Working towards %s: 1 of 40 done (2%% complete)", to))
		set(hyperv1.ClusterVersionAvailable, metav1.ConditionTrue, "FromClusterVersion", "Done applying "+tr.From)
		schedule(o.Now.Add(tick))
		return (&Transition{Kind: "upgrade", From: tr.From, To: to, Image: image, Started: o.Now}).encode()
	}
	st.Version.ObservedGeneration = hc.Generation
	h := &st.Version.History[0]
	if h.State != configv1.PartialUpdate || h.Image != image {
		if tr != nil {
			return "-" // nothing in flight: a record left by an end whose removal did not land
		}
		return ""
	}
	if tr == nil || tr.Image != image {
		// In flight by the CVO's own history (a Partial entry at the spec's image), whatever the bookkeeping says:
		// the record can be lost between two writes, and the CVO does not depend on it.
		tr = &Transition{Kind: "upgrade", From: completedVersion(st), To: h.Version, Image: image, Started: h.StartedTime.Time}
	}
	elapsed := o.Now.Sub(tr.Started)
	if mode == FailUpgradeStuck {
		set(hyperv1.ClusterVersionProgressing, metav1.ConditionTrue, "ClusterOperatorsUpdating", fmt.Sprintf("Unable to apply %s: some cluster operators have not yet rolled out", tr.To))
		set(hyperv1.ClusterVersionSucceeding, metav1.ConditionFalse, "ClusterOperatorsNotAvailable", "Cluster operators ingress, console are not available")
		return ""
	}
	if elapsed < tl.ReadyAfter {
		pct := int(100 * elapsed / tl.ReadyAfter)
		set(hyperv1.ClusterVersionProgressing, metav1.ConditionTrue, "ClusterOperatorsUpdating", fmt.Sprintf("Working towards %s: %d of 40 done (%d%% complete)", tr.To, 40*pct/100, pct))
		set(hyperv1.ClusterVersionAvailable, metav1.ConditionTrue, "FromClusterVersion", "Done applying "+tr.From)
		if elapsed >= 3*tick && elapsed < 5*tick {
			set(hyperv1.HostedClusterDegraded, metav1.ConditionTrue, "UnavailableReplicas", "kube-apiserver deployment has 1 unavailable replicas")
		}
		schedule(o.Now.Add(tick - elapsed%tick))
		return ""
	}
	now := metav1.NewTime(o.Now)
	h.State, h.CompletionTime, h.Verified = configv1.CompletedUpdate, &now, true
	set(hyperv1.ClusterVersionProgressing, metav1.ConditionFalse, "FromClusterVersion", "Cluster version is "+tr.To)
	set(hyperv1.ClusterVersionAvailable, metav1.ConditionTrue, "FromClusterVersion", "Done applying "+tr.To)
	return "-"
}

// completedVersion is HyperShift's getHostedClusterVersion: the newest history entry with a completion.
func completedVersion(st *hyperv1.HostedClusterStatus) string {
	if st.Version == nil {
		return ""
	}
	for _, h := range st.Version.History {
		if h.State == configv1.CompletedUpdate {
			return h.Version
		}
	}
	return ""
}

// templateOf is the NodePool's platform template as the operator hashes it (KubeVirt compute and root volume).
func templateOf(np *hyperv1.NodePool) string {
	kv := np.Spec.Platform.Kubevirt
	if kv == nil {
		return ""
	}
	var parts []string
	if kv.Compute != nil {
		if kv.Compute.Cores != nil {
			parts = append(parts, fmt.Sprintf("cores=%d", *kv.Compute.Cores))
		}
		if kv.Compute.Memory != nil {
			parts = append(parts, "memory="+kv.Compute.Memory.String())
		}
	}
	if kv.RootVolume != nil && kv.RootVolume.Persistent != nil && kv.RootVolume.Persistent.Size != nil {
		parts = append(parts, "rootVolume="+kv.RootVolume.Persistent.Size.String())
	}
	return strings.Join(parts, ",")
}

// loseNode reports one of want nodes NotReady: one machine fewer available, and the conditions HyperShift
// aggregates from its Machines (hypershift-operator/controllers/nodepool/conditions.go, setAllNodesHealthyCondition;
// the reason is Cluster API's NodeConditionsFailedReason).
func loseNode(np *hyperv1.NodePool, st *hyperv1.NodePoolStatus, want int32, set func(t string, s corev1.ConditionStatus, reason, msg string)) {
	st.Replicas = want - 1
	machine := fmt.Sprintf("Machine %s-lost: NodeConditionsFailed: Node condition Ready is False\n", np.Name)
	set(hyperv1.NodePoolReadyConditionType, corev1.ConditionFalse, "WaitingForAvailableMachines", fmt.Sprintf("Minimum availability requires %d replicas, current %d available", want, want-1))
	set(hyperv1.NodePoolAllMachinesReadyConditionType, corev1.ConditionFalse, "NodeConditionsFailed", fmt.Sprintf("1 of %d machines are not ready\n%s", want, machine))
	set(hyperv1.NodePoolAllNodesHealthyConditionType, corev1.ConditionFalse, "NodeConditionsFailed", fmt.Sprintf("1 of %d machines are not healthy\n%s", want, machine))
}

// npDay2 plays the rollouts and scaling of an installed NodePool over the install's status st. It returns the
// transition annotation to write ("" unchanged, "-" removed) and the template annotation ("" unchanged).
func npDay2(np *hyperv1.NodePool, hcStatus *hyperv1.HostedClusterStatus, st *hyperv1.NodePoolStatus, tl Timeline, now time.Time, mode string, agentsShort bool, schedule func(time.Time)) (transition, template string) {
	want := wantedReplicas(np)
	set := func(t string, s corev1.ConditionStatus, reason, msg string) {
		setNPCondition(st, hyperv1.NodePoolCondition{Type: t, Status: s, Reason: reason, Message: msg, LastTransitionTime: metav1.NewTime(now), ObservedGeneration: np.Generation})
	}
	if a := np.Spec.AutoScaling; np.Spec.Replicas == nil && a != nil {
		if a.Min < 1 {
			set(hyperv1.NodePoolAutoscalingEnabledConditionType, corev1.ConditionFalse, "ValidationFailed", "min replicas must be greater than 0 on this platform")
		} else {
			set(hyperv1.NodePoolAutoscalingEnabledConditionType, corev1.ConditionTrue, "AsExpected", "")
		}
	} else {
		set(hyperv1.NodePoolAutoscalingEnabledConditionType, corev1.ConditionFalse, "AsExpected", "")
	}
	tr := readTransition(np.Annotations, AnnotationRollout)
	target, _ := imageVersion(np.Spec.Release.Image)
	tmpl := templateOf(np)
	applied, hasApplied := np.Annotations[AnnotationTemplate]
	if !hasApplied {
		template = tmpl // the installed template
		applied = tmpl
	}
	replace := np.Spec.Management.UpgradeType != hyperv1.UpgradeTypeInPlace
	// what the operator should be doing now
	lost := mode == FailNodeLost && want > 0
	var kind, to string
	switch {
	case target != "" && target != np.Status.Version:
		kind, to = "version", target
	case tmpl != applied:
		kind, to = "template", tmpl
	case want != np.Status.Replicas && !lost || (tr != nil && tr.Kind == "scale"):
		kind, to = "scale", fmt.Sprint(want)
	}
	st.Version = np.Status.Version // only a finished rollout changes it
	st.Replicas = np.Status.Replicas
	if kind == "" && lost {
		loseNode(np, st, want, set)
	}
	if kind == "" {
		if tr != nil {
			return "-", template
		}
		return "", template
	}
	if tr == nil || tr.Kind != kind || tr.To != to {
		from := np.Status.Version
		if kind == "template" {
			from = applied
		} else if kind == "scale" {
			from = fmt.Sprint(np.Status.Replicas)
		}
		// The reconcile that sees the new generation reports the rollout at once; the machines move from the next.
		switch kind {
		case "version":
			set(hyperv1.NodePoolUpdatingVersionConditionType, corev1.ConditionTrue, "AsExpected", "Updating version in progress. Target version: "+to)
		case "template":
			set(hyperv1.NodePoolUpdatingPlatformMachineTemplateConditionType, corev1.ConditionTrue, "AsExpected", "platform machine template update in progress. Target template: "+to)
		case "scale":
			if want > np.Status.Replicas {
				set(hyperv1.NodePoolReadyConditionType, corev1.ConditionFalse, "WaitingForAvailableMachines", fmt.Sprintf("Minimum availability requires %d replicas, current %d available", want, np.Status.Replicas))
			}
		}
		schedule(now.Add(tl.ReadyAfter / 20))
		return (&Transition{Kind: kind, From: from, To: to, Started: now}).encode(), template
	}
	elapsed := now.Sub(tr.Started)
	switch kind {
	case "version", "template":
		if kind == "version" {
			cpMinor, _ := minorOf(completedVersion(hcStatus))
			if m, _ := minorOf(target); m > cpMinor {
				set(hyperv1.NodePoolValidReleaseImageConditionType, corev1.ConditionFalse, "ValidationFailed",
					fmt.Sprintf("NodePool minor version %s is greater than the HostedCluster's %s", target, completedVersion(hcStatus)))
				return "", template
			}
			set(hyperv1.NodePoolValidReleaseImageConditionType, corev1.ConditionTrue, "AsExpected", "Using release image "+np.Spec.Release.Image)
		}
		condType, msg := hyperv1.NodePoolUpdatingVersionConditionType, "Updating version in progress. Target version: "+to
		if kind == "template" {
			condType, msg = hyperv1.NodePoolUpdatingPlatformMachineTemplateConditionType, "platform machine template update in progress. Target template: "+to
		}
		perNode := tl.ReadyAfter / 5
		done := int32(elapsed / perNode)
		if mode == FailNPUpgradeStuck {
			done = 0
		}
		if mode == FailInPlaceFailed && !replace && kind == "version" && elapsed >= perNode/2 {
			set(condType, corev1.ConditionFalse, "InplaceUpgradeFailed", "Node "+np.Name+"-0 failed to upgrade: the machine config daemon reported an error")
			return "", template
		}
		if done >= want {
			set(condType, corev1.ConditionFalse, "AsExpected", "")
			st.Replicas = want
			if kind == "version" {
				st.Version = to
			} else {
				template = to
			}
			return "-", template
		}
		set(condType, corev1.ConditionTrue, "AsExpected", msg)
		inNode := elapsed % perNode
		switch {
		case replace && inNode < perNode/2:
			st.Replicas = want + 1 // the surge machine is up before the old one goes
		case !replace && inNode < perNode/2:
			st.Replicas = want - 1 // drained and rebooting
		default:
			st.Replicas = want
		}
		schedule(now.Add(perNode/2 - elapsed%(perNode/2)))
		return "", template
	case "scale":
		from, _ := strconv.Atoi(tr.From)
		step := tl.ReadyAfter / 10
		n := int32(elapsed / step)
		cur := int32(from)
		switch {
		case want > cur:
			cur = min(want, cur+n)
			if agentsShort || mode == FailScaleNoCapacity {
				cur = np.Status.Replicas
			}
		case want < cur:
			cur = max(want, cur-n)
		}
		st.Replicas = cur
		if cur == want {
			set(hyperv1.NodePoolReadyConditionType, corev1.ConditionTrue, "AsExpected", "")
			set(hyperv1.NodePoolAllMachinesReadyConditionType, corev1.ConditionTrue, "AsExpected", "All is well")
			set(hyperv1.NodePoolAllNodesHealthyConditionType, corev1.ConditionTrue, "AsExpected", "All is well")
			return "-", template
		}
		set(hyperv1.NodePoolReadyConditionType, corev1.ConditionFalse, "WaitingForAvailableMachines", fmt.Sprintf("Minimum availability requires %d replicas, current %d available", want, cur))
		switch {
		case agentsShort:
			set(hyperv1.NodePoolAllMachinesReadyConditionType, corev1.ConditionFalse, "NoSuitableAgents", fmt.Sprintf("No suitable Agents found for %d machines: AgentReserved=False (NoSuitableAgents)", want))
		case mode == FailScaleNoCapacity:
			set(hyperv1.NodePoolAllMachinesReadyConditionType, corev1.ConditionFalse, "MachineCreationFailed", "0 of 1 machines could not be created: insufficient capacity on the infrastructure cluster")
		default:
			set(hyperv1.NodePoolAllMachinesReadyConditionType, corev1.ConditionFalse, "WaitingForMachines", fmt.Sprintf("%d of %d machines are ready", cur, want))
			schedule(now.Add(step - elapsed%step))
		}
		set(hyperv1.NodePoolAllNodesHealthyConditionType, corev1.ConditionFalse, "NodeProvisioning", fmt.Sprintf("%d of %d nodes are healthy", cur, want))
	}
	return "", template
}
