// Package simulator plays the HyperShift operator (and the bits of ACM and assisted-service the SP relies on)
// against a bare local hub, so the SP can be exercised end to end without a management cluster.
//
// It watches HostedClusters and NodePools and walks them through the real condition sequence of docs/hypershift-objects.md
// on a compressed clock: the operator's finalizer and the t≈0 conditions, the hosted control plane starting
// (Degraded=True UnavailableReplicas), Available with the endpoint and the <name>-admin-kubeconfig Secret, workers
// coming up one by one, and the version rollout completing. Agent NodePools bind matching Agents first and report
// NoSuitableAgents when too few exist. On deletion it deletes the NodePools, waits, unbinds Agents, deletes the
// operator-owned Secrets and removes its finalizer.
//
// Timeline (R = Timeline.ReadyAfter, default 20 s in dev mode, 2 s in tests; ×BareMetalFactor for Agent clusters):
//
//	0       finalizer, ReconciliationActive/ValidConfiguration/SupportedHostedCluster/ValidReleaseImage=True,
//	        Progressing=False, Available=False (WaitingForAvailable), Degraded=Unknown, history [Partial]
//	0.15 R  control plane starting: Degraded=True (UnavailableReplicas), InfrastructureReady=True, Agents bound
//	0.35 R  Available=True, Degraded=False, controlPlaneEndpoint, status.kubeconfig + Secret, ClusterVersionProgressing
//	0.45 R  workers join one by one until status.replicas = spec.replicas at 0.8 R (NodePool Ready=True)
//	1.0 R   rollout Completed, ClusterVersionAvailable=True, ManagedCluster joined with its console URL claim
//
// A pass that comes late (after the next phase but one has begun on the clock) writes only the next phase and sets
// the clock back to its start, so no phase of an install goes unwritten on a loaded machine.
//
// Failure injection, by annotation simulator.acm-cluster-sp/fail on the HostedCluster:
//
//	invalid-release          ValidReleaseImage=False (InvalidImage) from t0, Progressing=False (Blocked); nothing else happens
//	stuck-pending            the hosted control plane never appears: the t0 conditions forever
//	degraded                 like a normal install, but Degraded=True (UnavailableReplicas) never clears
//	unavailable-after-ready  completes, then at 1.5 R Available=False (KASLoadBalancerNotReachable)
//	nodepool-invalid         NodePool ValidPlatformConfig=False (InvalidKubevirtMachineTemplate); no worker ever joins
//	never-complete           control plane and workers come up but the rollout stays Partial (no *.apps DNS)
//	stuck-deletion           on delete the operator's finalizer is never removed
//	upgrade-blocked          a y-stream upgrade is Blocked by ClusterVersionUpgradeable=False (AdminAckRequired)
//	                         unless hypershift.openshift.io/force-upgrade-to names the image
//	upgrade-stuck            a control-plane upgrade stays Partial ("Unable to apply …")
//	np-upgrade-stuck         NodePool rollouts never replace a node
//	inplace-failed           an InPlace (Agent) NodePool upgrade ends with UpdatingVersion=False InplaceUpgradeFailed
//	scale-no-capacity        a scale-up never gets its machines (MachineCreationFailed)
//	node-lost                an installed NodePool has one node NotReady (NodeConditionsFailed) until the annotation
//	                         goes; then a replacement joins
//
// Day-2 (upgrades, rollouts, scaling of an installed cluster) is stepped per transition: see day2.go.
package simulator

import (
	"fmt"
	"hash/fnv"
	"math"
	"slices"
	"sort"
	"time"

	configv1 "github.com/openshift/api/config/v1"
	hyperv1 "github.com/openshift/hypershift/api/hypershift/v1beta1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	apimeta "k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/dcm-sp/acm-cluster-sp/internal/sp/inventory"
	"github.com/dcm-sp/acm-cluster-sp/internal/sp/meta"
	"github.com/dcm-sp/acm-cluster-sp/internal/sp/versions"
)

