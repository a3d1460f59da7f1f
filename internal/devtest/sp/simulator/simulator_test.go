package simulator

import (
	"context"
	"fmt"
	"os"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	hyperv1 "github.com/openshift/hypershift/api/hypershift/v1beta1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	apimeta "k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/tools/clientcmd"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/dcm-sp/acm-cluster-sp/internal/devtest/sp/sphub"
	"github.com/dcm-sp/acm-cluster-sp/internal/devtest/testwait"
	"github.com/dcm-sp/acm-cluster-sp/internal/sp/meta"
	"github.com/dcm-sp/acm-cluster-sp/internal/sp/render"
	"github.com/dcm-sp/acm-cluster-sp/internal/sp/status"
)

var hub *sphub.Hub

// lastPlan is the last plan the simulator applied per HostedCluster (Options.Observe).
var lastPlan sync.Map

// settled waits until the simulator has applied a plan for hc that schedules nothing more: from then on, unless
// its objects change, the simulator will not act on it again — the proof that it had its chance.
func settled(t *testing.T, hc *hyperv1.HostedCluster, within time.Duration) {
	t.Helper()
	testwait.For(t, within, "the simulator to have nothing more scheduled for "+hc.Name, func() bool {
		p, ok := lastPlan.Load(client.ObjectKeyFromObject(hc))
		return ok && p.(Plan).RequeueAfter == 0
	})
}

func TestMain(m *testing.M) {
	os.Exit(sphub.RunTests(m, sphub.Options{NoNATS: true, NoSeed: true}, func(h *sphub.Hub) func() {
		hub = h
		stop, err := Start(context.Background(), h.Config, Options{Timeline: TestTimeline(),
			Observe: func(hc types.NamespacedName, p Plan) { lastPlan.Store(hc, p) }})
		if err != nil {
			fmt.Fprintln(os.Stderr, err)
			os.Exit(1)
		}
		return stop
	}))
}

// create renders an example cluster into a fresh namespace and creates its HostedCluster and NodePool.
func create(t *testing.T, example, mode string) (*hyperv1.HostedCluster, *hyperv1.NodePool) {
	t.Helper()
	in := render.Examples()[example]
	in.Namespace = hub.NewNamespace(t, "sim")
	in.Finalizers = nil
	in.Name = fmt.Sprintf("c%d", time.Now().UnixNano()%1_000_000)
	objs := render.Render(in)
	if mode != "" {
		objs.HostedCluster.Annotations[AnnotationFail] = mode
	}
	ctx := context.Background()
	if err := hub.Client.Create(ctx, objs.HostedCluster); err != nil {
		t.Fatal(err)
	}
	if err := hub.Client.Create(ctx, objs.NodePool); err != nil {
		t.Fatal(err)
	}
	return objs.HostedCluster, objs.NodePool
}

// observe reads the cluster back and maps it with the product's status function.
func observe(t *testing.T, hc *hyperv1.HostedCluster) (status.Result, *hyperv1.HostedCluster, []*hyperv1.NodePool) {
	t.Helper()
	var got hyperv1.HostedCluster
	if err := hub.Client.Get(context.Background(), client.ObjectKeyFromObject(hc), &got); err != nil {
		if apierrors.IsNotFound(err) {
			return status.Map(nil, nil, time.Now(), status.DefaultSettings()), nil, nil
		}
		t.Fatal(err)
	}
	var nps hyperv1.NodePoolList
	if err := hub.Client.List(context.Background(), &nps, client.InNamespace(hc.Namespace)); err != nil {
		t.Fatal(err)
	}
	var list []*hyperv1.NodePool
	for i := range nps.Items {
		list = append(list, &nps.Items[i])
	}
	return status.Map(&got, list, time.Now(), status.DefaultSettings()), &got, list
}

// waitFor polls (bounded) until the cluster maps to want, recording every status seen on the way.
func waitFor(t *testing.T, hc *hyperv1.HostedCluster, want status.Status, within time.Duration) ([]status.Status, *hyperv1.HostedCluster, []*hyperv1.NodePool) {
	t.Helper()
	var seen []status.Status
	var r status.Result
	var got *hyperv1.HostedCluster
	var nps []*hyperv1.NodePool
	if !testwait.Poll(within, func() bool {
		r, got, nps = observe(t, hc)
		if len(seen) == 0 || seen[len(seen)-1] != r.Status {
			seen = append(seen, r.Status)
		}
		return r.Status == want
	}) {
		t.Fatalf("after %v: status %s (%q), want %s; seen %v", within, r.Status, r.Message, want, seen)
	}
	return seen, got, nps
}

