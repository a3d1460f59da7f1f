package sphub

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strings"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/utils/ptr"
	clusterv1 "open-cluster-management.io/api/cluster/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"
)

// SeedOptions name where the seed content goes. Zero values take the dev-mode defaults.
type SeedOptions struct {
	Namespace           string // the SP's namespace for clusters (default "clusters")
	AgentNamespace      string // InfraEnv and Agents (default "hardware-inventory")
	HyperShiftNamespace string // operator Deployment and supported-versions ConfigMap (default "hypershift")
	InfraEnv            string // InfraEnv name (default "production-infraenv", the design's example)
	NoAgents            bool   // skip the InfraEnv and Agents
}

func (o SeedOptions) withDefaults() SeedOptions {
	if o.Namespace == "" {
		o.Namespace = "clusters"
	}
	if o.AgentNamespace == "" {
		o.AgentNamespace = "hardware-inventory"
	}
	if o.HyperShiftNamespace == "" {
		o.HyperShiftNamespace = "hypershift"
	}
	if o.InfraEnv == "" {
		o.InfraEnv = "production-infraenv"
	}
	return o
}

// SeedReleases are the OpenShift patch releases seeded as ClusterImageSets: 4.14 to 4.20, several patches each,
// as ACM's acm-hive-openshift-releases sync leaves them (all patches kept, the newest per minor visible).
var SeedReleases = map[string][]int{
	"4.14": {20, 38, 51}, "4.15": {8, 33, 45}, "4.16": {12, 30, 42}, "4.17": {3, 12, 29},
	"4.18": {1, 14, 22}, "4.19": {2, 9, 15}, "4.20": {0, 3, 6},
}

// Seed creates the hub content the SP and the simulator read. It is idempotent (existing objects are kept).
func Seed(ctx context.Context, c client.Client, o SeedOptions) error {
	o = o.withDefaults()
	for _, ns := range []string{o.Namespace, o.AgentNamespace, o.HyperShiftNamespace} {
		if err := EnsureNamespace(ctx, c, ns); err != nil {
			return err
		}
	}
	local := &clusterv1.ManagedCluster{
		ObjectMeta: metav1.ObjectMeta{Name: "local-cluster", Labels: map[string]string{"local-cluster": "true", "name": "local-cluster"}},
		Spec:       clusterv1.ManagedClusterSpec{HubAcceptsClient: true},
	}
	if err := create(ctx, c, local); err != nil {
		return err
	}
	for minor, patches := range SeedReleases {
		for i, p := range patches {
			if err := create(ctx, c, ClusterImageSet(fmt.Sprintf("%s.%d", minor, p), "multi", i == len(patches)-1)); err != nil {
				return err
			}
		}
	}
	// A release candidate, as ACM lists them in channel "candidate": never chosen for new clusters.
	if err := create(ctx, c, ClusterImageSet("4.21.0-rc.1", "multi", false)); err != nil {
		return err
	}
	if err := SeedOperator(ctx, c, o.HyperShiftNamespace, supportedVersions()); err != nil {
		return err
	}
	if o.NoAgents {
		return nil
	}
	if err := create(ctx, c, InfraEnv(o.InfraEnv, o.AgentNamespace)); err != nil {
		return err
	}
	for _, a := range seedAgents {
		if err := CreateAgent(ctx, c, a.with(o.AgentNamespace, o.InfraEnv)); err != nil {
			return err
		}
	}
	return nil
}

func supportedVersions() []string {
	var out []string
	for m := 20; m >= 14; m-- {
		out = append(out, fmt.Sprintf("4.%d", m))
	}
	return out
}

// EnsureNamespace creates a namespace if it does not exist.
func EnsureNamespace(ctx context.Context, c client.Client, name string) error {
	return create(ctx, c, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: name}})
}

func create(ctx context.Context, c client.Client, obj client.Object) error {
	if err := c.Create(ctx, obj); err != nil && !apierrors.IsAlreadyExists(err) {
		return fmt.Errorf("creating %T %s: %w", obj, obj.GetName(), err)
	}
	return nil
}

// ClusterImageSet builds a hive.openshift.io/v1 ClusterImageSet named as ACM names them (img4.17.3-multi-appsub).
func ClusterImageSet(version, arch string, visible bool) *unstructured.Unstructured {
	channel := "fast"
	if strings.Contains(version, "-rc.") || strings.Contains(version, "-ec.") {
		channel = "candidate"
	}
	u := &unstructured.Unstructured{Object: map[string]any{
		"apiVersion": "hive.openshift.io/v1",
		"kind":       "ClusterImageSet",
		"metadata": map[string]any{
			"name":   fmt.Sprintf("img%s-%s-appsub", version, strings.ReplaceAll(arch, "_", "-")),
			"labels": map[string]any{"channel": channel, "visible": fmt.Sprint(visible)},
		},
		"spec": map[string]any{"releaseImage": fmt.Sprintf("quay.io/openshift-release-dev/ocp-release:%s-%s", version, arch)},
	}}
	return u
}