// Annotations the simulator reads and writes on HostedClusters.
const (
	AnnotationFail    = "simulator.acm-cluster-sp/fail"
	AnnotationStarted = "simulator.acm-cluster-sp/started-at" // RFC 3339 with nanoseconds; the timeline's t0
	// AnnotationDeleting records when the simulator first saw the deletion (deletionTimestamp has whole seconds only).
	AnnotationDeleting = "simulator.acm-cluster-sp/deleting-since"
)

// Failure modes (values of AnnotationFail).
const (
	FailInvalidRelease        = "invalid-release"
	FailStuckPending          = "stuck-pending"
	FailDegraded              = "degraded"
	FailUnavailableAfterReady = "unavailable-after-ready"
	FailNodePoolInvalid       = "nodepool-invalid"
	FailNeverComplete         = "never-complete"
	FailStuckDeletion         = "stuck-deletion"
)

// Timeline scales the simulated operator's clock.
type Timeline struct {
	ReadyAfter      time.Duration // a KubeVirt cluster completes its rollout after this long
	DeleteAfter     time.Duration // a deleted cluster's finalizer is removed after this long
	BareMetalFactor float64       // Agent clusters take this many times longer
}

// DevTimeline is dev mode's pace: READY in about 20 s.
func DevTimeline() Timeline {
	return Timeline{ReadyAfter: 20 * time.Second, DeleteAfter: 5 * time.Second, BareMetalFactor: 1.5}
}

// TestTimeline is the pace for tests: READY in about 2 s.
func TestTimeline() Timeline {
	return Timeline{ReadyAfter: 2 * time.Second, DeleteAfter: 500 * time.Millisecond, BareMetalFactor: 1.5}
}

// AppsDomain is the management cluster's apps domain the simulated operator writes under base-domain passthrough.
const AppsDomain = "apps.local-hub.test"

// Observed is what the simulator sees of one HostedCluster.
type Observed struct {
	HC        *hyperv1.HostedCluster
	NodePools []*hyperv1.NodePool // with spec.clusterName = HC name
	Agents    []inventory.Agent   // Agent platform: Agents in agentNamespace matching the NodePools' selectors
	Now       time.Time
}

// Plan is what the simulator does next for one HostedCluster. The controller applies it; Step decides it.
type Plan struct {
	Start bool // add the finalizer and AnnotationStarted
	// Restart sets AnnotationStarted back to this time: a late pass writes the next phase, not a later one.
	Restart       time.Time
	SetBaseDomain string
	HCStatus      *hyperv1.HostedClusterStatus      // nil: unchanged
	NPStatus      map[string]hyperv1.NodePoolStatus // by NodePool name; absent: unchanged
	NPFinalize    []string                          // NodePools that need the finalizer
	NPRelease     []string                          // NodePools deleted on their own: drained, the finalizer goes
	Kubeconfig    bool                              // ensure <name>-admin-kubeconfig and <name>-kubeadmin-password
	BindAgents    []string                          // Agent names to bind to this cluster
	UnbindAgents  []string                          // Agents a scale-down lets go
	// Day-2 transition annotations to write: "" unchanged, "-" removed (see day2.go).
	HCTransition  string
	NPTransitions map[string]string // by NodePool name
	NPTemplates   map[string]string // by NodePool name: the template last rolled out
	JoinACM       bool              // mark the ManagedCluster joined with its claims
	Delete        *DeletePlan       // non-nil while the HC is being deleted
	RequeueAfter  time.Duration     // zero: nothing scheduled
}

// DeletePlan is the deletion part of a Plan.
type DeletePlan struct {
	MarkStart           bool     // record AnnotationDeleting (the deletion clock starts now)
	DeleteNodePools     bool     // delete the NodePools (they keep the finalizer for now)
	ReleaseNodePools    []string // remove the finalizer from these NodePools
	UnbindAgents        []string
	DeleteSecrets       bool // the operator-owned admin-kubeconfig and kubeadmin-password Secrets
	RemoveHCFinalizer   bool
	CloudResourcesClean bool // set CloudResourcesDestroyed=True (cleanup annotation present)
}

// phase boundaries as fractions of ReadyAfter.
const (
	phaseHCPStarted = 0.15
	phaseAvailable  = 0.35
	phaseWorkers    = 0.45
	phaseWorkersEnd = 0.80
	phaseCompleted  = 1.0
	phaseOutage     = 1.5
)

