package controller_test

import (
	"context"
	"errors"
	"fmt"
	"os"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	hyperv1 "github.com/openshift/hypershift/api/hypershift/v1beta1"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"
	admissionv1 "k8s.io/api/admissionregistration/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/interceptor"

	"github.com/dcm-sp/acm-cluster-sp/internal/capiprivate/groups"
	"github.com/dcm-sp/acm-cluster-sp/internal/capiprivate/migrate/controller"
	"github.com/dcm-sp/acm-cluster-sp/internal/capiprivate/migrate/plan"
	"github.com/dcm-sp/acm-cluster-sp/internal/devtest/capi/capipods"
	"github.com/dcm-sp/acm-cluster-sp/internal/devtest/testwait"
)

// kinds the harness's hosted clusters have (the migrator lists all of controller.DefaultKinds).
var graphKinds = []string{"Cluster", "KubevirtCluster", "MachineDeployment", "MachineSet", "Machine", "MachineHealthCheck",
	"KubevirtMachineTemplate", "KubevirtMachine"}

// runWithin bounds a wait for a run's outcome (migrated, rolled back, stalled) and for a cluster's provisioning: the
// package's tests run in parallel on one hub, and on a loaded two-core machine a run that takes a minute alone
// takes several.
const runWithin = 8 * time.Minute

// testConfig is the production configuration with its windows shortened to what the tests' simulated clusters
// need. The deadlines a run that goes well must meet (quiesce, switch, resume) stay generous — on a loaded
// machine a rollout of the simulated pods takes minutes — and the tests of a deadline set a short one of their
// own. Poll, how soon a waiting run looks again, stays at a second: every look lists each moved kind in both
// group sets, and the package's tests run in parallel on one hub.
func testConfig() plan.Config {
	return plan.Config{
		QuietWindow: 2 * time.Second, QuiesceTimeout: 5 * time.Minute, SwitchTimeout: 5 * time.Minute,
		HealthWindow: 3 * time.Second, ResumeTimeout: 5 * time.Minute, WebhookGrace: 30 * time.Second,
		Poll: time.Second,
	}
}

// rig is one legacy hosted cluster in its own namespace with a legacy and a private fake HyperShift operator
// (each accepting only its scope), and the migrate manager when started.
type rig struct {
	t        *testing.T
	platform capipods.Platform // of the hosted cluster (KubeVirt when unset)
	ns       string
	hc       *capipods.HostedCluster
	key      types.NamespacedName
	reg      *prometheus.Registry
	metrics  *controller.Metrics
	mig      *controller.Running

	mu      sync.Mutex
	actions []timedAction
	hook    func(plan.Action) // called after each executed action
	all     []hcAction        // every executed action of every HostedCluster
	before  []capipods.MachineState
}

type hcAction struct {
	hc types.NamespacedName
	at time.Time
}

type timedAction struct {
	at     time.Time
	phase  plan.Phase
	action plan.Action
}

// newRig creates the hosted cluster (annotations as given: nil leaves it for the classifier), the legacy
// HyperShift operator (scope legacy, direct) and — unless privateLater, for the install order — the private one
// (the default operator, through the proxy), both scoped exactly as HyperShift scopes and kept to this test's
// namespace; it waits until the Machines run when the cluster is legacy.
func newRig(t *testing.T, name string, mds, machines int, annotations map[string]string) *rig {
	return newRigWith(t, name, mds, machines, annotations, false)
}

func newRigWith(t *testing.T, name string, mds, machines int, annotations map[string]string, privateLater bool) *rig {
	t.Helper()
	return newRigSpec(t, name, mds, machines, annotations, privateLater, nil)
}

// newRigSpec is newRigWith with the hosted cluster's spec adjusted by mutate (nil: as LegacyHostedCluster makes it).
func newRigSpec(t *testing.T, name string, mds, machines int, annotations map[string]string, privateLater bool, mutate func(*capipods.HostedClusterSpec)) *rig {
	t.Helper()
	ctx := t.Context()
	ns := env.NewNamespace(t, "mig")
	r := &rig{t: t, ns: ns, key: types.NamespacedName{Namespace: ns, Name: name}}
	legacy, err := harness.StartHyperShiftOperator(ctx, "legacy-"+ns, capipods.Direct, capipods.LegacyOperatorEnv, r.inNS)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = legacy.Stop() })
	if !privateLater {
		r.startPrivateOperator()
	}
	spec := capipods.LegacyHostedCluster(ns, name, mds, machines)
	spec.Annotations = annotations
	if mutate != nil {
		mutate(&spec)
	}
	r.platform = spec.Platform
	if r.hc, err = harness.CreateHostedCluster(ctx, spec); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		env.DeleteNamespace(r.hc.Namespace())
	})
	if annotations[plan.ScopeAnnotation] == plan.ScopeLegacy {
		r.waitLegacyRunning(mds * machines)
	}
	return r
}

func (r *rig) inNS(hc *hyperv1.HostedCluster) bool { return hc.Namespace == r.ns }

// startPrivateOperator starts the private HyperShift operator: the default one (no scope), through the proxy.
func (r *rig) startPrivateOperator() {
	r.t.Helper()
	private, err := harness.StartHyperShiftOperator(r.t.Context(), "private-"+r.ns, capipods.Proxied, capipods.PrivateOperatorEnv, r.inNS)
	if err != nil {
		r.t.Fatal(err)
	}
	r.t.Cleanup(func() { _ = private.Stop() })
}

func (r *rig) waitLegacyRunning(n int) {
	r.t.Helper()
	var err error
	// A loaded 2-core machine provisions a few Machines a second at best: big clusters get longer.
	within := max(runWithin, time.Duration(n)*3*time.Second)
	if r.before, err = r.hc.WaitMachinesRunning(r.t.Context(), capipods.StandardGroups, n, within); err != nil {
		r.t.Fatal(err)
	}
}

