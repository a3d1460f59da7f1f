package status

import (
	"slices"
	"strings"
	"testing"
	"time"

	hyperv1 "github.com/openshift/hypershift/api/hypershift/v1beta1"
	corev1 "k8s.io/api/core/v1"
)

var (
	seed    = Seed{}
	dcm2026 = DCM2026{Active: Active}
)

// Every row of the status table in both vocabularies (docs/status-mapping.md, "Vocabularies"): seed reports Map's
// status unchanged; dcm-2026 keeps FAILED for the terminal failures only (a configuration error of a cluster that
// never came up), reports what DCM must not tear down as DEGRADED and everything in progress as PROGRESSING. The
// message is Map's in both.
func TestVocabulariesOnTheStatusTable(t *testing.T) {
	// Rows by number; the comment says why a row is not the obvious word.
	want2026 := map[int]Status{
		1: Progressing, 2: Progressing, 3: Progressing, 4: Progressing, 5: Progressing, 6: Progressing, 7: Active,
		8: Degraded, 9: Degraded, 10: Degraded, // completed, then short of workers: a node lost, a pool gone
		11: Active,                                     // Degraded=True within the grace period
		12: Degraded,                                   // degraded too long (seed FAILED)
		13: Degraded,                                   // control plane down after it was up (seed UNAVAILABLE)
		14: Failed, 16: Failed, 17: Failed, 18: Failed, // configuration errors before completion: terminal
		15: Progressing, 20: Progressing, 25: Progressing, // pull secret pending; bare metal installing; a rollout
		19: Degraded, 21: Degraded, 28: Degraded, 30: Degraded, // provisioning timeouts (seed FAILED)
		22: Deleting, 23: Deleting, 24: Deleted,
		26: Active, 27: Active,
		29: Degraded, // degraded too long beats UNAVAILABLE (seed FAILED)
	}
	for _, tc := range mapCases() {
		var hc *hyperv1.HostedCluster
		if tc.hc != nil {
			hc = tc.hc.hc
		}
		r := Map(hc, tc.nps, now, DefaultSettings())
		if st, msg := seed.Present(r, Observation{}); st != tc.want || msg != r.Message {
			t.Errorf("case %d seed: %s %q, want %s %q", tc.num, st, msg, tc.want, r.Message)
		}
		want, ok := want2026[tc.num]
		if !ok {
			t.Errorf("case %d has no dcm-2026 expectation", tc.num)
			continue
		}
		if st, msg := dcm2026.Present(r, Observation{}); st != want || msg != r.Message {
			t.Errorf("case %d dcm-2026: %s %q, want %s (seed %s %q)", tc.num, st, msg, want, r.Status, r.Message)
		}
	}
}

// The causes dcm-2026 tells apart beyond the table: a configuration error of a cluster that once completed (a bad
// upgrade target) is not terminal; a failed or running day-2 operation; ACTIVE's RUNNING override; a lost hub.
func TestVocabularyDCM2026Causes(t *testing.T) {
	s := DefaultSettings()
	badTarget := newHC(5*time.Hour).done().cond("ValidReleaseImage", "False", "InvalidImage", "the latest version supported is 4.20", 0).hc
	r := Map(badTarget, []*hyperv1.NodePool{np3()}, now, s)
	if r.Status != Failed || r.Why != WhyConfigurationLater {
		t.Fatalf("configuration error after completion: %+v", r)
	}
	if st, _ := dcm2026.Present(r, Observation{}); st != Degraded {
		t.Errorf("configuration error after completion: %s, want DEGRADED (the cluster still runs)", st)
	}
	cases := []struct {
		name string
		r    Result
		v    Vocabulary
		want Status
	}{
		{"day-2 running", Result{Status: Updating, Message: "Scaling workers 2→3: 2/3 ready"}, dcm2026, Progressing},
		{"day-2 failed", Result{Status: Failed, Message: "Scaling workers 2→3: not finished after 90m", Why: WhyOperation}, dcm2026, Degraded},
		{"ready as RUNNING", Result{Status: Ready, Message: "Cluster is ready"}, DCM2026{Active: Running}, Running},
		{"ready, Active unset", Result{Status: Ready}, DCM2026{}, Active},
		{"seed keeps UPDATING", Result{Status: Updating}, seed, Updating},
	}
	for _, c := range cases {
		if st, msg := c.v.Present(c.r, Observation{}); st != c.want || msg != c.r.Message {
			t.Errorf("%s: %s %q, want %s %q", c.name, st, msg, c.want, c.r.Message)
		}
	}
}

// When the SP cannot observe the hub, dcm-2026 reports every cluster it does not know to be gone as UNAVAILABLE and
// says what it last observed; seed is unchanged (its UNAVAILABLE means a control plane down).
func TestVocabularyHubLost(t *testing.T) {
	lost := Observation{Lost: true, For: 47*time.Second + 300*time.Millisecond}
	ready := Result{Status: Ready, Message: "Cluster is ready; workers 3/3 ready"}
	st, msg := dcm2026.Present(ready, lost)
	if st != Unavailable || msg != "Not observed: the hub has not answered for 47s; last observed ACTIVE: Cluster is ready; workers 3/3 ready" {
		t.Fatalf("lost hub: %s %q", st, msg)
	}
	if st, _ := dcm2026.Present(Result{Status: Deleting, Message: "Deletion in progress"}, lost); st != Unavailable {
		t.Errorf("deleting while lost: %s", st)
	}
	if st, _ := dcm2026.Present(Result{Status: Deleted, Message: "Cluster deleted"}, lost); st != Deleted {
		t.Errorf("deleted while lost: %s (the delete was observed)", st)
	}
	if st, msg := seed.Present(ready, lost); st != Ready || msg != ready.Message {
		t.Errorf("seed while lost: %s %q", st, msg)
	}
}

