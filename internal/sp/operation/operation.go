// Package operation is the day-2 operation of one cluster (docs/day2.md): the record the API writes on the
// HostedCluster before anything changes, and the one pure function, Next, that reads the record and the cached
// HyperShift objects and says where the operation stands — what to change next on the hub, whether it is done or
// failed, and the progress message. The leader's reconciler acts on Next; the status function reports it. Both
// call the same function, so the status never says UPDATING for an operation the reconciler considers finished,
// and a restarted SP resumes from the record alone.
package operation

import (
	"encoding/json"
	"fmt"
	"time"

	configv1 "github.com/openshift/api/config/v1"
	hyperv1 "github.com/openshift/hypershift/api/hypershift/v1beta1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// Annotation holds the JSON Record on the HostedCluster.
const Annotation = "dcm-operation"

// Kind is what an operation changes.
type Kind string

// The operation kinds.
const (
	Upgrade Kind = "upgrade"
	Scale   Kind = "scale"
	Resize  Kind = "resize"
)

// Phase is where an operation stands.
type Phase string

// The phases. An upgrade runs control-plane then node-pools; scale and resize run workers. done and failed end it.
const (
	PhaseControlPlane Phase = "control-plane"
	PhaseNodePools    Phase = "node-pools"
	PhaseWorkers      Phase = "workers"
	PhaseDone         Phase = "done"
	PhaseFailed       Phase = "failed"
)

// Record is one operation, stored as JSON in Annotation.
type Record struct {
	ID        string    `json:"id"`
	Kind      Kind      `json:"kind"`
	From      string    `json:"from"` // version, worker count or worker size before
	To        string    `json:"to"`   // the target, same form
	Phase     Phase     `json:"phase"`
	Message   string    `json:"message,omitempty"` // the last progress message (kept as the failure's cause)
	StartedAt time.Time `json:"started_at"`
	EndedAt   time.Time `json:"ended_at,omitzero"`
	Deadline  time.Time `json:"deadline"`
	// HCGeneration is the HostedCluster's generation when the record was written (before any spec change).
	HCGeneration int64 `json:"hc_generation"`
	// ReleaseImage is an upgrade's target image (resolved once, when accepted).
	ReleaseImage string `json:"release_image,omitempty"`
	// Replicas is the worker count the NodePool converges to (scale; resize and upgrade keep the count); under
	// autoscaling its minimum.
	Replicas int32 `json:"replicas"`
	// AutoscalingMin and AutoscalingMax are set when the NodePool scales itself (replicas then lie in [min, max]).
	AutoscalingMin int32 `json:"autoscaling_min,omitempty"`
	AutoscalingMax int32 `json:"autoscaling_max,omitempty"`
}

// Autoscaled reports whether the operation leaves the NodePool autoscaling.
func (r *Record) Autoscaled() bool { return r.AutoscalingMax > 0 }

// Open reports whether the operation still runs.
func (r *Record) Open() bool { return r != nil && r.Phase != PhaseDone && r.Phase != PhaseFailed }

// Describe names the operation for conflicts and logs: "upgrade to 4.18.5 (phase node-pools)".
func (r *Record) Describe() string {
	return fmt.Sprintf("%s to %s (phase %s)", r.Kind, r.To, r.Phase)
}

// Decode reads the record of a HostedCluster; nil when there is none or it is unreadable.
func Decode(hc *hyperv1.HostedCluster) *Record {
	if hc == nil {
		return nil
	}
	s, ok := hc.Annotations[Annotation]
	if !ok || s == "" {
		return nil
	}
	var r Record
	if err := json.Unmarshal([]byte(s), &r); err != nil || r.Kind == "" {
		return nil
	}
	return &r
}

// Encode is the annotation value of a record.
func (r *Record) Encode() string {
	data, _ := json.Marshal(r)
	return string(data)
}

// Action is what the reconciler must change on the hub next (zero value: nothing, wait).
type Action struct {
	// SetControlPlaneImage: patch HostedCluster spec.release.image to this image.
	SetControlPlaneImage string
	// SyncNodePools: bring the NodePools' spec (release image, replicas, platform template) to the desired one.
	SyncNodePools bool
}

// Verdict is where an operation stands on the cached objects.
type Verdict struct {
	Phase   Phase  // the phase the record should move to (equal to the record's when it stays)
	Message string // progress, or the failure's cause
	Action  Action
	// RecheckAt is the operation's deadline while it runs (nothing changes on the objects when it passes).
	RecheckAt time.Time
}

// NodePoolsInSpec reports whether the cached NodePools already carry the desired spec; the reconciler computes it
// (it renders the desired NodePool) and passes it to Next.
type NodePoolsInSpec func(np *hyperv1.NodePool) bool

// Next decides an open operation's progress. version is the target OpenShift version of an upgrade (record.To),
// inSpec whether a NodePool's spec is already the desired one. It is pure.
func Next(r *Record, hc *hyperv1.HostedCluster, nps []*hyperv1.NodePool, inSpec NodePoolsInSpec, now time.Time) Verdict {
	v := Verdict{Phase: r.Phase, Message: r.Message, RecheckAt: r.Deadline}
	if !r.Open() {
		v.RecheckAt = time.Time{}
		return v
	}
	fail := func(msg string) Verdict {
		return Verdict{Phase: PhaseFailed, Message: msg}
	}
	if msg, failed := hardFailure(r, hc, nps); failed {
		return fail(msg)
	}
	if !r.Deadline.IsZero() && now.After(r.Deadline) {
		return fail(fmt.Sprintf("%s did not finish within %s: %s", capitalize(string(r.Kind)), r.Deadline.Sub(r.StartedAt).Round(time.Second), orDefault(r.Message, "no progress")))
	}
	switch r.Phase {
	case PhaseControlPlane:
		if hc.Spec.Release.Image != r.ReleaseImage {
			v.Action.SetControlPlaneImage = r.ReleaseImage
			v.Message = fmt.Sprintf("Upgrading control plane to %s: starting", r.To)
			return v
		}
		if controlPlaneAt(hc, r.To) {
			v.Phase = PhaseNodePools
			return nodePools(r, v, nps, inSpec)
		}
		v.Message = fmt.Sprintf("Upgrading control plane to %s: %s", r.To, controlPlaneProgress(hc))
		return v
	case PhaseNodePools, PhaseWorkers:
		return nodePools(r, v, nps, inSpec)
	}
	return v
}

// nodePools waits for every NodePool to carry the desired spec and converge.
func nodePools(r *Record, v Verdict, nps []*hyperv1.NodePool, inSpec NodePoolsInSpec) Verdict {
	if len(nps) == 0 {
		v.Message = "Waiting for the NodePool"
		return v
	}
	for _, np := range nps {
		if !inSpec(np) {
			v.Action.SyncNodePools = true
		}
	}
	var ready, total, updated int32
	converged := !v.Action.SyncNodePools
	for _, np := range nps {
		want := wanted(np)
		total += want
		ready += min(np.Status.Replicas, want)
		if r.Kind == Upgrade && np.Status.Version == r.To && !updating(np) {
			updated += want
		}
		if !nodePoolConverged(r, np) {
			converged = false
		}
	}
	if converged {
		v.Phase, v.Message = PhaseDone, fmt.Sprintf("%s to %s completed", capitalize(string(r.Kind)), r.To)
		v.RecheckAt = time.Time{}
		return v
	}
	switch r.Kind {
	case Upgrade:
		v.Message = fmt.Sprintf("Upgrading workers to %s: %d/%d nodes updated", r.To, updated, total)
	case Scale:
		v.Message = fmt.Sprintf("Scaling workers %s→%s: %d/%d ready", r.From, r.To, ready, total)
	case Resize:
		v.Message = fmt.Sprintf("Resizing workers to %s: %s", r.To, rolloutMessage(nps, ready, total))
	}
	return v
}

// nodePoolConverged: the operator has seen the NodePool's current generation, its rollout ended (no Updating*
// condition True), it is Ready with exactly the wanted replicas and, for an upgrade, reports the target version.
func nodePoolConverged(r *Record, np *hyperv1.NodePool) bool {
	if np.DeletionTimestamp != nil || updating(np) {
		return false
	}
	ready := condition(np, hyperv1.NodePoolReadyConditionType)
	if ready == nil || ready.Status != corev1.ConditionTrue || ready.ObservedGeneration < np.Generation {
		return false
	}
	if a := np.Spec.AutoScaling; np.Spec.Replicas == nil && a != nil {
		if np.Status.Replicas < a.Min || np.Status.Replicas > a.Max {
			return false
		}
	} else if np.Status.Replicas != wanted(np) {
		return false
	}
	return r.Kind != Upgrade || np.Status.Version == r.To
}

// wanted is the NodePool's replica target: spec.replicas, or the autoscaler's floor (min).
func wanted(np *hyperv1.NodePool) int32 {
	if np.Spec.Replicas != nil {
		return *np.Spec.Replicas
	}
	if a := np.Spec.AutoScaling; a != nil {
		return a.Min
	}
	return 0
}

// updatingTypes are the NodePool conditions HyperShift holds True while a rollout runs (a new release version, a new
// config, a new platform machine template): a NodePool with one of them True has not finished.
var updatingTypes = []string{hyperv1.NodePoolUpdatingVersionConditionType, hyperv1.NodePoolUpdatingConfigConditionType, hyperv1.NodePoolUpdatingPlatformMachineTemplateConditionType}

func updating(np *hyperv1.NodePool) bool {
	for _, t := range updatingTypes {
		if c := condition(np, t); c != nil && c.Status == corev1.ConditionTrue {
			return true
		}
	}
	return false
}

func rolloutMessage(nps []*hyperv1.NodePool, ready, total int32) string {
	for _, np := range nps {
		for _, t := range updatingTypes {
			if c := condition(np, t); c != nil && c.Status == corev1.ConditionTrue && c.Message != "" {
				return fmt.Sprintf("%s (%d/%d ready)", c.Message, ready, total)
			}
		}
	}
	return fmt.Sprintf("%d/%d ready", ready, total)
}

// controlPlaneAt: history[0] is Completed at the target version, and the version status was observed at the
// HostedCluster's current generation (a stale cache's old Completed entry never counts). Versions, never image
// strings, are compared (a tag and a digest name the same release).
func controlPlaneAt(hc *hyperv1.HostedCluster, version string) bool {
	st := hc.Status.Version
	if st == nil || len(st.History) == 0 || st.ObservedGeneration < hc.Generation {
		return false
	}
	h := st.History[0]
	return h.State == configv1.CompletedUpdate && h.Version == version
}

// controlPlaneProgress is the CVO's own words ("Working towards 4.18.5: 30 of 40 done (75% complete)").
func controlPlaneProgress(hc *hyperv1.HostedCluster) string {
	for _, c := range hc.Status.Conditions {
		if c.Type == string(hyperv1.ClusterVersionProgressing) && c.Status == metav1.ConditionTrue && c.Message != "" {
			return c.Message
		}
	}
	return "waiting for the operator"
}

// hardFailure: what the operator will not get past on its own during an operation (docs/day2.md, section "The record"):
// the release refused for this generation, Progressing=False Blocked (e.g. ClusterVersionUpgradeable=False for a
// y-stream), a NodePool's invalid platform or machine config, an InPlace upgrade that failed.
func hardFailure(r *Record, hc *hyperv1.HostedCluster, nps []*hyperv1.NodePool) (string, bool) {
	if r.Kind == Upgrade {
		for _, c := range hc.Status.Conditions {
			current := c.ObservedGeneration > r.HCGeneration
			switch {
			case c.Type == string(hyperv1.ValidReleaseImage) && c.Status == metav1.ConditionFalse && c.Reason != "SecretNotFound" && current:
				return c.Type + ": " + orDefault(c.Message, c.Reason), true
			case c.Type == string(hyperv1.HostedClusterProgressing) && c.Status == metav1.ConditionFalse && c.Reason == "Blocked" && current:
				msg := orDefault(c.Message, c.Reason)
				for _, u := range hc.Status.Conditions {
					if u.Type == string(hyperv1.ClusterVersionUpgradeable) && u.Status == metav1.ConditionFalse {
						msg += ": " + u.Reason + ": " + u.Message
					}
				}
				return "Upgrade blocked: " + msg, true
			}
		}
	}
	for _, np := range nps {
		for _, t := range []string{hyperv1.NodePoolValidPlatformConfigConditionType, hyperv1.NodePoolValidMachineConfigConditionType} {
			if c := condition(np, t); c != nil && c.Status == corev1.ConditionFalse {
				return "NodePool " + np.Name + " " + t + ": " + orDefault(c.Message, c.Reason), true
			}
		}
		if c := condition(np, hyperv1.NodePoolUpdatingVersionConditionType); c != nil && c.Status == corev1.ConditionFalse && c.Reason == "InplaceUpgradeFailed" {
			return "NodePool " + np.Name + " " + c.Type + ": " + orDefault(c.Message, c.Reason), true
		}
	}
	return "", false
}

func condition(np *hyperv1.NodePool, t string) *hyperv1.NodePoolCondition {
	for i := range np.Status.Conditions {
		if np.Status.Conditions[i].Type == t {
			return &np.Status.Conditions[i]
		}
	}
	return nil
}

func orDefault(s, def string) string {
	if s == "" {
		return def
	}
	return s
}

func capitalize(s string) string {
	if s == "" {
		return s
	}
	return string(s[0]-'a'+'A') + s[1:]
}