// start starts the migrate manager (the classifier and the migrator) with testConfig, recording every executed
// action; mutate adjusts the options.
func (r *rig) start(mutate func(*controller.RunOptions)) {
	r.t.Helper()
	if r.reg == nil {
		r.reg = prometheus.NewRegistry()
		r.metrics = controller.NewMetrics(r.reg)
	}
	o := controller.RunOptions{
		Options: controller.Options{Config: testConfig(), Metrics: r.metrics, ProbeNamespace: r.ns, Namespace: r.ns, StateNamespace: r.ns,
			AfterAction: func(hc types.NamespacedName, p plan.Phase, a plan.Action) {
				r.mu.Lock()
				r.all = append(r.all, hcAction{hc: hc, at: time.Now()})
				r.mu.Unlock()
				if hc != r.key {
					return
				}
				r.mu.Lock()
				r.actions = append(r.actions, timedAction{at: time.Now(), phase: p, action: a})
				hook := r.hook
				r.mu.Unlock()
				if hook != nil {
					hook(a)
				}
			}},
		LeaderElection: true, LeaderElectionNamespace: r.ns, SkipNameValidation: true,
		// A lease a loaded machine renews in time: with the default 15 s one (renewed within 10 s) a migrator lost
		// its leadership under make stress and stopped, and no Deployment here starts it again. A stopped migrator
		// releases its lease, so a restarted one still takes over at once.
		LeaseDuration: time.Minute,
	}
	o.Log = testLog(r.t)
	if mutate != nil {
		mutate(&o)
	}
	mig, err := controller.Start(context.Background(), env.TokenConfig(env.AdminToken), o)
	if err != nil {
		r.t.Fatal(err)
	}
	r.mig = mig
	r.t.Cleanup(func() { _ = mig.Stop() })
}

func (r *rig) annotations() map[string]string {
	hc := &hyperv1.HostedCluster{}
	if err := harness.Client.Get(r.t.Context(), r.key, hc); err != nil {
		return map[string]string{"error": err.Error()}
	}
	return hc.Annotations
}

// waitAnnotations waits until cond holds for the HostedCluster's annotations.
func (r *rig) waitAnnotations(what string, within time.Duration, cond func(map[string]string) bool) map[string]string {
	r.t.Helper()
	var last map[string]string
	// Every half second: the annotations change at most once a look (every second), and each read is a quorum
	// read of the HostedCluster that the package's parallel tests would otherwise repeat ten times a second.
	if !testwait.PollEvery(500*time.Millisecond, within, func() bool { last = r.annotations(); return cond(last) }) {
		r.t.Fatalf("HostedCluster %s: %s not within %s; annotations %v; actions %v", r.key, what, within, last, r.kinds())
	}
	return last
}

// checkLegacyRunsAgain: after a rollback the legacy controllers run again (every Deployment available), the
// standard Machines are running, and no instance was created or deleted beyond the cluster's machines.
func (r *rig) checkLegacyRunsAgain(machines int) {
	r.t.Helper()
	if err := r.hc.WaitDeploymentsAvailable(r.t.Context(), 2*time.Minute); err != nil {
		r.t.Fatal(err)
	}
	if _, err := r.hc.WaitMachinesRunning(r.t.Context(), capipods.StandardGroups, machines, time.Minute); err != nil {
		r.t.Fatal(err)
	}
	if s := r.ledger(); s.Creates != machines || s.Deletes != 0 {
		r.t.Errorf("ledger %s, want creates=%d deletes=0", s, machines)
	}
}

func migrated(a map[string]string) bool {
	return a[plan.PrivateTypesAnnotation] == "true" && a[plan.InProgressAnnotation] == "" && a[plan.PhaseAnnotation] == ""
}

func (r *rig) kinds() []plan.Kind {
	r.mu.Lock()
	defer r.mu.Unlock()
	var out []plan.Kind
	for _, a := range r.actions {
		if a.action.Kind != plan.Persist {
			out = append(out, a.action.Kind)
		}
	}
	return out
}

func (r *rig) actionTime(k plan.Kind) time.Time {
	r.mu.Lock()
	defer r.mu.Unlock()
	for _, a := range r.actions {
		if a.action.Kind == k {
			return a.at
		}
	}
	return time.Time{}
}

func (r *rig) list(g capipods.Groups, kind string) []unstructured.Unstructured {
	r.t.Helper()
	items, err := r.hc.List(r.t.Context(), harness.Client, g, kind)
	if err != nil {
		r.t.Fatalf("listing %s %s: %v", g, kind, err)
	}
	return items
}

// graphKinds are the kinds of the rig's hosted cluster that move: the core kinds and, when its provider's group
// is renamed, the platform's.
func (r *rig) graphKinds() []string {
	if r.platform.Name == "" || r.platform.Name == capipods.KubeVirt.Name {
		return graphKinds
	}
	core := []string{"Cluster", "MachineDeployment", "MachineSet", "Machine", "MachineHealthCheck"}
	if _, renamed := groups.Default.ToPrivate(r.platform.Group); !renamed {
		return core
	}
	return append(core, r.platform.Kinds()...)
}

func (r *rig) count(g capipods.Groups) map[string]int {
	out := map[string]int{}
	for _, k := range r.graphKinds() {
		out[k] = len(r.list(g, k))
	}
	return out
}

func (r *rig) ledger() capipods.Stats { return harness.Ledger.StatsFor(r.hc.Namespace()) }