// Step computes the next plan for one HostedCluster. It is pure: same inputs, same plan.
func Step(o Observed, tl Timeline) Plan {
	hc := o.HC
	var p Plan
	if hc.DeletionTimestamp != nil {
		p.Delete = deletion(o, tl, &p)
		return p
	}
	started, ok := startedAt(hc)
	if !ok || !slices.Contains(hc.Finalizers, meta.FinalizerHyperShift) {
		p.Start = true
		started = o.Now
	}
	for _, np := range o.NodePools {
		if np.DeletionTimestamp == nil && !slices.Contains(np.Finalizers, meta.FinalizerHyperShift) {
			p.NPFinalize = append(p.NPFinalize, np.Name)
		}
		// A NodePool deleted while its cluster lives: the operator drains and removes its machines, then lets it go.
		if np.DeletionTimestamp != nil && slices.Contains(np.Finalizers, meta.FinalizerHyperShift) {
			p.NPRelease = append(p.NPRelease, np.Name)
		}
	}
	r := tl.ReadyAfter
	if hc.Spec.Platform.Type == hyperv1.AgentPlatform && tl.BareMetalFactor > 0 {
		r = time.Duration(float64(r) * tl.BareMetalFactor)
	}
	at := func(f float64) time.Time { return started.Add(time.Duration(f * float64(r))) }
	elapsed := o.Now.Sub(started)
	reached := func(f float64) bool { return elapsed >= time.Duration(f*float64(r)) }
	next := time.Time{}
	schedule := func(t time.Time) {
		if t.After(o.Now) && (next.IsZero() || t.Before(next)) {
			next = t
		}
	}
	mode := hc.Annotations[AnnotationFail]

	st := hc.Status.DeepCopy()
	now := metav1.NewTime(o.Now)
	// Conditions are collected first and applied once each, so that a condition decided twice in one step (the
	// t0 value, then a failure mode's) does not get a new lastTransitionTime on every pass.
	desired := map[string]metav1.Condition{}
	var order []string
	set := func(t hyperv1.ConditionType, s metav1.ConditionStatus, reason, msg string) {
		if _, seen := desired[string(t)]; !seen {
			order = append(order, string(t))
		}
		desired[string(t)] = metav1.Condition{Type: string(t), Status: s, Reason: reason, Message: msg, LastTransitionTime: now, ObservedGeneration: hc.Generation}
	}
	version := releaseVersion(hc)
	if hc.Status.Version != nil && hc.Status.Version.Desired.Version != "" {
		version = hc.Status.Version.Desired.Version // the release the cluster runs (an upgrade moves it)
	}
	const notFound = "The hosted control plane is not found"

	// t0
	set(hyperv1.ReconciliationActive, metav1.ConditionTrue, "AsExpected", "Reconciliation active on resource")
	set(hyperv1.ValidHostedClusterConfiguration, metav1.ConditionTrue, "AsExpected", "Configuration passes validation")
	set(hyperv1.SupportedHostedCluster, metav1.ConditionTrue, "AsExpected", "HostedCluster is supported by operator configuration")
	set(hyperv1.ValidReleaseImage, metav1.ConditionTrue, "AsExpected", "Release image is valid")
	set(hyperv1.HostedClusterProgressing, metav1.ConditionFalse, "AsExpected", "HostedCluster is at expected version")
	if st.Version == nil {
		st.Version = &hyperv1.ClusterVersionStatus{
			Desired:            configv1.Release{Image: hc.Spec.Release.Image, Version: version},
			History:            []configv1.UpdateHistory{{State: configv1.PartialUpdate, Version: version, Image: hc.Spec.Release.Image, StartedTime: metav1.NewTime(started)}},
			ObservedGeneration: hc.Generation,
		}
	}
	hcpStarted := reached(phaseHCPStarted) && mode != FailStuckPending && mode != FailInvalidRelease
	available := reached(phaseAvailable) && hcpStarted
	if mode == FailUnavailableAfterReady && reached(phaseOutage) {
		available = false
	}
	// A late pass (the simulator's queue ran behind on a loaded machine) writes the next phase of the install, not
	// one its clock says has begun since: the clock is set back to that phase's start. HyperShift's operator
	// passes through each phase and reports it, so the SP can observe each for its length.
	if !rolledOut(hc) {
		rewind := func(f float64) {
			started = o.Now.Add(-time.Duration(f * float64(r)))
			elapsed = o.Now.Sub(started)
			p.Restart = started
		}
		switch {
		case hcpStarted && !apimeta.IsStatusConditionTrue(hc.Status.Conditions, string(hyperv1.InfrastructureReady)) && reached(phaseAvailable):
			rewind(phaseHCPStarted)
			available = false
		case available && !apimeta.IsStatusConditionTrue(hc.Status.Conditions, string(hyperv1.HostedClusterAvailable)) && reached(phaseWorkers):
			rewind(phaseAvailable)
		}
	}
	switch {
	case mode == FailInvalidRelease:
		set(hyperv1.ValidReleaseImage, metav1.ConditionFalse, "InvalidImage", fmt.Sprintf("failed to pull release image %s: manifest unknown", hc.Spec.Release.Image))
		set(hyperv1.HostedClusterProgressing, metav1.ConditionFalse, "Blocked", "Release image is invalid")
		set(hyperv1.HostedClusterAvailable, metav1.ConditionFalse, "WaitingForAvailable", "Waiting for hosted control plane to be healthy")
		set(hyperv1.HostedClusterDegraded, metav1.ConditionUnknown, "StatusUnknown", notFound)
	case !hcpStarted:
		set(hyperv1.HostedClusterAvailable, metav1.ConditionFalse, "WaitingForAvailable", "Waiting for hosted control plane to be healthy")
		set(hyperv1.HostedClusterDegraded, metav1.ConditionUnknown, "StatusUnknown", notFound)
		for _, t := range []hyperv1.ConditionType{hyperv1.InfrastructureReady, hyperv1.EtcdAvailable, hyperv1.KubeAPIServerAvailable, hyperv1.ValidHostedControlPlaneConfiguration, hyperv1.ValidReleaseInfo} {
			set(t, metav1.ConditionUnknown, "StatusUnknown", notFound)
		}
		if mode != FailStuckPending {
			schedule(at(phaseHCPStarted))
		}
	case !reached(phaseAvailable):
		set(hyperv1.HostedClusterDegraded, metav1.ConditionTrue, "UnavailableReplicas", "kube-apiserver deployment has 3 unavailable replicas")
		set(hyperv1.InfrastructureReady, metav1.ConditionTrue, "AsExpected", "Cluster infrastructure is ready")
		set(hyperv1.EtcdAvailable, metav1.ConditionFalse, "EtcdWaitingForQuorum", "Waiting for etcd to reach quorum")
		set(hyperv1.KubeAPIServerAvailable, metav1.ConditionFalse, "NotFound", "Waiting for the kube-apiserver deployment to become available")
		set(hyperv1.ValidHostedControlPlaneConfiguration, metav1.ConditionTrue, "AsExpected", "Configuration passes validation")
		set(hyperv1.ValidReleaseInfo, metav1.ConditionTrue, "AsExpected", "Release image is valid")
		set(hyperv1.IgnitionEndpointAvailable, metav1.ConditionFalse, "IgnitionServerDeploymentUnavailable", "Ignition server deployment is not yet available")
		set(hyperv1.HostedClusterAvailable, metav1.ConditionFalse, "ComponentsNotAvailable", "Waiting for etcd and kube-apiserver to become available")
		schedule(at(phaseAvailable))
	default:
		set(hyperv1.InfrastructureReady, metav1.ConditionTrue, "AsExpected", "Cluster infrastructure is ready")
		set(hyperv1.EtcdAvailable, metav1.ConditionTrue, "QuorumAvailable", "Etcd cluster quorum is available")
		set(hyperv1.KubeAPIServerAvailable, metav1.ConditionTrue, "AsExpected", "Kube APIServer deployment is available")
		set(hyperv1.ValidHostedControlPlaneConfiguration, metav1.ConditionTrue, "AsExpected", "Configuration passes validation")
		set(hyperv1.ValidReleaseInfo, metav1.ConditionTrue, "AsExpected", "Release image is valid")
		set(hyperv1.IgnitionEndpointAvailable, metav1.ConditionTrue, "AsExpected", "Ignition server deployment is available")
		if mode == FailDegraded {
			set(hyperv1.HostedClusterDegraded, metav1.ConditionTrue, "UnavailableReplicas", "etcd statefulset has 1 unavailable replica")
		} else {
			set(hyperv1.HostedClusterDegraded, metav1.ConditionFalse, "AsExpected", "The hosted cluster is not degraded")
		}
		if available {
			set(hyperv1.HostedClusterAvailable, metav1.ConditionTrue, "AsExpected", "The hosted control plane is available")
		} else {
			set(hyperv1.HostedClusterAvailable, metav1.ConditionFalse, "KASLoadBalancerNotReachable", "Get \"https://"+endpointHost(hc)+":6443/healthz\": dial tcp: i/o timeout")
		}
		st.ControlPlaneEndpoint = hyperv1.APIEndpoint{Host: endpointHost(hc), Port: 6443}
		st.KubeConfig = &corev1.LocalObjectReference{Name: adminKubeconfigName(hc)}
		st.KubeadminPassword = &corev1.LocalObjectReference{Name: kubeadminPasswordName(hc)}
		st.IgnitionEndpoint = "ignition-server-" + hc.Namespace + "-" + hc.Name + "." + AppsDomain
		p.Kubeconfig = true
		if hc.Spec.Platform.Kubevirt != nil && hc.Spec.Platform.Kubevirt.BaseDomainPassthrough != nil && *hc.Spec.Platform.Kubevirt.BaseDomainPassthrough && hc.Spec.DNS.BaseDomain == "" {
			p.SetBaseDomain = AppsDomain
		}
		if mode == FailUnavailableAfterReady && !reached(phaseOutage) {
			schedule(at(phaseOutage))
		}
	}

	// NodePools
	workersDone := true
	p.NPStatus = map[string]hyperv1.NodePoolStatus{}
	agentsShort := false
	if hc.Spec.Platform.Type == hyperv1.AgentPlatform && hcpStarted {
		var short bool
		p.BindAgents, short = bindAgents(hc, o.NodePools, o.Agents)
		agentsShort = short
		p.UnbindAgents = surplusAgents(hc, o.NodePools, o.Agents)
	}
	p.NPTransitions, p.NPTemplates = map[string]string{}, map[string]string{}
	for _, np := range o.NodePools {
		if np.DeletionTimestamp != nil {
			continue
		}
		want := wantedReplicas(np)
		ready := int32(0)
		cpUp := hcpStarted && reached(phaseAvailable) // workers stay joined through a later control-plane outage
		if cpUp && mode != FailNodePoolInvalid && !agentsShort && reached(phaseWorkers) {
			span := phaseWorkersEnd - phaseWorkers
			frac := (elapsed.Seconds()/r.Seconds() - phaseWorkers) / span
			ready = int32(math.Min(float64(want), math.Floor(frac*float64(want))+1))
			if ready < want {
				// next worker joins at phaseWorkers + ready/want*span
				schedule(at(phaseWorkers + float64(ready)/float64(want)*span))
			}
		} else if cpUp && mode != FailNodePoolInvalid && !agentsShort {
			schedule(at(phaseWorkers))
		}
		if ready < want {
			workersDone = false
		}
		npst := nodePoolStatus(np, want, ready, available, mode, agentsShort, version, o.Now)
		if np.Status.Version != "" { // installed: day-2 transitions from here on
			tr, tmpl := npDay2(np, st, &npst, tl, o.Now, mode, agentsShort, schedule)
			if tr != "" {
				p.NPTransitions[np.Name] = tr
			}
			if tmpl != "" {
				p.NPTemplates[np.Name] = tmpl
			}
		}
		p.NPStatus[np.Name] = npst
	}
	if len(o.NodePools) == 0 {
		workersDone = false
	}

	// Rollout
	completed := hcpStarted && reached(phaseAvailable) && workersDone && reached(phaseCompleted) && mode != FailNeverComplete
	everCompleted := false
	for _, h := range st.Version.History {
		everCompleted = everCompleted || h.State == configv1.CompletedUpdate
	}
	switch {
	case completed || everCompleted:
		if !everCompleted && st.Version.History[0].State != configv1.CompletedUpdate {
			st.Version.History[0].State = configv1.CompletedUpdate
			st.Version.History[0].CompletionTime = &now
			st.Version.History[0].Verified = true
		}
		set(hyperv1.ClusterVersionProgressing, metav1.ConditionFalse, "FromClusterVersion", "Cluster version is "+version)
		set(hyperv1.ClusterVersionAvailable, metav1.ConditionTrue, "FromClusterVersion", "Done applying "+version)
		set(hyperv1.ClusterVersionSucceeding, metav1.ConditionTrue, "FromClusterVersion", "")
		set(hyperv1.ClusterVersionReleaseAccepted, metav1.ConditionTrue, "PayloadLoaded", "Payload loaded version=\""+version+"\"")
		p.JoinACM = true
	case available:
		set(hyperv1.ClusterVersionProgressing, metav1.ConditionTrue, "ClusterOperatorsUpdating", "Working towards "+version)
		set(hyperv1.ClusterVersionAvailable, metav1.ConditionFalse, "FromClusterVersion", "")
		set(hyperv1.ClusterVersionSucceeding, metav1.ConditionFalse, "ClusterOperatorsNotAvailable", "Cluster operators console, ingress are not available")
		if workersDone && mode != FailNeverComplete {
			schedule(at(phaseCompleted))
		}
	}
	if everCompleted {
		p.HCTransition = upgradeControlPlane(o, tl, st, set, schedule, mode)
	}
	for _, t := range order {
		apimeta.SetStatusCondition(&st.Conditions, desired[t])
	}
	if !statusEqual(&hc.Status, st) {
		p.HCStatus = st
	}
	for name, s := range p.NPStatus {
		for _, np := range o.NodePools {
			if np.Name == name && npStatusEqual(&np.Status, &s) {
				delete(p.NPStatus, name)
			}
		}
	}
	if !next.IsZero() {
		p.RequeueAfter = next.Sub(o.Now)
	}
	return p
}