// SeedOperator creates what the SP reads about the HyperShift operator: the supported-versions ConfigMap and an
// `operator` Deployment whose status says Available (no kubelet runs it; only its status matters).
func SeedOperator(ctx context.Context, c client.Client, namespace string, versions []string) error {
	if err := EnsureNamespace(ctx, c, namespace); err != nil {
		return err
	}
	list, _ := json.Marshal(map[string][]string{"versions": versions})
	cm := &corev1.ConfigMap{
		ObjectMeta: metav1.ObjectMeta{Name: "supported-versions", Namespace: namespace, Labels: map[string]string{"hypershift.openshift.io/supported-versions": "true"}},
		Data:       map[string]string{"supported-versions": string(list), "server-version": "4.20.0"},
	}
	if err := create(ctx, c, cm); err != nil {
		return err
	}
	labels := map[string]string{"app": "operator", "hypershift.openshift.io/operator-component": "operator"}
	dep := &appsv1.Deployment{
		ObjectMeta: metav1.ObjectMeta{Name: "operator", Namespace: namespace, Labels: labels},
		Spec: appsv1.DeploymentSpec{
			Replicas: ptr.To[int32](2),
			Selector: &metav1.LabelSelector{MatchLabels: labels},
			Template: corev1.PodTemplateSpec{
				ObjectMeta: metav1.ObjectMeta{Labels: labels},
				Spec: corev1.PodSpec{Containers: []corev1.Container{{
					Name: "operator", Image: "quay.io/acm-d/rhtap-hypershift-operator:latest", Args: []string{"run"},
				}}},
			},
		},
	}
	if err := create(ctx, c, dep); err != nil {
		return err
	}
	if err := c.Get(ctx, client.ObjectKeyFromObject(dep), dep); err != nil {
		return err
	}
	dep.Status = appsv1.DeploymentStatus{
		ObservedGeneration: dep.Generation, Replicas: 2, ReadyReplicas: 2, AvailableReplicas: 2, UpdatedReplicas: 2,
		Conditions: []appsv1.DeploymentCondition{{
			Type: appsv1.DeploymentAvailable, Status: corev1.ConditionTrue, Reason: "MinimumReplicasAvailable",
			Message: "Deployment has minimum availability.", LastUpdateTime: metav1.Now(), LastTransitionTime: metav1.Now(),
		}},
	}
	return c.Status().Update(ctx, dep)
}

// InfraEnv builds an agent-install.openshift.io/v1beta1 InfraEnv.
func InfraEnv(name, namespace string) *unstructured.Unstructured {
	return &unstructured.Unstructured{Object: map[string]any{
		"apiVersion": "agent-install.openshift.io/v1beta1",
		"kind":       "InfraEnv",
		"metadata":   map[string]any{"name": name, "namespace": namespace},
		"spec": map[string]any{
			"pullSecretRef": map[string]any{"name": "pull-secret"},
			"agentLabels":   map[string]any{"location": "datacenter-1"},
		},
	}}
}

// AgentSpec describes one seeded Agent.
type AgentSpec struct {
	Name      string
	Namespace string
	InfraEnv  string
	Labels    map[string]string
	Approved  bool
	Role      string // auto-assign, worker, master
	Validated bool
	CPUs      int64
	MemoryGiB int64
	DiskGiB   int64
	BoundTo   string // spec.clusterDeploymentName.name, "" when free
}

func (a AgentSpec) with(namespace, infraEnv string) AgentSpec {
	a.Namespace, a.InfraEnv = namespace, infraEnv
	return a
}

