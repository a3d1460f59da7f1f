package status

import (
	"fmt"
	"time"
)

// The words of the dcm-2026 vocabulary (DCM's cluster status enum since its status-reporting enhancement); DELETING,
// DELETED, FAILED and UNAVAILABLE are shared with the seed's.
const (
	Progressing Status = "PROGRESSING"
	Active      Status = "ACTIVE"
	Degraded    Status = "DEGRADED"
	// Running replaces ACTIVE for control planes that advance placement on "running" (configuration activeStatus).
	Running Status = "RUNNING"
)

// Vocabulary names.
const (
	VocabularySeed    = "seed"     // PENDING, PROVISIONING, READY, UPDATING, FAILED, UNAVAILABLE, DELETING, DELETED
	VocabularyDCM2026 = "dcm-2026" // PROGRESSING, ACTIVE, DEGRADED, UNAVAILABLE, FAILED, DELETING, DELETED
)

// Why tells apart the causes behind one status, where a vocabulary reports them differently. Map sets it.
type Why int

// The causes.
const (
	WhyNone Why = iota
	// WhyConfiguration: FAILED by a configuration error of a cluster that never completed its installation — it will
	// not come up by itself (terminal).
	WhyConfiguration
	// WhyConfigurationLater: FAILED by a configuration error of a cluster that completed before (a refused upgrade
	// target, an invalid NodePool change): the cluster keeps running what it ran.
	WhyConfigurationLater
	// WhyDegradedTooLong: FAILED because Degraded=True outlasted the grace period.
	WhyDegradedTooLong
	// WhyTimeout: FAILED because the installation did not complete within the provisioning timeout.
	WhyTimeout
	// WhyOperation: FAILED because a day-2 operation failed or passed its deadline.
	WhyOperation
	// WhyPlatformNotServed: FAILED because the HostedCluster's platform type is not in the SP's platform table (a
	// HostedCluster labelled for this SP by someone else): the SP neither reads it as another platform nor
	// changes it. Not terminal: nothing is wrong with the cluster itself, and tearing it down would be.
	WhyPlatformNotServed
	// WhyWorkersShort: PROVISIONING of a completed cluster whose control plane is available and whose rollout is
	// complete, but whose NodePools have fewer ready workers than wanted (a node was lost, a pool was removed).
	WhyWorkersShort
)

// Vocabulary is the set of status words the SP reports to DCM, in GET, LIST and the status events alike.
type Vocabulary struct {
	Name string // VocabularySeed or VocabularyDCM2026
	// Active is dcm-2026's word for a ready cluster: Active (default) or Running.
	Active Status
}

// Observation is whether the SP can observe the clusters: its view of the hub is current.
type Observation struct {
	// Lost: the hub's API server has not answered for longer than the health threshold; the cached objects may no
	// longer be true.
	Lost bool
	For  time.Duration // how long it has not answered
}

// Present turns a decision of Map into the status and message this vocabulary reports.
//
// seed reports Map's statuses unchanged. dcm-2026 is not a relabelling: a FAILED there makes DCM tear the instance
// down, so only a terminal failure — a configuration error of a cluster that never came up — is FAILED; a cluster
// degraded too long, one not ready within the provisioning timeout, a failed day-2 operation, a configuration error
// on a running cluster, a HostedCluster of a platform the SP does not serve, a control plane down after it was up
// and a running cluster short of workers are DEGRADED; creation, day-2 operations and other rollouts are
// PROGRESSING; a ready cluster is Active (ACTIVE or RUNNING). When the SP cannot observe the hub, every cluster not
// known to be gone is UNAVAILABLE, with the last observed status in the message.
func (v Vocabulary) Present(r Result, o Observation) (Status, string) {
	if v.Name != VocabularyDCM2026 {
		return r.Status, r.Message
	}
	if r.Status == Deleted {
		return Deleted, r.Message
	}
	if o.Lost {
		st, msg := v.Present(r, Observation{})
		return Unavailable, fmt.Sprintf("Not observed: the hub has not answered for %s; last observed %s: %s", o.For.Round(time.Second), st, msg)
	}
	switch r.Status {
	case Deleting:
		return Deleting, r.Message
	case Failed:
		if r.Why == WhyConfiguration {
			return Failed, r.Message
		}
		return Degraded, r.Message
	case Ready:
		if v.Active == "" {
			return Active, r.Message
		}
		return v.Active, r.Message
	case Unavailable:
		return Degraded, r.Message
	case Provisioning:
		if r.Why == WhyWorkersShort {
			return Degraded, r.Message
		}
	}
	return Progressing, r.Message // PENDING, PROVISIONING, UPDATING
}

// Words lists the statuses a vocabulary reports (activeStatus applied).
func (v Vocabulary) Words() []Status {
	if v.Name != VocabularyDCM2026 {
		return []Status{Pending, Provisioning, Ready, Updating, Failed, Unavailable, Deleting, Deleted}
	}
	active := v.Active
	if active == "" {
		active = Active
	}
	return []Status{Progressing, active, Degraded, Unavailable, Failed, Deleting, Deleted}
}
