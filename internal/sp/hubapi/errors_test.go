package hubapi

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"testing"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/util/validation/field"

	"github.com/dcm-sp/acm-cluster-sp/internal/sp/clusters"
)

// The hub's causes come back under the request's field names where they can be traced back.
func TestRejected(t *testing.T) {
	err := apierrors.NewInvalid(schema.GroupKind{Group: "hypershift.openshift.io", Kind: "HostedCluster"}, "c1", field.ErrorList{
		field.Invalid(field.NewPath("spec", "dns", "baseDomain"), "x..y", "baseDomain must be a valid domain name"),
		field.Invalid(field.NewPath("spec", "platform", "kubevirt", "compute", "cores"), 0, "must be at least 1"),
		field.Required(field.NewPath("spec", "services").Index(3), "needed"),
	})
	e := Rejected(err, "HostedCluster", "c1")
	if e.Kind != clusters.KindUnprocessable {
		t.Fatalf("kind %v", e.Kind)
	}
	want := []string{"spec.provider_hints.acm.base_domain", "spec.nodes.workers.cpu", "HostedCluster.spec.services[3]"}
	if len(e.Fields) != len(want) {
		t.Fatalf("fields %+v", e.Fields)
	}
	for i, f := range want {
		if e.Fields[i].Field != f {
			t.Errorf("field %d = %q, want %q", i, e.Fields[i].Field, f)
		}
	}
}

// A failed hub call is a retryable 503 or 504 when the hub (or the SP's own stop) is the cause, with a message that
// says so; anything else stays an internal error.
func TestFailureKinds(t *testing.T) {
	gr := schema.GroupResource{Group: "hypershift.openshift.io", Resource: "hostedclusters"}
	for _, c := range []struct {
		err  error
		want clusters.Kind
		says string
	}{
		{context.DeadlineExceeded, clusters.KindTimeout, "did not answer in time"},
		{apierrors.NewTimeoutError("slow", 1), clusters.KindTimeout, "did not answer in time"},
		{apierrors.NewTooManyRequests("busy", 1), clusters.KindUnavailable, "unavailable"},
		{apierrors.NewServiceUnavailable("down"), clusters.KindUnavailable, "unavailable"},
		{apierrors.NewInternalError(errors.New("etcd hiccup")), clusters.KindUnavailable, "internal error; retry"},
		{fmt.Errorf("wrapped: %w", context.Canceled), clusters.KindUnavailable, "SP is stopping"},
		{apierrors.NewForbidden(gr, "c1", errors.New("no")), clusters.KindInternal, "creating"},
		{errors.New("surprise"), clusters.KindInternal, "creating"},
	} {
		e := Failure(c.err, "creating HostedCluster %s", "c1")
		if e.Kind != c.want || !strings.Contains(e.Message, c.says) {
			t.Errorf("%v: kind %v %q, want %v containing %q", c.err, e.Kind, e.Message, c.want, c.says)
		}
	}
}
