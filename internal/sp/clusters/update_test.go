package clusters_test

import (
	"strings"
	"testing"
	"time"

	"github.com/dcm-sp/acm-cluster-sp/internal/sp/clusters"
	"github.com/dcm-sp/acm-cluster-sp/internal/sp/operation"
	"github.com/dcm-sp/acm-cluster-sp/internal/sp/versions"
	"github.com/dcm-sp/acm-cluster-sp/internal/sp/wire"
)

func testCatalog() versions.Catalog {
	var sets []versions.ImageSet
	for _, v := range []string{"4.16.42", "4.17.3", "4.17.12", "4.17.29", "4.18.1", "4.18.22", "4.19.15"} {
		sets = append(sets, versions.ImageSet{Name: "img" + v + "-multi-appsub", ReleaseImage: "quay.io/openshift-release-dev/ocp-release:" + v + "-multi"})
	}
	return versions.NewCatalog(versions.DefaultMatrix(), sets, nil)
}

var sc = clusters.SpecContext{Namespace: "clusters", AgentNamespace: "hardware-inventory", DefaultPlatform: "kubevirt"}

// stored is a spec as Create stores it (its canonical JSON).
func stored(t *testing.T, body string) string {
	t.Helper()
	s, err := wire.ParseSpec([]byte(body), sc)
	if err != nil {
		t.Fatal(err)
	}
	return s.JSON
}

// decide decides a PATCH body as the SP does: decoded and merged by the wire, decided by the domain.
func decide(t *testing.T, body string, st clusters.UpdateState) (clusters.UpdateDecision, error) {
	t.Helper()
	p, err := wire.DecodePatch([]byte(body), st.StoredSpec)
	if err != nil {
		t.Fatalf("decoding %s: %v", body, err)
	}
	return clusters.DecideUpdate(p, sc, st)
}

var t0 = time.Date(2026, 11, 23, 12, 0, 0, 0, time.UTC)

