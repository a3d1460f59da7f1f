package provision

import (
	"context"
	"slices"
	"strings"
	"testing"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	clusterv1 "open-cluster-management.io/api/cluster/v1"

	"github.com/dcm-sp/acm-cluster-sp/internal/sp/clusters"
	"github.com/dcm-sp/acm-cluster-sp/internal/sp/meta"
	"github.com/dcm-sp/acm-cluster-sp/internal/sp/operation"
)

// A bare-metal create reserves as many eligible Agents as workers; too few is a 422 before anything is written.
func TestCreateBareMetalReservesAgents(t *testing.T) {
	f := newFixture(t)
	taken := agent("agent-0")
	taken.SetLabels(map[string]string{meta.LabelInfraEnv: testInfraEnv, "location": "lab", meta.LabelInstanceID: id2, meta.LabelProvider: testProvider})
	f.seed(taken, agent("agent-1"))
	_, _, err := f.svc.Create(context.Background(), id1, "", []byte(baremetalBody("metal", 2)))
	if clusters.KindOf(err) != clusters.KindUnprocessable || !strings.Contains(err.Error(), "need 2 eligible Agents") {
		t.Fatalf("too few Agents: %v, want a 422 naming the shortfall", err)
	}
	if got := f.reservedFor(id1); len(got) != 0 || f.exists(newHostedCluster(), testNS, "metal") {
		t.Fatalf("a refused create reserved %v or wrote its HostedCluster", got)
	}

	f.seed(agent("agent-2"))
	f.create(id1, "", baremetalBody("metal", 2))
	if got := f.reservedFor(id1); !slices.Equal(got, []string{"agent-1", "agent-2"}) {
		t.Fatalf("reserved %v, want agent-1 and agent-2", got)
	}
	if got := f.reservedFor(id2); !slices.Equal(got, []string{"agent-0"}) {
		t.Fatalf("another cluster's reservation changed: %v", got)
	}

	// After the cluster is gone, the reconciler releases its reservations (and only its own).
	if err := f.svc.ReleaseAgents(context.Background(), id1); err != nil {
		t.Fatal(err)
	}
	if got := f.reservedFor(id1); len(got) != 0 {
		t.Fatalf("still reserved after the release: %v", got)
	}
	if got := f.reservedFor(id2); len(got) != 1 {
		t.Fatalf("the release took another cluster's Agent: %v", got)
	}
}

// A create that fails after reserving releases the Agents it labelled — not those an earlier attempt had reserved.
func TestCreateBareMetalRollbackReleasesOnlyItsAgents(t *testing.T) {
	f := newFixture(t, manageACM)
	f.catalog.kac, f.catalog.clusterNamespaces["metal"] = true, true
	earlier := agent("agent-1")
	earlier.SetLabels(map[string]string{meta.LabelInfraEnv: testInfraEnv, "location": "lab", meta.LabelInstanceID: id1, meta.LabelProvider: testProvider})
	f.seed(earlier, agent("agent-2"), agent("agent-3"))
	// The KlusterletAddonConfig is the step after the reservation.
	f.fail("create", "KlusterletAddonConfig", "", apierrors.NewForbidden(kacResource, "metal", errAdmission))
	_, _, err := f.svc.Create(context.Background(), id1, "", []byte(baremetalBody("metal", 3)))
	if err == nil {
		t.Fatal("the create succeeded though its KlusterletAddonConfig was refused")
	}
	if f.exists(newHostedCluster(), testNS, "metal") || f.exists(&clusterv1.ManagedCluster{}, "", "metal") {
		t.Fatal("the rollback left the HostedCluster or the ManagedCluster")
	}
	if got := f.reservedFor(id1); !slices.Equal(got, []string{"agent-1"}) {
		t.Fatalf("after the rollback the instance holds %v, want only the Agent an earlier attempt reserved", got)
	}
}

// A bare-metal resize is accepted only when every Agent the cluster holds meets the new minimums.
func TestUpdateBareMetalResizeChecksBoundAgents(t *testing.T) {
	f := newFixture(t)
	f.installedBareMetal(2, "agent-1", "agent-2")
	_, err := f.svc.Update(context.Background(), id1, []byte(`{"spec":{"nodes":{"workers":{"cpu":32}}}}`), "")
	if clusters.KindOf(err) != clusters.KindUnprocessable || !strings.Contains(err.Error(), "do not meet the new minimums") {
		t.Fatalf("resize beyond the Agents' hardware: %v, want a 422", err)
	}
	if c, err := f.svc.Update(context.Background(), id1, []byte(`{"spec":{"nodes":{"workers":{"cpu":12}}}}`), ""); err != nil || c.Operation == nil {
		t.Fatalf("resize within the Agents' hardware: %v", err)
	}
}

// Once a bare-metal scale-down has ended, the reconciler releases the Agents beyond the worker count that the
// operator has unbound.
func TestConvergeReleasesSurplusAgents(t *testing.T) {
	f := newFixture(t)
	ctx := context.Background()
	f.installedBareMetal(3, "agent-1", "agent-2", "agent-3")
	if _, err := f.svc.Update(ctx, id1, []byte(`{"spec":{"nodes":{"workers":{"count":2}}}}`), ""); err != nil {
		t.Fatal(err)
	}
	hc := f.hostedCluster("metal")
	rec := operation.Decode(hc)
	rec.Phase = operation.PhaseDone
	hc.Annotations[operation.Annotation] = rec.Encode()
	if err := f.client.Update(ctx, hc); err != nil {
		t.Fatal(err)
	}
	if err := f.svc.Converge(ctx, f.hostedCluster("metal")); err != nil {
		t.Fatal(err)
	}
	if got := f.reservedFor(id1); len(got) != 2 {
		t.Fatalf("after the scale-down the cluster holds %v, want 2 Agents", got)
	}
}
