package provision

import (
	"context"
	"slices"
	"strings"
	"testing"

	hyperv1 "github.com/openshift/hypershift/api/hypershift/v1beta1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/util/validation/field"

	"github.com/dcm-sp/acm-cluster-sp/internal/sp/clusters"
	"github.com/dcm-sp/acm-cluster-sp/internal/sp/meta"
	"github.com/dcm-sp/acm-cluster-sp/internal/sp/operation"
)

const scaleTo3 = `{"spec":{"nodes":{"workers":{"count":3}}}}`

// An unknown cluster is a 404 whatever the body; a stale If-Match a 412; a cluster never installed a 409.
func TestUpdateRefusals(t *testing.T) {
	f := newFixture(t)
	ctx := context.Background()
	if _, err := f.svc.Update(ctx, id1, []byte(`not json`), ""); clusters.KindOf(err) != clusters.KindNotFound {
		t.Fatalf("unknown cluster with a bad body: %v, want a 404 before the body is read", err)
	}
	c := f.create(id1, "", kubevirtBody("alpha", 2))
	if _, err := f.svc.Update(ctx, id1, []byte(scaleTo3), `"not-the-etag"`); clusters.KindOf(err) != clusters.KindPrecondition {
		t.Fatalf("stale If-Match: %v, want a 412", err)
	}
	if _, err := f.svc.Update(ctx, id1, []byte(scaleTo3), c.ETag); clusters.KindOf(err) != clusters.KindConflict || !strings.Contains(err.Error(), "not completed its installation") {
		t.Fatalf("a cluster never installed: %v, want a 409", err)
	}
	if op := operation.Decode(f.hostedCluster("alpha")); op != nil {
		t.Fatalf("a refused update recorded %+v", op)
	}
}

// An accepted change records the new spec and the operation on the HostedCluster in one write; while it runs,
// another change is a 409 and the same patch again a replay that starts nothing.
func TestUpdateSequencesOperations(t *testing.T) {
	f := newFixture(t)
	ctx := context.Background()
	f.create(id1, "", kubevirtBody("alpha", 2))
	f.installed("alpha", "4.17.29")
	c, err := f.svc.Update(ctx, id1, []byte(scaleTo3), "")
	if err != nil || c.Operation == nil || c.Operation.Kind != operation.Scale {
		t.Fatalf("scale: %v, %+v", err, c)
	}
	hc := f.hostedCluster("alpha")
	rec := operation.Decode(hc)
	if rec == nil || !rec.Open() || rec.Replicas != 3 || !strings.Contains(hc.Annotations[meta.AnnotationSpec], `"count":3`) {
		t.Fatalf("recorded %+v with the spec %s", rec, hc.Annotations[meta.AnnotationSpec])
	}
	again, err := f.svc.Update(ctx, id1, []byte(scaleTo3), "")
	if err != nil || again.Operation == nil || again.Operation.ID != rec.ID {
		t.Fatalf("replay of the accepted patch: %v, %+v (want the same operation %s)", err, again.Operation, rec.ID)
	}
	if _, err := f.svc.Update(ctx, id1, []byte(`{"spec":{"nodes":{"workers":{"count":4}}}}`), ""); clusters.KindOf(err) != clusters.KindConflict || !strings.Contains(err.Error(), "in progress") {
		t.Fatalf("a change while an operation runs: %v, want a 409", err)
	}
}

// A bare-metal scale-up reserves the extra Agents before it records anything; when the record is refused, the
// Agents it reserved are released again and the cluster keeps its own.
func TestUpdateBareMetalScaleRollsBackReservation(t *testing.T) {
	f := newFixture(t)
	ctx := context.Background()
	f.installedBareMetal(2, "agent-1", "agent-2", "agent-3")
	f.fail("patch", "HostedCluster", "metal", apierrors.NewInvalid(schema.GroupKind{Group: hyperv1.GroupVersion.Group, Kind: "HostedCluster"}, "metal",
		field.ErrorList{field.Forbidden(field.NewPath("metadata", "annotations"), "refused")}))
	if _, err := f.svc.Update(ctx, id1, []byte(scaleTo3), ""); err == nil {
		t.Fatal("the scale was accepted though its record was refused")
	}
	if got := f.reservedFor(id1); !slices.Equal(got, []string{"agent-1", "agent-2"}) {
		t.Fatalf("after the refused scale the cluster holds %v, want its two Agents", got)
	}
	if op := operation.Decode(f.hostedCluster("metal")); op != nil {
		t.Fatalf("a refused scale recorded %+v", op)
	}
}

// A bare-metal scale-up without enough Agents is a 422 before anything is recorded.
func TestUpdateBareMetalScaleShortfall(t *testing.T) {
	f := newFixture(t)
	f.installedBareMetal(2, "agent-1", "agent-2")
	if _, err := f.svc.Update(context.Background(), id1, []byte(scaleTo3), ""); clusters.KindOf(err) != clusters.KindUnprocessable || !strings.Contains(err.Error(), "need 3 eligible Agents") {
		t.Fatalf("scale beyond the Agents: %v, want a 422", err)
	}
	if op := operation.Decode(f.hostedCluster("metal")); op != nil {
		t.Fatalf("a refused scale recorded %+v", op)
	}
}

// A HostedCluster of a platform type the SP does not serve is not changed (422, nothing recorded) and is read with
// no platform and a status that says why: the SP never reads it as KubeVirt.
func TestPlatformNotServed(t *testing.T) {
	f := newFixture(t)
	ctx := context.Background()
	f.create(id1, "", kubevirtBody("alpha", 2))
	f.installed("alpha", "4.17.29")
	hc := f.hostedCluster("alpha")
	hc.Spec.Platform = hyperv1.PlatformSpec{Type: hyperv1.AWSPlatform}
	if err := f.client.Update(ctx, hc); err != nil {
		t.Fatal(err)
	}
	if _, err := f.svc.Update(ctx, id1, []byte(scaleTo3), ""); clusters.KindOf(err) != clusters.KindUnprocessable || !strings.Contains(err.Error(), `"AWS"`) {
		t.Fatalf("update of an AWS HostedCluster: %v, want a 422 naming its platform", err)
	}
	if op := operation.Decode(f.hostedCluster("alpha")); op != nil {
		t.Fatalf("a refused update recorded %+v", op)
	}
	c, err := f.svc.Get(ctx, id1)
	if err != nil {
		t.Fatal(err)
	}
	if c.Platform != "" || !strings.Contains(c.StatusMessage, "not one this service provider serves") {
		t.Fatalf("read as platform %q, status %s %q", c.Platform, c.Status, c.StatusMessage)
	}
}