// bindAgents picks the Agents to bind for the cluster's Agent NodePools: those already bound to it count first,
// then unbound eligible ones by name. short reports that fewer than the wanted replicas exist.
func bindAgents(hc *hyperv1.HostedCluster, nps []*hyperv1.NodePool, agents []inventory.Agent) (bind []string, short bool) {
	want := int32(0)
	for _, np := range nps {
		if np.DeletionTimestamp == nil {
			want += wantedReplicas(np)
		}
	}
	sorted := append([]inventory.Agent(nil), agents...)
	sort.Slice(sorted, func(i, j int) bool { return sorted[i].Name < sorted[j].Name })
	have := int32(0)
	for _, a := range sorted {
		if a.ClusterDeploymentName == hc.Name {
			have++
		}
	}
	for _, a := range sorted {
		if have >= want {
			break
		}
		if a.ClusterDeploymentName == "" && a.Approved && a.Validated && a.BoundCondition != "True" {
			bind = append(bind, a.Name)
			have++
		}
	}
	return bind, have < want
}

// wantedReplicas is what the operator scales a NodePool to: spec.replicas, or with autoScaling the cluster
// autoscaler's floor (an idle simulated cluster never needs more than min).
func wantedReplicas(np *hyperv1.NodePool) int32 {
	if np.Spec.Replicas != nil {
		return *np.Spec.Replicas
	}
	if a := np.Spec.AutoScaling; a != nil {
		return a.Min
	}
	return 0
}

