package provision

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"sync"

	hyperv1 "github.com/openshift/hypershift/api/hypershift/v1beta1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	apimeta "k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/utils/ptr"
	clusterv1 "open-cluster-management.io/api/cluster/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/dcm-sp/acm-cluster-sp/internal/sp/clusters"
	"github.com/dcm-sp/acm-cluster-sp/internal/sp/hubapi"
	"github.com/dcm-sp/acm-cluster-sp/internal/sp/meta"
	"github.com/dcm-sp/acm-cluster-sp/internal/sp/render"
)

// Converge drives a live HostedCluster's children toward the spec stored on it: missing Secrets and the NodePool
// are (re)created with an ownerReference to it, its ManagedCluster and KlusterletAddonConfig exist, its Agent
// reservations are complete, and objects made before the provider label or ownerReferences existed are adopted.
// A cluster being deleted is left alone. Secret contents are read (pull secret) or generated (etcd key) only when
// that Secret has to be recreated.
func (s *Converger) Converge(ctx context.Context, hc *hyperv1.HostedCluster) error {
	if hc.DeletionTimestamp != nil {
		return nil
	}
	id := meta.InstanceID(hc.Labels)
	if err := s.adopt(ctx, hc); err != nil {
		return err
	}
	spec, err := clusters.ParseStoredSpec([]byte(hc.Annotations[meta.AnnotationSpec]), s.cfg.Spec)
	if err != nil {
		return fmt.Errorf("the spec stored on HostedCluster %s is unusable (%v); not converging it", hc.Name, err)
	}
	// Only a platform of the table, and the one the stored spec names, is rendered: children of another platform's
	// HostedCluster would be guesses (its status reports it; an update of it is refused).
	if p, ok := clusters.PlatformOf(hc.Spec.Platform.Type); !ok || p != spec.Platform {
		return fmt.Errorf("HostedCluster %s is of platform type %q, which this SP does not serve as its stored spec's %s; not converging it",
			hc.Name, hc.Spec.Platform.Type, spec.Platform)
	}
	idx := s.index
	now := s.now()
	// missing: neither in the index nor created by this process a moment ago (expectations).
	missing := func(c child, shown bool) bool { return !s.expected.pending(id, c, shown, now) && !shown }
	_, hasPullSecret := idx.Secret(render.PullSecretName(hc.Name))
	_, hasEtcdKey := idx.Secret(render.EtcdKeySecretName(hc.Name))
	needPullSecret := missing(child{kindSecret, render.PullSecretName(hc.Name)}, hasPullSecret)
	needEtcdKey := missing(child{kindSecret, render.EtcdKeySecretName(hc.Name)}, hasEtcdKey)
	if needEtcdKey && len(hc.Status.Conditions) > 0 {
		s.log.Warn("the etcd encryption key Secret of a started cluster is missing; creating a new key (data encrypted with the lost one cannot be read)", "id", id, "name", hc.Name)
	}
	v, _ := idx.Get(id)
	in, err := s.Desired(ctx, id, spec, Release{Image: hc.Spec.Release.Image, OpenShiftVersion: hc.Annotations[meta.AnnotationOpenShiftVersion],
		InfraID: hc.Spec.InfraID, Policy: hc.Spec.ControllerAvailabilityPolicy},
		Fill{PullSecret: needPullSecret, EtcdKey: needEtcdKey,
			HostingCluster: s.cfg.ManageACMObjects && missing(child{kindManagedCluster, hc.Name}, v.ManagedCluster != nil)})
	if err != nil {
		return err
	}
	if err := s.EnsureChildren(ctx, hc, spec, render.Render(in), nil); err != nil {
		if errors.Is(err, errDeleting) {
			return nil
		}
		return err
	}
	return s.operate(ctx, hc, spec, in)
}

// errDeleting: the API server says the HostedCluster is being deleted or gone, though the cache did not yet.
var errDeleting = errors.New("the HostedCluster is being deleted")

