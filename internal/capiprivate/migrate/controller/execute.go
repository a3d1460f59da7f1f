package controller

import (
	"context"
	"fmt"
	"maps"
	"slices"

	hyperv1 "github.com/openshift/hypershift/api/hypershift/v1beta1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/dcm-sp/acm-cluster-sp/internal/capiprivate/migrate/plan"
)

// execute persists a's Changes, then performs its I/O. Every action is idempotent: it re-reads what it changes
// and skips what is already done, so a repeat after a crash is harmless.
func (m *Migrator) execute(ctx context.Context, hc *hyperv1.HostedCluster, rec *runRecord, s plan.State, g graph, a plan.Action) error {
	if err := m.persist(ctx, hc, rec, s, a); err != nil {
		return err
	}
	ns := ControlPlaneNamespace(hc)
	switch a.Kind {
	case plan.Persist:
		return nil
	case plan.PauseLegacyCluster:
		return m.setPaused(ctx, clusterOf(g.old), true)
	case plan.ScaleDownLegacy:
		return m.opts.Switcher.ScaleDownLegacy(ctx, ns)
	case plan.RepointFromLeftovers:
		return m.repoint(ctx, g, g.id.Leftovers.Invert(g.old))
	case plan.RemoveLeftovers:
		return m.remove(ctx, g.id.LeftoverObjects)
	case plan.CopyTwins:
		return m.copyTwins(ctx, g, s.ID)
	case plan.RepointToTwins:
		return m.repoint(ctx, g, g.id.Twins)
	case plan.Switch:
		return m.opts.Switcher.Switch(ctx, ns)
	case plan.UnpausePrivate:
		return m.setPaused(ctx, clusterOf(g.private), false)
	case plan.DeleteOld:
		return m.remove(ctx, plan.Twinned(g.old, g.id.Twins))
	case plan.StopProxied:
		return m.opts.Switcher.StopProxied(ctx, ns)
	case plan.PausePrivate:
		return m.setPaused(ctx, clusterOf(g.private), true)
	case plan.RepointToOld:
		return m.repoint(ctx, g, g.id.Twins.Invert(g.old))
	case plan.DeleteTwins:
		// Only this run's twins: born objects (only a running provider could release their instances), strays
		// and an earlier run's leftovers are left alone.
		twins := m.twinsOf(g)
		if m.opts.Config.EnhancementRollbackOrder {
			return m.deleteLikeTheEnhancement(ctx, twins)
		}
		return m.remove(ctx, twins)
	case plan.RestoreLegacy:
		if err := m.opts.Switcher.RestoreLegacy(ctx, ns); err != nil {
			return err
		}
		if cl := clusterOf(g.old); cl != nil {
			return m.setPaused(ctx, cl, false)
		}
		return nil
	}
	return fmt.Errorf("unknown action %s", a.Kind)
}

// twinsOf are the private objects Identify took for this run's twins.
func (m *Migrator) twinsOf(g graph) []unstructured.Unstructured {
	isTwin := map[types.UID]bool{}
	for _, r := range g.id.Twins {
		isTwin[r.UID] = true
	}
	var out []unstructured.Unstructured
	for i := range g.private {
		if isTwin[g.private[i].GetUID()] {
			out = append(out, g.private[i])
		}
	}
	return out
}

// setPaused sets a Cluster's spec.paused (a no-op for a nil Cluster or when already so).
func (m *Migrator) setPaused(ctx context.Context, cl *unstructured.Unstructured, p bool) error {
	if cl == nil || paused(cl) == p {
		return nil
	}
	return m.c.Patch(ctx, cl, rawMerge(map[string]any{"spec": map[string]any{"paused": p}}))
}

// copyTwins creates the missing twins owners first, then for each twin writes its status (create ignores it) and
// sets its managedFields back to the old object's, translated: the create and the status write made the migrator
// a manager of every field, which would keep a field alive after its real manager stops applying it. Twins left
// incomplete by a crash are completed. An admission denial or a name taken by another object is permanent
// (create-failed); anything else is retried.
func (m *Migrator) copyTwins(ctx context.Context, g graph, id string) error {
	twins := maps.Clone(g.id.Twins)
	byUID := map[types.UID]*unstructured.Unstructured{}
	for i := range g.private {
		byUID[g.private[i].GetUID()] = &g.private[i]
	}
	for _, old := range plan.Order(g.old) {
		tw, err := m.copier.Twin(&old, twins, id)
		if err != nil {
			return &permanentError{reason: plan.ReasonCreateFailed, err: err}
		}
		created, fresh := byUID[twins[old.GetUID()].UID], false
		if created == nil {
			created, fresh = tw.Object.DeepCopy(), true
			if err := m.c.Create(ctx, created); err != nil {
				if apierrors.IsForbidden(err) || apierrors.IsInvalid(err) || apierrors.IsAlreadyExists(err) || apierrors.IsBadRequest(err) {
					return &permanentError{reason: plan.ReasonCreateFailed, err: fmt.Errorf("creating the twin of %s %s: %w", old.GetKind(), old.GetName(), err)}
				}
				return err
			}
			twins[old.GetUID()] = plan.RefOf(created)
			m.opts.Metrics.ObjectsCopied.WithLabelValues(old.GetKind()).Inc()
		}
		if st := plan.TwinStatus(tw, created.GetGeneration()); st != nil && (fresh || plan.StatusPending(&old, created)) {
			created.Object["status"] = st
			if err := m.c.Status().Update(ctx, created); err != nil {
				return fmt.Errorf("writing the status of the twin of %s %s: %w", old.GetKind(), old.GetName(), err)
			}
		}
		want := tw.Object.GetManagedFields()
		if len(want) > 0 && (fresh || plan.ManagedFieldsPending(created, want)) {
			body := map[string]any{"metadata": map[string]any{"managedFields": want, "resourceVersion": created.GetResourceVersion()}}
			if err := m.c.Patch(ctx, created, rawMerge(body)); err != nil {
				return fmt.Errorf("setting the managedFields of the twin of %s %s: %w", old.GetKind(), old.GetName(), err)
			}
		}
	}
	return nil
}