// checkMigrated asserts the state after a successful migration: the standard objects are gone, every
// private object is a twin whose owners are twins (new UIDs), the HostedControlPlane is owned by the private
// Cluster, Machines kept their names, providerIDs and Nodes, and the ledger saw no create and no delete.
func (r *rig) checkMigrated(wantCounts map[string]int, machines int) {
	t := r.t
	t.Helper()
	ctx := t.Context()
	testwait.For(t, time.Minute, "standard objects gone (orphan deletes finish)", func() bool {
		for _, n := range r.count(capipods.StandardGroups) {
			if n != 0 {
				return false
			}
		}
		return true
	})
	if got := r.count(capipods.PrivateGroups); !mapsEqual(got, wantCounts) {
		t.Errorf("private objects %v, want %v", got, wantCounts)
	}
	uids := map[types.UID]bool{}
	from := map[string]bool{}
	var all []unstructured.Unstructured
	for _, k := range r.graphKinds() {
		for _, o := range r.list(capipods.PrivateGroups, k) {
			uids[o.GetUID()] = true
			// Non-empty on every twin (a MachineSet's is its MachineDeployment's once CAPI synced its annotations).
			f := o.GetAnnotations()[plan.MigratedFromUIDAnnotation]
			if f == "" {
				t.Errorf("%s %s: no migrated-from-uid", k, o.GetName())
			}
			from[f] = true
			all = append(all, o)
		}
	}
	for _, o := range all {
		for _, ref := range o.GetOwnerReferences() {
			if strings.Contains(ref.APIVersion, "x-k8s.io") {
				t.Errorf("%s %s: owner %s still in a standard group", o.GetKind(), o.GetName(), ref.APIVersion)
			}
			if strings.Contains(ref.APIVersion, "hypershift.openshift.io") && ref.Kind != "HostedControlPlane" && !uids[ref.UID] {
				t.Errorf("%s %s: owner %s %s uid %s is not a twin", o.GetKind(), o.GetName(), ref.Kind, ref.Name, ref.UID)
			}
		}
	}
	cluster, err := r.hc.Get(ctx, harness.Client, capipods.PrivateGroups, "Cluster", r.hc.Spec.ClusterName())
	if err != nil {
		t.Fatal(err)
	}
	hcp := &hyperv1.HostedControlPlane{}
	if err := harness.Client.Get(ctx, client.ObjectKey{Namespace: r.hc.Namespace(), Name: r.key.Name}, hcp); err != nil {
		t.Fatalf("HostedControlPlane: %v", err)
	}
	owned := false
	for _, ref := range hcp.OwnerReferences {
		owned = owned || (ref.UID == cluster.GetUID() && ref.APIVersion == capipods.PrivateGroups.APIVersion(capipods.ClusterGroup, "v1beta2"))
	}
	if !owned {
		t.Errorf("HostedControlPlane owners %+v, want the private Cluster %s", hcp.OwnerReferences, cluster.GetUID())
	}
	after, err := r.hc.MachineStates(ctx, capipods.PrivateGroups)
	if err != nil {
		t.Fatal(err)
	}
	if !slices.Equal(after, r.before) {
		t.Errorf("Machines after migration %+v, before %+v (names, providerIDs, Nodes must not change)", after, r.before)
	}
	if s := r.ledger(); s.Creates != machines || s.Deletes != 0 {
		t.Errorf("ledger %s, want creates=%d deletes=0", s, machines)
	}
	// GC barrier: a ConfigMap owned by the deleted standard Cluster's UID is collected; once it is, the garbage
	// collector has looked at this namespace's owners, and the private objects must all still be there.
	oldUID := types.UID("")
	for _, o := range all {
		if o.GetKind() == "Cluster" {
			oldUID = types.UID(o.GetAnnotations()[plan.MigratedFromUIDAnnotation])
		}
	}
	sentinel := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: r.hc.Namespace(), Name: "gc-sentinel",
		OwnerReferences: []metav1.OwnerReference{{APIVersion: "cluster.x-k8s.io/v1beta2", Kind: "Cluster", Name: r.hc.Spec.ClusterName(), UID: oldUID}}}}
	if err := harness.Client.Create(ctx, sentinel); err != nil {
		t.Fatal(err)
	}
	testwait.For(t, time.Minute, "the garbage collector to collect the sentinel owned by the old Cluster", func() bool {
		err := harness.Client.Get(ctx, client.ObjectKeyFromObject(sentinel), &corev1.ConfigMap{})
		return apierrors.IsNotFound(err)
	})
	if got := r.count(capipods.PrivateGroups); !mapsEqual(got, wantCounts) {
		t.Errorf("after GC: private objects %v, want %v", got, wantCounts)
	}
	if err := harness.Client.Get(ctx, client.ObjectKeyFromObject(hcp), hcp); err != nil {
		t.Errorf("HostedControlPlane after GC: %v", err)
	}
	for _, m := range after {
		if err := harness.Client.Get(ctx, client.ObjectKey{Name: m.NodeName}, &corev1.Node{}); err != nil {
			t.Errorf("Node %s: %v", m.NodeName, err)
		}
	}
}

func mapsEqual(a, b map[string]int) bool {
	for k, v := range a {
		if b[k] != v {
			return false
		}
	}
	for k, v := range b {
		if a[k] != v {
			return false
		}
	}
	return true
}

func expectedCounts(mds, machines int, mhc bool) map[string]int {
	m := map[string]int{"Cluster": 1, "KubevirtCluster": 1, "MachineDeployment": mds, "MachineSet": mds,
		"Machine": mds * machines, "KubevirtMachine": mds * machines, "KubevirtMachineTemplate": mds, "MachineHealthCheck": 0}
	if mhc {
		m["MachineHealthCheck"] = mds
	}
	return m
}

