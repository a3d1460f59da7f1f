// Package status decides a cluster's DCM status from its HyperShift objects.
//
// Map is the one status function of the product (docs/status-mapping.md: the HTTP API (GET, LIST) and
// the CloudEvents publisher both call it, so a GET and an event never disagree. It is pure: the objects and the
// clock go in, a status, a message and the time at which the answer may change by itself come out.
package status

import (
	"fmt"
	"strings"
	"time"

	configv1 "github.com/openshift/api/config/v1"
	hyperv1 "github.com/openshift/hypershift/api/hypershift/v1beta1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/dcm-sp/acm-cluster-sp/internal/sp/operation"
	"github.com/dcm-sp/acm-cluster-sp/internal/sp/platform"
)

// Status is one of the seven DCM statuses.
type Status string

// The statuses, exactly as they appear on the wire.
const (
	Pending      Status = "PENDING"
	Provisioning Status = "PROVISIONING"
	Ready        Status = "READY"
	Updating     Status = "UPDATING"
	Failed       Status = "FAILED"
	Unavailable  Status = "UNAVAILABLE"
	Deleting     Status = "DELETING"
	Deleted      Status = "DELETED"
)

// All lists the statuses in precedence order (DELETED first, PENDING last).
var All = []Status{Deleted, Deleting, Failed, Updating, Ready, Provisioning, Unavailable, Pending}

// Settings are the timing rules of docs/status-mapping.md
type Settings struct {
	DegradedGracePeriod time.Duration // Degraded=True for longer than this is FAILED (default 15m)
	// ProvisioningTimeouts: a cluster not READY once after its platform's timeout is FAILED (a platform not set
	// here takes its default from package platform's table).
	ProvisioningTimeouts map[platform.Name]time.Duration
	DeletionWarnAfter    time.Duration // DELETING longer than this says so in the message (default 15m)
	// UpdateUnavailableGrace: during an operation, Available=False for longer than this is UNAVAILABLE (default 5m;
	// a SingleReplica kube-apiserver may blink while it rolls).
	UpdateUnavailableGrace time.Duration
}

// DefaultSettings are the product defaults (the configurable ones are listed in docs/configuration.md).
func DefaultSettings() Settings {
	return Settings{
		DegradedGracePeriod:    15 * time.Minute,
		DeletionWarnAfter:      15 * time.Minute,
		UpdateUnavailableGrace: 5 * time.Minute,
	}
}

// Result is the decision for one cluster.
type Result struct {
	Status  Status
	Message string
	// ControlPlaneAvailable is HostedCluster Available=True (drives nodes.control_plane.ready).
	ControlPlaneAvailable bool
	// RecheckAt is when the result may change without any object changing (a grace period or timeout
	// expiring); zero when no deadline is pending. Reconcilers schedule a re-evaluation at this time.
	RecheckAt time.Time
	// SteppedBack: the cluster once completed yet now reads PROVISIONING or PENDING. Legitimate (a NodePool
	// recreated) but also what a cache shows when its NodePools vanished before its HostedCluster's deletion
	// arrived (separate informers): a cached reader confirms it against the API server before reporting it.
	SteppedBack bool
	// Why tells the causes of one status apart (vocabulary.go): which FAILED is terminal, which PROVISIONING is a
	// running cluster short of workers.
	Why Why
}

// Map computes the status of one cluster. hc == nil means the HostedCluster of a known instance is gone
// (DELETED). nodePools are the NodePools carrying the instance's label, in any order.
func Map(hc *hyperv1.HostedCluster, nodePools []*hyperv1.NodePool, now time.Time, s Settings) Result {
	if hc == nil {
		return Result{Status: Deleted, Message: "Cluster deleted"}
	}
	e := evaluate(hc, nodePools, now, s)
	return e.result()
}

// evaluation holds the predicates of docs/status-mapping.md for one cluster.
type evaluation struct {
	hc        *hyperv1.HostedCluster
	nodePools []*hyperv1.NodePool
	now       time.Time
	s         Settings
	conds     conditions
	recheck   time.Time
}

