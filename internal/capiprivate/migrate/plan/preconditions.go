package plan

import (
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"slices"
	"strings"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
)

// BlockMoveAnnotation is clusterctl's block-move annotation: an object carrying it is not ready to be moved.
const BlockMoveAnnotation = "clusterctl.cluster.x-k8s.io/block-move"

// CoreGroup is Cluster API's core standard group.
const CoreGroup = "cluster.x-k8s.io"

// Class names a kind of precondition that does not hold.
type Class string

// Precondition classes. The safety classes protect the infrastructure or another actor's work: nothing ever
// disregards them. The waitable ones only make the copy less likely to go through unchanged (a Node not joined, a
// rollout under way): they are waited for, and an operator may override them per HostedCluster (OverrideAnnotation).
const (
	// Safety.
	ClassMissingPrivateCRD   Class = "missing-private-crd"  // objects of a renamed group the migrator cannot move
	ClassNoProviderID        Class = "no-provider-id"       // copying it could create a second instance
	ClassDeleting            Class = "deleting"             // a delete is under way
	ClassBlockMove           Class = "block-move"           // a provider asked not to be moved yet
	ClassPausedByOther       Class = "paused-by-other"      // someone else is working on the Cluster
	ClassNotProvisioned      Class = "not-provisioned"      // infrastructure or control plane not ready yet
	ClassClusterCount        Class = "cluster-count"        // not exactly one Cluster in the namespace
	ClassStrayPrivateObject  Class = "stray-private-object" // a private object that is no twin of this cluster
	ClassProxiedWhileLegacy  Class = "proxied-workloads"    // a workload runs through the proxy before the switch
	ClassUnsupportedPlatform Class = "unsupported-platform" // HyperShift writes its CAPI objects in both groups
	// Waitable.
	ClassNoNodeRef                  Class = "no-noderef"
	ClassMachineDeploymentUnsettled Class = "machinedeployment-unsettled"
)

// Waitable reports whether c may be overridden by an operator. Every class not listed as waitable is a safety
// class, so a class added later is safe by default.
func (c Class) Waitable() bool {
	return c == ClassNoNodeRef || c == ClassMachineDeploymentUnsettled
}

// Block is one precondition that does not hold.
type Block struct {
	Class Class
	// Object is "Kind/name" (or a kind, for a class about kinds).
	Object string
	// Detail says more (counts, versions); it is left out of the persisted summary, which changes only when the
	// set of blocks does.
	Detail string
}

func (b Block) String() string {
	s := string(b.Class) + " " + b.Object
	if b.Detail != "" {
		s += " (" + b.Detail + ")"
	}
	return s
}

// Blocking is blocks without the waitable ones override names, sorted. Safety classes are always kept.
func Blocking(blocks []Block, override []string) []Block {
	var out []Block
	for _, b := range blocks {
		if b.Class.Waitable() && slices.Contains(override, string(b.Class)) {
			continue
		}
		out = append(out, b)
	}
	slices.SortFunc(out, func(a, b Block) int {
		return strings.Compare(string(a.Class)+" "+a.Object, string(b.Class)+" "+b.Object)
	})
	return out
}

// IgnoredOverrides are the classes of override that are not waitable classes (safety classes, unknown names): an
// operator cannot override them, and the migrator says so.
func IgnoredOverrides(override []string) []string {
	var out []string
	for _, o := range override {
		if !Class(o).Waitable() {
			out = append(out, o)
		}
	}
	return out
}

// maxSummary bounds BlockedAnnotation's value.
const maxSummary = 1024

// Summary is the persisted form of blocks (BlockedAnnotation): "safety: …; waitable: …" with class and object of
// each block, without details, so it changes only when the set of blocks does. Long lists are cut.
func Summary(blocks []Block) string {
	var safety, waitable []string
	for _, b := range blocks {
		if b.Class.Waitable() {
			waitable = append(waitable, string(b.Class)+" "+b.Object)
		} else {
			safety = append(safety, string(b.Class)+" "+b.Object)
		}
	}
	var parts []string
	if len(safety) > 0 {
		parts = append(parts, "safety: "+strings.Join(safety, ", "))
	}
	if len(waitable) > 0 {
		parts = append(parts, "waitable: "+strings.Join(waitable, ", "))
	}
	s := strings.Join(parts, "; ")
	if len(s) > maxSummary {
		s = s[:maxSummary-3] + "..."
	}
	return s
}

// Preconditions checks a hosted cluster's standard objects (any order) and returns the blocks, sorted. pausedByUs
// tells whether the Cluster's spec.paused is the migrator's own (after Quiescing began); otherwise a paused Cluster
// means someone else is working on it. The caller adds the blocks about kinds, private objects and workloads.
func Preconditions(objs []unstructured.Unstructured, pausedByUs bool) []Block {
	var out []Block
	clusters := 0
	byRef := map[string]*unstructured.Unstructured{}
	for i := range objs {
		byRef[refKey(objs[i].GroupVersionKind().Group, objs[i].GetKind(), objs[i].GetName())] = &objs[i]
	}
	for i := range objs {
		o := &objs[i]
		what := o.GetKind() + "/" + o.GetName()
		if o.GetDeletionTimestamp() != nil {
			out = append(out, Block{Class: ClassDeleting, Object: what})
		}
		if _, ok := o.GetAnnotations()[BlockMoveAnnotation]; ok {
			out = append(out, Block{Class: ClassBlockMove, Object: what, Detail: BlockMoveAnnotation})
		}
		if o.GroupVersionKind().Group != CoreGroup {
			continue
		}
		switch o.GetKind() {
		case "Cluster":
			clusters++
			out = append(out, clusterBlocks(o, what, pausedByUs)...)
		case "Machine":
			out = append(out, machineBlocks(o, what, byRef)...)
		case "MachineDeployment":
			out = append(out, machineDeploymentBlocks(o, what)...)
		}
	}
	if clusters != 1 {
		out = append(out, Block{Class: ClassClusterCount, Object: "Cluster", Detail: fmt.Sprintf("%d in the namespace, want 1", clusters)})
	}
	return Blocking(out, nil)
}

