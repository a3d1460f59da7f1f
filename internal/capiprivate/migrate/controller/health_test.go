package controller

import (
	"strings"
	"testing"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
)

func object(kind, phase string, conds map[string]string) *unstructured.Unstructured {
	u := &unstructured.Unstructured{Object: map[string]any{"kind": kind, "metadata": map[string]any{"name": "x"}}}
	var list []any
	for t, s := range conds {
		list = append(list, map[string]any{"type": t, "status": s})
	}
	status := map[string]any{"conditions": list}
	if phase != "" {
		status["phase"] = phase
	}
	u.Object["status"] = status
	return u
}

func TestObjectRegression(t *testing.T) {
	for _, tc := range []struct {
		name      string
		old, twin *unstructured.Unstructured
		want      string
	}{
		{"same", object("Machine", "Running", map[string]string{"Ready": "True"}), object("Machine", "Running", map[string]string{"Ready": "True"}), ""},
		{"failed", object("Machine", "Provisioning", nil), object("Machine", "Failed", nil), "phase Failed"},
		{"settled phase lost", object("Machine", "Running", nil), object("Machine", "Provisioning", nil), "phase Provisioning, was Running"},
		{"unsettled phase may move", object("Machine", "Provisioning", nil), object("Machine", "Running", nil), ""},
		{"cluster provisioned lost", object("Cluster", "Provisioned", nil), object("Cluster", "Pending", nil), "phase Pending, was Provisioned"},
		{"watched condition turned False", object("Machine", "Running", map[string]string{"NodeReady": "True"}), object("Machine", "Running", map[string]string{"NodeReady": "False"}), "condition NodeReady False"},
		{"watched condition Unknown is no regression", object("Machine", "Running", map[string]string{"NodeReady": "True"}), object("Machine", "Running", map[string]string{"NodeReady": "Unknown"}), ""},
		{"was already False", object("Machine", "Running", map[string]string{"Ready": "False"}), object("Machine", "Running", map[string]string{"Ready": "False"}), ""},
		{"unwatched condition", object("Machine", "Running", map[string]string{"Paused": "True"}), object("Machine", "Running", map[string]string{"Paused": "False"}), ""},
		{"cluster condition", object("Cluster", "Provisioned", map[string]string{"RemoteConnectionProbe": "True"}), object("Cluster", "Provisioned", map[string]string{"RemoteConnectionProbe": "False"}), "condition RemoteConnectionProbe False"},
		{"machine condition on a cluster is not watched", object("Cluster", "Provisioned", map[string]string{"NodeReady": "True"}), object("Cluster", "Provisioned", map[string]string{"NodeReady": "False"}), ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got := objectRegression(tc.old, tc.twin)
			if (tc.want == "") != (got == "") || !strings.Contains(got, tc.want) {
				t.Errorf("objectRegression = %q, want %q", got, tc.want)
			}
		})
	}
}

func TestUnhealthyWorkloads(t *testing.T) {
	if got := unhealthy(graph{}, Workloads{Available: false}); got != "proxied workloads not Available" {
		t.Errorf("unavailable: %q", got)
	}
	if got := unhealthy(graph{}, Workloads{Available: true, Restarts: 2}); !strings.Contains(got, "2 container restarts") {
		t.Errorf("restarts: %q", got)
	}
	if got := unhealthy(graph{}, Workloads{Available: true}); got != "" {
		t.Errorf("healthy: %q", got)
	}
}

func counters(replicas, ready, available int64) *unstructured.Unstructured {
	return &unstructured.Unstructured{Object: map[string]any{"kind": "MachineDeployment", "status": map[string]any{
		"replicas": replicas, "readyReplicas": ready, "availableReplicas": available,
	}}}
}

func TestCounterRegression(t *testing.T) {
	for _, tc := range []struct {
		name      string
		old, twin *unstructured.Unstructured
		want      string
	}{
		{"same", counters(2, 2, 2), counters(2, 2, 2), ""},
		{"a replica more", counters(2, 2, 2), counters(3, 2, 2), "status.replicas 3, was 2"},
		{"a replica less", counters(2, 2, 2), counters(1, 1, 1), "status.replicas 1, was 2"},
		{"fewer ready", counters(2, 2, 2), counters(2, 1, 2), "status.readyReplicas 1, was 2"},
		{"fewer available", counters(2, 2, 2), counters(2, 2, 1), "status.availableReplicas 1, was 2"},
		{"a Machine that came up under the private controllers", counters(1, 0, 0), counters(1, 1, 1), ""},
		{"no status on the twin yet", counters(1, 1, 1), &unstructured.Unstructured{Object: map[string]any{}}, "status.replicas 0, was 1"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if got := counterRegression(tc.old, tc.twin); got != tc.want {
				t.Errorf("counterRegression = %q, want %q", got, tc.want)
			}
		})
	}
}