// conditions looks HostedCluster conditions up by type. A linear scan over the ~20 conditions allocates nothing,
// which matters because every GET and LIST item evaluates the status.
type conditions []metav1.Condition

func (cs conditions) get(condType string) (metav1.Condition, bool) {
	for i := range cs {
		if cs[i].Type == condType {
			return cs[i], true
		}
	}
	return metav1.Condition{}, false
}

func evaluate(hc *hyperv1.HostedCluster, nodePools []*hyperv1.NodePool, now time.Time, s Settings) *evaluation {
	return &evaluation{hc: hc, nodePools: nodePools, now: now, s: s, conds: conditions(hc.Status.Conditions)}
}

func (e *evaluation) is(condType string, st metav1.ConditionStatus) bool {
	c, ok := e.conds.get(condType)
	return ok && c.Status == st
}

// msg returns the message of a condition ("" when absent).
func (e *evaluation) msg(condType string) string {
	c, _ := e.conds.get(condType)
	return c.Message
}

func (e *evaluation) result() Result {
	r := e.decide()
	r.ControlPlaneAvailable = e.available()
	r.RecheckAt = e.recheck
	r.SteppedBack = (r.Status == Provisioning || r.Status == Pending) && e.everCompleted()
	return r
}

func (e *evaluation) decide() Result {
	if dt := e.hc.DeletionTimestamp; dt != nil {
		return e.deleting(dt.Time)
	}
	timeout, served := e.provisioningTimeout()
	if !served {
		return Result{Status: Failed, Why: WhyPlatformNotServed, Message: fmt.Sprintf(
			"The HostedCluster's platform type %q is not one this service provider serves (%s): it neither reads nor changes it", e.hc.Spec.Platform.Type, platform.Names())}
	}
	everCompleted := e.everCompleted()
	if msg, failed := e.hardFailure(); failed {
		why := WhyConfiguration
		if everCompleted {
			why = WhyConfigurationLater
		}
		return Result{Status: Failed, Message: msg, Why: why}
	}
	if r, ok := e.operation(); ok {
		return r
	}
	if d, ok := e.conds.get(string(hyperv1.HostedClusterDegraded)); ok && d.Status == metav1.ConditionTrue {
		since := e.notFuture(d.LastTransitionTime.Time)
		if e.now.Sub(since) > e.s.DegradedGracePeriod {
			return Result{Status: Failed, Message: fmt.Sprintf("Degraded for more than %s: %s", human(e.s.DegradedGracePeriod), d.Message), Why: WhyDegradedTooLong}
		}
		e.recheckAt(since.Add(e.s.DegradedGracePeriod))
	}
	if !everCompleted {
		created := e.notFuture(e.hc.CreationTimestamp.Time)
		if e.now.Sub(created) > timeout {
			return Result{Status: Failed, Message: fmt.Sprintf("Not ready after %s: %s", human(timeout), e.progressMessage()), Why: WhyTimeout}
		}
		e.recheckAt(created.Add(timeout))
	}
	available := e.available()
	if available && e.rolloutCompleted() && e.nodePoolsReady() {
		return Result{Status: Ready, Message: e.annotate(e.readyMessage())}
	}
	if everCompleted && !available {
		return Result{Status: Unavailable, Message: "Control plane unavailable: " + orDefault(e.msg(string(hyperv1.HostedClusterAvailable)), "Available is not True")}
	}
	if e.hcpStarted() {
		r := Result{Status: Provisioning, Message: e.annotate(e.progressMessage())}
		if everCompleted && available && e.rolloutCompleted() {
			r.Why = WhyWorkersShort // only the workers are missing: nodePoolsReady is false
		}
		return r
	}
	return Result{Status: Pending, Message: e.annotate(e.pendingMessage())}
}

