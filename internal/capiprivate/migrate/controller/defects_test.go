package controller_test

import (
	"context"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus/testutil"
	admissionv1 "k8s.io/api/admissionregistration/v1"
	appsv1 "k8s.io/api/apps/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/discovery"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/dcm-sp/acm-cluster-sp/internal/capiprivate/migrate/controller"
	"github.com/dcm-sp/acm-cluster-sp/internal/capiprivate/migrate/plan"
	"github.com/dcm-sp/acm-cluster-sp/internal/devtest/capi/capipods"
	"github.com/dcm-sp/acm-cluster-sp/internal/devtest/testwait"
)

// TestRefusedBeforeFirstWrite: a hosted cluster holding an object of a renamed group that has no private CRD (an
// AWS-like kind installed only in the standard group) is refused before the first write — no lock, no pause, no
// copy: the migrator's only write is its report of what blocks the cluster, with an event. So is one whose
// control plane namespace holds a private object of the same kind and name as one of its objects that is no twin
// of it (a stray): it is neither adopted nor touched.
func TestRefusedBeforeFirstWrite(t *testing.T) {
	const mds, machines = 1, 1
	r := newRig(t, "refused", mds, machines, map[string]string{plan.ScopeAnnotation: plan.ScopeLegacy})
	ctx := t.Context()
	installKind(t, "examplewidgets", "ExampleWidget", false)
	widget := exampleObject(infraGroup, "ExampleWidget", r.hc.Namespace(), "w1")
	if err := harness.Client.Create(ctx, widget); err != nil {
		t.Fatal(err)
	}
	writes, waits := r.startRefusing()
	a := r.waitAnnotations("blocked by the kind without a private CRD", time.Minute, func(a map[string]string) bool {
		return strings.Contains(a[plan.BlockedAnnotation], "missing-private-crd ExampleWidget."+infraGroup)
	})
	checkEvents(t, r.key, "MigrationBlocked")
	testwait.For(t, time.Minute, "the migrator to look at the blocked cluster again (its chances to write)", func() bool {
		return waits.count(r.key, plan.PhaseNone, "missing-private-crd") >= 3
	})
	if w := writes.list(); len(w) != 0 || a[plan.ScopeAnnotation] != plan.ScopeLegacy || a[plan.InProgressAnnotation] != "" {
		t.Fatalf("refused cluster: writes %v, annotations %v", w, a)
	}
	if v := testutil.ToFloat64(r.metrics.BlockedSince.WithLabelValues(r.key.Namespace, r.key.Name)); v == 0 {
		t.Error("blocked_since_timestamp_seconds not set")
	}
	t.Logf("refused: %q", plan.Report(plan.ReadState(a, false), time.Now()))

	// A stray private object with the name of a legacy one.
	if err := harness.Client.Delete(ctx, widget); err != nil {
		t.Fatal(err)
	}
	mhc := r.list(capipods.StandardGroups, "MachineHealthCheck")[0]
	stray := capipods.NewCAPIObject(capipods.PrivateGroups, "MachineHealthCheck")
	stray.SetNamespace(r.hc.Namespace())
	stray.SetName(mhc.GetName())
	stray.Object["spec"] = mhc.Object["spec"]
	if err := harness.Client.Create(ctx, stray); err != nil {
		t.Fatal(err)
	}
	r.waitAnnotations("blocked by the stray", time.Minute, func(a map[string]string) bool {
		return a[plan.BlockedAnnotation] == "safety: stray-private-object MachineHealthCheck/"+mhc.GetName()
	})
	before := waits.count(r.key, plan.PhaseNone, "stray-private-object")
	testwait.For(t, time.Minute, "the migrator to look at the stray again", func() bool {
		return waits.count(r.key, plan.PhaseNone, "stray-private-object") >= before+3
	})
	if w := writes.list(); len(w) != 0 {
		t.Fatalf("writes with a stray: %v", w)
	}
	after := capipods.NewCAPIObject(capipods.PrivateGroups, "MachineHealthCheck")
	if err := harness.Client.Get(ctx, client.ObjectKeyFromObject(stray), after); err != nil {
		t.Fatal(err)
	}
	if after.GetUID() != stray.GetUID() || after.GetResourceVersion() != stray.GetResourceVersion() {
		t.Errorf("the stray was touched: uid %s→%s rv %s→%s", stray.GetUID(), after.GetUID(), stray.GetResourceVersion(), after.GetResourceVersion())
	}
}