// stillLive confirms on the API server that hc is neither gone nor being deleted (errDeleting). The reconciler
// works from caches fed by separate watches: a NodePool the operator removed for a deletion can leave the cache
// before the HostedCluster's deletion reaches it, and would be recreated — and then left behind.
func (s *Converger) stillLive(ctx context.Context, hc *hyperv1.HostedCluster) error {
	var live hyperv1.HostedCluster
	if err := s.client.Get(ctx, client.ObjectKeyFromObject(hc), &live); err != nil {
		if apierrors.IsNotFound(err) {
			return errDeleting
		}
		return err
	}
	if live.DeletionTimestamp != nil || live.UID != hc.UID {
		return errDeleting
	}
	return nil
}

// EnsureChildren creates whichever of the rendered children does not exist yet, each owned by hc where it can be,
// and completes the Agent reservation. ch, when set, records what was created (a create's rollback).
func (s *Converger) EnsureChildren(ctx context.Context, hc *hyperv1.HostedCluster, spec *clusters.Spec, objs render.Objects, ch *changes) error {
	id := meta.InstanceID(hc.Labels)
	// What is ensured is remembered, what a create ensured too (the reconciler then neither reads the lock nor writes
	// the KlusterletAddonConfig again); every replica forgets an instance once its index no longer knows it
	// (Services.IndexChanged), so a create served by a follower leaves nothing behind.
	taken := ch.lock()
	idx := s.index
	v, _ := idx.Get(id)
	now := s.now()
	// A child this process created a moment ago and the index does not show yet is neither created nor adopted again.
	expected := func(o client.Object, shown bool) bool {
		return s.expected.pending(id, child{kindOf(o), o.GetName()}, shown, now)
	}
	// The lock's ownership and the children do not depend on one another: they are written in parallel (a create's
	// latency is then one round trip for all of them, not one per object).
	steps := []func() error{func() error { return s.ensureInstanceLock(ctx, hc, taken) }}
	creates := false
	for _, sec := range objs.Secrets {
		existing, ok := idx.Secret(sec.Name)
		if expected(sec, ok) {
			continue
		}
		if ok {
			steps = append(steps, func() error { return s.adoptChild(ctx, hc, &corev1.Secret{}, existing.ObjectMeta) })
			continue
		}
		if sec.Data == nil && sec.StringData == nil {
			continue // not rendered with content: it existed when Converge looked
		}
		steps = append(steps, func() error { return s.createChild(ctx, hc, sec, ch) })
		creates = true
	}
	switch np := nodePoolOf(v); {
	case expected(objs.NodePool, np != nil):
	case np != nil:
		steps = append(steps, func() error { return s.adoptChild(ctx, hc, &hyperv1.NodePool{}, np.ObjectMeta) })
	default:
		steps = append(steps, func() error { return s.createChild(ctx, hc, objs.NodePool, ch) })
		creates = true
	}
	if objs.ManagedCluster != nil && !expected(objs.ManagedCluster, v.ManagedCluster != nil) && v.ManagedCluster == nil {
		steps = append(steps, func() error { return s.createManagedCluster(ctx, hc, objs, ch) })
		creates = true
	}
	// Before the reconciler (re)creates anything, the API server confirms the cluster is not being deleted (a
	// create's own request has just written it).
	if creates && ch == nil {
		if err := s.stillLive(ctx, hc); err != nil {
			return err
		}
		// What the reconciler recreates makes HyperShift act in the control plane namespace (and recreate it if it
		// is gone): it must still be this cluster's alone.
		if err := s.checkControlPlaneNamespace(ctx, hc.Name, hc); err != nil {
			return err
		}
	}
	if err := parallel(steps...); err != nil {
		return err
	}
	if agentsOf(spec.Platform) {
		if err := s.ReserveAgents(ctx, id, spec, int(spec.MaxReplicas(s.cfg.DefaultWorkerCount)), ch); err != nil {
			return err
		}
	}
	return s.ensureKlusterletAddonConfig(ctx, id, hc)
}

// nodePoolOf is the cluster's NodePool in the cache (the SP creates one per cluster), deleting or not.
func nodePoolOf(v clusters.View) *hyperv1.NodePool {
	if len(v.NodePools) == 0 {
		return nil
	}
	return v.NodePools[0]
}

