package plan

import (
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"slices"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
)

// BlockMoveAnnotation is clusterctl's block-move annotation: an object carrying it is not ready to be moved.
const BlockMoveAnnotation = "clusterctl.cluster.x-k8s.io/block-move"

// Preconditions checks §8.2 on a hosted cluster's standard objects (any order) and returns the ones that do not
// hold, sorted. pausedByUs tells whether the Cluster's spec.paused is the migrator's own (after Quiescing began);
// otherwise a paused Cluster means someone else is working on it. The caller checks the CRDs, the webhook and the
// HostedCluster itself.
func Preconditions(objs []unstructured.Unstructured, pausedByUs bool) []string {
	var out []string
	clusters := 0
	for i := range objs {
		o := &objs[i]
		what := o.GetKind() + "/" + o.GetName()
		if o.GetDeletionTimestamp() != nil {
			out = append(out, what+" is being deleted")
		}
		if _, ok := o.GetAnnotations()[BlockMoveAnnotation]; ok {
			out = append(out, what+" blocks the move ("+BlockMoveAnnotation+")")
		}
		switch o.GetKind() {
		case "Cluster":
			clusters++
			if infra, _, _ := unstructured.NestedBool(o.Object, "status", "initialization", "infrastructureProvisioned"); !infra {
				out = append(out, what+": infrastructure not provisioned")
			}
			if cp, _, _ := unstructured.NestedBool(o.Object, "status", "initialization", "controlPlaneInitialized"); !cp {
				out = append(out, what+": control plane not initialized")
			}
			if paused, _, _ := unstructured.NestedBool(o.Object, "spec", "paused"); paused && !pausedByUs {
				out = append(out, what+" is paused by someone else")
			}
		case "Machine":
			if n, _, _ := unstructured.NestedString(o.Object, "status", "nodeRef", "name"); n == "" {
				out = append(out, what+" has no nodeRef")
			}
			if p, _, _ := unstructured.NestedString(o.Object, "spec", "providerID"); p == "" {
				out = append(out, what+" has no providerID")
			}
		case "KubevirtMachine":
			if p, _, _ := unstructured.NestedString(o.Object, "spec", "providerID"); p == "" {
				out = append(out, what+" has no providerID") // copying it would create a second instance
			}
		case "MachineDeployment":
			gen := o.GetGeneration()
			og, _, _ := unstructured.NestedInt64(o.Object, "status", "observedGeneration")
			want, _, _ := unstructured.NestedInt64(o.Object, "spec", "replicas")
			have, _, _ := unstructured.NestedInt64(o.Object, "status", "replicas")
			upToDate, _, _ := unstructured.NestedInt64(o.Object, "status", "upToDateReplicas")
			if og != gen {
				out = append(out, fmt.Sprintf("%s: observedGeneration %d of %d", what, og, gen))
			}
			if have != want || upToDate != want {
				out = append(out, fmt.Sprintf("%s: replicas %d, upToDate %d, want %d", what, have, upToDate, want))
			}
		}
	}
	if clusters != 1 {
		out = append(out, fmt.Sprintf("%d Clusters in the namespace, want 1", clusters))
	}
	slices.Sort(out)
	return out
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