// TestStrayNeitherAdoptedNorDeleted: a private object of the same kind and name as one of the cluster's objects,
// but no twin of it, appears once the run is copying. The copy cannot create that twin, so the run rolls back —
// and the rollback removes this run's twins only: the stray is still there, untouched.
func TestStrayNeitherAdoptedNorDeleted(t *testing.T) {
	t.Parallel()
	const mds, machines = 1, 1
	r := newRig(t, "stray", mds, machines, map[string]string{plan.ScopeAnnotation: plan.ScopeLegacy})
	mhc := r.list(capipods.StandardGroups, "MachineHealthCheck")[0]
	stray := capipods.NewCAPIObject(capipods.PrivateGroups, "MachineHealthCheck")
	stray.SetNamespace(r.hc.Namespace())
	stray.SetName(mhc.GetName())
	stray.Object["spec"] = mhc.Object["spec"]
	var once sync.Once
	r.mu.Lock()
	r.hook = func(a plan.Action) {
		if a.Why == "enter Copying" {
			once.Do(func() {
				if err := harness.Client.Create(context.Background(), stray); err != nil {
					t.Errorf("creating the stray: %v", err)
				}
			})
		}
	}
	r.mu.Unlock()
	r.start(nil)
	a := r.waitAnnotations("rolled back", runWithin, func(a map[string]string) bool { return a[plan.FailedAnnotation] != "" })
	if a[plan.FailedAnnotation] != plan.ReasonCreateFailed || a[plan.ScopeAnnotation] != plan.ScopeLegacy {
		t.Errorf("annotations %v, want migration-failed %s", a, plan.ReasonCreateFailed)
	}
	after := capipods.NewCAPIObject(capipods.PrivateGroups, "MachineHealthCheck")
	if err := harness.Client.Get(t.Context(), client.ObjectKeyFromObject(stray), after); err != nil {
		t.Fatalf("the stray: %v", err)
	}
	if after.GetUID() != stray.GetUID() || after.GetResourceVersion() != stray.GetResourceVersion() || after.GetDeletionTimestamp() != nil {
		t.Errorf("the stray was touched: uid %s→%s rv %s→%s deleting %v", stray.GetUID(), after.GetUID(), stray.GetResourceVersion(), after.GetResourceVersion(), after.GetDeletionTimestamp())
	}
	for _, k := range graphKinds {
		want := 0
		if k == "MachineHealthCheck" {
			want = 1 // the stray
		}
		if n := len(r.list(capipods.PrivateGroups, k)); n != want {
			t.Errorf("%d private %s after the rollback, want %d", n, k, want)
		}
	}
	if err := r.hc.WaitDeploymentsAvailable(t.Context(), 2*time.Minute); err != nil {
		t.Fatal(err)
	}
	if s := r.ledger(); s.Creates != machines || s.Deletes != 0 {
		t.Errorf("ledger %s", s)
	}
}

