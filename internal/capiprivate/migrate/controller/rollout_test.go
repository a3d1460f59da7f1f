package controller_test

import (
	"context"
	"errors"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/watch"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/interceptor"
	"sigs.k8s.io/controller-runtime/pkg/controller/controllerutil"

	"github.com/dcm-sp/acm-cluster-sp/internal/capiprivate/migrate/controller"
	"github.com/dcm-sp/acm-cluster-sp/internal/capiprivate/migrate/plan"
	"github.com/dcm-sp/acm-cluster-sp/internal/devtest/capi/capipods"
	"github.com/dcm-sp/acm-cluster-sp/internal/devtest/testwait"
)

// slowTermination is a test finalizer: a Pod carrying it stays terminating, as one whose containers take long to
// stop.
const slowTermination = "capi-private-test/slow-termination"

// podOf is the one Pod of role in the hosted control plane namespace that is not being deleted.
func (r *rig) podOf(role string) *corev1.Pod {
	r.t.Helper()
	list := &corev1.PodList{}
	if err := harness.Client.List(r.t.Context(), list, client.InNamespace(r.hc.Namespace()), client.MatchingLabels{capipods.ComponentLabel: role}); err != nil {
		r.t.Fatal(err)
	}
	var live []corev1.Pod
	for _, p := range list.Items {
		if p.DeletionTimestamp == nil {
			live = append(live, p)
		}
	}
	if len(live) != 1 {
		r.t.Fatalf("%d live pods of %s", len(live), role)
	}
	return &live[0]
}

func patchFinalizer(t *testing.T, pod *corev1.Pod, add bool) {
	t.Helper()
	cur := &corev1.Pod{}
	if err := harness.Client.Get(context.Background(), client.ObjectKeyFromObject(pod), cur); err != nil {
		t.Fatal(err)
	}
	orig := cur.DeepCopy()
	if add {
		controllerutil.AddFinalizer(cur, slowTermination)
	} else {
		controllerutil.RemoveFinalizer(cur, slowTermination)
	}
	if err := harness.Client.Patch(context.Background(), cur, client.MergeFromWithOptions(orig, client.MergeFromWithOptimisticLock{})); err != nil {
		t.Fatal(err)
	}
}

// TestCAPIReadersMoveWithSwitch: the hosted-cluster-config-operator and karpenter-operator read CAPI objects; they
// are restarted with the switch and come back with the sidecar. The old HCCO Pod takes long to terminate (a
// finalizer holds it): it still reads the standard groups, so clean-up waits — the migrator looks again and again
// and deletes nothing — until it is gone; then the migration finishes.
func TestCAPIReadersMoveWithSwitch(t *testing.T) {
	t.Parallel()
	const mds, machines = 1, 1
	r := newRigSpec(t, "readers", mds, machines, map[string]string{plan.ScopeAnnotation: plan.ScopeLegacy}, false,
		func(s *capipods.HostedClusterSpec) { s.Karpenter = true })
	if err := r.hc.WaitDeploymentsAvailable(t.Context(), 2*time.Minute); err != nil {
		t.Fatal(err)
	}
	hcco, karpenter := r.podOf(capipods.RoleHCCO), r.podOf(capipods.RoleKarpenterOperator)
	if sidecar(hcco) || sidecar(karpenter) {
		t.Fatal("legacy readers already carry the sidecar")
	}
	patchFinalizer(t, hcco, true)
	released := false
	t.Cleanup(func() {
		if !released {
			patchFinalizer(t, hcco, false)
		}
	})
	waits := &waitCounter{}
	r.start(func(o *controller.RunOptions) { o.OnWait = waits.hook })
	const reason = "still run without the proxy"
	testwait.For(t, runWithin, "clean-up to wait for the old HCCO pod 3 times", func() bool {
		return waits.count(r.key, plan.PhaseCleaningUp, reason) >= 3
	})
	if k := r.kinds(); slices.Contains(k, plan.DeleteOld) {
		t.Fatalf("clean-up deleted old objects while an uninjected reader runs: %v", k)
	}
	if n := len(r.list(capipods.StandardGroups, "Machine")); n != mds*machines {
		t.Fatalf("%d standard Machines while the old HCCO pod runs, want %d", n, mds*machines)
	}
	if a := r.annotations(); a[plan.PhaseAnnotation] != string(plan.PhaseCleaningUp) {
		t.Fatalf("phase %q, want CleaningUp", a[plan.PhaseAnnotation])
	}
	for _, role := range []string{capipods.RoleHCCO, capipods.RoleKarpenterOperator} {
		if p := r.podOf(role); !sidecar(p) || p.UID == hcco.UID || p.UID == karpenter.UID {
			t.Errorf("%s: the new pod %s carries the sidecar %v", role, p.Name, sidecar(p))
		}
	}
	patchFinalizer(t, hcco, false)
	released = true
	r.waitAnnotations("migrated once the old HCCO pod is gone", runWithin, migrated)
	r.checkMigrated(expectedCounts(mds, machines, true), mds*machines)
	r.checkRollout(true, []string{hcco.Name, karpenter.Name})
	t.Logf("clean-up waited %d times for the old pod", waits.count(r.key, plan.PhaseCleaningUp, reason))
}