// createChild creates one namespaced child owned by hc. AlreadyExists is fine when the object is this instance's
// (a concurrent convergence won); someone else's object of that name is a conflict.
func (s *Converger) createChild(ctx context.Context, hc *hyperv1.HostedCluster, o client.Object, ch *changes) error {
	o.SetOwnerReferences(appendOwner(o.GetOwnerReferences(), hc))
	id := meta.InstanceID(hc.Labels)
	err := s.expectedCreate(ctx, id, o)
	switch {
	case err == nil:
		ch.add(o)
		return nil
	case apierrors.IsAlreadyExists(err):
		existing := o.DeepCopyObject().(client.Object)
		if gerr := s.client.Get(ctx, client.ObjectKeyFromObject(o), existing); gerr != nil {
			return s.unexpected(id, o, hubapi.Failure(gerr, "reading %s %s", kindOf(o), o.GetName()))
		}
		if other := meta.InstanceID(existing.GetLabels()); other != id {
			return s.unexpected(id, o, nameTaken(hc.Name, other, kindOf(o)))
		}
		return nil
	case apierrors.IsInvalid(err) || apierrors.IsForbidden(err) && isAdmissionDenial(err):
		return hubapi.Rejected(err, kindOf(o), o.GetName())
	}
	return hubapi.Failure(err, "creating %s %s", kindOf(o), o.GetName())
}

// createManagedCluster creates the cluster-scoped ManagedCluster (not ownable by a namespaced HostedCluster),
// annotated with hc's UID. The reconciler (ch == nil) then confirms hc is still live and, if it is not, deletes
// what it just created: a create's rollback may have deleted hc between the reconciler's first look and this write.
// With the rollback's own sweep (deleteManagedClusterOf, after it deleted hc) no ManagedCluster of a gone
// HostedCluster survives: a write that lands before the sweep's read is swept, one after it sees hc gone.
func (s *Converger) createManagedCluster(ctx context.Context, hc *hyperv1.HostedCluster, objs render.Objects, ch *changes) error {
	id := meta.InstanceID(hc.Labels)
	mc := objs.ManagedCluster.DeepCopy()
	if mc.Annotations == nil {
		mc.Annotations = map[string]string{}
	}
	mc.Annotations[meta.AnnotationHostedClusterUID] = string(hc.UID)
	err := s.expectedCreate(ctx, id, mc)
	switch {
	case err == nil:
		ch.add(mc)
		if ch == nil {
			if lerr := s.stillLive(ctx, hc); errors.Is(lerr, errDeleting) {
				if derr := s.deleteManagedClusterOf(ctx, mc.Name, hc.UID); derr != nil {
					return derr
				}
				return errDeleting
			}
		}
		return nil
	case apimeta.IsNoMatchError(err):
		return nil // no ACM on this hub
	case apierrors.IsAlreadyExists(err):
		existing := mc.DeepCopy()
		if gerr := s.client.Get(ctx, client.ObjectKeyFromObject(mc), existing); gerr == nil && meta.InstanceID(existing.Labels) != id {
			return s.unexpected(id, mc, nameTaken(mc.Name, meta.InstanceID(existing.Labels), "ManagedCluster"))
		}
		return nil
	case apierrors.IsInvalid(err) || apierrors.IsForbidden(err) && isAdmissionDenial(err):
		return hubapi.Rejected(err, "ManagedCluster", mc.Name)
	}
	return hubapi.Failure(err, "creating ManagedCluster %s", mc.Name)
}

// expectedCreate creates child o of instance id and expects it in the index until the index shows it
// (expectations). The expectation is in place before the write, so the informer's event cannot come first. An
// object already there is expected too: it exists, so the cache will show it (a caller that finds it someone else's,
// or cannot tell, drops the expectation: unexpected); only a failed write ends it.
func (s *Converger) expectedCreate(ctx context.Context, id string, o client.Object) error {
	c := child{kindOf(o), o.GetName()}
	s.expected.add(id, c, s.now())
	err := s.client.Create(ctx, o)
	if err != nil && !apierrors.IsAlreadyExists(err) {
		s.expected.drop(id, c)
	}
	return err
}

// unexpected ends the expectation of child o of instance id, found already there but not known to be the
// instance's (someone else's, or unreadable), and returns err, which says so.
func (s *Converger) unexpected(id string, o client.Object, err error) error {
	s.expected.drop(id, child{kindOf(o), o.GetName()})
	return err
}

