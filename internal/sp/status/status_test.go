package status

import (
	"strings"
	"testing"
	"time"

	configv1 "github.com/openshift/api/config/v1"
	hyperv1 "github.com/openshift/hypershift/api/hypershift/v1beta1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"

	"github.com/dcm-sp/acm-cluster-sp/internal/sp/platform"
)

var now = time.Date(2026, 11, 22, 12, 0, 0, 0, time.UTC)

// hcBuilder assembles the HostedCluster fixtures of docs/status-mapping.md
type hcBuilder struct{ hc *hyperv1.HostedCluster }

func newHC(age time.Duration) *hcBuilder {
	return &hcBuilder{hc: &hyperv1.HostedCluster{
		ObjectMeta: metav1.ObjectMeta{Name: "c1", Namespace: "clusters", CreationTimestamp: metav1.NewTime(now.Add(-age))},
		Spec:       hyperv1.HostedClusterSpec{Platform: hyperv1.PlatformSpec{Type: hyperv1.KubevirtPlatform}},
	}}
}

func (b *hcBuilder) cond(t string, st metav1.ConditionStatus, reason, msg string, since time.Duration) *hcBuilder {
	c := metav1.Condition{Type: t, Status: st, Reason: reason, Message: msg, LastTransitionTime: metav1.NewTime(now.Add(-since))}
	for i := range b.hc.Status.Conditions {
		if b.hc.Status.Conditions[i].Type == t {
			b.hc.Status.Conditions[i] = c
			return b
		}
	}
	b.hc.Status.Conditions = append(b.hc.Status.Conditions, c)
	return b
}

func (b *hcBuilder) history(states ...string) *hcBuilder {
	v := &hyperv1.ClusterVersionStatus{Desired: configv1.Release{Version: "4.17.12"}}
	for _, s := range states {
		parts := strings.SplitN(s, " ", 2)
		version := "4.17.12"
		if len(parts) == 2 {
			version = parts[1]
		}
		v.History = append(v.History, configv1.UpdateHistory{State: configv1.UpdateState(parts[0]), Version: version})
	}
	b.hc.Status.Version = v
	return b
}

// c0 is the t≈0 condition set.
func (b *hcBuilder) c0() *hcBuilder {
	const notFound = "The hosted control plane is not found"
	return b.cond("ReconciliationActive", "True", "AsExpected", "", 0).
		cond("ValidConfiguration", "True", "AsExpected", "", 0).
		cond("SupportedHostedCluster", "True", "AsExpected", "", 0).
		cond("ValidReleaseImage", "True", "AsExpected", "Release image is valid", 0).
		cond("Progressing", "False", "AsExpected", "HostedCluster is at expected version", 0).
		cond("Available", "False", "WaitingForAvailable", "Waiting for hosted control plane to be healthy", 0).
		cond("Degraded", "Unknown", "StatusUnknown", notFound, 0).
		cond("InfrastructureReady", "Unknown", "StatusUnknown", notFound, 0).
		cond("EtcdAvailable", "Unknown", "StatusUnknown", notFound, 0).
		cond("KubeAPIServerAvailable", "Unknown", "StatusUnknown", notFound, 0).
		history("Partial")
}

// up is C0 with the control plane available.
func (b *hcBuilder) up() *hcBuilder {
	b.c0()
	return b.cond("Available", "True", "AsExpected", "The hosted control plane is available", 0).
		cond("Degraded", "False", "AsExpected", "The hosted cluster is not degraded", 0).
		cond("InfrastructureReady", "True", "AsExpected", "", 0).
		cond("EtcdAvailable", "True", "QuorumAvailable", "", 0).
		cond("KubeAPIServerAvailable", "True", "AsExpected", "", 0)
}

// done is UP with a completed rollout.
func (b *hcBuilder) done() *hcBuilder {
	return b.up().history("Completed").cond("ClusterVersionAvailable", "True", "FromClusterVersion", "", 0)
}

func (b *hcBuilder) baremetal() *hcBuilder {
	b.hc.Spec.Platform.Type = hyperv1.AgentPlatform
	return b
}

func (b *hcBuilder) deleting() *hcBuilder {
	b.hc.DeletionTimestamp = ptr.To(metav1.NewTime(now.Add(-time.Minute)))
	return b
}

