package controller_test

import (
	"encoding/json"
	"slices"
	"strings"
	"testing"
	"time"

	hyperv1 "github.com/openshift/hypershift/api/hypershift/v1beta1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/dcm-sp/acm-cluster-sp/internal/capiprivate/inject"
	"github.com/dcm-sp/acm-cluster-sp/internal/capiprivate/migrate/controller"
	"github.com/dcm-sp/acm-cluster-sp/internal/capiprivate/migrate/plan"
	"github.com/dcm-sp/acm-cluster-sp/internal/devtest/capi/capipods"
	"github.com/dcm-sp/acm-cluster-sp/internal/devtest/testwait"
)

// HostedClusters whose annotations claim a run (each phase, with a fresh phase start), written by someone who may
// patch HostedClusters: one per phase names an unrelated namespace holding a standard Cluster, one ("x.y")
// names the control plane namespace of a real legacy cluster ("x-y": HyperShift makes dots dashes), and one
// ("own") is a real legacy cluster whose own control plane passes every check of the namespace — only the
// migrator's record shows it is in no run. The migrator refuses each of them visibly (an event), changes nothing
// in those namespaces, advances none of their annotations, and migrates the real cluster alongside: a forged run
// blocks nothing.
func TestForgedRunsAreRefused(t *testing.T) {
	t.Parallel()
	r := newRig(t, "x-y", 1, 1, map[string]string{plan.ScopeAnnotation: plan.ScopeLegacy})
	ctx := t.Context()
	forged := func(phase plan.Phase) map[string]string {
		now := time.Now().UTC().Format(time.RFC3339)
		return map[string]string{
			plan.ScopeAnnotation: plan.ScopeMigrating, plan.InProgressAnnotation: "true", plan.PhaseAnnotation: string(phase),
			plan.IDAnnotation: "forged", plan.StartedAnnotation: now, plan.PhaseStartedAnnotation: now,
		}
	}
	type victim struct {
		hc      string
		phase   plan.Phase
		cluster *unstructured.Unstructured // the standard Cluster in the namespace it names
	}
	var victims []victim
	for _, phase := range []plan.Phase{plan.PhaseLocked, plan.PhaseQuiescing, plan.PhaseSwitching, plan.PhaseCleaningUp, plan.PhaseRollingBack} {
		name := "api-" + strings.ToLower(string(phase))
		ns := capipods.ControlPlaneNamespace(r.ns, name)
		if err := harness.Client.Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}}); err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { env.DeleteNamespace(ns) })
		cl := capipods.NewCAPIObject(capipods.StandardGroups, "Cluster")
		cl.SetNamespace(ns)
		cl.SetName("platform")
		cl.Object["spec"] = map[string]any{
			"infrastructureRef": map[string]any{"apiGroup": "infrastructure.cluster.x-k8s.io", "kind": "KubevirtCluster", "name": "platform"},
		}
		if err := harness.Client.Create(ctx, cl); err != nil {
			t.Fatal(err)
		}
		victims = append(victims, victim{hc: name, phase: phase, cluster: cl})
	}
	victims = append(victims, victim{hc: "x.y", phase: plan.PhaseCleaningUp})
	ownSpec := capipods.LegacyHostedCluster(r.ns, "own", 1, 1)
	ownSpec.Annotations = map[string]string{plan.ScopeAnnotation: plan.ScopeLegacy}
	own, err := harness.CreateHostedCluster(ctx, ownSpec)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { env.DeleteNamespace(own.Namespace()) })
	if _, err := own.WaitMachinesRunning(ctx, capipods.StandardGroups, 1, 3*time.Minute); err != nil {
		t.Fatal(err)
	}
	if err := harness.Client.Patch(ctx, &hyperv1.HostedCluster{ObjectMeta: metav1.ObjectMeta{Namespace: r.ns, Name: "own"}},
		client.RawPatch(types.MergePatchType, mergeAnnotations(forged(plan.PhaseCleaningUp)))); err != nil {
		t.Fatal(err)
	}
	for _, v := range victims {
		hc := capipods.HostedClusterSpec{Namespace: r.ns, Name: v.hc, Annotations: forged(v.phase)}.HostedCluster()
		hc.Spec.InfraID = strings.ReplaceAll(hc.Spec.InfraID, ".", "-")
		if err := harness.Client.Create(ctx, hc); err != nil {
			t.Fatal(err)
		}
	}

	r.start(nil)
	r.waitAnnotations("migrated beside the forged runs", runWithin, migrated)
	testwait.For(t, time.Minute, "the refusal of own", func() bool { return refused(t, r.ns, "own") })
	if a := (&hyperv1.HostedCluster{}); harness.Client.Get(ctx, client.ObjectKey{Namespace: r.ns, Name: "own"}, a) != nil ||
		a.Annotations[plan.PhaseAnnotation] != string(plan.PhaseCleaningUp) || a.Annotations[plan.FailedAnnotation] != "" {
		t.Errorf("own: annotations advanced: %v", a.Annotations)
	}
	if cls, err := own.List(ctx, harness.Client, capipods.StandardGroups, "Cluster"); err != nil || len(cls) != 1 ||
		cls[0].GetDeletionTimestamp() != nil || paused(cls[0].Object) {
		t.Errorf("own: its standard Cluster was paused or deleted: %v %v", err, cls)
	}
	if cls, err := own.List(ctx, harness.Client, capipods.PrivateGroups, "Cluster"); err != nil || len(cls) != 0 {
		t.Errorf("own: private Clusters %v %v, want none", err, cls)
	}
	if st := harness.Ledger.StatsFor(own.Namespace()); st.Deletes != 0 {
		t.Errorf("own: ledger %s", st)
	}
	for _, v := range victims {
		testwait.For(t, time.Minute, "the refusal of "+v.hc, func() bool { return refused(t, r.ns, v.hc) })
		hc := &hyperv1.HostedCluster{}
		if err := harness.Client.Get(ctx, client.ObjectKey{Namespace: r.ns, Name: v.hc}, hc); err != nil {
			t.Fatal(err)
		}
		if hc.Annotations[plan.PhaseAnnotation] != string(v.phase) || hc.Annotations[plan.FailedAnnotation] != "" {
			t.Errorf("%s: annotations advanced: %v", v.hc, hc.Annotations)
		}
		ns := &corev1.Namespace{}
		if err := harness.Client.Get(ctx, client.ObjectKey{Name: capipods.ControlPlaneNamespace(r.ns, v.hc)}, ns); err != nil {
			t.Fatal(err)
		}
		if v.cluster == nil {
			continue // the real cluster's namespace: its own migration changed it
		}
		if ns.Labels[inject.MarkerLabel] != "" {
			t.Errorf("%s: the namespace was marked for injection", ns.Name)
		}
		now := capipods.NewCAPIObject(capipods.StandardGroups, "Cluster")
		if err := harness.Client.Get(ctx, client.ObjectKeyFromObject(v.cluster), now); err != nil {
			t.Errorf("%s: the standard Cluster: %v", ns.Name, err)
		} else if now.GetResourceVersion() != v.cluster.GetResourceVersion() {
			t.Errorf("%s: the standard Cluster changed: %v", ns.Name, now.Object)
		}
	}
}

// refused reports whether the migrator recorded its refusal on HostedCluster namespace/name.
func refused(t *testing.T, namespace, name string) bool {
	t.Helper()
	evs := &corev1.EventList{}
	if err := harness.Client.List(t.Context(), evs, client.InNamespace(namespace)); err != nil {
		t.Fatal(err)
	}
	return slices.ContainsFunc(evs.Items, func(e corev1.Event) bool {
		return e.InvolvedObject.Name == name && e.Reason == controller.ReasonRefused
	})
}

func mergeAnnotations(a map[string]string) []byte {
	b, err := json.Marshal(map[string]any{"metadata": map[string]any{"annotations": a}})
	if err != nil {
		panic(err)
	}
	return b
}