// surplusAgents are the Agents bound to the cluster beyond its NodePools' replicas (a scale-down unbinds them,
// highest name first).
func surplusAgents(hc *hyperv1.HostedCluster, nps []*hyperv1.NodePool, agents []inventory.Agent) []string {
	want := 0
	for _, np := range nps {
		if np.DeletionTimestamp == nil {
			want += int(wantedReplicas(np))
		}
	}
	var bound []string
	for _, a := range agents {
		if a.ClusterDeploymentName == hc.Name {
			bound = append(bound, a.Name)
		}
	}
	sort.Sort(sort.Reverse(sort.StringSlice(bound)))
	if len(bound) <= want {
		return nil
	}
	return bound[:len(bound)-want]
}

func nodePoolStatus(np *hyperv1.NodePool, want, ready int32, hcAvailable bool, mode string, agentsShort bool, version string, now time.Time) hyperv1.NodePoolStatus {
	st := np.Status.DeepCopy()
	st.Replicas = ready
	set := func(t string, s corev1.ConditionStatus, reason, msg string) {
		setNPCondition(st, hyperv1.NodePoolCondition{Type: t, Status: s, Reason: reason, Message: msg, LastTransitionTime: metav1.NewTime(now), ObservedGeneration: np.Generation})
	} // each NodePool condition below is set exactly once
	set(hyperv1.NodePoolValidReleaseImageConditionType, corev1.ConditionTrue, "AsExpected", "Using release image "+np.Spec.Release.Image)
	set(hyperv1.NodePoolReconciliationActiveConditionType, corev1.ConditionTrue, "ReconciliationActive", "Reconciliation active on resource")
	if mode == FailNodePoolInvalid {
		set(hyperv1.NodePoolValidPlatformConfigConditionType, corev1.ConditionFalse, "InvalidKubevirtMachineTemplate", "failed to create KubeVirt machine template: rootVolume storage class not found")
	} else {
		set(hyperv1.NodePoolValidPlatformConfigConditionType, corev1.ConditionTrue, "AsExpected", "")
	}
	if hcAvailable {
		set(hyperv1.NodePoolValidGeneratedPayloadConditionType, corev1.ConditionTrue, "AsExpected", "Payload generated successfully")
	} else {
		set(hyperv1.NodePoolValidGeneratedPayloadConditionType, corev1.ConditionFalse, "WaitingForIgnitionEndpoint", "Ignition endpoint not available, waiting")
	}
	switch {
	case agentsShort:
		set(hyperv1.NodePoolAllMachinesReadyConditionType, corev1.ConditionFalse, "NoSuitableAgents", fmt.Sprintf("No suitable Agents found for %d machines: AgentReserved=False (NoSuitableAgents)", want))
	case ready == want && want > 0:
		set(hyperv1.NodePoolAllMachinesReadyConditionType, corev1.ConditionTrue, "AsExpected", "All is well")
	default:
		set(hyperv1.NodePoolAllMachinesReadyConditionType, corev1.ConditionFalse, "WaitingForMachines", fmt.Sprintf("%d of %d machines are ready", ready, want))
	}
	if ready == want && want > 0 {
		set(hyperv1.NodePoolAllNodesHealthyConditionType, corev1.ConditionTrue, "AsExpected", "All is well")
		set(hyperv1.NodePoolReachedIgnitionEndpoint, corev1.ConditionTrue, "AsExpected", "")
		set(hyperv1.NodePoolReadyConditionType, corev1.ConditionTrue, "AsExpected", "")
		st.Version = version
	} else {
		set(hyperv1.NodePoolAllNodesHealthyConditionType, corev1.ConditionFalse, "NodeProvisioning", fmt.Sprintf("%d of %d nodes are healthy", ready, want))
		set(hyperv1.NodePoolReachedIgnitionEndpoint, corev1.ConditionStatus(boolStatus(ready > 0)), "AsExpected", "")
		set(hyperv1.NodePoolReadyConditionType, corev1.ConditionFalse, "WaitingForAvailableMachines", fmt.Sprintf("Minimum availability requires %d replicas, current %d available", want, ready))
	}
	return *st
}