// operation reports a day-2 operation (docs/day2.md, section "Status"): FAILED once it failed (until another operation
// starts), UPDATING while it runs — with operation.Next's progress message and its deadline — and UNAVAILABLE only
// when the control plane stays unavailable longer than the grace period. The operation's deadline replaces the
// degraded grace period meanwhile.
func (e *evaluation) operation() (Result, bool) {
	rec := operation.Decode(e.hc)
	switch {
	case rec == nil || rec.Phase == operation.PhaseDone:
		return Result{}, false
	case rec.Phase == operation.PhaseFailed:
		return Result{Status: Failed, Message: orDefault(rec.Message, "the "+string(rec.Kind)+" failed"), Why: WhyOperation}, true
	}
	// The status does not know the desired NodePool spec: a rollout is reported until the reconciler records done.
	v := operation.Next(rec, e.hc, e.nodePools, func(*hyperv1.NodePool) bool { return false }, e.now)
	if v.Phase == operation.PhaseFailed {
		return Result{Status: Failed, Message: v.Message, Why: WhyOperation}, true
	}
	e.recheckAt(v.RecheckAt)
	if c, ok := e.conds.get(string(hyperv1.HostedClusterAvailable)); ok && c.Status != metav1.ConditionTrue {
		grace := e.s.UpdateUnavailableGrace
		if grace == 0 {
			grace = DefaultSettings().UpdateUnavailableGrace
		}
		since := e.notFuture(c.LastTransitionTime.Time)
		if e.now.Sub(since) > grace {
			return Result{Status: Unavailable, Message: "Control plane unavailable during " + rec.Describe() + ": " + orDefault(c.Message, "Available is not True")}, true
		}
		e.recheckAt(since.Add(grace))
	}
	return Result{Status: Updating, Message: e.annotate(orDefault(v.Message, "Accepted"))}, true
}

func (e *evaluation) deleting(since time.Time) Result {
	since = e.notFuture(since)
	if e.s.DeletionWarnAfter > 0 {
		if e.now.Sub(since) > e.s.DeletionWarnAfter {
			return Result{Status: Deleting, Message: fmt.Sprintf("Deletion in progress for more than %s; waiting for finalizers", human(e.s.DeletionWarnAfter))}
		}
		e.recheckAt(since.Add(e.s.DeletionWarnAfter))
	}
	return Result{Status: Deleting, Message: "Deletion in progress"}
}

// hardFailedHC are the HostedCluster conditions whose False is a configuration error the operator will not fix.
var hardFailedHC = []hyperv1.ConditionType{
	hyperv1.ValidHostedClusterConfiguration,
	hyperv1.SupportedHostedCluster,
	hyperv1.ValidHostedControlPlaneConfiguration,
	hyperv1.ValidReleaseInfo,
}

// hardFailedNP are the NodePool conditions whose False is a configuration error.
var hardFailedNP = []string{
	hyperv1.NodePoolValidPlatformConfigConditionType,
	hyperv1.NodePoolValidReleaseImageConditionType,
	hyperv1.NodePoolValidMachineConfigConditionType,
}

func (e *evaluation) hardFailure() (string, bool) {
	for _, t := range hardFailedHC {
		if c, ok := e.conds.get(string(t)); ok && c.Status == metav1.ConditionFalse {
			return conditionMessage(c.Type, c.Reason, c.Message), true
		}
	}
	if c, ok := e.conds.get(string(hyperv1.ValidReleaseImage)); ok && c.Status == metav1.ConditionFalse && c.Reason != secretNotFound {
		return conditionMessage(c.Type, c.Reason, c.Message), true
	}
	for _, np := range e.nodePools {
		for _, t := range hardFailedNP {
			if c := npCondition(np, t); c != nil && c.Status == corev1.ConditionFalse {
				return "NodePool " + np.Name + " " + conditionMessage(c.Type, c.Reason, c.Message), true
			}
		}
	}
	return "", false
}

// secretNotFound is the transient ValidReleaseImage reason while the pull secret has not appeared yet.
const secretNotFound = "SecretNotFound"

func conditionMessage(condType, reason, message string) string {
	if message == "" {
		message = reason
	}
	return condType + ": " + message
}

