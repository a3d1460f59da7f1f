package simulator

import (
	"slices"
	"strings"
	"testing"
	"time"

	hyperv1 "github.com/openshift/hypershift/api/hypershift/v1beta1"
	apimeta "k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"

	"github.com/dcm-sp/acm-cluster-sp/internal/sp/inventory"
	"github.com/dcm-sp/acm-cluster-sp/internal/sp/meta"
	"github.com/dcm-sp/acm-cluster-sp/internal/sp/render"
	"github.com/dcm-sp/acm-cluster-sp/internal/sp/status"
)

var t0 = time.Date(2026, 11, 22, 10, 0, 0, 0, time.UTC)

var tl = Timeline{ReadyAfter: 100 * time.Second, DeleteAfter: 10 * time.Second, BareMetalFactor: 2}

// world is a cluster as the controller would leave it after applying plans up to some time.
type world struct {
	hc     *hyperv1.HostedCluster
	nps    []*hyperv1.NodePool
	agents []inventory.Agent
}

func newWorld(example, mode string) *world {
	objs := render.Render(render.Examples()[example])
	hc, np := objs.HostedCluster, objs.NodePool
	hc.CreationTimestamp = metav1.NewTime(t0)
	if mode != "" {
		hc.Annotations[AnnotationFail] = mode
	}
	return &world{hc: hc, nps: []*hyperv1.NodePool{np}}
}

// at applies Step plans at time t (twice, so that a plan depending on the previous one settles) like the
// controller does, and returns the last plan.
func (w *world) at(t time.Time) Plan {
	var p Plan
	for i := 0; i < 2; i++ {
		p = Step(Observed{HC: w.hc, NodePools: w.nps, Agents: w.agents, Now: t}, tl)
		if p.Start {
			w.hc.Finalizers = append(w.hc.Finalizers, meta.FinalizerHyperShift)
			w.hc.Annotations[AnnotationStarted] = t.Format(time.RFC3339Nano)
		}
		if !p.Restart.IsZero() {
			w.hc.Annotations[AnnotationStarted] = p.Restart.Format(time.RFC3339Nano)
		}
		if p.SetBaseDomain != "" {
			w.hc.Spec.DNS.BaseDomain = p.SetBaseDomain
		}
		if p.HCStatus != nil {
			w.hc.Status = *p.HCStatus
		}
		for _, np := range w.nps {
			if st, ok := p.NPStatus[np.Name]; ok {
				np.Status = st
			}
		}
		for _, name := range p.BindAgents {
			for i := range w.agents {
				if w.agents[i].Name == name {
					w.agents[i].ClusterDeploymentName = w.hc.Name
				}
			}
		}
		for _, name := range p.UnbindAgents {
			for i := range w.agents {
				if w.agents[i].Name == name {
					w.agents[i].ClusterDeploymentName = ""
				}
			}
		}
		setAnnotation(w.hc, AnnotationUpgrade, p.HCTransition)
		for _, np := range w.nps {
			setAnnotation(np, AnnotationRollout, p.NPTransitions[np.Name])
			setAnnotation(np, AnnotationTemplate, p.NPTemplates[np.Name])
		}
	}
	return p
}

func setAnnotation(o metav1.Object, key, value string) {
	a := o.GetAnnotations()
	if a == nil {
		a = map[string]string{}
	}
	switch value {
	case "":
		return
	case "-":
		delete(a, key)
	default:
		a[key] = value
	}
	o.SetAnnotations(a)
}

func frac(f float64) time.Time { return t0.Add(time.Duration(f * float64(tl.ReadyAfter))) }