// unscopedPlatforms are the HostedCluster platforms on which HyperShift's NodePool controller ignores the scope:
// its watch on the cloud-config ConfigMap of the control plane namespace (azure-cloud-config, openstack-cloud-config;
// hypershift-operator/controllers/nodepool/nodepool_controller.go) has no scoping predicate and enqueues every
// NodePool of the HostedCluster in every operator. With the legacy and the private operator both running, each
// writes the NodePool's MachineTemplate and MachineDeployment in its own groups: no migration can leave one writer.
var unscopedPlatforms = map[string]string{"Azure": "azure-cloud-config", "OpenStack": "openstack-cloud-config"}

// PlatformBlocks refuses a HostedCluster of a platform (its spec.platform.type) whose CAPI objects HyperShift
// writes whatever the scope: a safety block, so the migrator never locks it.
func PlatformBlocks(platform string) []Block {
	cm, ok := unscopedPlatforms[platform]
	if !ok {
		return nil
	}
	return []Block{{Class: ClassUnsupportedPlatform, Object: platform,
		Detail: "HyperShift's NodePool controller reconciles this platform's NodePools in both operators on a change of " + cm + ", whatever their scope"}}
}

func refKey(group, kind, name string) string { return group + "|" + kind + "|" + name }

func clusterBlocks(o *unstructured.Unstructured, what string, pausedByUs bool) []Block {
	var out []Block
	if infra, _, _ := unstructured.NestedBool(o.Object, "status", "initialization", "infrastructureProvisioned"); !infra {
		out = append(out, Block{Class: ClassNotProvisioned, Object: what, Detail: "infrastructure not provisioned"})
	}
	if cp, _, _ := unstructured.NestedBool(o.Object, "status", "initialization", "controlPlaneInitialized"); !cp {
		out = append(out, Block{Class: ClassNotProvisioned, Object: what, Detail: "control plane not initialized"})
	}
	if paused, _, _ := unstructured.NestedBool(o.Object, "spec", "paused"); paused && !pausedByUs {
		out = append(out, Block{Class: ClassPausedByOther, Object: what})
	}
	return out
}

// machineBlocks: a Machine needs its providerID (safety), and so does the infrastructure machine its
// infrastructureRef names when that object is moved too (copying either without it could create a second
// instance); a Machine without a nodeRef is waitable.
func machineBlocks(o *unstructured.Unstructured, what string, byRef map[string]*unstructured.Unstructured) []Block {
	var out []Block
	if p, _, _ := unstructured.NestedString(o.Object, "spec", "providerID"); p == "" {
		out = append(out, Block{Class: ClassNoProviderID, Object: what})
	}
	group, _, _ := unstructured.NestedString(o.Object, "spec", "infrastructureRef", "apiGroup")
	kind, _, _ := unstructured.NestedString(o.Object, "spec", "infrastructureRef", "kind")
	name, _, _ := unstructured.NestedString(o.Object, "spec", "infrastructureRef", "name")
	if infra := byRef[refKey(group, kind, name)]; infra != nil {
		if p, _, _ := unstructured.NestedString(infra.Object, "spec", "providerID"); p == "" {
			out = append(out, Block{Class: ClassNoProviderID, Object: kind + "/" + name})
		}
	}
	if n, _, _ := unstructured.NestedString(o.Object, "status", "nodeRef", "name"); n == "" {
		out = append(out, Block{Class: ClassNoNodeRef, Object: what})
	}
	return out
}

func machineDeploymentBlocks(o *unstructured.Unstructured, what string) []Block {
	gen := o.GetGeneration()
	og, _, _ := unstructured.NestedInt64(o.Object, "status", "observedGeneration")
	want, _, _ := unstructured.NestedInt64(o.Object, "spec", "replicas")
	have, _, _ := unstructured.NestedInt64(o.Object, "status", "replicas")
	upToDate, _, _ := unstructured.NestedInt64(o.Object, "status", "upToDateReplicas")
	if og != gen || have != want || upToDate != want {
		return []Block{{Class: ClassMachineDeploymentUnsettled, Object: what,
			Detail: fmt.Sprintf("observedGeneration %d of %d, replicas %d, upToDate %d, want %d", og, gen, have, upToDate, want)}}
	}
	return nil
}

// Fingerprint summarises a set of objects by kind, name, uid and resourceVersion: any write to any of them, any
// create and any delete changes it. The order of objs does not matter.
func Fingerprint(objs []unstructured.Unstructured) string {
	lines := make([]string, 0, len(objs))
	for i := range objs {
		o := &objs[i]
		lines = append(lines, o.GetAPIVersion()+"|"+o.GetKind()+"|"+o.GetName()+"|"+string(o.GetUID())+"|"+o.GetResourceVersion())
	}
	slices.Sort(lines)
	h := sha256.New()
	for _, l := range lines {
		h.Write([]byte(l))
		h.Write([]byte{'\n'})
	}
	return hex.EncodeToString(h.Sum(nil))[:16]
}

// StatusPending reports whether a twin still lacks the status its old object has (a crash between create and the
// status write): CopyTwins writes it.
func StatusPending(old, twin *unstructured.Unstructured) bool {
	_, oldHas := old.Object["status"]
	_, twinHas := twin.Object["status"]
	return oldHas && !twinHas
}