func (e *evaluation) everCompleted() bool { return CompletedVersion(e.hc) != "" }

// CompletedVersion is the version of the newest Completed rollout in the HostedCluster's history ("" when none
// completed yet): the version the cluster runs, as HyperShift's own getHostedClusterVersion reads it.
func CompletedVersion(hc *hyperv1.HostedCluster) string {
	if hc.Status.Version == nil {
		return ""
	}
	for _, h := range hc.Status.Version.History {
		if h.State == configv1.CompletedUpdate {
			return orDefault(h.Version, "(unknown)")
		}
	}
	return ""
}

func (e *evaluation) rolloutCompleted() bool {
	v := e.hc.Status.Version
	return v != nil && len(v.History) > 0 && v.History[0].State == configv1.CompletedUpdate
}

func (e *evaluation) available() bool {
	return e.is(string(hyperv1.HostedClusterAvailable), metav1.ConditionTrue)
}

func (e *evaluation) hcpStarted() bool {
	if e.available() || e.is(string(hyperv1.HostedClusterDegraded), metav1.ConditionTrue) || e.is(string(hyperv1.HostedClusterDegraded), metav1.ConditionFalse) {
		return true
	}
	for _, t := range []hyperv1.ConditionType{hyperv1.InfrastructureReady, hyperv1.EtcdAvailable, hyperv1.KubeAPIServerAvailable} {
		if c, ok := e.conds.get(string(t)); ok && c.Status != metav1.ConditionUnknown {
			return true
		}
	}
	return false
}

func (e *evaluation) nodePoolsReady() bool {
	if len(e.nodePools) == 0 {
		return false
	}
	for _, np := range e.nodePools {
		if !nodePoolReady(np) {
			return false
		}
	}
	return true
}

// nodePoolReady: Ready=True with the wanted replicas — at least spec.replicas (a Replace rollout surges one above
// it), or within [min, max] under autoscaling (spec.replicas is nil then).
func nodePoolReady(np *hyperv1.NodePool) bool {
	if np.DeletionTimestamp != nil {
		return false
	}
	c := npCondition(np, hyperv1.NodePoolReadyConditionType)
	if c == nil || c.Status != corev1.ConditionTrue {
		return false
	}
	if a := np.Spec.AutoScaling; np.Spec.Replicas == nil && a != nil {
		return np.Status.Replicas >= a.Min && np.Status.Replicas <= a.Max
	}
	return np.Status.Replicas >= desiredReplicas(np)
}

// desiredReplicas is spec.replicas, or under autoscaling the current count within [min, max].
func desiredReplicas(np *hyperv1.NodePool) int32 {
	if np.Spec.Replicas != nil {
		return *np.Spec.Replicas
	}
	if a := np.Spec.AutoScaling; a != nil {
		return min(max(np.Status.Replicas, a.Min), a.Max)
	}
	return 0
}

func npCondition(np *hyperv1.NodePool, condType string) *hyperv1.NodePoolCondition {
	for i := range np.Status.Conditions {
		if np.Status.Conditions[i].Type == condType {
			return &np.Status.Conditions[i]
		}
	}
	return nil
}

// Workers returns the ready and total worker counts over the NodePools (status.replicas / spec.replicas).
func Workers(nodePools []*hyperv1.NodePool) (ready, total int32) {
	for _, np := range nodePools {
		ready += np.Status.Replicas
		total += desiredReplicas(np)
	}
	return ready, total
}

// provisioningTimeout is the provisioning timeout of the cluster's platform; false: the SP does not serve it.
func (e *evaluation) provisioningTimeout() (time.Duration, bool) {
	p, ok := platform.Of(e.hc.Spec.Platform.Type)
	if !ok {
		return 0, false
	}
	return platform.Timeout(p.Name, e.s.ProvisioningTimeouts, func(p platform.Platform) time.Duration { return p.ProvisioningTimeout })
}