func np(spec, ready int32, readyCond corev1.ConditionStatus, reason string) *hyperv1.NodePool {
	p := &hyperv1.NodePool{ObjectMeta: metav1.ObjectMeta{Name: "c1"}}
	p.Spec.Replicas = ptr.To(spec)
	p.Status.Replicas = ready
	if readyCond != "" {
		p.Status.Conditions = append(p.Status.Conditions, hyperv1.NodePoolCondition{Type: "Ready", Status: readyCond, Reason: reason,
			Message: "Minimum availability requires 3 replicas, current 0 available"})
	}
	return p
}

func np0() *hyperv1.NodePool { return np(3, 0, corev1.ConditionFalse, "WaitingForAvailableMachines") }
func np3() *hyperv1.NodePool { return np(3, 3, corev1.ConditionTrue, "AsExpected") }

// mapCase is one row of the status table of docs/status-mapping.md.
type mapCase struct {
	num        int
	hc         *hcBuilder
	nps        []*hyperv1.NodePool
	want       Status
	msgHas     string
	msgPrefix  string
	cpAvail    bool
	wantReady  int32
	wantTotal  int32
	checkNodes bool
}

// mapCases are the table's rows, numbered 1–30 (docs/status-mapping.md, section "Examples", shows a selection).
func mapCases() []mapCase {
	return []mapCase{
		{num: 1, hc: newHC(5 * time.Second), want: Pending, msgHas: "Waiting for the hosted control plane"},
		{num: 2, hc: newHC(20 * time.Second).c0(), nps: []*hyperv1.NodePool{np(3, 0, "", "")}, want: Pending},
		{num: 3, hc: newHC(2*time.Minute).c0().cond("Degraded", "True", "UnavailableReplicas", "kube-apiserver deployment has 3 unavailable replicas", time.Minute).cond("InfrastructureReady", "True", "AsExpected", "", 0), nps: []*hyperv1.NodePool{np0()}, want: Provisioning, msgHas: "Control plane starting"},
		{num: 4, hc: newHC(time.Minute).c0().cond("InfrastructureReady", "False", "WaitingOnInfrastructureReady", "", 0), nps: []*hyperv1.NodePool{np0()}, want: Provisioning},
		{num: 5, hc: newHC(5 * time.Minute).up(), nps: []*hyperv1.NodePool{np0()}, want: Provisioning, msgHas: "workers 0/3 ready", cpAvail: true, checkNodes: true, wantReady: 0, wantTotal: 3},
		{num: 6, hc: newHC(9*time.Minute).up().cond("ClusterVersionAvailable", "False", "", "", 0), nps: []*hyperv1.NodePool{np3()}, want: Provisioning, msgHas: "Cluster version 4.17.12 rolling out", checkNodes: true, wantReady: 3, wantTotal: 3, cpAvail: true},
		{num: 7, hc: newHC(14 * time.Minute).done(), nps: []*hyperv1.NodePool{np3()}, want: Ready, msgHas: "workers 3/3 ready", cpAvail: true},
		{num: 8, hc: newHC(20 * time.Minute).done(), nps: []*hyperv1.NodePool{np(3, 2, corev1.ConditionTrue, "AsExpected")}, want: Provisioning, msgHas: "workers 2/3", checkNodes: true, wantReady: 2, wantTotal: 3, cpAvail: true},
		{num: 9, hc: newHC(20 * time.Minute).done(), want: Provisioning, msgHas: "No NodePool found", cpAvail: true},
		{num: 10, hc: newHC(2 * time.Hour).done(), nps: []*hyperv1.NodePool{np(3, 2, corev1.ConditionFalse, "WaitingForAvailableMachines")}, want: Provisioning, cpAvail: true},
		{num: 11, hc: newHC(2*time.Hour).done().cond("Degraded", "True", "UnavailableReplicas", "etcd has 1 unavailable replica", 5*time.Minute), nps: []*hyperv1.NodePool{np3()}, want: Ready, msgHas: "degraded: etcd has 1 unavailable replica", cpAvail: true},
		{num: 12, hc: newHC(2*time.Hour).done().cond("Degraded", "True", "UnavailableReplicas", "etcd has 1 unavailable replica", 20*time.Minute), nps: []*hyperv1.NodePool{np3()}, want: Failed, msgPrefix: "Degraded for more than 15m: etcd", cpAvail: true},
		{num: 13, hc: newHC(3*time.Hour).done().cond("Available", "False", "KASLoadBalancerNotReachable", "kube-apiserver load balancer is not reachable", 0), nps: []*hyperv1.NodePool{np3()}, want: Unavailable, msgPrefix: "Control plane unavailable: kube-apiserver load balancer"},
		{num: 14, hc: newHC(time.Minute).c0().cond("ValidReleaseImage", "False", "InvalidImage", "release image is not valid", 0), want: Failed, msgPrefix: "ValidReleaseImage:"},
		{num: 15, hc: newHC(30*time.Second).c0().cond("ValidReleaseImage", "False", "SecretNotFound", "secret clusters/c1-pull-secret not found", 0), want: Pending, msgHas: "Pull secret not found"},
		{num: 16, hc: newHC(time.Minute).c0().cond("ValidConfiguration", "False", "InvalidConfiguration", "bad networking", 0).cond("Progressing", "False", "Blocked", "", 0), nps: []*hyperv1.NodePool{np0()}, want: Failed, msgPrefix: "ValidConfiguration: bad networking"},
		{num: 17, hc: newHC(time.Minute).c0().cond("SupportedHostedCluster", "False", "UnsupportedHostedCluster", "not supported", 0), nps: []*hyperv1.NodePool{np0()}, want: Failed, msgPrefix: "SupportedHostedCluster:"},
		{num: 18, hc: newHC(3 * time.Minute).up(), nps: []*hyperv1.NodePool{func() *hyperv1.NodePool {
			p := np0()
			p.Status.Conditions = append(p.Status.Conditions, hyperv1.NodePoolCondition{Type: "ValidPlatformConfig", Status: "False", Reason: "InvalidPlatformConfig", Message: "kubevirt block missing"})
			return p
		}()}, want: Failed, msgPrefix: "NodePool c1 ValidPlatformConfig: kubevirt block missing", cpAvail: true},
		{num: 19, hc: newHC(46 * time.Minute).up(), nps: []*hyperv1.NodePool{np3()}, want: Failed, msgPrefix: "Not ready after 45m: Cluster version 4.17.12 rolling out", cpAvail: true},
		{num: 20, hc: newHC(60 * time.Minute).up().baremetal(), nps: []*hyperv1.NodePool{np0()}, want: Provisioning, cpAvail: true},
		{num: 21, hc: newHC(121 * time.Minute).up().baremetal(), nps: []*hyperv1.NodePool{np0()}, want: Failed, msgPrefix: "Not ready after 2h:", cpAvail: true},
		{num: 22, hc: newHC(time.Hour).done().deleting(), nps: []*hyperv1.NodePool{np3()}, want: Deleting, msgHas: "Deletion in progress", cpAvail: true},
		{num: 23, hc: newHC(time.Hour).c0().cond("Degraded", "True", "UnavailableReplicas", "", 30*time.Minute).deleting(), nps: []*hyperv1.NodePool{np0()}, want: Deleting},
		{num: 24, hc: nil, want: Deleted, msgHas: "Cluster deleted"},
		{num: 25, hc: newHC(5*time.Hour).done().cond("Progressing", "True", "AsExpected", "", 0).history("Partial 4.17.13", "Completed 4.17.12"), nps: []*hyperv1.NodePool{np3()}, want: Provisioning, msgHas: "Cluster version 4.17.13 rolling out", cpAvail: true},
		{num: 26, hc: newHC(time.Hour).done().cond("ReconciliationActive", "False", "ReconciliationPaused", "", 0), nps: []*hyperv1.NodePool{np3()}, want: Ready, msgHas: "reconciliation paused", cpAvail: true},
		{num: 27, hc: newHC(time.Hour).done().cond("KubeVirtNodesLiveMigratable", "False", "", "RWO", 0).cond("ValidKubeVirtInfraNetworkMTU", "False", "", "", 0), nps: []*hyperv1.NodePool{np3()}, want: Ready, cpAvail: true},
		{num: 28, hc: newHC(50 * time.Minute), want: Failed, msgPrefix: "Not ready after 45m: Waiting for the hosted control plane"},
		{num: 29, hc: newHC(3*time.Hour).done().cond("Available", "False", "KASLoadBalancerNotReachable", "", 0).cond("Degraded", "True", "UnavailableReplicas", "", 20*time.Minute), nps: []*hyperv1.NodePool{np3()}, want: Failed, msgPrefix: "Degraded for more than 15m"},
		{num: 30, hc: newHC(50*time.Minute).c0().cond("ValidReleaseImage", "False", "SecretNotFound", "", 0), want: Failed, msgPrefix: "Not ready after 45m: Pull secret not found"},
	}
}