// Each vocabulary's words are exactly the seven (eight with UPDATING) it documents, and Present never leaves them.
func TestVocabularyWords(t *testing.T) {
	if got := strings.Join(statusStrings(dcm2026.Words()), ","); got != "PROGRESSING,ACTIVE,DEGRADED,UNAVAILABLE,FAILED,DELETING,DELETED" {
		t.Errorf("dcm-2026 words %s", got)
	}
	if got := strings.Join(statusStrings(seed.Words()), ","); got != "PENDING,PROVISIONING,READY,UPDATING,FAILED,UNAVAILABLE,DELETING,DELETED" {
		t.Errorf("seed words %s", got)
	}
	whys := []Why{WhyNone, WhyConfiguration, WhyConfigurationLater, WhyDegradedTooLong, WhyTimeout, WhyOperation, WhyPlatformNotServed, WhyWorkersShort}
	for _, v := range []Vocabulary{seed, dcm2026, DCM2026{Active: Running}} {
		for _, st := range All {
			for _, why := range whys {
				for _, lost := range []bool{false, true} {
					got, _ := v.Present(Result{Status: st, Why: why}, Observation{Lost: lost})
					if !slices.Contains(v.Words(), got) {
						t.Errorf("%s: %s/%d (lost %v) → %s, not a word of the vocabulary", v.Name(), st, why, lost, got)
					}
				}
			}
		}
	}
	// A NodePool short of a worker on a completed cluster is the one PROVISIONING that is DEGRADED.
	r := Map(newHC(2*time.Hour).done().hc, []*hyperv1.NodePool{np(3, 2, corev1.ConditionFalse, "WaitingForAvailableMachines")}, now, DefaultSettings())
	if r.Why != WhyWorkersShort {
		t.Errorf("workers short: Why %d", r.Why)
	}
}

func statusStrings(list []Status) []string {
	out := make([]string, len(list))
	for i, s := range list {
		out[i] = string(s)
	}
	return out
}

// NewVocabulary builds the vocabulary a configuration names with its one setting, and refuses unknown names and words.
func TestNewVocabulary(t *testing.T) {
	cases := []struct {
		name             string
		active, updating Status
		want             Vocabulary
		err              string
	}{
		{"", "", "", Seed{}, ""},
		{VocabularySeed, Running, Progressing, Seed{UpdatingInEvents: Progressing}, ""},
		{VocabularyDCM2026, Running, Updating, DCM2026{Active: Running}, ""},
		{VocabularyDCM2026, "", "", DCM2026{}, ""},
		{"dcm-2027", "", "", nil, `status vocabulary "dcm-2027" is not one of [seed dcm-2026]`},
		{VocabularyDCM2026, Ready, "", nil, `"READY" must be one of [ACTIVE RUNNING]`},
		{VocabularySeed, "", Pending, nil, `"PENDING" must be one of [UPDATING PROGRESSING]`},
	}
	for _, c := range cases {
		v, err := NewVocabulary(c.name, c.active, c.updating)
		if c.err != "" {
			if err == nil || !strings.Contains(err.Error(), c.err) {
				t.Errorf("NewVocabulary(%q, %q, %q): %v, want an error with %q", c.name, c.active, c.updating, err, c.err)
			}
			continue
		}
		if err != nil || v != c.want {
			t.Errorf("NewVocabulary(%q, %q, %q) = %#v, %v; want %#v", c.name, c.active, c.updating, v, err, c.want)
		}
	}
	for _, name := range VocabularyNames {
		if v, err := NewVocabulary(name, "", ""); err != nil || v.Name() != name {
			t.Errorf("NewVocabulary(%q) = %v, %v", name, v, err)
		}
	}
}

// Each vocabulary decides what its status events carry and whether it follows the hub observation.
func TestVocabularyEventsAndObservation(t *testing.T) {
	cases := []struct {
		v       Vocabulary
		in, out Status
		follows bool
	}{
		{Seed{}, Updating, Updating, false},
		{Seed{UpdatingInEvents: Progressing}, Updating, Progressing, false},
		{Seed{UpdatingInEvents: Progressing}, Ready, Ready, false},
		{DCM2026{}, Progressing, Progressing, true},
		{DCM2026{Active: Running}, Running, Running, true},
	}
	for _, c := range cases {
		if got := c.v.EventStatus(c.in); got != c.out {
			t.Errorf("%#v.EventStatus(%s) = %s, want %s", c.v, c.in, got, c.out)
		}
		if c.v.FollowsObservation() != c.follows {
			t.Errorf("%#v.FollowsObservation() = %v", c.v, !c.follows)
		}
	}
}