// TestMigrateEndToEnd: a legacy hosted cluster with 2 MachineDeployments × 2 Machines migrates with no
// instance created or deleted, then scales in the private group.
func TestMigrateEndToEnd(t *testing.T) {
	const mds, machines = 2, 2
	r := newRig(t, "alpha", mds, machines, map[string]string{plan.ScopeAnnotation: plan.ScopeLegacy})
	wantCounts := expectedCounts(mds, machines, true)
	if got := r.count(capipods.StandardGroups); !mapsEqual(got, wantCounts) {
		t.Fatalf("legacy objects %v, want %v", got, wantCounts)
	}
	oldCluster := r.list(capipods.StandardGroups, "Cluster")[0]
	ctx := t.Context()
	// A provider-like kind the migrator discovers from its CRDs (standard and private installed): one per
	// Machine, owned by it and referring to it by uid.
	installKind(t, "examplemachines", "ExampleMachine", true)
	for _, m := range r.list(capipods.StandardGroups, "Machine") {
		ex := exampleObject(infraGroup, "ExampleMachine", r.hc.Namespace(), m.GetName())
		ex.SetOwnerReferences([]metav1.OwnerReference{{APIVersion: m.GetAPIVersion(), Kind: "Machine", Name: m.GetName(), UID: m.GetUID(), BlockOwnerDeletion: ptr.To(true)}})
		ex.Object["spec"] = map[string]any{"machineRef": map[string]any{"apiVersion": m.GetAPIVersion(), "kind": "Machine", "name": m.GetName(), "uid": string(m.GetUID())}}
		if err := harness.Client.Create(ctx, ex); err != nil {
			t.Fatal(err)
		}
	}
	// Dependents of the standard Cluster outside the CAPI groups: a Secret (a kind the migrator re-points) and a
	// Service (a kind it does not list).
	ownedByCluster := []metav1.OwnerReference{{APIVersion: oldCluster.GetAPIVersion(), Kind: "Cluster", Name: oldCluster.GetName(), UID: oldCluster.GetUID()}}
	kubeconfig := &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: r.hc.Namespace(), Name: "owned-kubeconfig", OwnerReferences: ownedByCluster}}
	unlisted := &corev1.Service{ObjectMeta: metav1.ObjectMeta{Namespace: r.hc.Namespace(), Name: "owned-service", OwnerReferences: ownedByCluster},
		Spec: corev1.ServiceSpec{Ports: []corev1.ServicePort{{Port: 443}}}}
	for _, o := range []client.Object{kubeconfig, unlisted} {
		if err := harness.Client.Create(ctx, o); err != nil {
			t.Fatal(err)
		}
	}
	// A field manager that applies its fields (as HyperShift's nodepool controller applies MachineDeployments).
	md := r.hc.Spec.MachineDeployments[0].Name
	applyLabels(t, harness.Client, capipods.StandardGroups, r.hc.Namespace(), md, "a", "b")
	deletes := watchDeletes(t, r.hc.Namespace(), standardKinds()...)
	_, legacyPods := r.dependentPods()
	begin := time.Now()
	r.start(nil)
	seenLocked := false
	r.waitAnnotations("migrated", runWithin, func(a map[string]string) bool {
		seenLocked = seenLocked || a[plan.InProgressAnnotation] == "true"
		return migrated(a)
	})
	took := time.Since(begin)
	if a := r.annotations(); a[plan.ScopeAnnotation] != "" || a[plan.FailedAnnotation] != "" {
		t.Errorf("annotations after migration: %v", a)
	}
	want := []plan.Kind{plan.PauseLegacyCluster, plan.ScaleDownLegacy, plan.CopyTwins, plan.RepointToTwins, plan.Switch, plan.UnpausePrivate, plan.DeleteOld}
	if got := slices.Compact(r.kinds()); !slices.Equal(got, want) {
		t.Errorf("actions %v, want %v", got, want)
	}
	r.checkMigrated(wantCounts, mds*machines)
	r.checkInfrastructureRefs(capipods.KubeVirt, true) // the rig's platform; TestMigratePlatforms covers the others
	// The switch was a rollout: every CAPI-dependent component runs new Pods with the sidecar.
	r.checkRollout(true, legacyPods)
	// managedFields came along, their apiVersions translated.
	newCluster := r.list(capipods.PrivateGroups, "Cluster")[0]
	managers := map[string]string{}
	for _, f := range newCluster.GetManagedFields() {
		managers[f.Manager+"/"+string(f.Operation)] = f.APIVersion
	}
	for _, f := range oldCluster.GetManagedFields() {
		if v, ok := managers[f.Manager+"/"+string(f.Operation)]; !ok || !strings.HasPrefix(v, "cluster.hypershift.openshift.io/") {
			t.Errorf("managedFields of %s (%s) not on the twin: %v", f.Manager, f.Operation, managers)
		}
	}
	window := r.actionTime(plan.UnpausePrivate).Sub(r.actionTime(plan.PauseLegacyCluster))
	t.Logf("migration of %d Machines took %s; MachineDeployments could not scale for %s (pause → unpause)", mds*machines, took.Round(time.Millisecond), window.Round(time.Millisecond))
	checkExampleMachines(t, r, mds*machines)
	// The Secret now belongs to the private Cluster. The Service was never listed: the old Cluster's deletion
	// (propagationPolicy Orphan) made the garbage collector drop its ownerReference, and the Service stays.
	if err := harness.Client.Get(ctx, client.ObjectKeyFromObject(kubeconfig), kubeconfig); err != nil {
		t.Fatal(err)
	}
	if refs := kubeconfig.OwnerReferences; len(refs) != 1 || refs[0].UID != newCluster.GetUID() {
		t.Errorf("Secret owners %+v, want the private Cluster %s", refs, newCluster.GetUID())
	}
	testwait.For(t, time.Minute, "the garbage collector to orphan the Service owned by the old Cluster", func() bool {
		if err := harness.Client.Get(ctx, client.ObjectKeyFromObject(unlisted), unlisted); err != nil {
			t.Fatalf("the Service owned by the old Cluster: %v", err)
		}
		return len(unlisted.OwnerReferences) == 0
	})
	// CAPI's MachineDeployment controller copied each private MachineDeployment's annotations onto its MachineSet
	// once unpaused: the MachineSet twins carry their MachineDeployment's migrated-from-uid, and the migration still
	// told them apart from born objects (it would have rolled back otherwise).
	mdFrom := map[string]string{}
	for _, md := range r.list(capipods.PrivateGroups, "MachineDeployment") {
		mdFrom[md.GetName()] = md.GetAnnotations()[plan.MigratedFromUIDAnnotation]
	}
	for _, ms := range r.list(capipods.PrivateGroups, "MachineSet") {
		owner := ms.GetOwnerReferences()
		if len(owner) == 0 || ms.GetAnnotations()[plan.MigratedFromUIDAnnotation] != mdFrom[owner[0].Name] {
			t.Errorf("MachineSet %s: migrated-from-uid %s, want its MachineDeployment's (CAPI copies them): %v",
				ms.GetName(), ms.GetAnnotations()[plan.MigratedFromUIDAnnotation], mdFrom)
		}
	}
	// Every old object was deleted with clusterctl's delete-for-move annotation set first.
	deleted, notMarked := deletes.result()
	if len(deleted) < mds*machines*3 || len(notMarked) != 0 {
		t.Errorf("deleted %v; without delete-for-move %v", deleted, notMarked)
	}
	// Field ownership survived the move: the manager that applied the labels drops one, through the proxy, and it
	// is gone (the migrator co-owns nothing).
	applyLabels(t, viaProxy, capipods.StandardGroups, r.hc.Namespace(), md, "a")
	got, err := r.hc.Get(ctx, harness.Client, capipods.PrivateGroups, "MachineDeployment", md)
	if err != nil {
		t.Fatal(err)
	}
	if l := got.GetLabels(); l["example.com/a"] != "a" || l["example.com/b"] != "" {
		t.Errorf("labels after the manager dropped example.com/b: %v", l)
	}
	for _, f := range got.GetManagedFields() {
		if f.Manager == plan.FieldManager {
			t.Errorf("the migrator manages fields of the twin: %+v", f)
		}
	}
	checkScopes(t, r.key, "legacy-"+r.ns, "private-"+r.ns)

	// Metrics and events.
	if v := testutil.ToFloat64(r.metrics.HostedClusters.WithLabelValues("migrated")); v < 1 {
		t.Errorf("hostedclusters{state=migrated} = %v", v)
	}
	if v := testutil.ToFloat64(r.metrics.ObjectsCopied.WithLabelValues("Machine")); v != mds*machines {
		t.Errorf("objects_copied_total{kind=Machine} = %v, want %d", v, mds*machines)
	}
	for _, kind := range []string{"HostedControlPlane", "Secret"} {
		if v := testutil.ToFloat64(r.metrics.DependentsRepointed.WithLabelValues(kind)); v != 1 {
			t.Errorf("dependents_repointed_total{kind=%s} = %v, want 1", kind, v)
		}
	}
	if v := testutil.ToFloat64(r.metrics.DependentsRepointed.WithLabelValues("Service")); v != 0 {
		t.Errorf("dependents_repointed_total{kind=Service} = %v, want 0", v)
	}
	if n := testutil.CollectAndCount(r.reg, "capi_private_migration_duration_seconds"); n != 1 {
		t.Errorf("duration histogram series %d", n)
	}
	checkEvents(t, r.key, "MigrationStarted", "MigrationPhase", "Migrated")

	// Scaling afterwards creates one Machine, in the private group, through the proxy.
	if err := r.hc.ScaleMachineDeployment(t.Context(), viaProxy, capipods.StandardGroups, r.hc.Spec.MachineDeployments[0].Name, machines+1); err != nil {
		t.Fatal(err)
	}
	if _, err := r.hc.WaitMachinesRunning(t.Context(), capipods.PrivateGroups, mds*machines+1, 2*time.Minute); err != nil {
		t.Fatal(err)
	}
	if s := r.ledger(); s.Creates != mds*machines+1 || s.Deletes != 0 {
		t.Errorf("after scaling: ledger %s", s)
	}
	if n := len(r.list(capipods.StandardGroups, "Machine")); n != 0 {
		t.Errorf("%d standard Machines after scaling", n)
	}
}