// The simulator's purpose is to produce the conditions real HyperShift produces, so its timeline is asserted
// through the product's status function: each failure mode lands where docs/status-mapping.md says it must.
func TestTimelineThroughStatusMapping(t *testing.T) {
	settings := status.DefaultSettings()
	cases := []struct {
		name    string
		example string
		mode    string
		at      float64
		want    status.Status
		msgHas  string
	}{
		{"t0 pending", "kubevirt-minimal", "", 0, status.Pending, "Waiting for the hosted control plane"},
		{"hcp starting", "kubevirt-minimal", "", 0.2, status.Provisioning, "Control plane starting"},
		{"available no workers", "kubevirt-minimal", "", 0.4, status.Provisioning, "workers 0/2 ready"},
		{"first worker", "kubevirt-minimal", "", 0.5, status.Provisioning, "workers 1/2 ready"},
		{"workers ready, rolling out", "kubevirt-minimal", "", 0.9, status.Provisioning, "Cluster version 4.17.12 rolling out"},
		{"ready", "kubevirt-minimal", "", 1.0, status.Ready, "workers 2/2 ready"},
		{"ready 3 workers", "kubevirt-full", "", 1.0, status.Ready, "workers 3/3 ready"},
		{"still ready later", "kubevirt-minimal", "", 5, status.Ready, ""},
		{"invalid release", "kubevirt-minimal", FailInvalidRelease, 0.5, status.Failed, "ValidReleaseImage:"},
		{"stuck pending", "kubevirt-minimal", FailStuckPending, 5, status.Pending, ""},
		{"degraded within grace", "kubevirt-minimal", FailDegraded, 1.0, status.Ready, "degraded:"},
		{"unavailable after ready: before", "kubevirt-minimal", FailUnavailableAfterReady, 1.2, status.Ready, ""},
		{"unavailable after ready", "kubevirt-minimal", FailUnavailableAfterReady, 1.6, status.Unavailable, "Control plane unavailable"},
		{"nodepool invalid", "kubevirt-minimal", FailNodePoolInvalid, 0.5, status.Failed, "ValidPlatformConfig"},
		{"never complete", "kubevirt-minimal", FailNeverComplete, 5, status.Provisioning, "rolling out"},
		{"baremetal slower", "baremetal", "", 1.0, status.Provisioning, ""},
		{"baremetal ready", "baremetal", "", 2.0, status.Ready, "workers 3/3 ready"},
		{"baremetal without agents", "baremetal", "no-agents", 3.0, status.Provisioning, "No suitable Agents"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			mode := c.mode
			if mode == "no-agents" {
				mode = ""
			}
			w := newWorld(c.example, mode)
			if c.example == "baremetal" && c.mode != "no-agents" {
				for _, n := range []string{"a1", "a2", "a3", "a4"} {
					w.agents = append(w.agents, inventory.Agent{Name: n, Approved: true, Validated: true})
				}
			}
			// Walk the timeline in small steps, as watch events and requeues would.
			for f := 0.0; f < c.at; f += 0.05 {
				w.at(frac(f))
			}
			w.at(frac(c.at))
			got := status.Map(w.hc, w.nps, frac(c.at), settings)
			if got.Status != c.want || !strings.Contains(got.Message, c.msgHas) {
				t.Fatalf("at %.2fR: %s %q, want %s containing %q", c.at, got.Status, got.Message, c.want, c.msgHas)
			}
		})
	}
}