func boolStatus(b bool) string {
	if b {
		return "True"
	}
	return "False"
}

// deletion replays docs/hypershift-objects.md on the compressed clock.
func deletion(o Observed, tl Timeline, p *Plan) *DeletePlan {
	hc := o.HC
	d := &DeletePlan{}
	if !slices.Contains(hc.Finalizers, meta.FinalizerHyperShift) {
		return d // nothing of ours left to do
	}
	began, err := time.Parse(time.RFC3339Nano, hc.Annotations[AnnotationDeleting])
	if err != nil {
		d.MarkStart = true
		began = o.Now
	}
	since := o.Now.Sub(began)
	if since < 0 {
		since = 0
	}
	for _, np := range o.NodePools {
		if np.DeletionTimestamp == nil {
			d.DeleteNodePools = true
		}
	}
	half := tl.DeleteAfter / 2
	if since >= half {
		for _, np := range o.NodePools {
			if slices.Contains(np.Finalizers, meta.FinalizerHyperShift) {
				d.ReleaseNodePools = append(d.ReleaseNodePools, np.Name)
			}
		}
		for _, a := range o.Agents {
			if a.ClusterDeploymentName == hc.Name {
				d.UnbindAgents = append(d.UnbindAgents, a.Name)
			}
		}
	} else {
		p.RequeueAfter = half - since
	}
	if hc.Annotations[meta.AnnotationCleanupCloudResources] == "true" && !conditionTrue(hc, hyperv1.CloudResourcesDestroyed) {
		d.CloudResourcesClean = true
	}
	if since >= tl.DeleteAfter && len(o.NodePools) == 0 {
		if hc.Annotations[AnnotationFail] != FailStuckDeletion {
			d.DeleteSecrets = true
			d.RemoveHCFinalizer = true
		}
	} else if since < tl.DeleteAfter {
		if p.RequeueAfter == 0 || tl.DeleteAfter-since < p.RequeueAfter {
			p.RequeueAfter = tl.DeleteAfter - since
		}
	} else {
		p.RequeueAfter = 50 * time.Millisecond // waiting for the NodePools to disappear from the cache
	}
	return d
}