func TestMap(t *testing.T) {
	s := DefaultSettings()
	cases := mapCases()
	for _, tc := range cases {
		var hc *hyperv1.HostedCluster
		if tc.hc != nil {
			hc = tc.hc.hc
		}
		got := Map(hc, tc.nps, now, s)
		if got.Status != tc.want {
			t.Errorf("case %d: status = %s (%q), want %s", tc.num, got.Status, got.Message, tc.want)
			continue
		}
		if tc.msgHas != "" && !strings.Contains(got.Message, tc.msgHas) {
			t.Errorf("case %d: message %q does not contain %q", tc.num, got.Message, tc.msgHas)
		}
		if tc.msgPrefix != "" && !strings.HasPrefix(got.Message, tc.msgPrefix) {
			t.Errorf("case %d: message %q does not start with %q", tc.num, got.Message, tc.msgPrefix)
		}
		if got.ControlPlaneAvailable != tc.cpAvail {
			t.Errorf("case %d: ControlPlaneAvailable = %v, want %v", tc.num, got.ControlPlaneAvailable, tc.cpAvail)
		}
		if tc.checkNodes {
			r, tot := Workers(tc.nps)
			if r != tc.wantReady || tot != tc.wantTotal {
				t.Errorf("case %d: workers %d/%d, want %d/%d", tc.num, r, tot, tc.wantReady, tc.wantTotal)
			}
		}
	}
}