func (e *evaluation) pendingMessage() string {
	if c, ok := e.conds.get(string(hyperv1.ValidReleaseImage)); ok && c.Status == metav1.ConditionFalse && c.Reason == secretNotFound {
		return "Pull secret not found: " + orDefault(c.Message, c.Reason)
	}
	return "Waiting for the hosted control plane to be created"
}

// progressMessage says what a cluster that is not READY is waiting for.
func (e *evaluation) progressMessage() string {
	if !e.hcpStarted() {
		return e.pendingMessage()
	}
	if !e.available() {
		if m := e.msg(string(hyperv1.HostedClusterAvailable)); m != "" {
			return "Control plane starting: " + m
		}
		return "Control plane starting"
	}
	if len(e.nodePools) == 0 {
		return "No NodePool found"
	}
	if !e.nodePoolsReady() {
		ready, total := Workers(e.nodePools)
		msg := fmt.Sprintf("Control plane available; workers %d/%d ready", ready, total)
		if why := e.nodePoolWaitReason(); why != "" {
			msg += " (" + why + ")"
		}
		return msg
	}
	return fmt.Sprintf("Cluster version %s rolling out", e.rolloutVersion())
}

// nodePoolWaitReason explains the first not-ready NodePool. AllMachinesReady and AllNodesHealthy say why a pool is
// not ready (e.g. NoSuitableAgents); Ready's own message only restates the replica count (docs/status-mapping.md).
func (e *evaluation) nodePoolWaitReason() string {
	for _, np := range e.nodePools {
		if np.DeletionTimestamp != nil {
			return "NodePool " + np.Name + " is being deleted"
		}
		if nodePoolReady(np) {
			continue
		}
		for _, t := range []string{hyperv1.NodePoolAllMachinesReadyConditionType, hyperv1.NodePoolAllNodesHealthyConditionType, hyperv1.NodePoolReadyConditionType} {
			if c := npCondition(np, t); c != nil && c.Status == corev1.ConditionFalse {
				return orDefault(c.Message, c.Reason)
			}
		}
	}
	return ""
}

func (e *evaluation) rolloutVersion() string {
	v := e.hc.Status.Version
	if v == nil {
		return "(unknown)"
	}
	if len(v.History) > 0 && v.History[0].Version != "" {
		return v.History[0].Version
	}
	return orDefault(v.Desired.Version, "(unknown)")
}

func (e *evaluation) readyMessage() string {
	ready, total := Workers(e.nodePools)
	msg := fmt.Sprintf("Cluster is ready; workers %d/%d ready", ready, total)
	if d, ok := e.conds.get(string(hyperv1.HostedClusterDegraded)); ok && d.Status == metav1.ConditionTrue {
		msg += "; degraded: " + orDefault(d.Message, d.Reason)
	}
	return msg
}

// annotate appends informational facts that never change the status.
func (e *evaluation) annotate(msg string) string {
	if e.is(string(hyperv1.ReconciliationActive), metav1.ConditionFalse) {
		msg += "; reconciliation paused"
	}
	return msg
}

func (e *evaluation) recheckAt(t time.Time) {
	if !t.After(e.now) {
		return
	}
	if e.recheck.IsZero() || t.Before(e.recheck) {
		e.recheck = t
	}
}

// notFuture treats a timestamp from a clock running ahead of ours as "now" (docs/status-mapping.md).
func (e *evaluation) notFuture(t time.Time) time.Time {
	if t.After(e.now) {
		return e.now
	}
	return t
}

func orDefault(s, def string) string {
	if strings.TrimSpace(s) == "" {
		return def
	}
	return s
}

// human renders a duration the way people write timeouts: 45m, 2h, 1h30m, 90s.
func human(d time.Duration) string {
	switch {
	case d >= time.Hour && d%time.Hour == 0:
		return fmt.Sprintf("%dh", d/time.Hour)
	case d >= time.Minute && d%time.Minute == 0:
		return fmt.Sprintf("%dm", d/time.Minute)
	case d%time.Second == 0:
		return fmt.Sprintf("%ds", d/time.Second)
	default:
		return d.String()
	}
}