func checkEvents(t *testing.T, hc types.NamespacedName, reasons ...string) {
	t.Helper()
	testwait.For(t, 30*time.Second, fmt.Sprintf("events %v on %s", reasons, hc), func() bool {
		evs := &corev1.EventList{}
		if err := harness.Client.List(t.Context(), evs, client.InNamespace(hc.Namespace)); err != nil {
			return false
		}
		seen := map[string]bool{}
		for _, e := range evs.Items {
			if e.InvolvedObject.Name == hc.Name && e.InvolvedObject.Kind == "HostedCluster" {
				seen[e.Reason] = true
			}
		}
		for _, r := range reasons {
			if !seen[r] {
				return false
			}
		}
		return true
	})
}

// denyPrivateCreate installs a ValidatingAdmissionPolicy that denies creating the named objects in the private
// groups in namespace (how these tests make a private create fail), and returns a function removing it.
func denyPrivateCreate(t *testing.T, namespace string, spec any, names ...string) func() {
	t.Helper()
	ctx := t.Context()
	name := "deny-" + namespace
	quoted := make([]string, len(names))
	for i, n := range names {
		quoted[i] = "'" + n + "'"
	}
	resources := []string{"machines", "machinesets", "machinedeployments", "clusters", "machinehealthchecks", "kubevirtmachines", "kubevirtclusters", "kubevirtmachinetemplates"}
	policy := &admissionv1.ValidatingAdmissionPolicy{
		ObjectMeta: metav1.ObjectMeta{Name: name},
		Spec: admissionv1.ValidatingAdmissionPolicySpec{
			FailurePolicy: ptr.To(admissionv1.Fail),
			MatchConstraints: &admissionv1.MatchResources{ResourceRules: []admissionv1.NamedRuleWithOperations{{
				RuleWithOperations: admissionv1.RuleWithOperations{
					Operations: []admissionv1.OperationType{admissionv1.Create},
					Rule: admissionv1.Rule{APIGroups: []string{"cluster.hypershift.openshift.io", "infrastructure.cluster.hypershift.openshift.io"},
						APIVersions: []string{"*"}, Resources: resources},
				},
			}}},
			Validations: []admissionv1.Validation{{
				Expression: fmt.Sprintf("!(object.metadata.name in [%s])", strings.Join(quoted, ",")),
				Message:    "denied by the test's fault injection",
			}},
		},
	}
	binding := &admissionv1.ValidatingAdmissionPolicyBinding{
		ObjectMeta: metav1.ObjectMeta{Name: name},
		Spec: admissionv1.ValidatingAdmissionPolicyBindingSpec{
			PolicyName: name, ValidationActions: []admissionv1.ValidationAction{admissionv1.Deny},
			MatchResources: &admissionv1.MatchResources{NamespaceSelector: &metav1.LabelSelector{
				MatchLabels: map[string]string{corev1.LabelMetadataName: namespace}}},
		},
	}
	if err := harness.Client.Create(ctx, policy); err != nil {
		t.Fatal(err)
	}
	if err := harness.Client.Create(ctx, binding); err != nil {
		t.Fatal(err)
	}
	remove := func() {
		_ = harness.Client.Delete(context.Background(), binding)
		_ = harness.Client.Delete(context.Background(), policy)
	}
	t.Cleanup(remove)
	// The policy is in effect once a dry-run create of a denied name fails.
	probe := capipods.NewCAPIObject(capipods.PrivateGroups, "MachineHealthCheck")
	probe.SetNamespace(namespace)
	probe.SetName(names[0])
	probe.Object["spec"] = spec
	testwait.For(t, 30*time.Second, "the ValidatingAdmissionPolicy to take effect", func() bool {
		err := harness.Client.Create(ctx, probe.DeepCopy(), client.DryRunAll)
		return err != nil && strings.Contains(err.Error(), "fault injection")
	})
	return remove
}