// TestQuiesceUndoneEndsAtDeadline: an actor undoes the quiesce — it scales the legacy CAPI controllers up again as
// soon as the migrator scales them down, and every second besides. Quiescing still ends at its deadline (counted
// from its persisted start) and rolls back; the migrator's actions stay bounded (one per retry interval); the
// cluster is legacy and healthy afterwards.
func TestQuiesceUndoneEndsAtDeadline(t *testing.T) {
	t.Parallel()
	const mds, machines = 1, 1
	r := newRig(t, "undone", mds, machines, map[string]string{plan.ScopeAnnotation: plan.ScopeLegacy})
	ctx, stop := context.WithCancel(t.Context())
	defer stop()
	var reverts atomic.Int32
	go undoQuiesce(ctx, r.hc.Namespace(), capipods.RoleCAPI, &reverts)
	r.mu.Lock()
	r.hook = func(a plan.Action) {
		if a.Changes.Set[plan.PhaseAnnotation] == string(plan.PhaseRollingBack) {
			stop() // the actor goes away with the run: the rollback must finish
		}
	}
	r.mu.Unlock()
	cfg := testConfig()
	cfg.QuiesceTimeout = 15 * time.Second
	// When the migrator looked each time it decided to wait in Quiescing: its clock is read once per look, by the
	// observation, before it decides (one worker, so the last reading is that look's).
	var clock sync.Mutex
	var lastLook time.Time
	var quiescingWaits []time.Time
	r.start(func(o *controller.RunOptions) {
		o.Config = cfg
		o.Now = func() time.Time {
			now := time.Now()
			clock.Lock()
			lastLook = now
			clock.Unlock()
			return now
		}
		o.OnWait = func(hc types.NamespacedName, p plan.Phase, _ plan.Action) {
			if hc == r.key && p == plan.PhaseQuiescing {
				clock.Lock()
				quiescingWaits = append(quiescingWaits, lastLook)
				clock.Unlock()
			}
		}
	})
	a := r.waitAnnotations("rolled back", runWithin, func(a map[string]string) bool { return a[plan.FailedAnnotation] != "" })
	if a[plan.FailedAnnotation] != plan.ReasonQuiesceTimeout {
		t.Fatalf("migration-failed %q, want %s", a[plan.FailedAnnotation], plan.ReasonQuiesceTimeout)
	}
	var quiesced, rolled time.Time
	actions := 0
	r.mu.Lock()
	for _, ta := range r.actions {
		switch {
		case ta.action.Why == "enter Quiescing":
			// The deadline counts from the phase start the migrator persisted (whole seconds), not from when this
			// hook saw the write: on a loaded machine the write itself can take a second or more.
			started, err := time.Parse(time.RFC3339, ta.action.Changes.Set[plan.PhaseStartedAnnotation])
			if err != nil {
				t.Fatalf("enter Quiescing without a phase start: %v", err)
			}
			quiesced = started
		case ta.action.Changes.Set[plan.PhaseAnnotation] == string(plan.PhaseRollingBack):
			rolled = ta.at
		case ta.phase == plan.PhaseQuiescing:
			actions++
		}
	}
	r.mu.Unlock()
	took := rolled.Sub(quiesced)
	// The persisted start is truncated to the second: the rollback comes at the deadline, never before it, and at
	// the first look past it — how long after the deadline that look comes depends on the machine's load, whether
	// the migrator waited at a look past the deadline does not.
	if took < cfg.QuiesceTimeout {
		t.Errorf("Quiescing lasted %s, want its deadline %s", took, cfg.QuiesceTimeout)
	}
	deadline := quiesced.Add(cfg.QuiesceTimeout)
	clock.Lock()
	for _, at := range quiescingWaits {
		if !at.Before(deadline) {
			t.Errorf("waited in Quiescing at a look %s past its deadline %s instead of rolling back", at.Sub(deadline).Round(time.Millisecond), deadline.Format(time.TimeOnly))
		}
	}
	clock.Unlock()
	// At most one of each action per retry interval (Poll) while the actor fights, plus the first pass.
	if limit := 2 * int(cfg.QuiesceTimeout/cfg.Poll+2); actions > limit {
		t.Errorf("%d actions in Quiescing, want at most %d", actions, limit)
	}
	t.Logf("FIGURE quiesce undone by an actor (%d reverts): rolled back after %s (deadline %s), %d migrator actions in Quiescing",
		reverts.Load(), took.Round(100*time.Millisecond), cfg.QuiesceTimeout, actions)
	r.checkLegacyRunsAgain(machines)
}

