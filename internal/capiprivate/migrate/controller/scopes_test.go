package controller_test

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	hyperv1 "github.com/openshift/hypershift/api/hypershift/v1beta1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"

	"github.com/dcm-sp/acm-cluster-sp/internal/capiprivate/migrate/controller"
	"github.com/dcm-sp/acm-cluster-sp/internal/capiprivate/migrate/plan"
	"github.com/dcm-sp/acm-cluster-sp/internal/devtest/capi/capipods"
	"github.com/dcm-sp/acm-cluster-sp/internal/devtest/testwait"
)

// TestClassifierAndScopes runs the install order with operators scoped exactly as HyperShift scopes them: the
// legacy operator (scope legacy) first — it does not take an unannotated HostedCluster; then the classifier's startup
// scan marks the one with a standard Cluster legacy and the one without private; only then the private operator
// (the default one, through the proxy) starts. Then the migration: legacy → lock (neither operator reconciles the
// HostedCluster, and both had their chance: their scope predicates saw it and turned it away) → commit (the
// default operator takes it, through the proxy).
func TestClassifierAndScopes(t *testing.T) {
	t.Parallel()
	const mds, machines = 1, 1
	r := newRigWith(t, "epsilon", mds, machines, nil, true) // unclassified; the private operator not started yet
	ctx := t.Context()
	fresh := &hyperv1.HostedCluster{}
	if err := harness.Client.Get(ctx, r.key, fresh); err != nil {
		t.Fatal(err)
	}
	// A second HostedCluster with no Cluster at all: a new cluster, born private.
	born := fresh.DeepCopy()
	born.ObjectMeta = metav1.ObjectMeta{Namespace: r.ns, Name: "zeta"}
	born.Status = hyperv1.HostedClusterStatus{}
	if err := harness.Client.Create(ctx, born); err != nil {
		t.Fatal(err)
	}
	legacyOp, privateOp := "legacy-"+r.ns, "private-"+r.ns
	testwait.For(t, time.Minute, "the legacy operator to see the unannotated HostedCluster and skip it", func() bool {
		return harness.Reconciles.Skips(legacyOp, r.key) > 0
	})
	if n := harness.Reconciles.Count("", r.key); n != 0 {
		t.Fatalf("an unclassified HostedCluster was reconciled %d times", n)
	}
	// The migrator waits on its conversion probe (its namespace does not exist yet) while the classifier runs, so
	// the lock lands only once the legacy operator is done with the HostedCluster: a reconcile queued before the
	// lock would still run after it (HyperShift's scoping filters events, not reconciles).
	probeNS := r.ns + "-probe"
	r.start(func(o *controller.RunOptions) {
		cfg := testConfig()
		cfg.QuietWindow = 4 * time.Second
		o.Config = cfg
		o.ProbeNamespace = probeNS
	})
	r.waitAnnotations("classified legacy", time.Minute, func(a map[string]string) bool {
		return a[plan.ScopeAnnotation] == plan.ScopeLegacy
	})
	r.waitLegacyRunning(mds * machines)
	testwait.For(t, time.Minute, "the legacy operator to reconcile the legacy HostedCluster (and its own status write)", func() bool {
		return harness.Reconciles.Count(legacyOp, r.key) >= 2
	})
	probe := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: probeNS}}
	if err := harness.Client.Create(ctx, probe); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = harness.Client.Delete(context.Background(), probe) })
	bornKey := types.NamespacedName{Namespace: r.ns, Name: "zeta"}
	testwait.For(t, time.Minute, "the new HostedCluster classified private (no scope)", func() bool {
		h := &hyperv1.HostedCluster{}
		return harness.Client.Get(ctx, bornKey, h) == nil && h.Annotations[plan.PrivateTypesAnnotation] == "true" && h.Annotations[plan.ScopeAnnotation] == ""
	})
	r.startPrivateOperator() // the install order: only once every legacy HostedCluster carries its scope
	testwait.For(t, time.Minute, "the private operator to reconcile the new HostedCluster", func() bool {
		return harness.Reconciles.Count(privateOp, bornKey) > 0
	})
	r.waitAnnotations("migrated", runWithin, migrated)
	testwait.For(t, time.Minute, "the private operator to reconcile the migrated HostedCluster", func() bool {
		return harness.Reconciles.Count(privateOp, r.key) > 0
	})
	checkScopes(t, r.key, legacyOp, privateOp)
	for _, e := range harness.Reconciles.Entries() {
		if e.HostedCluster == bornKey && !e.Skipped && e.Operator != privateOp {
			t.Errorf("%s reconciled the private HostedCluster", e.Operator)
		}
	}
	// Through the proxy: the private operator's requests (its informers' lists and watches of KubevirtClusters)
	// reached kube-apiserver in the private groups; the legacy operator's never did. The legacy operator reads the
	// KubevirtCluster only once the HostedControlPlane is ready, which under load can come after the lock, so its
	// standard-group reads are reported, not required; that the audit log shows its requests at all is.
	// One read of the audit log for both operators (it is hundreds of MB by now), then each one's KubevirtCluster
	// groups.
	fromPrivate, fromLegacy := capipods.FromPod("hypershift-operator-"+privateOp), capipods.FromPod("hypershift-operator-"+legacyOp)
	evs, err := capipods.ReadAudit(env.AuditLog, capipods.PodLine("hypershift-operator-"), func(ev *capipods.AuditEvent) bool { return fromPrivate(ev) || fromLegacy(ev) })
	if err != nil {
		t.Fatal(err)
	}
	groupsOf := func(op string) (map[string]bool, int) {
		from := capipods.FromPod("hypershift-operator-" + op)
		out, n := map[string]bool{}, 0
		for i := range evs {
			if !from(&evs[i]) {
				continue
			}
			n++
			if evs[i].ObjectRef.Resource == "kubevirtclusters" {
				out[evs[i].ObjectRef.APIGroup] = true
			}
		}
		return out, n
	}
	if g, n := groupsOf(privateOp); !g["infrastructure.cluster.hypershift.openshift.io"] || g["infrastructure.cluster.x-k8s.io"] {
		t.Errorf("the private operator's %d requests: KubevirtClusters in %v, want the private groups only (through the proxy); audit files %s", n, g, auditFiles())
	}
	g, n := groupsOf(legacyOp)
	if n == 0 || g["infrastructure.cluster.hypershift.openshift.io"] {
		t.Errorf("the legacy operator's %d requests: KubevirtClusters in %v, want some requests and no private group; audit files %s", n, g, auditFiles())
	}
	t.Logf("the legacy operator's %d requests: KubevirtClusters in %v", n, g)
}