// TestRollbackOnDeniedCreate: the private create of a middle object is denied, so the run
// rolls back: the cluster is legacy again, healthy, with migration-failed set, no twin left and no instance
// deleted; after an SRE removes migration-failed (and the cause), the retry migrates it.
func TestRollbackOnDeniedCreate(t *testing.T) {
	t.Parallel()
	const mds, machines = 1, 2
	r := newRig(t, "beta", mds, machines, map[string]string{plan.ScopeAnnotation: plan.ScopeLegacy})
	remove := r.denyLastMachineTwin()
	r.start(nil)
	a := r.waitAnnotations("rolled back", runWithin, func(a map[string]string) bool { return a[plan.FailedAnnotation] != "" })
	if a[plan.FailedAnnotation] != plan.ReasonCreateFailed || a[plan.ScopeAnnotation] != plan.ScopeLegacy ||
		a[plan.InProgressAnnotation] != "" || a[plan.PhaseAnnotation] != "" || a[plan.PrivateTypesAnnotation] != "" {
		t.Fatalf("annotations after rollback: %v", a)
	}
	for _, k := range graphKinds {
		if n := len(r.list(capipods.PrivateGroups, k)); n != 0 {
			t.Errorf("%d private %s left after rollback", n, k)
		}
	}
	if got := r.count(capipods.StandardGroups); !mapsEqual(got, expectedCounts(mds, machines, true)) {
		t.Errorf("legacy objects after rollback %v", got)
	}
	if err := r.hc.WaitDeploymentsAvailable(t.Context(), 2*time.Minute); err != nil {
		t.Fatal(err)
	}
	// Healthy on the legacy controllers again: scale up by one in the standard group.
	if err := r.hc.ScaleMachineDeployment(t.Context(), harness.Client, capipods.StandardGroups, r.hc.Spec.MachineDeployments[0].Name, machines+1); err != nil {
		t.Fatal(err)
	}
	if _, err := r.hc.WaitMachinesRunning(t.Context(), capipods.StandardGroups, machines+1, 2*time.Minute); err != nil {
		t.Fatal(err)
	}
	if s := r.ledger(); s.Creates != machines+1 || s.Deletes != 0 {
		t.Errorf("ledger after rollback and scale-up %s", s)
	}
	if v := testutil.ToFloat64(r.metrics.Rollbacks.WithLabelValues(plan.ReasonCreateFailed)); v != 1 {
		t.Errorf("rollbacks_total{reason=create-failed} = %v", v)
	}
	if v := testutil.ToFloat64(r.metrics.HostedClusters.WithLabelValues("failed")); v < 1 {
		t.Errorf("hostedclusters{state=failed} = %v", v)
	}
	checkEvents(t, r.key, "MigrationRollingBack", "MigrationFailed")
	if err := safeOrder(r.kinds()); err != nil {
		t.Error(err)
	}

	// The documented manual step: fix the cause, then remove migration-failed.
	remove()
	r.waitLegacyRunning(machines + 1)
	r.clearFailed()
	r.waitAnnotations("migrated on retry", runWithin, migrated)
	r.checkMigrated(expectedCounts(mds, machines+1, true), machines+1)
}

// clearFailed is the documented manual step after a rollback: remove migration-failed (the recorded actions start
// afresh).
func (r *rig) clearFailed() {
	r.t.Helper()
	r.mu.Lock()
	r.actions = nil
	r.mu.Unlock()
	hc := &hyperv1.HostedCluster{ObjectMeta: metav1.ObjectMeta{Namespace: r.key.Namespace, Name: r.key.Name}}
	if err := harness.Client.Patch(r.t.Context(), hc, client.RawPatch(types.MergePatchType,
		[]byte(`{"metadata":{"annotations":{"`+plan.FailedAnnotation+`":null}}}`))); err != nil {
		r.t.Fatal(err)
	}
}

// denyLastMachineTwin denies the private create of the Machine named last (Machines are named by the MachineSet:
// a middle create of the copy), and returns a function removing the denial.
func (r *rig) denyLastMachineTwin() func() {
	r.t.Helper()
	names := []string{}
	for _, m := range r.before {
		names = append(names, m.Name)
	}
	slices.Sort(names)
	return denyPrivateCreate(r.t, r.hc.Namespace(), r.list(capipods.StandardGroups, "MachineHealthCheck")[0].Object["spec"], names[len(names)-1])
}

// safeOrder: in a rollback the proxied controllers stop before any twin is deleted, and the legacy controllers
// come back after.
func safeOrder(kinds []plan.Kind) error {
	del := slices.Index(kinds, plan.DeleteTwins)
	stop := slices.Index(kinds, plan.StopProxied)
	restore := slices.Index(kinds, plan.RestoreLegacy)
	if del >= 0 && slices.Contains(kinds[:del], plan.Switch) && (stop < 0 || stop > del) {
		return fmt.Errorf("twins deleted before the proxied controllers stopped: %v", kinds)
	}
	if restore >= 0 && del > restore {
		return fmt.Errorf("legacy controllers restored before the twins were deleted: %v", kinds)
	}
	return nil
}

// TestRollbackOrderAfterResume fails a run after the proxied controllers have taken over and the private Cluster
// is unpaused (an object is born), once in our order and once in the enhancement's. Ours
// leaves the ledger without a delete and ends rolled back; the enhancement's deletes instances or cannot finish
// its rollback with the controllers running — the test would catch that order.
func TestRollbackOrderAfterResume(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name        string
		enhancement bool
	}{{"safe", false}, {"enhancement", true}} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			const mds, machines = 1, 2
			r := newRig(t, "gamma-"+tc.name, mds, machines, map[string]string{plan.ScopeAnnotation: plan.ScopeLegacy})
			cfg := testConfig()
			cfg.EnhancementRollbackOrder = tc.enhancement
			r.mu.Lock()
			r.hook = func(a plan.Action) {
				if a.Kind == plan.UnpausePrivate {
					// A "born" object right after the private Cluster is unpaused: the run must roll back with
					// the proxied controllers running and the private Cluster unpaused.
					if err := harness.Client.Create(context.Background(), bornObject(r)); err != nil {
						t.Errorf("creating the born object: %v", err)
					}
				}
			}
			r.mu.Unlock()
			r.start(func(o *controller.RunOptions) { o.Config = cfg })
			if tc.enhancement {
				// The enhancement's order rolls back while the proxied controllers still run. Either they act on
				// the twins' deletion (an instance deleted: what Cluster API v1.12 did), or the rollback cannot
				// finish: its re-pointing of the dependents is undone between passes and asked again and again,
				// with the private objects and the controllers left in place (what Cluster API v1.13 does). Either
				// outcome is the unsafe order this test must tell from ours.
				const undone = 5
				testwait.For(t, runWithin, "the enhancement's rollback to delete an instance or be undone repeatedly", func() bool {
					return r.ledger().Deletes > 0 || count(r.kinds(), plan.RepointToOld) >= undone
				})
				k := r.kinds()
				first := slices.Index(k, plan.RepointToOld)
				if first < slices.Index(k, plan.UnpausePrivate) || slices.Contains(k[:first], plan.StopProxied) {
					t.Errorf("not the enhancement's order: %v", k)
				}
				if r.ledger().Deletes == 0 && slices.Contains(k, plan.StopProxied) {
					t.Errorf("the proxied controllers were stopped: %v", k)
				}
				t.Logf("enhancement order: ledger %s after actions %v", r.ledger(), k)
				return
			}
			a := r.waitAnnotations("rolled back", runWithin, func(a map[string]string) bool { return a[plan.FailedAnnotation] != "" })
			if a[plan.FailedAnnotation] != plan.ReasonBornObjects {
				t.Errorf("migration-failed %q", a[plan.FailedAnnotation])
			}
			kinds := r.kinds()
			if !slices.Contains(kinds, plan.UnpausePrivate) || !slices.Contains(kinds, plan.StopProxied) {
				t.Fatalf("the run did not resume and stop the proxied controllers: %v", kinds)
			}
			if err := safeOrder(kinds); err != nil {
				t.Error(err)
			}
			// The rollout back: the namespace unmarked, no Pod with the sidecar left.
			r.checkRollout(false, nil)
			r.checkLegacyRunsAgain(machines)
		})
	}
}

