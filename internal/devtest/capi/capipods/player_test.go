package capipods

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	hyperv1 "github.com/openshift/hypershift/api/hypershift/v1beta1"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"
)

func podObjects(ctx context.Context, ns, role string) ([]corev1.Pod, error) {
	list := &corev1.PodList{}
	err := harness.Client.List(ctx, list, client.InNamespace(ns), client.MatchingLabels{"app": role})
	return list.Items, err
}

func deploymentStatusOf(ctx context.Context, ns, role string) (appsv1.DeploymentStatus, error) {
	d := &appsv1.Deployment{}
	err := harness.Client.Get(ctx, client.ObjectKey{Namespace: ns, Name: role}, d)
	return d.Status, err
}

// TestDeploymentPlayer: the simulated Deployments start and stop the managers. Scaling cluster-api to 0 stops the
// CAPI manager before its Pod object goes; a MachineDeployment scaled meanwhile only grows once cluster-api is back,
// and the audit log shows that the stopped pod sent nothing after its Pod was gone while the new pod created the
// Machine. Pointing the pod template at a sidecar replaces the pods with Proxied ones, which stay not Ready while there is no
// proxy (the Deployment turns unavailable) and start once there is one; undoing it brings Direct pods back. The
// Pods come from kube-controller-manager's deployment and ReplicaSet controllers; the player only runs them.
func TestDeploymentPlayer(t *testing.T) {
	t.Parallel()
	ctx := t.Context()
	spec := HostedClusterSpec{
		Namespace: env.NewNamespace(t, "player"), Name: "hc2", Groups: StandardGroups,
		MachineDeployments: []MachineDeploymentSpec{{Name: "hc2-workers", Replicas: 1}},
		Deployments:        true, DeploymentReplicas: 1,
	}
	hc, err := harness.CreateHostedCluster(ctx, spec)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { deleteNamespace(hc.Namespace()) })
	ns := hc.Namespace()
	ho, err := harness.StartOperator(ctx, "player-"+t.Name(), Direct, func(h *hyperv1.HostedCluster) bool { return h.Namespace == spec.Namespace })
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = ho.Stop() }()
	runningMachines(t, hc, StandardGroups, 1, 3*time.Minute)

	capi := types.NamespacedName{Namespace: ns, Name: RoleCAPI}
	pods := harness.Player.Pods(capi)
	if len(pods) != 1 || pods[0].Mode != Direct || !pods[0].Ready || pods[0].Manager == nil {
		t.Fatalf("cluster-api pods %+v", pods)
	}
	first := pods[0].Name
	objs, err := podObjects(ctx, ns, RoleCAPI)
	if err != nil || len(objs) != 1 || objs[0].Name != first || objs[0].Status.Phase != corev1.PodRunning {
		t.Fatalf("cluster-api Pod objects %+v (err %v)", objs, err)
	}

	// Scale to 0: the manager stops, then its Pod goes.
	if err := hc.ScaleDeployment(ctx, RoleCAPI, 0); err != nil {
		t.Fatal(err)
	}
	took := eventually(t, time.Minute, "cluster-api scaled to 0", func(ctx context.Context) (bool, string, error) {
		objs, err := podObjects(ctx, ns, RoleCAPI)
		st, err2 := deploymentStatusOf(ctx, ns, RoleCAPI)
		if err == nil {
			err = err2
		}
		return len(objs) == 0 && st.Replicas == 0 && len(harness.Player.Pods(capi)) == 0, fmt.Sprintf("%d Pods, status %+v", len(objs), st), err
	})
	stopped := time.Now()
	t.Logf("cluster-api at 0 replicas after %s", took.Round(time.Millisecond))
	if !select1(pods[0].Manager.Done()) {
		t.Fatal("the cluster-api manager still runs although its Pod is gone")
	}

	if err := hc.ScaleMachineDeployment(ctx, harness.Client, StandardGroups, "hc2-workers", 2); err != nil {
		t.Fatal(err)
	}
	if err := hc.ScaleDeployment(ctx, RoleCAPI, 1); err != nil {
		t.Fatal(err)
	}
	runningMachines(t, hc, StandardGroups, 2, 2*time.Minute)
	second := harness.Player.Pods(capi)
	if len(second) != 1 || second[0].Name == first {
		t.Fatalf("cluster-api pods after scaling back %+v", second)
	}
	// The audit log is written before kube-apiserver answers: it holds every request up to the List above.
	late, err := ReadAudit(env.AuditLog, PodLine(first), func(ev *AuditEvent) bool {
		return FromPod(first)(ev) && ev.RequestReceivedTimestamp.After(stopped)
	})
	if err != nil {
		t.Fatal(err)
	}
	if len(late) > 0 {
		t.Errorf("the stopped pod %s sent %d requests after its Pod was gone, first %s %s", first, len(late), late[0].Verb, late[0].RequestURI)
	}
	creates, err := ReadAudit(env.AuditLog, `"resource":"machines"`, func(ev *AuditEvent) bool {
		// The MachineSet controller creates Machines with server-side apply: a PATCH answered 201 Created.
		return (ev.Verb == "create" || ev.Verb == "patch") && ev.ObjectRef.Resource == "machines" && ev.ObjectRef.Subresource == "" &&
			ev.ObjectRef.Namespace == ns && ev.ResponseStatus.Code == 201
	})
	if err != nil {
		t.Fatal(err)
	}
	if len(creates) != 2 || !strings.HasPrefix(creates[1].UserAgent, UserAgentPrefix+second[0].Name) {
		t.Errorf("Machine creates %+v: want the second one by %s", creates, second[0].Name)
	}

	// Proxy marker without a proxy: Proxied pods replace the Direct ones and stay not Ready.
	harness.SetProxied(nil)
	restored := false
	restore := func() {
		if !restored {
			harness.SetProxied(proxyServer.Config(env.AdminToken))
			restored = true
		}
	}
	defer restore()
	if err := hc.SetDeploymentProxied(ctx, RoleCAPI, true); err != nil {
		t.Fatal(err)
	}
	eventually(t, time.Minute, "cluster-api Proxied and unavailable", func(ctx context.Context) (bool, string, error) {
		pods := harness.Player.Pods(capi)
		st, err := deploymentStatusOf(ctx, ns, RoleCAPI)
		ok := len(pods) == 1 && pods[0].Mode == Proxied && !pods[0].Ready && pods[0].Err != nil &&
			st.UpdatedReplicas == 1 && st.AvailableReplicas == 0
		return ok, fmt.Sprintf("pods %+v, status %+v", pods, st), err
	})
	objs, err = podObjects(ctx, ns, RoleCAPI)
	if err != nil || len(objs) != 1 || ModeOf(objs[0].Spec) != Proxied || objs[0].Status.Phase != corev1.PodPending ||
		!strings.Contains(objs[0].Status.Message, "no proxy") {
		t.Fatalf("Proxied Pod objects %+v (err %v)", objs, err)
	}
	// The proxy arrives: the retried pod starts and turns Ready.
	restore()
	if err := hc.WaitDeploymentsAvailable(ctx, time.Minute); err != nil {
		t.Fatal(err)
	}
	if pods := harness.Player.Pods(capi); len(pods) != 1 || pods[0].Mode != Proxied || !pods[0].Ready || pods[0].Restarts != 0 {
		t.Fatalf("cluster-api pods once the proxy exists %+v", pods)
	}
	if err := hc.SetDeploymentProxied(ctx, RoleCAPI, false); err != nil {
		t.Fatal(err)
	}
	if err := hc.WaitDeploymentsAvailable(ctx, time.Minute); err != nil {
		t.Fatal(err)
	}
	if pods := harness.Player.Pods(capi); len(pods) != 1 || pods[0].Mode != Direct || !pods[0].Ready {
		t.Fatalf("cluster-api pods after removing the marker %+v", pods)
	}
}

func select1(ch <-chan struct{}) bool {
	select {
	case <-ch:
		return true
	default:
		return false
	}
}