// repoint re-points, in the hosted control plane namespace, the ownerReferences of every object outside the
// mapped groups from the keys of to onto its values (optimistically: a concurrent write makes the pass retry).
func (m *Migrator) repoint(ctx context.Context, g graph, to plan.UIDMap) error {
	deps, err := m.dependents(ctx, g, to)
	if err != nil {
		return err
	}
	for _, d := range deps {
		refs, changed := plan.Repoint(d.obj.OwnerReferences, to)
		if !changed {
			continue
		}
		body := map[string]any{"metadata": map[string]any{"ownerReferences": refs, "resourceVersion": d.obj.ResourceVersion}}
		if err := m.c.Patch(ctx, d.obj, rawMerge(body)); err != nil {
			if apierrors.IsNotFound(err) {
				continue
			}
			return fmt.Errorf("re-pointing %s %s: %w", d.obj.Kind, d.obj.Name, err)
		}
		m.opts.Metrics.DependentsRepointed.WithLabelValues(d.obj.Kind).Inc()
	}
	return nil
}

// gcFinalizers are the garbage collector's own finalizers: removing them would skip its orphaning.
var gcFinalizers = []string{metav1.FinalizerOrphanDependents, metav1.FinalizerDeleteDependents}

// remove deletes objects dependents first without triggering a delete anywhere. One patch (with a
// resourceVersion precondition) sets clusterctl's delete-for-move annotation, the hint providers' webhooks and
// controllers expect on an object a move deletes, and strips every finalizer but the garbage collector's; then a
// delete with propagationPolicy Orphan and a uid precondition. The object never carries a deletionTimestamp while a
// controller finalizer is on it, so no controller ever starts its delete path (drain, Node deletion, instance
// deletion) for it; and Orphan keeps the garbage collector from cascading into anything that still names it.
// Callers guarantee nothing reconciles these objects (the legacy controllers, or the proxied ones in a rollback,
// are stopped; leftovers are paused and nothing proxied runs).
func (m *Migrator) remove(ctx context.Context, objs []unstructured.Unstructured) error {
	ordered := plan.Order(objs)
	slices.Reverse(ordered)
	for i := range ordered {
		o := &ordered[i]
		deleting := o.GetDeletionTimestamp() != nil
		keep := slices.DeleteFunc(slices.Clone(o.GetFinalizers()), func(f string) bool { return !slices.Contains(gcFinalizers, f) })
		_, marked := o.GetAnnotations()[plan.DeleteForMoveAnnotation]
		if len(keep) != len(o.GetFinalizers()) || !marked && !deleting {
			meta := map[string]any{"finalizers": keep, "resourceVersion": o.GetResourceVersion()}
			if keep == nil {
				meta["finalizers"] = nil
			}
			if !deleting {
				meta["annotations"] = map[string]any{plan.DeleteForMoveAnnotation: ""}
			}
			if err := m.c.Patch(ctx, o, rawMerge(map[string]any{"metadata": meta})); err != nil {
				if apierrors.IsNotFound(err) {
					continue
				}
				return fmt.Errorf("preparing %s %s for deletion: %w", o.GetKind(), o.GetName(), err)
			}
		}
		if deleting {
			continue // already deleted: the garbage collector finishes it
		}
		uid := o.GetUID()
		err := m.c.Delete(ctx, o, client.PropagationPolicy(metav1.DeletePropagationOrphan), client.Preconditions{UID: &uid})
		if err != nil && !apierrors.IsNotFound(err) && !apierrors.IsConflict(err) {
			return fmt.Errorf("deleting %s %s: %w", o.GetKind(), o.GetName(), err)
		}
		if err == nil {
			m.opts.Metrics.OldObjectsDeleted.WithLabelValues(o.GetKind()).Inc()
		}
	}
	return nil
}

// deleteLikeTheEnhancement is the enhancement's rollback step "delete the private objects": a plain delete, left
// to the finalizers of whatever runs. Only plan.Config.EnhancementRollbackOrder uses it, to show what it does.
func (m *Migrator) deleteLikeTheEnhancement(ctx context.Context, objs []unstructured.Unstructured) error {
	for i := range objs {
		if objs[i].GetDeletionTimestamp() != nil {
			continue
		}
		if err := m.c.Delete(ctx, &objs[i]); client.IgnoreNotFound(err) != nil {
			return err
		}
	}
	return nil
}