// count is how many times k occurs in kinds.
func count(kinds []plan.Kind, k plan.Kind) int {
	n := 0
	for _, x := range kinds {
		if x == k {
			n++
		}
	}
	return n
}

// bornObject is a private MachineHealthCheck no migration made (no migrated-from-uid): what a controller
// creating objects after Resuming would leave.
func bornObject(r *rig) *unstructured.Unstructured {
	mhc := r.list(capipods.PrivateGroups, "MachineHealthCheck")[0]
	born := capipods.NewCAPIObject(capipods.PrivateGroups, "MachineHealthCheck")
	born.SetNamespace(r.hc.Namespace())
	born.SetName("born-after-resume")
	born.Object["spec"] = mhc.Object["spec"]
	return born
}

// TestCrashMidCopyResumes kills the migrator (its client fails and the manager stops) right after the third
// private create, then starts a new one: the run resumes, adopts the twins made so far, and ends migrated with
// exactly one twin per old object and no instance churn.
func TestCrashMidCopyResumes(t *testing.T) {
	t.Parallel()
	const mds, machines = 1, 2
	r := newRig(t, "delta", mds, machines, map[string]string{plan.ScopeAnnotation: plan.ScopeLegacy})
	var creates atomic.Int32
	killed := make(chan struct{})
	var once sync.Once
	base, err := client.NewWithWatch(env.TokenConfig(env.AdminToken), client.Options{Scheme: controller.Scheme()})
	if err != nil {
		t.Fatal(err)
	}
	crashing := interceptor.NewClient(base, interceptor.Funcs{
		Create: func(ctx context.Context, c client.WithWatch, obj client.Object, opts ...client.CreateOption) error {
			select {
			case <-killed:
				return errors.New("killed")
			default:
			}
			co := &client.CreateOptions{}
			co.ApplyOptions(opts)
			if len(co.DryRun) == 0 && groups.Default.IsPrivate(obj.GetObjectKind().GroupVersionKind().Group) && creates.Add(1) > 3 {
				once.Do(func() { close(killed) })
				return errors.New("killed")
			}
			return c.Create(ctx, obj, opts...)
		},
	})
	r.start(func(o *controller.RunOptions) { o.Client = crashing })
	select {
	case <-killed:
	case <-time.After(runWithin):
		t.Fatalf("no private create reached; annotations %v", r.annotations())
	}
	if err := r.mig.Stop(); err != nil {
		t.Fatal(err)
	}
	a := r.annotations()
	if a[plan.PhaseAnnotation] != string(plan.PhaseCopying) || a[plan.InProgressAnnotation] != "true" {
		t.Fatalf("after the kill: %v", a)
	}
	if n := len(r.list(capipods.PrivateGroups, "Cluster")); n != 1 {
		t.Fatalf("%d private Clusters after the kill", n)
	}
	r.start(nil)
	r.waitAnnotations("migrated after the restart", runWithin, migrated)
	r.checkMigrated(expectedCounts(mds, machines, true), machines)
}

// TestWebhookDownMidMigration: the conversion webhook goes down mid-migration, before Committed, so the run rolls
// back; no instance is deleted and the cluster is legacy and healthy again. Not parallel: every test of the
// package converts through that webhook.
func TestWebhookDownMidMigration(t *testing.T) {
	failMidMigration(t, "webhook-down", plan.ReasonWebhookUnavailable, func(t *testing.T, r *rig) {
		env.SetWebhookDown(true)
		t.Cleanup(func() { env.SetWebhookDown(false) })
	})
}

// TestHostedClusterDeletedMidMigration: the HostedCluster is deleted mid-migration (HyperShift keeps it with its
// finalizer while it cleans up), before Committed, so the run rolls back; no instance is deleted and the cluster
// is legacy and healthy again.
func TestHostedClusterDeletedMidMigration(t *testing.T) {
	t.Parallel()
	failMidMigration(t, "hostedcluster-deleted", plan.ReasonHostedClusterDeleted, func(t *testing.T, r *rig) {
		hc := &hyperv1.HostedCluster{}
		if err := harness.Client.Get(context.Background(), r.key, hc); err != nil {
			t.Error(err)
			return
		}
		if err := harness.Client.Delete(context.Background(), hc); err != nil {
			t.Error(err)
		}
	})
}

// failMidMigration runs a migration of a legacy cluster named name, calls inject once the run copies twins, and
// checks that the run rolled back for reason with no instance deleted, the cluster legacy and healthy again.
func failMidMigration(t *testing.T, name, reason string, inject func(t *testing.T, r *rig)) {
	t.Helper()
	const mds, machines = 1, 2
	r := newRig(t, name, mds, machines, map[string]string{plan.ScopeAnnotation: plan.ScopeLegacy})
	// HyperShift's finalizer keeps a deleted HostedCluster until its cleanup is done.
	const fin = "hypershift.openshift.io/finalizer"
	hc := &hyperv1.HostedCluster{ObjectMeta: metav1.ObjectMeta{Namespace: r.key.Namespace, Name: r.key.Name}}
	if err := harness.Client.Patch(t.Context(), hc, client.RawPatch(types.MergePatchType, []byte(`{"metadata":{"finalizers":["`+fin+`"]}}`))); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		_ = harness.Client.Patch(context.Background(), hc, client.RawPatch(types.MergePatchType, []byte(`{"metadata":{"finalizers":null}}`)))
	})
	var once sync.Once
	r.mu.Lock()
	r.hook = func(a plan.Action) {
		if a.Kind == plan.CopyTwins {
			once.Do(func() { inject(t, r) })
		}
	}
	r.mu.Unlock()
	cfg := testConfig()
	cfg.WebhookGrace = 3 * time.Second
	r.start(func(o *controller.RunOptions) { o.Config = cfg })
	a := r.waitAnnotations("rolled back", runWithin, func(a map[string]string) bool { return a[plan.FailedAnnotation] != "" })
	if a[plan.FailedAnnotation] != reason || a[plan.ScopeAnnotation] != plan.ScopeLegacy || a[plan.InProgressAnnotation] != "" {
		t.Errorf("annotations %v, want migration-failed %s", a, reason)
	}
	for _, k := range graphKinds {
		if n := len(r.list(capipods.PrivateGroups, k)); n != 0 {
			t.Errorf("%d private %s left", n, k)
		}
	}
	r.checkLegacyRunsAgain(machines)
	if err := safeOrder(r.kinds()); err != nil {
		t.Error(err)
	}
}