// seedAgents: six that fit the design's baremetal example (8 cores, 32 GiB, 250 GiB, location=datacenter-1,
// role=worker) and four that do not, each for a different reason.
var seedAgents = func() []AgentSpec {
	dc1 := func() map[string]string { return map[string]string{"location": "datacenter-1", "role": "worker"} }
	out := []AgentSpec{}
	sizes := []struct{ cpu, mem, disk int64 }{{16, 64, 480}, {16, 64, 480}, {24, 96, 960}, {24, 96, 960}, {32, 128, 1920}, {32, 128, 1920}}
	for i, s := range sizes {
		out = append(out, AgentSpec{Name: fmt.Sprintf("worker-%02d", i+1), Labels: dc1(), Approved: true, Role: "auto-assign", Validated: true, CPUs: s.cpu, MemoryGiB: s.mem, DiskGiB: s.disk})
	}
	return append(out,
		AgentSpec{Name: "worker-07-small", Labels: dc1(), Approved: true, Role: "auto-assign", Validated: true, CPUs: 4, MemoryGiB: 16, DiskGiB: 120},
		AgentSpec{Name: "worker-08-dc2", Labels: map[string]string{"location": "datacenter-2", "role": "worker"}, Approved: true, Role: "auto-assign", Validated: true, CPUs: 16, MemoryGiB: 64, DiskGiB: 480},
		AgentSpec{Name: "worker-09-unapproved", Labels: dc1(), Approved: false, Role: "auto-assign", Validated: true, CPUs: 16, MemoryGiB: 64, DiskGiB: 480},
		AgentSpec{Name: "master-10", Labels: map[string]string{"location": "datacenter-1", "role": "master"}, Approved: true, Role: "master", Validated: true, CPUs: 16, MemoryGiB: 64, DiskGiB: 480},
	)
}()

// CreateAgent creates an Agent and writes its status (inventory and conditions) through the status subresource,
// as assisted-service would after discovery.
func CreateAgent(ctx context.Context, c client.Client, a AgentSpec) error {
	labels := map[string]any{"infraenvs.agent-install.openshift.io": a.InfraEnv}
	for k, v := range a.Labels {
		labels[k] = v
	}
	spec := map[string]any{"approved": a.Approved, "role": a.Role, "hostname": a.Name}
	if a.BoundTo != "" {
		spec["clusterDeploymentName"] = map[string]any{"name": a.BoundTo, "namespace": a.BoundTo}
	}
	u := &unstructured.Unstructured{Object: map[string]any{
		"apiVersion": "agent-install.openshift.io/v1beta1",
		"kind":       "Agent",
		"metadata":   map[string]any{"name": a.Name, "namespace": a.Namespace, "labels": labels},
		"spec":       spec,
	}}
	if err := c.Create(ctx, u); err != nil {
		if apierrors.IsAlreadyExists(err) {
			return nil
		}
		return fmt.Errorf("creating Agent %s: %w", a.Name, err)
	}
	validated, bound := "False", "False"
	if a.Validated {
		validated = "True"
	}
	boundReason := "Unbound"
	if a.BoundTo != "" {
		bound, boundReason = "True", "Bound"
	}
	now := metav1.Now().UTC().Format("2006-01-02T15:04:05Z")
	const gib = int64(1) << 30
	u.Object["status"] = map[string]any{
		"conditions": []any{
			map[string]any{"type": "SpecSynced", "status": "True", "reason": "SyncOK", "lastTransitionTime": now},
			map[string]any{"type": "Connected", "status": "True", "reason": "AgentIsConnected", "lastTransitionTime": now},
			map[string]any{"type": "Validated", "status": validated, "reason": "ValidationsPassing", "lastTransitionTime": now},
			map[string]any{"type": "Bound", "status": bound, "reason": boundReason, "lastTransitionTime": now},
		},
		"inventory": map[string]any{
			"hostname": a.Name,
			"cpu":      map[string]any{"count": a.CPUs, "architecture": "x86_64"},
			"memory":   map[string]any{"physicalBytes": a.MemoryGiB * gib, "usableBytes": a.MemoryGiB * gib},
			"disks": []any{map[string]any{
				"id": "/dev/disk/by-id/wwn-0x" + fmt.Sprintf("%016x", len(a.Name)*7919), "name": "sda", "path": "/dev/sda",
				"driveType": "SSD", "sizeBytes": a.DiskGiB * gib, "bootable": true,
				"installationEligibility": map[string]any{"eligible": true, "notEligibleReasons": []any{}},
			}},
		},
	}
	if err := c.Status().Update(ctx, u); err != nil {
		return fmt.Errorf("writing Agent %s status: %w", a.Name, err)
	}
	return nil
}

// DevPullSecret is a syntactically valid, useless pull secret: the local hub never pulls anything.
const DevPullSecret = `{"auths":{"quay.io":{"auth":"ZGV2OmRldg==","email":"dev@localhost"}}}`

// WritePullSecret writes DevPullSecret to dir/pull-secret.json (mode 0600) and returns the path, for
// configurations that take a pull secret file.
func WritePullSecret(dir string) (string, error) {
	p := filepath.Join(dir, "pull-secret.json")
	return p, os.WriteFile(p, []byte(DevPullSecret), 0o600)
}