// The answer is a pure function of its inputs: the same inputs always give the same status and message,
// which is what lets the API and the event stream agree.
func TestMapIsDeterministic(t *testing.T) {
	hc := newHC(3 * time.Minute).up().hc
	nps := []*hyperv1.NodePool{np0()}
	a := Map(hc, nps, now, DefaultSettings())
	b := Map(hc.DeepCopy(), []*hyperv1.NodePool{nps[0].DeepCopy()}, now, DefaultSettings())
	if a != b {
		t.Fatalf("same inputs, different results: %+v vs %+v", a, b)
	}
}

func TestRecheckAt(t *testing.T) {
	s := DefaultSettings()
	// Case 19 evaluated at 44 minutes: still PROVISIONING, re-check scheduled at the 45 minute deadline.
	hc := newHC(44 * time.Minute).up().hc
	got := Map(hc, []*hyperv1.NodePool{np3()}, now, s)
	if got.Status != Provisioning {
		t.Fatalf("status = %s, want PROVISIONING", got.Status)
	}
	if want := hc.CreationTimestamp.Add(45 * time.Minute); !got.RecheckAt.Equal(want) {
		t.Fatalf("RecheckAt = %v, want %v", got.RecheckAt, want)
	}
	// Degraded for 5 minutes inside a READY cluster: re-check when the grace period ends.
	hc = newHC(2*time.Hour).done().cond("Degraded", "True", "UnavailableReplicas", "x", 5*time.Minute).hc
	got = Map(hc, []*hyperv1.NodePool{np3()}, now, s)
	if want := now.Add(10 * time.Minute); got.Status != Ready || !got.RecheckAt.Equal(want) {
		t.Fatalf("got %s recheck %v, want READY recheck %v", got.Status, got.RecheckAt, want)
	}
	// A READY cluster with nothing pending has no deadline.
	got = Map(newHC(2*time.Hour).done().hc, []*hyperv1.NodePool{np3()}, now, s)
	if !got.RecheckAt.IsZero() {
		t.Fatalf("RecheckAt = %v, want zero", got.RecheckAt)
	}
	// Deleting for one minute: the long-deletion message is due at 15 minutes.
	got = Map(newHC(time.Hour).done().deleting().hc, nil, now, s)
	if want := now.Add(14 * time.Minute); !got.RecheckAt.Equal(want) {
		t.Fatalf("deleting RecheckAt = %v, want %v", got.RecheckAt, want)
	}
	got = Map(newHC(time.Hour).done().deleting().hc, nil, now.Add(20*time.Minute), s)
	if !strings.Contains(got.Message, "waiting for finalizers") {
		t.Fatalf("long deletion message = %q", got.Message)
	}
}

