package status

import (
	"fmt"
	"slices"
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

// Vocabulary names (configuration statusVocabulary).
const (
	VocabularySeed    = "seed"     // PENDING, PROVISIONING, READY, UPDATING, FAILED, UNAVAILABLE, DELETING, DELETED
	VocabularyDCM2026 = "dcm-2026" // PROGRESSING, ACTIVE, DEGRADED, UNAVAILABLE, FAILED, DELETING, DELETED
)

// VocabularyNames lists the vocabularies NewVocabulary knows.
var VocabularyNames = []string{VocabularySeed, VocabularyDCM2026}

// ActiveWords are the words dcm-2026 may report for a ready cluster (configuration activeStatus); UpdatingWords the
// words the seed's status events may carry for UPDATING (configuration updatingStatus).
var (
	ActiveWords   = []Status{Active, Running}
	UpdatingWords = []Status{Updating, Progressing}
)

// Vocabulary is a set of status words the SP reports to DCM, in GET, LIST and the status events alike. Each
// vocabulary is one type that owns its words; NewVocabulary returns the one a configuration names.
type Vocabulary interface {
	// Name is the vocabulary's name in the configuration.
	Name() string
	// Present turns a decision of Map into the status and message this vocabulary reports.
	Present(r Result, o Observation) (Status, string)
	// Words lists every status Present can return.
	Words() []Status
	// EventStatus is the word a status event carries for a status Present returned (GET and LIST carry Present's).
	EventStatus(st Status) Status
	// FollowsObservation: Present depends on the Observation, so every cluster must be re-reported when the SP
	// loses or regains its view of the hub (nothing on the hub changes to trigger it).
	FollowsObservation() bool
}

// NewVocabulary returns the vocabulary named name ("" is the seed) with its setting: active is dcm-2026's word for a
// ready cluster, updating the word the seed's status events carry for UPDATING ("" takes each one's default).
func NewVocabulary(name string, active, updating Status) (Vocabulary, error) {
	if active != "" && !slices.Contains(ActiveWords, active) {
		return nil, fmt.Errorf("the status of a ready cluster %q must be one of %v", active, ActiveWords)
	}
	if updating != "" && !slices.Contains(UpdatingWords, updating) {
		return nil, fmt.Errorf("the status of a running day-2 operation %q must be one of %v", updating, UpdatingWords)
	}
	switch name {
	case VocabularySeed, "":
		return Seed{UpdatingInEvents: updating}, nil
	case VocabularyDCM2026:
		return DCM2026{Active: active}, nil
	}
	return nil, fmt.Errorf("status vocabulary %q is not one of %v", name, VocabularyNames)
}

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

// Seed is the SP's first vocabulary: Map's statuses unchanged.
type Seed struct {
	// UpdatingInEvents is the word the status events carry for UPDATING: UPDATING ("") or DCM's PROGRESSING (DCM
	// folded its UPDATING into PROGRESSING).
	UpdatingInEvents Status
}

// Name is VocabularySeed.
func (Seed) Name() string { return VocabularySeed }

// Present reports Map's decision unchanged (the hub observation plays no part).
func (Seed) Present(r Result, _ Observation) (Status, string) { return r.Status, r.Message }

// Words are the eight statuses of Map.
func (Seed) Words() []Status {
	return []Status{Pending, Provisioning, Ready, Updating, Failed, Unavailable, Deleting, Deleted}
}

// EventStatus relabels UPDATING as configured.
func (v Seed) EventStatus(st Status) Status {
	if st == Updating && v.UpdatingInEvents != "" {
		return v.UpdatingInEvents
	}
	return st
}

// FollowsObservation is false: the seed reports what it last observed.
func (Seed) FollowsObservation() bool { return false }

// DCM2026 is DCM's cluster status enum since its status-reporting enhancement.
type DCM2026 struct {
	// Active is the word for a ready cluster: Active ("") or Running.
	Active Status
}

// Name is VocabularyDCM2026.
func (DCM2026) Name() string { return VocabularyDCM2026 }

// EventStatus is the status itself: the events and the API speak alike.
func (DCM2026) EventStatus(st Status) Status { return st }

// FollowsObservation is true: a hub not observed makes every cluster UNAVAILABLE.
func (DCM2026) FollowsObservation() bool { return true }

func (v DCM2026) active() Status {
	if v.Active == "" {
		return Active
	}
	return v.Active
}

// Observation is whether the SP can observe the clusters: its view of the hub is current.
type Observation struct {
	// Lost: the hub's API server has not answered for longer than the health threshold; the cached objects may no
	// longer be true.
	Lost bool
	For  time.Duration // how long it has not answered
}

// Present: dcm-2026 is not a relabelling of the seed. A FAILED there makes DCM tear the instance down, so only a
// terminal failure — a configuration error of a cluster that never came up — is FAILED; a cluster degraded too long,
// one not ready within the provisioning timeout, a failed day-2 operation, a configuration error on a running
// cluster, a HostedCluster of a platform the SP does not serve, a control plane down after it was up and a running
// cluster short of workers are DEGRADED; creation, day-2 operations and other rollouts are PROGRESSING; a ready
// cluster is Active (ACTIVE or RUNNING). When the SP cannot observe the hub, every cluster not known to be gone is
// UNAVAILABLE, with the last observed status in the message.
func (v DCM2026) Present(r Result, o Observation) (Status, string) {
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
		return v.active(), r.Message
	case Unavailable:
		return Degraded, r.Message
	case Provisioning:
		if r.Why == WhyWorkersShort {
			return Degraded, r.Message
		}
	}
	return Progressing, r.Message // PENDING, PROVISIONING, UPDATING
}

// Words are the seven words of dcm-2026 (Active applied).
func (v DCM2026) Words() []Status {
	return []Status{Progressing, v.active(), Degraded, Unavailable, Failed, Deleting, Deleted}
}