func TestStepDetails(t *testing.T) {
	w := newWorld("kubevirt-minimal", "")
	p := w.at(t0)
	if !slices.Contains(w.hc.Finalizers, meta.FinalizerHyperShift) {
		t.Fatal("finalizer not added at t0")
	}
	if got := p.RequeueAfter; got != 15*time.Second {
		t.Fatalf("t0 requeue = %v, want 15s (the HCP phase)", got)
	}
	if v := w.hc.Status.Version; v == nil || len(v.History) != 1 || v.History[0].State != "Partial" || v.History[0].CompletionTime != nil || v.Desired.Image == "" {
		t.Fatalf("t0 version status %+v", v)
	}
	c := apimeta.FindStatusCondition(w.hc.Status.Conditions, "Degraded")
	if c == nil || c.Status != metav1.ConditionUnknown || c.Reason != "StatusUnknown" {
		t.Fatalf("t0 Degraded = %+v", c)
	}
	for _, cond := range w.hc.Status.Conditions {
		if cond.Reason == "" {
			t.Errorf("condition %s without reason (the CRD rejects it)", cond.Type)
		}
	}

	w.at(frac(0.2))
	p = w.at(frac(0.4))
	if !p.Kubeconfig || w.hc.Status.KubeConfig == nil || w.hc.Status.KubeConfig.Name != "dev-cluster-01-admin-kubeconfig" {
		t.Fatalf("at Available: kubeconfig plan %v status %v", p.Kubeconfig, w.hc.Status.KubeConfig)
	}
	if h := w.hc.Status.ControlPlaneEndpoint.Host; !strings.HasPrefix(h, "127.") || w.hc.Status.ControlPlaneEndpoint.Port != 6443 {
		t.Fatalf("endpoint %+v is not a loopback address", w.hc.Status.ControlPlaneEndpoint)
	}
	if w.hc.Spec.DNS.BaseDomain != AppsDomain {
		t.Fatalf("passthrough cluster: base domain %q, want the management apps domain", w.hc.Spec.DNS.BaseDomain)
	}

	// A second Step with nothing changed writes nothing: no hot loop of status updates.
	p = Step(Observed{HC: w.hc, NodePools: w.nps, Now: frac(0.4)}, tl)
	if p.HCStatus != nil || len(p.NPStatus) != 0 {
		t.Fatalf("idempotent step still writes: hc %v np %v", p.HCStatus != nil, p.NPStatus)
	}

	w.at(frac(1.0))
	if v := w.hc.Status.Version; v.History[0].State != "Completed" || v.History[0].CompletionTime == nil {
		t.Fatalf("rollout not completed: %+v", v.History)
	}
	if p := w.at(frac(1.0)); !p.JoinACM {
		t.Fatal("ManagedCluster not joined at the end of the timeline")
	}

	// A NodePool deleted by hand while the cluster lives is drained and let go; the others are untouched.
	np := w.nps[0].DeepCopy()
	np.DeletionTimestamp = &metav1.Time{Time: frac(1.0)}
	np.Finalizers = []string{meta.FinalizerHyperShift}
	p = Step(Observed{HC: w.hc, NodePools: []*hyperv1.NodePool{np}, Now: frac(1.0)}, tl)
	if !slices.Equal(p.NPRelease, []string{np.Name}) || len(p.NPFinalize) != 0 {
		t.Fatalf("deleted NodePool: release %v finalize %v", p.NPRelease, p.NPFinalize)
	}
	if p := Step(Observed{HC: w.hc, NodePools: w.nps, Now: frac(1.0)}, tl); len(p.NPRelease) != 0 {
		t.Fatalf("live NodePool released: %v", p.NPRelease)
	}
}

// A late simulator (its queue ran behind) still writes every phase of the install, each for its length: a pass
// long after the clock's next phase writes that phase and sets the clock back to its start. Without it, a pass at
// 1.0 R after one at t0 made a cluster READY that the SP had never seen PROVISIONING.
func TestStepLatePassesWriteEveryPhase(t *testing.T) {
	settings := status.DefaultSettings()
	w := newWorld("kubevirt-minimal", "")
	w.at(t0)
	at := func(tm time.Time, want status.Status) Plan {
		t.Helper()
		p := Step(Observed{HC: w.hc, NodePools: w.nps, Now: tm}, tl)
		w.at(tm)
		if got := status.Map(w.hc, w.nps, tm, settings).Status; got != want {
			t.Fatalf("at %v: %s, want %s", tm.Sub(t0), got, want)
		}
		return p
	}
	late := frac(1.2)
	if p := at(late, status.Provisioning); !p.Restart.Equal(late.Add(-15 * time.Second)) {
		t.Fatalf("restart %v, want 0.15 R before the late pass", p.Restart.Sub(t0))
	}
	if apimeta.IsStatusConditionTrue(w.hc.Status.Conditions, "Available") {
		t.Fatal("the late pass wrote two phases: Available with the control plane's start")
	}
	later := late.Add(time.Duration(2 * float64(tl.ReadyAfter)))
	if p := at(later, status.Provisioning); !p.Restart.Equal(later.Add(-35 * time.Second)) {
		t.Fatalf("restart %v, want 0.35 R before the second late pass", p.Restart.Sub(t0))
	}
	if c := w.hc.Status.Version.History[0]; c.State != "Partial" {
		t.Fatalf("the second late pass completed the rollout with Available: %+v", c)
	}
	// From the last restart, the rest of the timeline at its pace: READY 0.65 R later, not before.
	at(later.Add(60*time.Second), status.Provisioning)
	at(later.Add(66*time.Second), status.Ready)
	// Installed: no more restarts.
	if p := at(later.Add(10*time.Duration(tl.ReadyAfter)), status.Ready); !p.Restart.IsZero() {
		t.Fatalf("an installed cluster's clock was set back: %v", p.Restart)
	}
}

