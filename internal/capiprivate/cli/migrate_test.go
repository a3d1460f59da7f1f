package cli

import (
	"bytes"
	"testing"
	"time"

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
		hc("clusters", "eta", map[string]string{plan.ScopeAnnotation: plan.ScopeLegacy, plan.BlockedSinceAnnotation: "2026-11-23T11:50:00Z",
			plan.BlockedAnnotation: "safety: missing-private-crd AWSMachine.infrastructure.cluster.x-k8s.io"}),
		hc("clusters", "theta", map[string]string{plan.PrivateTypesAnnotation: "true", plan.InProgressAnnotation: "true",
			plan.PhaseAnnotation: "CleaningUp", plan.IDAnnotation: "c0ffee", plan.StalledAnnotation: "CleaningUp past its 15m0s deadline: 3 standard objects left"}),
		hc("other", "team-a", map[string]string{plan.ScopeAnnotation: "team-a"}),
	}
	var b bytes.Buffer
	if err := writeStatus(&b, hcs, time.Date(2026, 11, 23, 12, 0, 0, 0, time.UTC)); err != nil {
		t.Fatal(err)
	}
	want := `NAMESPACE  NAME    STATE         PHASE        RUN       STARTED               REASON
a          new     unclassified  -            -         -                     -
clusters   alpha   in_progress   Copying      ab12cd34  2026-11-23T12:00:00Z  -
clusters   beta    failed        -            -         -                     create-failed
clusters   delta   legacy        -            -         -                     -
clusters   eta     legacy        -            -         -                     blocked 10m0s: safety: missing-private-crd AWSMachine.infrastructure.cluster.x-k8s.io
clusters   gamma   in_progress   RollingBack  ff        -                     rolling back: born-objects
clusters   theta   in_progress   CleaningUp   c0ffee    -                     stalled: CleaningUp past its 15m0s deadline: 3 standard objects left
clusters   zeta    migrated      -            -         -                     -
other      team-a  other_scope   -            -         -                     -
`
	if b.String() != want {
		t.Errorf("status:\n%s\nwant:\n%s", b.String(), want)
	}
}
