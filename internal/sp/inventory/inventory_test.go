package inventory

import (
	"strings"
	"testing"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"sigs.k8s.io/yaml"
)

const gib = int64(1) << 30

// agent builds an eligible Agent of InfraEnv "prod" and lets each case break one property.
func agent(name string, mod func(*Agent)) Agent {
	a := Agent{
		Name: name, Namespace: "hw",
		Labels:   map[string]string{"infraenvs.agent-install.openshift.io": "prod", "location": "dc1"},
		Approved: true, Role: "auto-assign", Validated: true,
		CPUs: 16, MemoryBytes: 64 * gib, Disks: []Disk{{SizeBytes: 480 * gib}},
	}
	if mod != nil {
		mod(&a)
	}
	return a
}

func TestEligible(t *testing.T) {
	f, tr := false, true
	req := Requirements{InstanceID: "inst-1", InfraEnv: "prod", Labels: map[string]string{"location": "dc1"}, CPUs: 8, MemoryBytes: 32 * gib, DiskBytes: 250 * gib}
	cases := []struct {
		a    Agent
		want bool
		why  string
	}{
		{agent("ok", nil), true, ""},
		{agent("worker-role", func(a *Agent) { a.Role = "worker" }), true, ""},
		{agent("empty-role", func(a *Agent) { a.Role = "" }), true, ""},
		{agent("exact-minimums", func(a *Agent) { a.CPUs, a.MemoryBytes, a.Disks = 8, 32*gib, []Disk{{SizeBytes: 250 * gib}} }), true, ""},
		{agent("mine-already", func(a *Agent) { a.Labels["dcm-instance-id"] = "inst-1" }), true, ""},
		{agent("eligible-disk", func(a *Agent) {
			a.Disks = []Disk{{SizeBytes: 500 * gib, Eligible: &f}, {SizeBytes: 300 * gib, Eligible: &tr}}
		}), true, ""},
		{agent("other-infraenv", func(a *Agent) { a.Labels["infraenvs.agent-install.openshift.io"] = "dev" }), false, "in another InfraEnv"},
		{agent("other-location", func(a *Agent) { a.Labels["location"] = "dc2" }), false, "agent labels do not match"},
		{agent("reserved", func(a *Agent) { a.Labels["dcm-instance-id"] = "inst-2" }), false, "reserved by another cluster"},
		{agent("unapproved", func(a *Agent) { a.Approved = false }), false, "not approved"},
		{agent("master", func(a *Agent) { a.Role = "master" }), false, "role master"},
		{agent("cd-bound", func(a *Agent) { a.ClusterDeploymentName = "other" }), false, "bound to a cluster"},
		{agent("cond-bound", func(a *Agent) { a.BoundCondition = "True" }), false, "bound to a cluster"},
		{agent("binding", func(a *Agent) { a.BoundCondition, a.BoundReason = "False", "Binding" }), false, "bound to a cluster"},
		{agent("unbinding", func(a *Agent) { a.BoundCondition, a.BoundReason = "False", "UnbindingPendingUserAction" }), false, "bound to a cluster"},
		{agent("unvalidated", func(a *Agent) { a.Validated = false }), false, "not validated"},
		{agent("few-cpus", func(a *Agent) { a.CPUs = 4 }), false, "too few CPUs"},
		{agent("little-memory", func(a *Agent) { a.MemoryBytes = 16 * gib }), false, "too little memory"},
		{agent("small-disk", func(a *Agent) { a.Disks = []Disk{{SizeBytes: 120 * gib}} }), false, "no large enough installable disk"},
		{agent("ineligible-disk", func(a *Agent) { a.Disks = []Disk{{SizeBytes: 500 * gib, Eligible: &f}} }), false, "no large enough installable disk"},
		{agent("no-disks", func(a *Agent) { a.Disks = nil }), false, "no large enough installable disk"},
	}
	for _, c := range cases {
		if got := reject(c.a, req); got != c.why {
			t.Errorf("%s: reject = %q, want %q", c.a.Name, got, c.why)
		}
		if got := len(Eligible([]Agent{c.a}, req)) == 1; got != c.want {
			t.Errorf("%s: eligible = %v, want %v", c.a.Name, got, c.want)
		}
	}
}

func TestEligibleOrderPrefersOwnReservation(t *testing.T) {
	req := Requirements{InstanceID: "inst-1", InfraEnv: "prod"}
	got := Eligible([]Agent{agent("c", nil), agent("b", nil), agent("z", func(a *Agent) { a.Labels["dcm-instance-id"] = "inst-1" }), agent("a", nil)}, req)
	var names []string
	for _, a := range got {
		names = append(names, a.Name)
	}
	if strings.Join(names, ",") != "z,a,b,c" {
		t.Fatalf("order = %v", names)
	}
}

func TestShortfall(t *testing.T) {
	req := Requirements{InfraEnv: "prod", CPUs: 8}
	agents := []Agent{agent("ok", nil), agent("small1", func(a *Agent) { a.CPUs = 2 }), agent("small2", func(a *Agent) { a.CPUs = 4 }),
		agent("new", func(a *Agent) { a.Approved = false }), agent("elsewhere", func(a *Agent) { a.Labels["infraenvs.agent-install.openshift.io"] = "x" })}
	want := "need 3 eligible Agents in InfraEnv prod, found 1 (1 not approved, 2 too few CPUs)"
	if got := Shortfall(agents, req, 3); got != want {
		t.Fatalf("Shortfall = %q\nwant      %q", got, want)
	}
}

func TestFromUnstructured(t *testing.T) {
	doc := `
apiVersion: agent-install.openshift.io/v1beta1
kind: Agent
metadata:
  name: a1
  namespace: hw
  labels: {infraenvs.agent-install.openshift.io: prod, role: worker}
spec:
  approved: true
  role: worker
  clusterDeploymentName: {name: cd, namespace: x}
status:
  conditions:
  - {type: Validated, status: "True"}
  - {type: Bound, status: "False", reason: Unbinding}
  inventory:
    cpu: {count: 16}
    memory: {physicalBytes: 68719476736}
    disks:
    - {id: /dev/sda, sizeBytes: 515396075520, installationEligibility: {eligible: true}}
    - {id: /dev/sdb, sizeBytes: 1000}
`
	var obj map[string]any
	if err := yaml.Unmarshal([]byte(doc), &obj); err != nil {
		t.Fatal(err)
	}
	a := FromUnstructured(&unstructured.Unstructured{Object: obj})
	if a.Name != "a1" || !a.Approved || a.Role != "worker" || a.ClusterDeploymentName != "cd" || !a.Validated ||
		a.BoundCondition != "False" || a.BoundReason != "Unbinding" || a.CPUs != 16 || a.MemoryBytes != 64*gib ||
		len(a.Disks) != 2 || a.Disks[0].Eligible == nil || !*a.Disks[0].Eligible || a.Disks[1].Eligible != nil {
		t.Fatalf("parsed %+v", a)
	}
}