// undoQuiesce scales Deployment name back to 1 whenever it sees it at 0, and at least every second, until ctx ends.
func undoQuiesce(ctx context.Context, namespace, name string, reverts *atomic.Int32) {
	wc, err := client.NewWithWatch(env.TokenConfig(env.AdminToken), client.Options{Scheme: controller.Scheme()})
	if err != nil {
		return
	}
	tick := time.NewTicker(time.Second)
	defer tick.Stop()
	for ctx.Err() == nil {
		w, err := wc.Watch(ctx, &appsv1.DeploymentList{}, client.InNamespace(namespace))
		if err != nil {
			return
		}
		for open := true; open && ctx.Err() == nil; {
			select {
			case _, open = <-w.ResultChan():
			case <-tick.C:
			case <-ctx.Done():
			}
			d := &appsv1.Deployment{}
			if wc.Get(ctx, types.NamespacedName{Namespace: namespace, Name: name}, d) == nil && d.Spec.Replicas != nil && *d.Spec.Replicas == 0 {
				if wc.Patch(ctx, d, client.RawPatch(types.MergePatchType, []byte(`{"spec":{"replicas":1}}`))) == nil {
					reverts.Add(1)
				}
			}
		}
		w.Stop()
	}
}

// TestCleanupFailsAfterCommit: once committed, the old objects cannot be deleted (an admission policy denies it).
// Clean-up never rolls back: past its deadline it is reported stalled (annotation, event, metric, `migrate
// status`), keeps retrying with back-off, and the proxied CAPI controllers keep running the cluster; when the
// denial goes, clean-up finishes.
func TestCleanupFailsAfterCommit(t *testing.T) {
	t.Parallel()
	const mds, machines = 1, 1
	r := newRig(t, "stalled", mds, machines, map[string]string{plan.ScopeAnnotation: plan.ScopeLegacy})
	oldCluster := r.list(capipods.StandardGroups, "Cluster")[0]
	var remove func()
	var once sync.Once
	r.mu.Lock()
	r.hook = func(a plan.Action) {
		if a.Changes.Set[plan.PhaseAnnotation] == string(plan.PhaseCommitted) {
			once.Do(func() {
				remove = denyPolicy(t, "deny-delete-"+r.ns, []string{r.hc.Namespace()}, []admissionv1.OperationType{admissionv1.Delete},
					[]string{capipods.ClusterGroup, capipods.InfrastructureGroup},
					func() bool { return deniedDryRunDelete(context.Background(), oldCluster.DeepCopy()) })
			})
		}
	}
	r.mu.Unlock()
	cfg := testConfig()
	cfg.CleanupTimeout = 8 * time.Second
	r.start(func(o *controller.RunOptions) { o.Config = cfg })
	a := r.waitAnnotations("stalled", runWithin, func(a map[string]string) bool { return a[plan.StalledAnnotation] != "" })
	if a[plan.PhaseAnnotation] != string(plan.PhaseCleaningUp) || a[plan.PrivateTypesAnnotation] != "true" || a[plan.FailedAnnotation] != "" {
		t.Fatalf("annotations %v", a)
	}
	checkEvents(t, r.key, "MigrationStalled", "MigrationRetrying")
	if v := testutil.ToFloat64(r.metrics.Stalled.WithLabelValues(r.key.Namespace, r.key.Name, string(plan.PhaseCleaningUp))); v != 1 {
		t.Errorf("capi_private_migration_stalled = %v, want 1", v)
	}
	t.Logf("migrate status: %q", plan.Report(plan.ReadState(a, false), time.Now()))
	// The proxied controllers keep running the cluster: its Deployments are up with the proxy, its Machines run
	// in the private groups.
	if err := r.hc.WaitDeploymentsAvailable(t.Context(), time.Minute); err != nil {
		t.Fatal(err)
	}
	if !allProxied(t, r) {
		t.Error("a Deployment runs without the proxy while clean-up is stalled")
	}
	if _, err := r.hc.WaitMachinesRunning(t.Context(), capipods.PrivateGroups, machines, time.Minute); err != nil {
		t.Fatal(err)
	}
	remove()
	r.waitAnnotations("migrated once the denial is gone", runWithin, migrated)
	r.checkMigrated(expectedCounts(mds, machines, true), machines)
	testwait.For(t, time.Minute, "capi_private_migration_stalled to go", func() bool {
		return testutil.CollectAndCount(r.metrics.Stalled) == 0
	})
}