// unhealthyRun starts the migrator with a short deadline for the phase action kind starts (Switching for a
// Switch, Resuming otherwise), calls fault once when the run takes action kind, and waits until the run has rolled back; it returns the rollback's reason and why.
func unhealthyRun(t *testing.T, r *rig, kind plan.Kind, fault func(), mutate func(*controller.RunOptions)) string {
	t.Helper()
	var once sync.Once
	r.mu.Lock()
	r.hook = func(a plan.Action) {
		if a.Kind == kind {
			once.Do(fault)
		}
	}
	r.mu.Unlock()
	// The deadline of the phase the fault hits is short; the others stay generous (a loaded machine must not turn a
	// slow switch into the rollback this test expects for another reason). Switching's must still leave room for
	// the switch itself: under the stress load one look of the migrator took longer than 25 s, and the run rolled
	// back before it had switched.
	cfg := testConfig()
	switch kind {
	case plan.Switch:
		cfg.SwitchTimeout = 60 * time.Second
	default:
		cfg.ResumeTimeout = 25 * time.Second
	}
	r.start(func(o *controller.RunOptions) {
		o.Config = cfg
		if mutate != nil {
			mutate(o)
		}
	})
	a := r.waitAnnotations("rolled back", runWithin, func(a map[string]string) bool { return a[plan.FailedAnnotation] != "" })
	if a[plan.PrivateTypesAnnotation] == "true" || a[plan.ScopeAnnotation] != plan.ScopeLegacy {
		t.Errorf("annotations after the rollback %v", a)
	}
	if k := r.kinds(); !slices.Contains(k, plan.Switch) || slices.Contains(k, plan.DeleteOld) {
		t.Errorf("actions %v: want a switch, no clean-up", k)
	}
	r.checkRollout(false, nil)
	if s := r.ledger(); s.Deletes != 0 {
		t.Errorf("ledger %s", s)
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	for _, ta := range r.actions {
		if ta.action.Changes.Set[plan.PhaseAnnotation] == string(plan.PhaseRollingBack) {
			return a[plan.FailedAnnotation] + ": " + ta.action.Why
		}
	}
	return a[plan.FailedAnnotation]
}

// TestHealthRestartsRollBack: a proxied CAPI manager crashes once the private Cluster is unpaused (its container
// restarts): Resuming never turns green, the run rolls back at its deadline and never commits.
func TestHealthRestartsRollBack(t *testing.T) {
	t.Parallel()
	r := newRig(t, "restarts", 1, 1, map[string]string{plan.ScopeAnnotation: plan.ScopeLegacy})
	why := unhealthyRun(t, r, plan.UnpausePrivate, func() {
		pods := harness.Player.Pods(types.NamespacedName{Namespace: r.hc.Namespace(), Name: capipods.RoleCAPI})
		if len(pods) != 1 || pods[0].Manager == nil || pods[0].Mode != capipods.Proxied {
			t.Errorf("cluster-api pods %+v", pods)
			return
		}
		_ = pods[0].Manager.Stop() // the player did not stop it: a crash, restarted with restartCount 1
		// The hook holds the migrator until the Pod's status shows the restart, as the kubelet's would before
		// any later look: on a loaded machine the player's restart could otherwise come after Resuming's
		// deadline, which then rolls back without having seen it.
		pod := types.NamespacedName{Namespace: r.hc.Namespace(), Name: pods[0].Name}
		if !testwait.PollEvery(200*time.Millisecond, 2*time.Minute, func() bool {
			p := &corev1.Pod{}
			return harness.Client.Get(context.Background(), pod, p) == nil && len(p.Status.ContainerStatuses) > 0 &&
				p.Status.ContainerStatuses[0].RestartCount > 0
		}) {
			t.Errorf("pod %s: no restart in its status within 2 minutes", pod)
		}
	}, nil)
	if why != plan.ReasonHealthCheckTimeout+": roll back: "+plan.ReasonHealthCheckTimeout+" (1 container restarts in pods of CAPI-dependent components)" {
		t.Errorf("rollback %q", why)
	}
}

// TestHealthMachineRollsBack: a Node turns NotReady once the private Cluster is unpaused (its kubelet stops
// reporting): CAPI's conditions of the private Machine, and so of the private Cluster, turn False where the legacy
// objects' were True; Resuming never turns green, the run rolls back at its deadline and never commits.
func TestHealthMachineRollsBack(t *testing.T) {
	t.Parallel()
	r := newRig(t, "nodedown", 1, 1, map[string]string{plan.ScopeAnnotation: plan.ScopeLegacy})
	node := r.before[0].NodeName
	setReady := func(status corev1.ConditionStatus) { setNodeReady(t, node, status) }
	t.Cleanup(func() { setReady(corev1.ConditionTrue) })
	// Resuming's deadline leaves the CAPI controllers time to carry the NotReady Node into the private Machine's and
	// Cluster's conditions on a loaded machine (25 s once ended the run before they had: a bare
	// health-check-timeout).
	why := unhealthyRun(t, r, plan.UnpausePrivate, func() {
		setReady(corev1.ConditionFalse)
		// The hook holds the migrator until CAPI has carried the NotReady Node into the private Machine's
		// conditions, as a kubelet gone for longer would have before any later look: on a loaded machine the
		// migrator's health check once passed (and the run committed) before CAPI had reconciled the Node.
		if !testwait.PollEvery(200*time.Millisecond, 2*time.Minute, func() bool {
			for _, m := range r.list(capipods.PrivateGroups, "Machine") {
				if nodeConditionFalse(m) {
					return true
				}
			}
			return false
		}) {
			t.Errorf("no private Machine shows its Node NotReady within 2 minutes")
		}
	}, func(o *controller.RunOptions) {
		o.Config.ResumeTimeout = 90 * time.Second
	})
	// The NotReady Node turns the private Machine's conditions False and, through them, the private Cluster's
	// (Available, WorkersAvailable): the check reports whichever it looks at first.
	prefix := plan.ReasonHealthCheckTimeout + ": roll back: " + plan.ReasonHealthCheckTimeout + " ("
	if !strings.HasPrefix(why, prefix) || !strings.Contains(why, " False, was True)") ||
		!strings.HasPrefix(why[len(prefix):], "Machine/") && !strings.HasPrefix(why[len(prefix):], "Cluster/") {
		t.Errorf("rollback %q, want a Machine's or the Cluster's condition regression", why)
	}
}

// setNodeReady sets the Ready condition of Node name, as its kubelet would report it; any status but True also
// stops the simulated kubelet (the ledger provider would report the Node Ready again), True starts it.
func setNodeReady(t *testing.T, name string, status corev1.ConditionStatus) {
	t.Helper()
	cur := &corev1.Node{}
	if err := harness.Client.Get(context.Background(), client.ObjectKey{Name: name}, cur); err != nil {
		t.Error(err)
		return
	}
	orig := cur.DeepCopy()
	if status == corev1.ConditionTrue {
		delete(cur.Annotations, capipods.KubeletStoppedAnnotation)
	} else {
		metav1.SetMetaDataAnnotation(&cur.ObjectMeta, capipods.KubeletStoppedAnnotation, "true")
	}
	if err := harness.Client.Patch(context.Background(), cur, client.MergeFrom(orig)); err != nil {
		t.Error(err)
		return
	}
	orig = cur.DeepCopy()
	for i := range cur.Status.Conditions {
		if cur.Status.Conditions[i].Type == corev1.NodeReady {
			cur.Status.Conditions[i].Status, cur.Status.Conditions[i].Reason = status, "TestKubelet"+string(status)
		}
	}
	if err := harness.Client.Status().Patch(context.Background(), cur, client.MergeFrom(orig)); err != nil {
		t.Error(err)
	}
}

// readyReplicas is status.readyReplicas of the one object of kind (MachineDeployment, MachineSet) of r in groups g
// (-1 when there is not exactly one, or its controller has not counted yet). It may run outside the test's
// goroutine.
func (r *rig) readyReplicas(g capipods.Groups, kind string) int64 {
	mds, err := r.hc.List(context.Background(), harness.Client, g, kind)
	if err != nil || len(mds) != 1 {
		return -1
	}
	n, found, _ := unstructured.NestedInt64(mds[0].Object, "status", "readyReplicas")
	if !found {
		return -1
	}
	return n
}

// TestMachineReadyAfterSwitchMigrates: a migration starts while a Node is NotReady (the settled check asks for
// every replica up to date, not ready), so the paused legacy MachineDeployment keeps readyReplicas 0. Once the
// private Cluster is unpaused the Node turns Ready and the private controllers count the Machine ready: more ready
// replicas than the legacy object's are no regression, and the run migrates instead of rolling back at Resuming's
// deadline.
func TestMachineReadyAfterSwitchMigrates(t *testing.T) {
	t.Parallel()
	r := newRig(t, "nodeup", 1, 1, map[string]string{plan.ScopeAnnotation: plan.ScopeLegacy})
	node := r.before[0].NodeName
	// Counted ready first, so that none ready below is the NotReady Node's doing, not a count from before.
	counted := func(n int64) bool {
		return r.readyReplicas(capipods.StandardGroups, "MachineSet") == n && r.readyReplicas(capipods.StandardGroups, "MachineDeployment") == n
	}
	testwait.For(t, 2*time.Minute, "the legacy MachineSet and MachineDeployment to count their Machine ready", func() bool { return counted(1) })
	setNodeReady(t, node, corev1.ConditionFalse)
	t.Cleanup(func() { setNodeReady(t, node, corev1.ConditionTrue) })
	testwait.For(t, 2*time.Minute, "the legacy Machine to show its Node NotReady, its MachineSet and MachineDeployment to count no ready replica", func() bool {
		m := r.list(capipods.StandardGroups, "Machine")
		return len(m) == 1 && nodeConditionFalse(m[0]) && counted(0)
	})
	var seen sync.Mutex // the hook runs in the migrator's goroutine
	var legacyReady, privateReady int64 = -1, -1
	r.mu.Lock()
	r.hook = func(a plan.Action) {
		if a.Kind != plan.UnpausePrivate {
			return
		}
		legacy := r.readyReplicas(capipods.StandardGroups, "MachineDeployment")
		setNodeReady(t, node, corev1.ConditionTrue)
		// The hook holds the migrator until the private controllers count the Machine ready, so that every
		// health check of Resuming compares 1 ready replica with the legacy object's 0.
		private := int64(-1)
		testwait.PollEvery(200*time.Millisecond, 2*time.Minute, func() bool {
			private = r.readyReplicas(capipods.PrivateGroups, "MachineDeployment")
			return private == 1
		})
		seen.Lock()
		legacyReady, privateReady = legacy, private
		seen.Unlock()
	}
	r.mu.Unlock()
	// Resuming's deadline is shorter than the run's wait: a check that counted more ready replicas as a
	// regression would roll back at it. A run that migrates does not wait for it.
	cfg := testConfig()
	cfg.ResumeTimeout = 2 * time.Minute
	r.start(func(o *controller.RunOptions) { o.Config = cfg })
	a := r.waitAnnotations("migrated or rolled back", runWithin, func(a map[string]string) bool {
		return migrated(a) || a[plan.FailedAnnotation] != ""
	})
	seen.Lock()
	defer seen.Unlock()
	if legacyReady != 0 || privateReady != 1 {
		t.Fatalf("at the switch: legacy readyReplicas %d, private %d; want 0 and 1", legacyReady, privateReady)
	}
	if !migrated(a) {
		t.Fatalf("not migrated: %v", a)
	}
	r.checkMigrated(expectedCounts(1, 1, true), 1)
}

// TestProxyReadFailureRollsBack: the migrator's watch through the in-process proxy fails (fault injected at its
// client): Switching never ends, the run rolls back at the switch deadline, before the private Cluster is ever
// unpaused.
func TestProxyReadFailureRollsBack(t *testing.T) {
	t.Parallel()
	r := newRig(t, "proxyread", 1, 1, map[string]string{plan.ScopeAnnotation: plan.ScopeLegacy})
	pc, err := controller.ProxyClient(env.TokenConfig(env.AdminToken), nil)
	if err != nil {
		t.Fatal(err)
	}
	failing := interceptor.NewClient(pc, interceptor.Funcs{
		Watch: func(context.Context, client.WithWatch, client.ObjectList, ...client.ListOption) (watch.Interface, error) {
			return nil, errors.New("injected watch failure")
		},
	})
	why := unhealthyRun(t, r, plan.Switch, func() {}, func(o *controller.RunOptions) { o.ProxyClient = failing })
	if want := plan.ReasonSwitchTimeout; len(why) < len(want) || why[:len(want)] != want {
		t.Errorf("rollback %q, want %s", why, want)
	}
	if slices.Contains(r.kinds(), plan.UnpausePrivate) {
		t.Errorf("the private Cluster was unpaused: %v", r.kinds())
	}
}

// nodeConditionFalse reports whether CAPI set one of a Machine's Node conditions (NodeHealthy, NodeReady) False,
// in the conditions of either API version it writes.
func nodeConditionFalse(m unstructured.Unstructured) bool {
	for _, path := range [][]string{{"status", "conditions"}, {"status", "v1beta2", "conditions"}, {"status", "deprecated", "v1beta1", "conditions"}} {
		conds, _, _ := unstructured.NestedSlice(m.Object, path...)
		for _, c := range conds {
			cm, _ := c.(map[string]any)
			if (cm["type"] == "NodeHealthy" || cm["type"] == "NodeReady") && cm["status"] == "False" {
				return true
			}
		}
	}
	return false
}