// checkScopes asserts what HyperShift's scoping did with a HostedCluster that migrated: the legacy operator
// reconciled it only with scope legacy, the private one only without a scope (after the commit), neither while it
// carried the lock — and both had their chance while it was locked (their predicates saw it and turned it away).
func checkScopes(t *testing.T, hc types.NamespacedName, legacyOp, privateOp string) {
	t.Helper()
	lockSkips := map[string]int{}
	for _, e := range harness.Reconciles.Entries() {
		if e.HostedCluster != hc {
			continue
		}
		switch {
		case e.Skipped && e.Scope == plan.ScopeMigrating:
			lockSkips[e.Operator]++
		case e.Skipped:
		case e.Scope == plan.ScopeMigrating:
			t.Errorf("%s reconciled %s while it was locked (at %s)", e.Operator, hc, e.Time.Format(time.StampMilli))
		case e.Operator == legacyOp && e.Scope != plan.ScopeLegacy, e.Operator == privateOp && e.Scope != "":
			t.Errorf("%s reconciled %s with scope %q", e.Operator, hc, e.Scope)
		}
	}
	if lockSkips[legacyOp] == 0 || lockSkips[privateOp] == 0 {
		t.Errorf("events on the locked HostedCluster turned away: %v; want both operators (they had their chance)", lockSkips)
	}
	if harness.Reconciles.Count(legacyOp, hc) == 0 || harness.Reconciles.Count(privateOp, hc) == 0 {
		t.Errorf("legacy %d, private %d reconciles of %s: want both (before and after)", harness.Reconciles.Count(legacyOp, hc), harness.Reconciles.Count(privateOp, hc), hc)
	}
}

// auditFiles names the audit log's files (the log and those rotated away) with their sizes, for a failure message.
func auditFiles() string {
	files, _ := capipods.AuditFiles(env.AuditLog)
	var out []string
	for _, f := range files {
		if fi, err := os.Stat(f); err == nil {
			out = append(out, fmt.Sprintf("%s (%d MB)", filepath.Base(f), fi.Size()>>20))
		}
	}
	return strings.Join(out, ", ")
}