func allProxied(t *testing.T, r *rig) bool {
	injected, uninjected := r.dependentPods()
	return len(uninjected) == 0 && len(injected) >= len(dependentRoles)
}

// TestRetryAfterIncompleteRollback: a run fails (a private create denied) and its rollback cannot remove the twins
// (private deletes denied). Past the rollback's deadline the migrator gives up safely: the legacy controllers run
// again, the HostedCluster is marked migration-failed: rollback-incomplete and the twins are recorded as
// leftovers. Once the denials are gone and an SRE clears migration-failed, the next run removes the leftovers first
// and migrates.
func TestRetryAfterIncompleteRollback(t *testing.T) {
	t.Parallel()
	const mds, machines = 1, 2
	r := newRig(t, "leftovers", mds, machines, map[string]string{plan.ScopeAnnotation: plan.ScopeLegacy})
	removeCreate := r.denyLastMachineTwin()
	// The deletes are denied in the hosted control plane namespace and in a probe namespace, whose private object
	// shows when the policy is in effect (a delete is admitted only once the object exists).
	probeNS := env.NewNamespace(t, "probe")
	probe := capipods.NewCAPIObject(capipods.PrivateGroups, "MachineHealthCheck")
	probe.SetNamespace(probeNS)
	probe.SetName("probe")
	probe.Object["spec"] = r.list(capipods.StandardGroups, "MachineHealthCheck")[0].Object["spec"]
	if err := harness.Client.Create(t.Context(), probe); err != nil {
		t.Fatal(err)
	}
	removeDelete := denyPolicy(t, "deny-private-delete-"+r.ns, []string{r.hc.Namespace(), probeNS}, []admissionv1.OperationType{admissionv1.Delete},
		[]string{"cluster.hypershift.openshift.io", "infrastructure.cluster.hypershift.openshift.io"},
		func() bool { return deniedDryRunDelete(t.Context(), probe) })
	cfg := testConfig()
	cfg.RollbackTimeout = 10 * time.Second
	r.start(func(o *controller.RunOptions) { o.Config = cfg })
	a := r.waitAnnotations("rolled back", runWithin, func(a map[string]string) bool { return a[plan.FailedAnnotation] != "" })
	if a[plan.FailedAnnotation] != plan.ReasonRollbackIncomplete || a[plan.ScopeAnnotation] != plan.ScopeLegacy || a[plan.LeftoversAnnotation] == "" {
		t.Fatalf("annotations %v, want migration-failed %s and leftovers", a, plan.ReasonRollbackIncomplete)
	}
	leftCluster := r.list(capipods.PrivateGroups, "Cluster")
	if len(leftCluster) != 1 || !paused(leftCluster[0].Object) {
		t.Fatalf("leftover private Clusters %d (paused %v)", len(leftCluster), len(leftCluster) == 1 && paused(leftCluster[0].Object))
	}
	// The legacy controllers run the cluster again.
	if err := r.hc.WaitDeploymentsAvailable(t.Context(), 2*time.Minute); err != nil {
		t.Fatal(err)
	}
	if _, err := r.hc.WaitMachinesRunning(t.Context(), capipods.StandardGroups, machines, time.Minute); err != nil {
		t.Fatal(err)
	}
	if cl := r.list(capipods.StandardGroups, "Cluster")[0]; paused(cl.Object) {
		t.Error("the standard Cluster is still paused")
	}
	checkEvents(t, r.key, "MigrationFailed")

	removeCreate()
	removeDelete()
	r.clearFailed()
	r.waitAnnotations("migrated on retry", runWithin, migrated)
	if k := r.kinds(); !slices.Contains(k, plan.RemoveLeftovers) || slices.Index(k, plan.RemoveLeftovers) > slices.Index(k, plan.CopyTwins) {
		t.Errorf("actions %v: the leftovers must be removed before the copy", k)
	}
	if a := r.annotations(); a[plan.LeftoversAnnotation] != "" {
		t.Errorf("leftovers still recorded: %v", a)
	}
	r.checkMigrated(expectedCounts(mds, machines, true), machines)
}