// A clock skew that puts the operator's timestamps in our future counts as "now", never as a negative age.
func TestFutureTimestampsCountAsNow(t *testing.T) {
	hc := newHC(-10*time.Minute).c0().cond("Degraded", "True", "UnavailableReplicas", "", -30*time.Minute).hc
	got := Map(hc, nil, now, DefaultSettings())
	if got.Status != Provisioning {
		t.Fatalf("status = %s (%s), want PROVISIONING", got.Status, got.Message)
	}
}

func TestStatusStrings(t *testing.T) {
	want := []string{"DELETED", "DELETING", "FAILED", "UPDATING", "READY", "PROVISIONING", "UNAVAILABLE", "PENDING"}
	for i, s := range All {
		if string(s) != want[i] {
			t.Errorf("status %d = %q, want %q", i, s, want[i])
		}
	}
}

// A completed cluster that reads PROVISIONING (its NodePools missing or not ready) is flagged for confirmation; a
// first rollout, a READY cluster and a deleting one are not.
func TestSteppedBack(t *testing.T) {
	s := DefaultSettings()
	cases := []struct {
		name string
		hc   *hyperv1.HostedCluster
		nps  []*hyperv1.NodePool
		want bool
	}{
		{"first rollout", newHC(5 * time.Minute).up().hc, []*hyperv1.NodePool{np0()}, false},
		{"ready", newHC(20 * time.Minute).done().hc, []*hyperv1.NodePool{np3()}, false},
		{"completed, NodePools gone", newHC(20 * time.Minute).done().hc, nil, true},
		{"completed, workers 2/3", newHC(20 * time.Minute).done().hc, []*hyperv1.NodePool{np(3, 2, corev1.ConditionTrue, "AsExpected")}, true},
	}
	for _, c := range cases {
		if got := Map(c.hc, c.nps, now, s).SteppedBack; got != c.want {
			t.Errorf("%s: SteppedBack %v, want %v", c.name, got, c.want)
		}
	}
	deleting := newHC(20 * time.Minute).done().hc
	deleting.DeletionTimestamp = &metav1.Time{Time: now}
	if Map(deleting, nil, now, s).SteppedBack {
		t.Error("deleting: SteppedBack, want not")
	}
}

// A HostedCluster of a platform type the SP does not serve (labelled for it by someone else) is reported as such,
// never evaluated as a KubeVirt or Agent cluster; dcm-2026 reports it DEGRADED, not the terminal FAILED that would
// make DCM tear it down. Its deletion is still reported.
func TestMapPlatformNotServed(t *testing.T) {
	b := newHC(5 * time.Hour).done()
	b.hc.Spec.Platform.Type = hyperv1.AWSPlatform
	r := Map(b.hc, []*hyperv1.NodePool{np3()}, now, DefaultSettings())
	if r.Status != Failed || r.Why != WhyPlatformNotServed || !strings.Contains(r.Message, `platform type "AWS"`) ||
		!strings.Contains(r.Message, "kubevirt, baremetal") {
		t.Fatalf("AWS HostedCluster: %+v", r)
	}
	if st, _ := (DCM2026{}).Present(r, Observation{}); st != Degraded {
		t.Errorf("dcm-2026 reports it %s, want DEGRADED", st)
	}
	if r := Map(b.deleting().hc, nil, now, DefaultSettings()); r.Status != Deleting {
		t.Errorf("deleting AWS HostedCluster: %s, want DELETING", r.Status)
	}
}

// Each platform's provisioning timeout is its configured one, else its default.
func TestProvisioningTimeoutByPlatform(t *testing.T) {
	s := DefaultSettings()
	s.ProvisioningTimeouts = map[platform.Name]time.Duration{platform.BareMetal: 30 * time.Minute}
	kv, bm := newHC(50*time.Minute), newHC(50*time.Minute)
	bm.hc.Spec.Platform.Type = hyperv1.AgentPlatform
	if r := Map(kv.hc, nil, now, s); r.Status != Failed || !strings.HasPrefix(r.Message, "Not ready after 45m") {
		t.Errorf("KubeVirt at 50m (default 45m): %s %q", r.Status, r.Message)
	}
	if r := Map(bm.hc, nil, now, s); r.Status != Failed || !strings.HasPrefix(r.Message, "Not ready after 30m") {
		t.Errorf("bare metal at 50m (configured 30m): %s %q", r.Status, r.Message)
	}
	if r := Map(bm.hc, nil, now, DefaultSettings()); r.Status == Failed {
		t.Errorf("bare metal at 50m (default 120m): %s %q", r.Status, r.Message)
	}
}