// deleteManagedClusterOf deletes the ManagedCluster name if it was created for the HostedCluster uid (its
// annotation), preconditioned on the ManagedCluster's own UID; anything else of that name is left alone.
func (s *deps) deleteManagedClusterOf(ctx context.Context, name string, uid types.UID) error {
	mc := &clusterv1.ManagedCluster{}
	if err := s.client.Get(ctx, client.ObjectKey{Name: name}, mc); err != nil {
		if apierrors.IsNotFound(err) || apimeta.IsNoMatchError(err) {
			return nil
		}
		return hubapi.Failure(err, "reading ManagedCluster %s", name)
	}
	if mc.Annotations[meta.AnnotationHostedClusterUID] != string(uid) {
		return nil
	}
	mcUID := mc.UID
	if err := s.client.Delete(ctx, mc, client.Preconditions{UID: &mcUID}); err != nil && !apierrors.IsNotFound(err) && !apierrors.IsConflict(err) {
		return hubapi.Failure(err, "deleting ManagedCluster %s", name)
	}
	return nil
}

// ensureKlusterletAddonConfig creates the cluster's KAC once ACM's namespace for it exists (when ACM objects are
// managed and the KAC API is served).
func (s *Converger) ensureKlusterletAddonConfig(ctx context.Context, id string, hc *hyperv1.HostedCluster) error {
	if !s.cfg.ManageACMObjects || !s.catalog.ServesKlusterletAddonConfig() {
		return nil
	}
	s.mu.Lock()
	done := s.kacDone[id]
	s.mu.Unlock()
	if done || !s.catalog.ClusterNamespaceExists(ctx, hc.Name) {
		return nil
	}
	if v, _ := s.index.Get(id); v.ManagedCluster == nil {
		return nil // not our ManagedCluster (yet): nothing to configure
	}
	kac := render.KlusterletAddonConfig(s.cfg.Provider, id, hc.Name)
	if err := s.client.Create(ctx, kac); err != nil && !apierrors.IsAlreadyExists(err) {
		if apimeta.IsNoMatchError(err) {
			return nil
		}
		return fmt.Errorf("creating KlusterletAddonConfig %s: %w", hc.Name, err)
	}
	s.mu.Lock()
	s.kacDone[id] = true
	s.mu.Unlock()
	return nil
}

// adopt labels a HostedCluster created before the provider label existed with this SP's provider.
func (s *Converger) adopt(ctx context.Context, hc *hyperv1.HostedCluster) error {
	if _, ok := hc.Labels[meta.LabelProvider]; ok {
		return nil
	}
	return s.patchMeta(ctx, &hyperv1.HostedCluster{}, hc.ObjectMeta, map[string]any{"labels": map[string]string{meta.LabelProvider: s.cfg.Provider}})
}

// adoptChild gives an existing child what current versions create it with: the provider label and an
// ownerReference to its HostedCluster.
func (s *Converger) adoptChild(ctx context.Context, hc *hyperv1.HostedCluster, kind client.Object, m metav1.ObjectMeta) error {
	if m.DeletionTimestamp != nil || meta.InstanceID(m.Labels) != meta.InstanceID(hc.Labels) {
		return nil // going away, or another instance's (its own reconcile handles it)
	}
	patch := map[string]any{}
	if _, ok := m.Labels[meta.LabelProvider]; !ok {
		patch["labels"] = map[string]string{meta.LabelProvider: s.cfg.Provider}
	}
	if !ownedBy(m.OwnerReferences, hc) {
		patch["ownerReferences"] = appendOwner(m.OwnerReferences, hc)
	}
	if len(patch) == 0 {
		return nil
	}
	return s.patchMeta(ctx, kind, m, patch)
}

// patchMeta merge-patches metadata fields, conditional on the resourceVersion the decision was made on.
func (s *Converger) patchMeta(ctx context.Context, kind client.Object, m metav1.ObjectMeta, fields map[string]any) error {
	fields["resourceVersion"] = m.ResourceVersion
	body, err := json.Marshal(map[string]any{"metadata": fields})
	if err != nil {
		return err
	}
	kind.SetNamespace(m.Namespace)
	kind.SetName(m.Name)
	if err := s.client.Patch(ctx, kind, client.RawPatch(types.MergePatchType, body)); err != nil && !apierrors.IsNotFound(err) {
		if apierrors.IsConflict(err) {
			return fmt.Errorf("%s %s changed meanwhile; retrying: %w", kindOf(kind), m.Name, err)
		}
		return fmt.Errorf("adopting %s %s: %w", kindOf(kind), m.Name, err)
	}
	return nil
}