func paused(obj map[string]any) bool {
	spec, _ := obj["spec"].(map[string]any)
	p, _ := spec["paused"].(bool)
	return p
}

// TestPartialDiscoveryWaits: while the migration is copying, an aggregated API becomes unavailable, so discovery
// answers with partial results. The migrator must not re-point owners then (an object of the missing API could
// name an old UID): it waits in Repointing — having looked several times — and carries on once discovery is whole.
func TestPartialDiscoveryWaits(t *testing.T) {
	const mds, machines = 1, 1
	r := newRig(t, "discovery", mds, machines, map[string]string{plan.ScopeAnnotation: plan.ScopeLegacy})
	// An APIService whose Service does not exist (apiregistration.k8s.io/v1, written as data: no client for it here).
	svc := &unstructured.Unstructured{Object: map[string]any{
		"apiVersion": "apiregistration.k8s.io/v1", "kind": "APIService",
		"metadata": map[string]any{"name": "v1alpha1.unavailable.capipods.invalid"},
		"spec": map[string]any{"group": "unavailable.capipods.invalid", "version": "v1alpha1", "groupPriorityMinimum": int64(1000),
			"versionPriority": int64(15), "insecureSkipTLSVerify": true,
			"service": map[string]any{"namespace": r.ns, "name": "nothing-here", "port": int64(443)}},
	}}
	removeSvc := func() { _ = harness.Client.Delete(context.Background(), svc.DeepCopy()) }
	t.Cleanup(removeSvc)
	disc, err := discovery.NewDiscoveryClientForConfig(env.TokenConfig(env.AdminToken))
	if err != nil {
		t.Fatal(err)
	}
	var once sync.Once
	r.mu.Lock()
	r.hook = func(a plan.Action) {
		if a.Kind == plan.CopyTwins {
			once.Do(func() {
				if err := harness.Client.Create(context.Background(), svc.DeepCopy()); err != nil {
					t.Errorf("registering the unavailable APIService: %v", err)
					return
				}
				testwait.For(t, time.Minute, "discovery to fail for the unavailable group", func() bool {
					_, _, err := disc.ServerGroupsAndResources()
					return discovery.IsGroupDiscoveryFailedError(err)
				})
			})
		}
	}
	r.mu.Unlock()
	waits := &waitCounter{}
	r.start(func(o *controller.RunOptions) { o.OnWait = waits.hook })
	testwait.For(t, runWithin, "the migrator to wait in Repointing for a whole discovery (its chances to re-point)", func() bool {
		return waits.count(r.key, plan.PhaseRepointing, "discovery incomplete") >= 3
	})
	if a := r.annotations(); a[plan.PhaseAnnotation] != string(plan.PhaseRepointing) {
		t.Fatalf("phase %q with discovery incomplete, want Repointing", a[plan.PhaseAnnotation])
	}
	if n := len(r.kinds()); slices.Contains(r.kinds(), plan.RepointToTwins) {
		t.Fatalf("re-pointed with discovery incomplete (%d actions: %v)", n, r.kinds())
	}
	removeSvc()
	r.waitAnnotations("migrated once discovery is whole", runWithin, migrated)
	r.checkMigrated(expectedCounts(mds, machines, true), machines)
}
