package cli

import (
	"bytes"
	"testing"

	hyperv1 "github.com/openshift/hypershift/api/hypershift/v1beta1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/dcm-sp/acm-cluster-sp/internal/capiprivate/migrate/plan"
)

func TestWriteStatus(t *testing.T) {
	hc := func(ns, name string, ann map[string]string) hyperv1.HostedCluster {
		return hyperv1.HostedCluster{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name, Annotations: ann}}
	}
	hcs := []hyperv1.HostedCluster{
		hc("clusters", "zeta", map[string]string{plan.PrivateTypesAnnotation: "true"}),
		hc("clusters", "alpha", map[string]string{plan.ScopeAnnotation: plan.ScopeLegacy, plan.InProgressAnnotation: "true",
			plan.PhaseAnnotation: "Copying", plan.IDAnnotation: "ab12cd34", plan.StartedAnnotation: "2026-11-23T12:00:00Z"}),
		hc("clusters", "beta", map[string]string{plan.ScopeAnnotation: plan.ScopeLegacy, plan.FailedAnnotation: plan.ReasonCreateFailed}),
		hc("clusters", "gamma", map[string]string{plan.ScopeAnnotation: plan.ScopeLegacy, plan.InProgressAnnotation: "true",
			plan.PhaseAnnotation: "RollingBack", plan.RollbackAnnotation: plan.ReasonBornObjects, plan.IDAnnotation: "ff"}),
		hc("a", "new", nil),
		hc("clusters", "delta", map[string]string{plan.ScopeAnnotation: plan.ScopeLegacy}),
	}
	var b bytes.Buffer
	if err := writeStatus(&b, hcs); err != nil {
		t.Fatal(err)
	}
	want := `NAMESPACE  NAME   STATE         PHASE        RUN       STARTED               REASON
a          new    unclassified  -            -         -                     -
clusters   alpha  in_progress   Copying      ab12cd34  2026-11-23T12:00:00Z  -
clusters   beta   failed        -            -         -                     create-failed
clusters   delta  legacy        -            -         -                     -
clusters   gamma  in_progress   RollingBack  ff        -                     rolling back: born-objects
clusters   zeta   migrated      -            -         -                     -
`
	if b.String() != want {
		t.Errorf("status:\n%s\nwant:\n%s", b.String(), want)
	}
}