func TestKubeVirtLifecycle(t *testing.T) {
	hc, _ := create(t, "kubevirt-full", "")
	seen, got, nps := waitFor(t, hc, status.Ready, 20*time.Second)
	// Polling can miss the short PENDING phase under load; what it must see is PROVISIONING before READY and
	// nothing else (the event tests assert the exact sequence without polling).
	for _, st := range seen {
		if st != status.Pending && st != status.Provisioning && st != status.Ready {
			t.Errorf("unexpected status %s in %v", st, seen)
		}
	}
	if !slices.Contains(seen, status.Provisioning) {
		t.Errorf("status sequence %v, want PROVISIONING before READY", seen)
	}
	if !slices.Contains(got.Finalizers, meta.FinalizerHyperShift) {
		t.Error("operator finalizer missing")
	}
	if got.Status.KubeConfig == nil || got.Status.ControlPlaneEndpoint.Port != 6443 {
		t.Fatalf("status %+v", got.Status)
	}
	if nps[0].Status.Replicas != 3 || !slices.Contains(nps[0].Finalizers, meta.FinalizerHyperShift) {
		t.Fatalf("NodePool %+v", nps[0].Status)
	}
	var secret corev1.Secret
	if err := hub.Client.Get(context.Background(), client.ObjectKey{Namespace: hc.Namespace, Name: got.Status.KubeConfig.Name}, &secret); err != nil {
		t.Fatal(err)
	}
	if secret.Labels[meta.LabelInstanceID] != hc.Labels[meta.LabelInstanceID] || len(secret.OwnerReferences) != 1 || secret.OwnerReferences[0].UID != got.UID {
		t.Fatalf("admin kubeconfig Secret labels %v owners %v", secret.Labels, secret.OwnerReferences)
	}
	kc, err := clientcmd.Load(secret.Data["kubeconfig"])
	if err != nil {
		t.Fatalf("kubeconfig does not parse: %v", err)
	}
	if server := kc.Clusters[kc.Contexts[kc.CurrentContext].Cluster].Server; server != fmt.Sprintf("https://%s:6443", got.Status.ControlPlaneEndpoint.Host) {
		t.Fatalf("kubeconfig server %s", server)
	}

	// Delete: the finalizer is honoured, NodePools go first, then the HostedCluster and the operator's Secrets.
	if err := hub.Client.Delete(context.Background(), got); err != nil {
		t.Fatal(err)
	}
	seen, _, _ = waitFor(t, hc, status.Deleted, 20*time.Second)
	if !slices.Contains(seen, status.Deleting) {
		t.Errorf("deletion sequence %v, want DELETING then DELETED", seen)
	}
	var left hyperv1.NodePoolList
	_ = hub.Client.List(context.Background(), &left, client.InNamespace(hc.Namespace))
	if len(left.Items) != 0 {
		t.Errorf("%d NodePools left", len(left.Items))
	}
	if err := hub.Client.Get(context.Background(), client.ObjectKeyFromObject(&secret), &secret); !apierrors.IsNotFound(err) {
		t.Errorf("admin kubeconfig Secret not deleted: %v", err)
	}
}

func TestFailureModes(t *testing.T) {
	cases := []struct {
		mode      string
		want      status.Status
		condition string // an HC (or NodePool) condition type the mode must set False/True
	}{
		{FailInvalidRelease, status.Failed, "ValidReleaseImage"},
		{FailNodePoolInvalid, status.Failed, "ValidPlatformConfig"},
		{FailUnavailableAfterReady, status.Unavailable, "Available"},
		{FailDegraded, status.Ready, "Degraded"},
		{FailNeverComplete, status.Provisioning, "ClusterVersionAvailable"},
		{FailStuckPending, status.Pending, "Degraded"},
	}
	for _, c := range cases {
		t.Run(c.mode, func(t *testing.T) {
			t.Parallel()
			hc, _ := create(t, "kubevirt-minimal", c.mode)
			if c.mode == FailNeverComplete || c.mode == FailStuckPending {
				settled(t, hc, 20*time.Second) // it has played all it will: the status below is final
			}
			_, got, nps := waitFor(t, hc, c.want, 20*time.Second)
			var found bool
			switch c.mode {
			case FailNodePoolInvalid:
				for _, cond := range nps[0].Status.Conditions {
					found = found || (cond.Type == c.condition && cond.Status == corev1.ConditionFalse)
				}
			case FailDegraded:
				found = apimeta.IsStatusConditionTrue(got.Status.Conditions, c.condition)
			case FailStuckPending:
				cond := apimeta.FindStatusCondition(got.Status.Conditions, c.condition)
				found = cond != nil && cond.Status == metav1.ConditionUnknown
			default:
				found = apimeta.IsStatusConditionFalse(got.Status.Conditions, c.condition)
			}
			if !found {
				t.Fatalf("mode %s: condition %s not as documented: %+v", c.mode, c.condition, got.Status.Conditions)
			}
			if c.mode == FailStuckPending {
				if got.Status.Version == nil || len(got.Status.Version.History) != 1 || got.Status.Version.History[0].State != "Partial" {
					t.Fatalf("stuck-pending history %+v", got.Status.Version)
				}
			}
		})
	}
}