// TestMigrationScale measures a migration at the sizes in MIGRATE_SCALE (comma-separated Machine counts, in
// MachineDeployments of 10; skipped when unset): the time from start to done and the window during which no
// MachineDeployment could scale (standard Cluster paused → private Cluster unpaused), with the default windows
// shortened as in the other tests. Every size must migrate with no instance churn.
func TestMigrationScale(t *testing.T) {
	sizes := os.Getenv("MIGRATE_SCALE")
	if sizes == "" {
		t.Skip("set MIGRATE_SCALE=10,50,200 to measure")
	}
	for _, f := range strings.Split(sizes, ",") {
		n, err := strconv.Atoi(strings.TrimSpace(f))
		if err != nil || n <= 0 {
			t.Fatalf("MIGRATE_SCALE %q", sizes)
		}
		t.Run(f, func(t *testing.T) {
			per := min(n, 10)
			mds := (n + per - 1) / per
			began := time.Now()
			r := newRig(t, fmt.Sprintf("scale-%d", n), mds, per, map[string]string{plan.ScopeAnnotation: plan.ScopeLegacy})
			provisioned := time.Since(began)
			begin := time.Now()
			r.start(nil)
			r.waitAnnotations("migrated", 30*time.Minute, migrated)
			took := time.Since(begin)
			window := r.actionTime(plan.UnpausePrivate).Sub(r.actionTime(plan.PauseLegacyCluster))
			r.checkMigrated(expectedCounts(mds, per, true), mds*per)
			t.Logf("FIGURE %d Machines (%d MachineDeployments): provisioned in %s, migrated in %s, no scaling for %s",
				mds*per, mds, provisioned.Round(time.Second), took.Round(100*time.Millisecond), window.Round(100*time.Millisecond))
		})
	}
}

// TestTwoHostedClustersInSequence: two legacy hosted clusters migrate strictly one after the
// other, the older one first (the ordering policy), each without instance churn.
func TestTwoHostedClustersInSequence(t *testing.T) {
	t.Parallel()
	const mds, machines = 1, 2
	r := newRig(t, "first", mds, machines, map[string]string{plan.ScopeAnnotation: plan.ScopeLegacy})
	spec := capipods.LegacyHostedCluster(r.ns, "second", mds, machines)
	spec.Annotations = map[string]string{plan.ScopeAnnotation: plan.ScopeLegacy}
	second, err := harness.CreateHostedCluster(t.Context(), spec)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		env.DeleteNamespace(second.Namespace())
	})
	if _, err := second.WaitMachinesRunning(t.Context(), capipods.StandardGroups, machines, 3*time.Minute); err != nil {
		t.Fatal(err)
	}
	r.start(nil)
	secondKey := types.NamespacedName{Namespace: r.ns, Name: "second"}
	testwait.For(t, 2*runWithin, "both HostedClusters migrated (two runs, one after the other)", func() bool {
		h := &hyperv1.HostedCluster{}
		return migrated(r.annotations()) && harness.Client.Get(t.Context(), secondKey, h) == nil && migrated(h.Annotations)
	})
	r.mu.Lock()
	all := slices.Clone(r.all)
	r.mu.Unlock()
	span := map[types.NamespacedName][2]time.Time{}
	for _, a := range all {
		s, ok := span[a.hc]
		if !ok {
			s[0] = a.at
		}
		s[1] = a.at
		span[a.hc] = s
	}
	f, s := span[r.key], span[secondKey]
	if f[0].IsZero() || s[0].IsZero() {
		t.Fatalf("actions: %v", span)
	}
	if !f[1].Before(s[0]) {
		t.Errorf("runs overlap: first %s–%s, second %s–%s", f[0].Format(time.StampMilli), f[1].Format(time.StampMilli), s[0].Format(time.StampMilli), s[1].Format(time.StampMilli))
	}
	for _, hc := range []*capipods.HostedCluster{r.hc, second} {
		if st := harness.Ledger.StatsFor(hc.Namespace()); st.Creates != machines || st.Deletes != 0 {
			t.Errorf("%s: ledger %s", hc.Namespace(), st)
		}
	}
}

// TestAPIServerRestartMidMigration kills kube-apiserver right after the owners were re-pointed and starts it again
// (same port, same etcd) while the migrator keeps running: its requests fail for a while, it retries from the
// persisted phase, and the cluster ends migrated with no instance churn. It runs last: every component of the
// harness sees the outage.
func TestAPIServerRestartMidMigration(t *testing.T) {
	const mds, machines = 1, 2
	r := newRig(t, "restart", mds, machines, map[string]string{plan.ScopeAnnotation: plan.ScopeLegacy})
	restarted := make(chan error, 1)
	var once sync.Once
	r.mu.Lock()
	r.hook = func(a plan.Action) {
		if a.Kind == plan.RepointToTwins {
			once.Do(func() {
				go func() {
					if err := env.Hub.StopAPIServer(); err != nil {
						restarted <- err
						return
					}
					restarted <- env.Hub.StartAPIServer()
				}()
			})
		}
	}
	r.mu.Unlock()
	r.start(nil)
	select {
	case err := <-restarted:
		if err != nil {
			t.Fatalf("restarting kube-apiserver: %v", err)
		}
	case <-time.After(runWithin):
		t.Fatalf("kube-apiserver not restarted; actions %v", r.kinds())
	}
	// kube-apiserver down longer than the leader election's renew deadline ends the manager ("leader election
	// lost"): in production the process exits and its Deployment restarts it; here the test does.
	var a map[string]string
	if !testwait.Poll(runWithin, func() bool {
		select {
		case <-r.mig.Done():
			t.Logf("migrate manager stopped (%v): starting a new one, as its Deployment would", r.mig.Err())
			r.start(nil)
		default:
		}
		a = r.annotations()
		return migrated(a) || a[plan.FailedAnnotation] != ""
	}) {
		t.Fatalf("neither migrated nor rolled back: %v; actions %v", a, r.kinds())
	}
	if !migrated(a) {
		t.Logf("rolled back after the restart: %s", a[plan.FailedAnnotation])
		if s := r.ledger(); s.Deletes != 0 {
			t.Errorf("ledger %s", s)
		}
		return
	}
	r.checkMigrated(expectedCounts(mds, machines, true), machines)
}
