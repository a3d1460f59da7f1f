// Package inventory decides which bare-metal Agents can serve a cluster.
//
// The NodePool API cannot express hardware minimums, so the SP filters the Agent inventory itself and reserves the
// chosen Agents with its instance-id label. Everything here is pure: Agents come in as values read from the hub.
package inventory

import (
	"fmt"
	"sort"
	"strings"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"

	"github.com/dcm-sp/acm-cluster-sp/internal/sp/meta"
)

// Agent is the part of an agent-install.openshift.io/v1beta1 Agent the selection reads.
type Agent struct {
	Name, Namespace       string
	Labels                map[string]string
	Annotations           map[string]string
	Approved              bool
	Role                  string
	ClusterDeploymentName string
	BoundCondition        string // status of the Bound condition ("" when absent)
	BoundReason           string
	Validated             bool
	CPUs                  int64
	MemoryBytes           int64
	Disks                 []Disk
}

// Disk is one inventory disk.
type Disk struct {
	SizeBytes int64
	Eligible  *bool // installationEligibility.eligible, nil when not reported
}

// FromUnstructured reads an Agent object.
func FromUnstructured(u *unstructured.Unstructured) Agent {
	a := Agent{Name: u.GetName(), Namespace: u.GetNamespace(), Labels: u.GetLabels(), Annotations: u.GetAnnotations()}
	a.Approved, _, _ = unstructured.NestedBool(u.Object, "spec", "approved")
	a.Role, _, _ = unstructured.NestedString(u.Object, "spec", "role")
	a.ClusterDeploymentName, _, _ = unstructured.NestedString(u.Object, "spec", "clusterDeploymentName", "name")
	a.CPUs = number(u.Object, "status", "inventory", "cpu", "count")
	a.MemoryBytes = number(u.Object, "status", "inventory", "memory", "physicalBytes")
	conds, _, _ := unstructured.NestedSlice(u.Object, "status", "conditions")
	for _, c := range conds {
		m, _ := c.(map[string]any)
		typ, _ := m["type"].(string)
		st, _ := m["status"].(string)
		reason, _ := m["reason"].(string)
		switch typ {
		case "Bound":
			a.BoundCondition, a.BoundReason = st, reason
		case "Validated":
			a.Validated = st == "True"
		}
	}
	disks, _, _ := unstructured.NestedSlice(u.Object, "status", "inventory", "disks")
	for _, d := range disks {
		m, _ := d.(map[string]any)
		var disk Disk
		disk.SizeBytes = number(m, "sizeBytes")
		if e, ok, _ := unstructured.NestedBool(m, "installationEligibility", "eligible"); ok {
			disk.Eligible = &e
		}
		a.Disks = append(a.Disks, disk)
	}
	return a
}

// number reads an integer field that a JSON decoder may have produced as int64 or float64.
func number(obj map[string]any, fields ...string) int64 {
	v, ok, _ := unstructured.NestedFieldNoCopy(obj, fields...)
	if !ok {
		return 0
	}
	switch n := v.(type) {
	case int64:
		return n
	case float64:
		return int64(n)
	case int:
		return int64(n)
	}
	return 0
}

// Requirements describe the Agents a cluster needs.
type Requirements struct {
	InstanceID  string            // an Agent reserved for this instance already counts (idempotent retry)
	InfraEnv    string            // Agents of this InfraEnv only
	Labels      map[string]string // the request's agent_labels
	CPUs        int64             // minimum cores (0: any)
	MemoryBytes int64             // minimum memory (0: any)
	DiskBytes   int64             // minimum size of one installable disk (0: any)
}

// boundReasons are Bound condition reasons meaning the Agent is in use.
var boundReasons = map[string]bool{"Bound": true, "Binding": true, "Unbinding": true, "UnbindingPendingUserAction": true}

// reject returns why an Agent cannot serve the requirements, or "" when it can.
func reject(a Agent, r Requirements) string {
	switch {
	case a.Labels[meta.LabelInfraEnv] != r.InfraEnv:
		return "in another InfraEnv"
	case !hasLabels(a.Labels, r.Labels):
		return "agent labels do not match"
	case a.Labels[meta.LabelInstanceID] != "" && a.Labels[meta.LabelInstanceID] != r.InstanceID:
		return "reserved by another cluster"
	case !a.Approved:
		return "not approved"
	case a.Role != "" && a.Role != "auto-assign" && a.Role != "worker":
		return "role " + a.Role
	case a.ClusterDeploymentName != "" || a.BoundCondition == "True" || boundReasons[a.BoundReason]:
		return "bound to a cluster"
	case !a.Validated:
		return "not validated"
	}
	return Undersized(a, r)
}

// Undersized returns why an Agent's hardware is below the minimums of r ("" when it meets them): a resize of a
// bare-metal cluster is accepted only when every Agent bound to it still qualifies.
func Undersized(a Agent, r Requirements) string {
	switch {
	case a.CPUs < r.CPUs:
		return "too few CPUs"
	case a.MemoryBytes < r.MemoryBytes:
		return "too little memory"
	case !hasDisk(a.Disks, r.DiskBytes):
		return "no large enough installable disk"
	}
	return ""
}

func hasLabels(have, want map[string]string) bool {
	for k, v := range want {
		if have[k] != v {
			return false
		}
	}
	return true
}

func hasDisk(disks []Disk, min int64) bool {
	if min <= 0 {
		return true
	}
	for _, d := range disks {
		if d.SizeBytes >= min && (d.Eligible == nil || *d.Eligible) {
			return true
		}
	}
	return false
}

// Eligible returns the Agents that satisfy r, those already reserved for r.InstanceID first, then by name.
func Eligible(agents []Agent, r Requirements) []Agent {
	var out []Agent
	for _, a := range agents {
		if reject(a, r) == "" {
			out = append(out, a)
		}
	}
	sort.Slice(out, func(i, j int) bool {
		ri, rj := out[i].Labels[meta.LabelInstanceID] == r.InstanceID, out[j].Labels[meta.LabelInstanceID] == r.InstanceID
		if ri != rj {
			return ri
		}
		return out[i].Name < out[j].Name
	})
	return out
}

// Shortfall explains, for a 422, why fewer than need Agents are eligible: "need 3 eligible Agents in InfraEnv x,
// found 1 (2 too few CPUs, 1 not approved)". Agents of other InfraEnvs are not counted.
func Shortfall(agents []Agent, r Requirements, need int) string {
	counts := map[string]int{}
	found := 0
	for _, a := range agents {
		why := reject(a, r)
		switch why {
		case "":
			found++
		case "in another InfraEnv":
		default:
			counts[why]++
		}
	}
	msg := fmt.Sprintf("need %d eligible Agents in InfraEnv %s, found %d", need, r.InfraEnv, found)
	if len(counts) > 0 {
		reasons := make([]string, 0, len(counts))
		for why, n := range counts {
			reasons = append(reasons, fmt.Sprintf("%d %s", n, why))
		}
		sort.Strings(reasons)
		msg += " (" + strings.Join(reasons, ", ") + ")"
	}
	return msg
}