func ownedBy(refs []metav1.OwnerReference, hc *hyperv1.HostedCluster) bool {
	for _, r := range refs {
		if r.UID == hc.UID {
			return true
		}
	}
	return false
}

// appendOwner adds hc as a (non-controller) owner. blockOwnerDeletion stays unset: setting it would need update on
// hostedclusters/finalizers (OwnerReferencesPermissionEnforcement), and nothing waits for foreground deletion.
func appendOwner(refs []metav1.OwnerReference, hc *hyperv1.HostedCluster) []metav1.OwnerReference {
	if ownedBy(refs, hc) {
		return refs
	}
	return append(append([]metav1.OwnerReference(nil), refs...), metav1.OwnerReference{
		APIVersion: hyperv1.GroupVersion.String(), Kind: "HostedCluster", Name: hc.Name, UID: hc.UID, Controller: ptr.To(false),
	})
}

// parallel runs the steps concurrently and returns the error of the first step (in argument order) that failed.
func parallel(steps ...func() error) error {
	if len(steps) == 1 {
		return steps[0]()
	}
	errs := make([]error, len(steps))
	var wg sync.WaitGroup
	for i, step := range steps {
		wg.Add(1)
		go func() {
			defer wg.Done()
			errs[i] = step()
		}()
	}
	wg.Wait()
	for _, err := range errs {
		if err != nil {
			return err
		}
	}
	return nil
}

// ensureInstanceLock makes a live cluster's lock exist, owned by its HostedCluster alone and carrying its stored
// spec. Done once per HostedCluster per process (the garbage collector, not the SP, removes it).
// taken is the lock this create has just taken, if any (no need to read it back).
func (s *Converger) ensureInstanceLock(ctx context.Context, hc *hyperv1.HostedCluster, taken *corev1.ConfigMap) error {
	id := meta.InstanceID(hc.Labels)
	s.mu.Lock()
	done := s.lockDone[id] == hc.UID
	s.mu.Unlock()
	if done {
		return nil
	}
	var err error
	if taken != nil {
		err = s.ownLock(ctx, taken, hc)
	} else {
		// Read first: the lock almost always exists (every create takes it), so this is one call, not two.
		lock := render.InstanceLock(s.cfg.Provider, s.site.Namespace(), id, hc.Annotations[meta.AnnotationSpec])
		var got corev1.ConfigMap
		if err = s.client.Get(ctx, client.ObjectKeyFromObject(lock), &got); apierrors.IsNotFound(err) {
			lock.OwnerReferences = appendOwner(nil, hc)
			err = s.client.Create(ctx, lock)
			if apierrors.IsAlreadyExists(err) {
				err = s.client.Get(ctx, client.ObjectKeyFromObject(lock), &got)
			} else if err == nil {
				got = *lock
			}
		}
		if err == nil {
			err = s.ownLock(ctx, &got, hc)
		}
	}
	if err != nil {
		return fmt.Errorf("the lock of instance %s: %w", id, err)
	}
	s.mu.Lock()
	s.lockDone[id] = hc.UID
	s.mu.Unlock()
	return nil
}

// ownLock makes hc the lock's only owner and its spec the lock's, conditional on the version read.
func (s *Converger) ownLock(ctx context.Context, lock *corev1.ConfigMap, hc *hyperv1.HostedCluster) error {
	if len(lock.OwnerReferences) == 1 && ownedBy(lock.OwnerReferences, hc) && lock.Annotations[meta.AnnotationSpec] == hc.Annotations[meta.AnnotationSpec] {
		return nil
	}
	return s.patchMeta(ctx, &corev1.ConfigMap{}, lock.ObjectMeta, map[string]any{
		"ownerReferences": appendOwner(nil, hc),
		"annotations":     map[string]string{meta.AnnotationSpec: hc.Annotations[meta.AnnotationSpec]},
	})
}