func conditionTrue(hc *hyperv1.HostedCluster, t hyperv1.ConditionType) bool {
	c := apimeta.FindStatusCondition(hc.Status.Conditions, string(t))
	return c != nil && c.Status == metav1.ConditionTrue
}

// rolledOut reports whether the HostedCluster's first rollout completed (its version history has a Completed entry).
func rolledOut(hc *hyperv1.HostedCluster) bool {
	return hc.Status.Version != nil && slices.ContainsFunc(hc.Status.Version.History, func(h configv1.UpdateHistory) bool {
		return h.State == configv1.CompletedUpdate
	})
}

func startedAt(hc *hyperv1.HostedCluster) (time.Time, bool) {
	s, ok := hc.Annotations[AnnotationStarted]
	if !ok {
		return time.Time{}, false
	}
	t, err := time.Parse(time.RFC3339Nano, s)
	return t, err == nil
}

// releaseVersion is the SP's resolved version, else the release image's (4.17.12-multi → 4.17.12).
func releaseVersion(hc *hyperv1.HostedCluster) string {
	if v := hc.Annotations[meta.AnnotationOpenShiftVersion]; v != "" {
		return v
	}
	if r, ok := versions.ParseRelease(hc.Name, hc.Spec.Release.Image); ok {
		return r.Version()
	}
	return "0.0.0"
}

// endpointHost is the simulated API LoadBalancer address: a loopback address unique per cluster, so that nothing
// ever leaves the machine even if someone points a client at it.
func endpointHost(hc *hyperv1.HostedCluster) string {
	h := fnv.New32a()
	_, _ = h.Write([]byte(hc.Namespace + "/" + hc.Name))
	v := h.Sum32()
	return fmt.Sprintf("127.%d.%d.%d", 1+v%250, (v>>8)%256, 1+(v>>16)%254)
}

func setNPCondition(st *hyperv1.NodePoolStatus, c hyperv1.NodePoolCondition) {
	for i := range st.Conditions {
		if st.Conditions[i].Type == c.Type {
			if st.Conditions[i].Status == c.Status {
				c.LastTransitionTime = st.Conditions[i].LastTransitionTime
			}
			st.Conditions[i] = c
			return
		}
	}
	st.Conditions = append(st.Conditions, c)
}

func statusEqual(a, b *hyperv1.HostedClusterStatus) bool { return equality.Semantic.DeepEqual(a, b) }

func npStatusEqual(a, b *hyperv1.NodePoolStatus) bool { return equality.Semantic.DeepEqual(a, b) }