func TestDecideUpdate(t *testing.T) {
	spec := stored(t, `{"spec":{"version":"4.17","metadata":{"name":"c1","labels":{"team":"a"}},"nodes":{"workers":{"count":3,"cpu":4,"memory":"16GB","storage":"120GB"}},"provider_hints":{"acm":{"platform":"kubevirt"}}}}`)
	base := func() clusters.UpdateState {
		return clusters.UpdateState{StoredSpec: spec, EverCompleted: true, CompletedVersion: "4.17.12", NodePoolVersions: []string{"4.17.12"},
			Catalog: testCatalog(), DefaultWorkerCount: 2, HCGeneration: 4, Now: t0, Timeout: 90 * time.Minute, OperationID: "op-2"}
	}
	running := &operation.Record{ID: "op-1", Kind: operation.Upgrade, To: "4.18.22", Phase: operation.PhaseNodePools}
	cases := []struct {
		name     string
		body     string
		state    func(*clusters.UpdateState)
		kind     clusters.Kind // 0 with wantOp "": success
		reason   string
		errHas   string
		field    string
		wantOp   operation.Kind
		wantTo   string
		wantFrom string
		noop     bool
		specOnly bool
	}{
		{name: "scale", body: `{"spec":{"nodes":{"workers":{"count":5}}}}`, wantOp: operation.Scale, wantFrom: "3", wantTo: "5"},
		{name: "upgrade to a minor resolves once to its newest patch", body: `{"spec":{"version":"4.18"}}`, wantOp: operation.Upgrade, wantFrom: "4.17.12", wantTo: "4.18.22"},
		{name: "upgrade by Kubernetes version", body: `{"spec":{"version":"1.31"}}`, wantOp: operation.Upgrade, wantTo: "4.18.22"},
		{name: "z-stream", body: `{"spec":{"version":"4.17.29"}}`, wantOp: operation.Upgrade, wantTo: "4.17.29"},
		{name: "resize", body: `{"spec":{"nodes":{"workers":{"memory":"32GB"}}}}`, wantOp: operation.Resize, wantFrom: "cpu=4,memory=16Gi,storage=120Gi", wantTo: "cpu=4,memory=32Gi,storage=120Gi"},
		{name: "replay of the stored spec changes nothing", body: `{"spec":{"version":"4.17","nodes":{"workers":{"count":3}},"metadata":{"name":"c1"}}}`, noop: true},
		{name: "replay while an operation runs starts nothing", body: `{"spec":{"nodes":{"workers":{"count":3}}}}`, state: func(s *clusters.UpdateState) { s.Operation = running }, noop: true},
		{name: "an equivalent size is stored, nothing starts", body: `{"spec":{"nodes":{"workers":{"memory":"16Gi"}}}}`, specOnly: true},
		{name: "a version naming the running release", body: `{"spec":{"version":"4.17.12"}}`, specOnly: true},
		{name: "immutable name", body: `{"spec":{"metadata":{"name":"c2"}}}`, kind: clusters.KindInvalid, field: "spec.metadata.name", errHas: "immutable"},
		{name: "immutable platform", body: `{"spec":{"provider_hints":{"acm":{"platform":"baremetal"}}}}`, kind: clusters.KindInvalid, field: "spec.provider_hints.acm.platform"},
		{name: "immutable control plane count", body: `{"spec":{"nodes":{"control_plane":{"count":1}}}}`, kind: clusters.KindInvalid, field: "spec.nodes.control_plane.count"},
		{name: "immutable labels removed with null", body: `{"spec":{"metadata":{"labels":null}}}`, kind: clusters.KindInvalid, field: "spec.metadata.labels.team"},
		{name: "pull secret", body: `{"spec":{"pull_secret":"eyJ9"}}`, kind: clusters.KindInvalid, field: "spec.pull_secret"},
		{name: "invalid count", body: `{"spec":{"nodes":{"workers":{"count":0}}}}`, kind: clusters.KindInvalid, field: "spec.nodes.workers.count"},
		{name: "two operations at once", body: `{"spec":{"version":"4.18","nodes":{"workers":{"count":5}}}}`, kind: clusters.KindUnprocessable, errHas: "one operation per request"},
		{name: "another operation in progress", body: `{"spec":{"nodes":{"workers":{"count":5}}}}`, state: func(s *clusters.UpdateState) { s.Operation = running }, kind: clusters.KindConflict, reason: clusters.ReasonAborted, errHas: "upgrade to 4.18.22 (phase node-pools)"},
		{name: "deleting", body: `{"spec":{"nodes":{"workers":{"count":5}}}}`, state: func(s *clusters.UpdateState) { s.Deleting = true }, kind: clusters.KindConflict, reason: clusters.ReasonFailedPrecondition, errHas: "being deleted"},
		{name: "never completed", body: `{"spec":{"nodes":{"workers":{"count":5}}}}`, state: func(s *clusters.UpdateState) { s.EverCompleted = false }, kind: clusters.KindConflict, reason: clusters.ReasonFailedPrecondition, errHas: "not completed"},
		{name: "after a failed operation a retry is allowed", body: `{"spec":{"nodes":{"workers":{"count":5}}}}`, state: func(s *clusters.UpdateState) {
			s.Operation = &operation.Record{Kind: operation.Scale, To: "5", Phase: operation.PhaseFailed}
		}, wantOp: operation.Scale, wantTo: "5"},
		{name: "downgrade", body: `{"spec":{"version":"4.16"}}`, kind: clusters.KindInvalid, field: "spec.version", errHas: "downgrades are not supported"},
		{name: "two minors ahead", body: `{"spec":{"version":"4.19"}}`, kind: clusters.KindUnprocessable, field: "spec.version", errHas: "valid targets: 4.17.29, 4.18.1, 4.18.22"},
		{name: "unknown patch lists the targets", body: `{"spec":{"version":"4.18.7"}}`, kind: clusters.KindUnprocessable, errHas: "valid targets from 4.17.12: 4.17.29, 4.18.1, 4.18.22"},
		{name: "not a version", body: `{"spec":{"version":"latest"}}`, kind: clusters.KindInvalid, field: "spec.version"},
		{name: "NodePool skew beyond N-2", body: `{"spec":{"version":"4.18"}}`, state: func(s *clusters.UpdateState) { s.NodePoolVersions = []string{"4.15.8"} }, kind: clusters.KindUnprocessable, errHas: "more than 2 minors behind"},
		{name: "y-stream blocked by the CVO", body: `{"spec":{"version":"4.18"}}`, state: func(s *clusters.UpdateState) { s.Upgradeable = "AdminAckRequired: ack the API removals" }, kind: clusters.KindUnprocessable, errHas: "AdminAckRequired: ack the API removals"},
		{name: "autoscaling on (the count removed in the same patch)", body: `{"spec":{"nodes":{"workers":{"count":null}},"provider_hints":{"acm":{"autoscaling":{"min":2,"max":5}}}}}`, wantOp: operation.Scale, wantFrom: "3", wantTo: "autoscaling 2-5"},
		{name: "autoscaling and a count", body: `{"spec":{"provider_hints":{"acm":{"autoscaling":{"min":2,"max":5}}}}}`, kind: clusters.KindInvalid, field: "spec.nodes.workers.count"},
		{name: "autoscaling min 0", body: `{"spec":{"nodes":{"workers":{"count":null}},"provider_hints":{"acm":{"autoscaling":{"min":0,"max":5}}}}}`, kind: clusters.KindInvalid, field: "spec.provider_hints.acm.autoscaling.min"},
		{name: "autoscaling max below min", body: `{"spec":{"nodes":{"workers":{"count":null}},"provider_hints":{"acm":{"autoscaling":{"min":4,"max":2}}}}}`, kind: clusters.KindInvalid, field: "spec.provider_hints.acm.autoscaling.max"},
		{name: "z-stream passes the CVO's block", body: `{"spec":{"version":"4.17.29"}}`, state: func(s *clusters.UpdateState) { s.Upgradeable = "AdminAckRequired: x" }, wantOp: operation.Upgrade, wantTo: "4.17.29"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			st := base()
			if tc.state != nil {
				tc.state(&st)
			}
			d, err := decide(t, tc.body, st)
			if tc.kind != 0 || (tc.wantOp == "" && !tc.noop && !tc.specOnly) {
				var e *clusters.Error
				if err == nil || !asError(err, &e) {
					t.Fatalf("want a %v error, got %v (decision %+v)", tc.kind, err, d)
				}
				if e.Kind != tc.kind || e.Reason != tc.reason || !strings.Contains(e.Message, tc.errHas) {
					t.Fatalf("error %v %q %q, want %v %q containing %q", e.Kind, e.Reason, e.Message, tc.kind, tc.reason, tc.errHas)
				}
				if tc.field != "" && (len(e.Fields) == 0 || e.Fields[0].Field != tc.field) {
					t.Fatalf("fields %+v, want %s", e.Fields, tc.field)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			switch {
			case tc.noop:
				if d.Spec != nil || d.Operation != nil {
					t.Fatalf("want no change, got %+v", d)
				}
			case tc.specOnly:
				if d.Spec == nil || d.Operation != nil {
					t.Fatalf("want a spec-only change, got %+v", d)
				}
			default:
				op := d.Operation
				if op == nil || op.Kind != tc.wantOp || op.To != tc.wantTo || (tc.wantFrom != "" && op.From != tc.wantFrom) {
					t.Fatalf("operation %+v, want %s %s→%s", op, tc.wantOp, tc.wantFrom, tc.wantTo)
				}
				if op.ID != "op-2" || !op.StartedAt.Equal(t0) || !op.Deadline.Equal(t0.Add(90*time.Minute)) || op.HCGeneration != 4 || !op.Open() {
					t.Fatalf("record %+v", op)
				}
				if op.Kind == operation.Upgrade && (op.Phase != operation.PhaseControlPlane || !strings.HasSuffix(op.ReleaseImage, ":"+op.To+"-multi")) {
					t.Fatalf("upgrade record %+v", op)
				}
				if !strings.Contains(d.Spec.JSON, `"name":"c1"`) {
					t.Fatalf("new spec lost the rest: %s", d.Spec.JSON)
				}
			}
		})
	}
}

// The resolved version is stored as requested: a replay compares the requested string, so a ClusterImageSet added
// later never starts a second upgrade.
func TestUpgradeReplayComparesTheRequestedString(t *testing.T) {
	st := clusters.UpdateState{StoredSpec: stored(t, `{"spec":{"version":"4.18","metadata":{"name":"c1"}}}`), EverCompleted: true, CompletedVersion: "4.18.1",
		Catalog: testCatalog(), DefaultWorkerCount: 2, Now: t0, Timeout: time.Hour}
	d, err := decide(t, `{"spec":{"version":"4.18"}}`, st)
	if err != nil || d.Spec != nil {
		t.Fatalf("replay: %+v %v", d, err)
	}
}

func asError(err error, e **clusters.Error) bool {
	x, ok := err.(*clusters.Error)
	*e = x
	return ok
}

// After a failed operation: the same target again is a retry (a new operation); going back from a refused upgrade
// that never started restores the running release; one that started cannot be reverted.
func TestDecideUpdateAfterAFailure(t *testing.T) {
	const img418, img417 = "quay.io/openshift-release-dev/ocp-release:4.18.22-multi", "quay.io/openshift-release-dev/ocp-release:4.17.12-multi"
	failedUpgrade := &operation.Record{ID: "op-1", Kind: operation.Upgrade, From: "4.17.12", To: "4.18.22", Phase: operation.PhaseFailed}
	failedScale := &operation.Record{ID: "op-1", Kind: operation.Scale, From: "3", To: "5", Phase: operation.PhaseFailed}
	base := clusters.UpdateState{EverCompleted: true, CompletedVersion: "4.17.12", Catalog: testCatalog(), DefaultWorkerCount: 2, Now: t0, Timeout: time.Hour, OperationID: "op-2"}
	cases := []struct {
		name, stored, body string
		state              func(*clusters.UpdateState)
		wantKind           operation.Kind
		wantTo, wantImage  string
		wantFrom           string
		errHas             string
	}{
		{name: "retry of a failed upgrade", stored: `{"spec":{"version":"4.18","metadata":{"name":"c1"}}}`, body: `{"spec":{"version":"4.18"}}`,
			state: func(s *clusters.UpdateState) {
				s.Operation, s.SpecImage, s.DesiredImage = failedUpgrade, img418, img417
			}, wantKind: operation.Upgrade, wantTo: "4.18.22", wantImage: img418},
		{name: "revert of an upgrade that never started restores the running release", stored: `{"spec":{"version":"4.18","metadata":{"name":"c1"}}}`, body: `{"spec":{"version":"4.17.12"}}`,
			state: func(s *clusters.UpdateState) {
				s.Operation, s.SpecImage, s.DesiredImage, s.SpecVersion = failedUpgrade, img418, img417, "4.18.22"
			}, wantKind: operation.Upgrade, wantTo: "4.17.12", wantImage: img417, wantFrom: "4.18.22"},
		{name: "an upgrade that started cannot be reverted", stored: `{"spec":{"version":"4.18","metadata":{"name":"c1"}}}`, body: `{"spec":{"version":"4.17.12"}}`,
			state: func(s *clusters.UpdateState) {
				s.Operation, s.SpecImage, s.DesiredImage = failedUpgrade, img418, img418
			}, errHas: "has started and cannot be reverted"},
		{name: "a replay after a success is no retry", stored: `{"spec":{"version":"4.18","metadata":{"name":"c1"}}}`, body: `{"spec":{"version":"4.18"}}`,
			state: func(s *clusters.UpdateState) {
				s.Operation = &operation.Record{Kind: operation.Upgrade, To: "4.18.22", Phase: operation.PhaseDone}
				s.CompletedVersion = "4.18.22"
			}},
		{name: "retry of a failed scale", stored: `{"spec":{"version":"4.17","metadata":{"name":"c1"},"nodes":{"workers":{"count":5}}}}`, body: `{"spec":{"nodes":{"workers":{"count":5}}}}`,
			state: func(s *clusters.UpdateState) { s.Operation = failedScale }, wantKind: operation.Scale, wantTo: "5", wantFrom: "3"},
		{name: "autoscaling off again", stored: `{"spec":{"version":"4.17","metadata":{"name":"c1"},"provider_hints":{"acm":{"autoscaling":{"min":2,"max":5}}}}}`, body: `{"spec":{"nodes":{"workers":{"count":4}},"provider_hints":{"acm":{"autoscaling":null}}}}`,
			state: func(*clusters.UpdateState) {}, wantKind: operation.Scale, wantTo: "4", wantFrom: "autoscaling 2-5"},
		{name: "another field after a failed scale is no retry of it", stored: `{"spec":{"version":"4.17","metadata":{"name":"c1"},"nodes":{"workers":{"count":5}}}}`, body: `{"spec":{"version":"4.17"}}`,
			state: func(s *clusters.UpdateState) { s.Operation = failedScale }},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			st := base
			st.StoredSpec = stored(t, c.stored)
			c.state(&st)
			d, err := decide(t, c.body, st)
			if c.errHas != "" {
				if err == nil || !strings.Contains(err.Error(), c.errHas) || clusters.KindOf(err) != clusters.KindUnprocessable {
					t.Fatalf("got %v, want a 422 containing %q", err, c.errHas)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if c.wantKind == "" {
				if d.Operation != nil {
					t.Fatalf("want no operation, got %+v", d.Operation)
				}
				return
			}
			op := d.Operation
			if op == nil || op.Kind != c.wantKind || op.To != c.wantTo || (c.wantImage != "" && op.ReleaseImage != c.wantImage) || (c.wantFrom != "" && op.From != c.wantFrom) || op.ID != "op-2" {
				t.Fatalf("operation %+v", op)
			}
		})
	}
}