func TestStepDeletion(t *testing.T) {
	for _, mode := range []string{"", FailStuckDeletion} {
		w := newWorld("kubevirt-minimal", mode)
		w.at(frac(1.0))
		w.hc.Annotations[meta.AnnotationCleanupCloudResources] = "true"
		del := frac(1.0)
		w.hc.DeletionTimestamp = ptr.To(metav1.NewTime(del))

		p := Step(Observed{HC: w.hc, NodePools: w.nps, Now: del}, tl)
		if p.Delete == nil || !p.Delete.MarkStart {
			t.Fatalf("%q: deletion start not recorded", mode)
		}
		w.hc.Annotations[AnnotationDeleting] = del.Format(time.RFC3339Nano)
		if p.Delete == nil || !p.Delete.DeleteNodePools || len(p.Delete.ReleaseNodePools) != 0 || p.Delete.RemoveHCFinalizer || !p.Delete.CloudResourcesClean {
			t.Fatalf("%q: deletion start plan %+v", mode, p.Delete)
		}
		if p.RequeueAfter != tl.DeleteAfter/2 {
			t.Fatalf("%q: requeue %v", mode, p.RequeueAfter)
		}
		w.nps[0].DeletionTimestamp = ptr.To(metav1.NewTime(del))
		w.nps[0].Finalizers = []string{meta.FinalizerHyperShift}
		p = Step(Observed{HC: w.hc, NodePools: w.nps, Now: del.Add(tl.DeleteAfter / 2)}, tl)
		if len(p.Delete.ReleaseNodePools) != 1 || p.Delete.RemoveHCFinalizer {
			t.Fatalf("%q: midway plan %+v", mode, p.Delete)
		}
		p = Step(Observed{HC: w.hc, NodePools: nil, Now: del.Add(tl.DeleteAfter)}, tl)
		if p.Delete.RemoveHCFinalizer != (mode == "") || p.Delete.DeleteSecrets != (mode == "") {
			t.Fatalf("%q: end plan %+v", mode, p.Delete)
		}
	}
}

func TestBindAgents(t *testing.T) {
	w := newWorld("baremetal", "")
	w.agents = []inventory.Agent{
		{Name: "c", Approved: true, Validated: true},
		{Name: "a", Approved: true, Validated: true},
		{Name: "b", Approved: false, Validated: true},
		{Name: "d", Approved: true, Validated: true, ClusterDeploymentName: w.hc.Name},
		{Name: "e", Approved: true, Validated: true, ClusterDeploymentName: "someone-else"},
		{Name: "f", Approved: true, Validated: true},
	}
	bind, short := bindAgents(w.hc, w.nps, w.agents)
	if short || strings.Join(bind, ",") != "a,c" {
		t.Fatalf("bind %v short %v; want a,c (d already bound, b unapproved, e taken)", bind, short)
	}
	bind, short = bindAgents(w.hc, w.nps, w.agents[:3])
	if !short || len(bind) != 2 {
		t.Fatalf("two usable Agents for three replicas: bind %v short %v", bind, short)
	}
}