func TestStuckDeletion(t *testing.T) {
	hc, _ := create(t, "kubevirt-minimal", FailStuckDeletion)
	_, got, _ := waitFor(t, hc, status.Ready, 20*time.Second)
	if err := hub.Client.Delete(context.Background(), got); err != nil {
		t.Fatal(err)
	}
	testwait.For(t, 15*time.Second, "NodePools deleted", func() bool {
		_, _, nps := observe(t, hc)
		return len(nps) == 0
	})
	settled(t, hc, 15*time.Second) // past the point where it would have removed the finalizer
	r, still, _ := observe(t, hc)
	if r.Status != status.Deleting || still == nil || !slices.Contains(still.Finalizers, meta.FinalizerHyperShift) {
		t.Fatalf("stuck deletion: %s, hc present %v", r.Status, still != nil)
	}
}

func TestAgentBinding(t *testing.T) {
	agentNS := hub.NewNamespace(t, "agents")
	ctx := context.Background()
	for i := 1; i <= 4; i++ {
		a := sphub.AgentSpec{Name: fmt.Sprintf("a%d", i), Namespace: agentNS, InfraEnv: "ie", Approved: true, Role: "auto-assign", Validated: true, CPUs: 16, MemoryGiB: 64, DiskGiB: 500,
			Labels: map[string]string{meta.LabelInstanceID: "bm-1"}}
		if i == 4 {
			a.Labels = nil // not reserved for this cluster: must not be bound
		}
		if err := sphub.CreateAgent(ctx, hub.Client, a); err != nil {
			t.Fatal(err)
		}
	}
	in := render.Examples()["baremetal"]
	in.ID, in.AgentNamespace, in.Namespace, in.Finalizers = "bm-1", agentNS, hub.NewNamespace(t, "bm"), nil
	objs := render.Render(in)
	if err := hub.Client.Create(ctx, objs.HostedCluster); err != nil {
		t.Fatal(err)
	}
	if err := hub.Client.Create(ctx, objs.NodePool); err != nil {
		t.Fatal(err)
	}
	waitFor(t, objs.HostedCluster, status.Ready, 30*time.Second)
	bound := boundAgents(t, agentNS, objs.HostedCluster.Name)
	if len(bound) != 3 || slices.Contains(bound, "a4") {
		t.Fatalf("bound %v, want a1..a3", bound)
	}

	// A second cluster wanting 3 Agents finds only a4 selectable: NoSuitableAgents, never READY.
	in2 := in
	in2.ID, in2.Name, in2.InfraID = "bm-2", "prod-cluster-02", "prod-cluster-02-zzzzz"
	objs2 := render.Render(in2)
	if err := hub.Client.Create(ctx, objs2.HostedCluster); err != nil {
		t.Fatal(err)
	}
	if err := hub.Client.Create(ctx, objs2.NodePool); err != nil {
		t.Fatal(err)
	}
	settled(t, objs2.HostedCluster, 20*time.Second)
	r, _, _ := observe(t, objs2.HostedCluster)
	if r.Status != status.Provisioning || !strings.Contains(r.Message, "No suitable Agents") {
		t.Fatalf("short of Agents: %s %q", r.Status, r.Message)
	}

	// Deleting the first cluster unbinds its Agents.
	if err := hub.Client.Delete(ctx, objs.HostedCluster); err != nil {
		t.Fatal(err)
	}
	waitFor(t, objs.HostedCluster, status.Deleted, 20*time.Second)
	if b := boundAgents(t, agentNS, objs.HostedCluster.Name); len(b) != 0 {
		t.Fatalf("still bound after delete: %v", b)
	}
}

func boundAgents(t *testing.T, ns, cluster string) []string {
	var list unstructured.UnstructuredList
	list.SetAPIVersion("agent-install.openshift.io/v1beta1")
	list.SetKind("AgentList")
	if err := hub.Client.List(context.Background(), &list, client.InNamespace(ns)); err != nil {
		t.Fatal(err)
	}
	var out []string
	for _, a := range list.Items {
		if name, _, _ := unstructured.NestedString(a.Object, "spec", "clusterDeploymentName", "name"); name == cluster {
			out = append(out, a.GetName())
		}
	}
	return out
}
