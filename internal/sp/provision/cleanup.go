package provision

import (
	"context"
	"fmt"
	"slices"
	"time"

	hyperv1 "github.com/openshift/hypershift/api/hypershift/v1beta1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	apimeta "k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/labels"
	clusterv1 "open-cluster-management.io/api/cluster/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/dcm-sp/acm-cluster-sp/internal/sp/hubapi"
	"github.com/dcm-sp/acm-cluster-sp/internal/sp/meta"
	"github.com/dcm-sp/acm-cluster-sp/internal/sp/render"
)

// SweepOrphans removes what belongs to this provider but to no live cluster, once older than grace (a create in
// flight on another replica has its objects for a moment before the cache shows its HostedCluster): ManagedClusters
// (a create that died between the HostedCluster's rollback and the ManagedCluster's), Agent reservations, Secrets
// made before they were owned by their HostedCluster, and instance locks of creates that died before it. known reports whether an instance has a
// HostedCluster.
func (s *Converger) SweepOrphans(ctx context.Context, known func(id string) bool, grace time.Duration) {
	now := s.now()
	idx := s.index
	for id, mc := range idx.ManagedClusters() {
		if known(id) || now.Sub(mc.CreationTimestamp.Time) < grace || mc.DeletionTimestamp != nil {
			continue
		}
		if err := s.DeleteACMObjects(ctx, id, mc.Name); err != nil {
			s.log.Warn("orphan sweep: ManagedCluster", "id", id, "error", err)
		} else {
			s.log.Info("orphan sweep: removed the ManagedCluster of an instance without HostedCluster", "id", id, "name", mc.Name)
		}
	}
	for _, id := range idx.UnownedSecretInstances(now.Add(-grace)) {
		if known(id) {
			continue
		}
		for _, name := range idx.SecretsOf(id) {
			sec := &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: s.site.Namespace(), Name: name}}
			if err := s.client.Delete(ctx, sec); err != nil && !apierrors.IsNotFound(err) {
				s.log.Warn("orphan sweep: Secret", "id", id, "name", name, "error", err)
			}
		}
		s.log.Info("orphan sweep: removed unowned Secrets of an instance without HostedCluster", "id", id)
	}
	s.sweepAgents(ctx, known, now, grace)
	s.sweepLocks(ctx, known, now, grace)
	s.sweepTombstones(ctx, now)
}

// DeleteACMObjects deletes the KlusterletAddonConfig and the ManagedCluster of a cluster — only if they are this
// instance's (labelled with its id). A no-op without manageACMObjects.
func (s *deps) DeleteACMObjects(ctx context.Context, id, name string) error {
	if !s.cfg.ManageACMObjects || name == "" {
		return nil
	}
	kac := &unstructured.Unstructured{}
	kac.SetGroupVersionKind(hubapi.KlusterletAddonConfigGVK)
	if err := s.client.Get(ctx, client.ObjectKey{Namespace: name, Name: name}, kac); err == nil && meta.InstanceID(kac.GetLabels()) == id {
		if err := s.client.Delete(ctx, kac); err != nil && !apierrors.IsNotFound(err) {
			return hubapi.Failure(err, "deleting KlusterletAddonConfig %s", name)
		}
	} else if err != nil && !apierrors.IsNotFound(err) && !apimeta.IsNoMatchError(err) {
		return hubapi.Failure(err, "reading KlusterletAddonConfig %s", name)
	}
	var mc clusterv1.ManagedCluster
	if err := s.client.Get(ctx, client.ObjectKey{Name: name}, &mc); err == nil && meta.InstanceID(mc.Labels) == id {
		uid := mc.UID
		if err := s.client.Delete(ctx, &mc, client.Preconditions{UID: &uid}); err != nil && !apierrors.IsNotFound(err) {
			return hubapi.Failure(err, "deleting ManagedCluster %s", name)
		}
	} else if err != nil && !apierrors.IsNotFound(err) && !apimeta.IsNoMatchError(err) {
		return hubapi.Failure(err, "reading ManagedCluster %s", name)
	}
	return nil
}

// RemoveStatusFinalizer removes the SP's finalizer — and only it — from a HostedCluster, with an optimistic lock
// (a conflict is retried on a fresh read), so another actor's finalizer change is never overwritten.
func (s *deps) RemoveStatusFinalizer(ctx context.Context, hc *hyperv1.HostedCluster) error {
	cur := hc.DeepCopy()
	for attempt := 0; attempt < 5; attempt++ {
		if !slices.Contains(cur.Finalizers, meta.FinalizerStatus) {
			return nil
		}
		patch := client.MergeFromWithOptions(cur.DeepCopy(), client.MergeFromWithOptimisticLock{})
		cur.Finalizers = slices.DeleteFunc(slices.Clone(cur.Finalizers), func(f string) bool { return f == meta.FinalizerStatus })
		err := s.client.Patch(ctx, cur, patch)
		switch {
		case err == nil || apierrors.IsNotFound(err):
			return nil
		case !apierrors.IsConflict(err):
			return err
		}
		cur = &hyperv1.HostedCluster{}
		if err := s.client.Get(ctx, client.ObjectKeyFromObject(hc), cur); err != nil {
			return client.IgnoreNotFound(err)
		}
		if cur.UID != hc.UID {
			return nil // a newer cluster of the same name: not ours to touch
		}
	}
	return fmt.Errorf("HostedCluster %s kept changing", hc.Name)
}

// sweepLocks removes this provider's locks that no HostedCluster owns, of instances without one, once older than
// grace: creates that died after taking the lock. Owned locks go with their HostedCluster (garbage collector).
func (s *Converger) sweepLocks(ctx context.Context, known func(id string) bool, now time.Time, grace time.Duration) {
	var list metav1.PartialObjectMetadataList
	list.SetGroupVersionKind(corev1.SchemeGroupVersion.WithKind("ConfigMapList"))
	sel := labels.SelectorFromSet(labels.Set{meta.LabelProvider: s.cfg.Provider})
	if err := s.client.List(ctx, &list, client.InNamespace(s.site.Namespace()), client.MatchingLabelsSelector{Selector: sel}); err != nil {
		s.log.Warn("orphan sweep: listing instance locks", "error", err)
		return
	}
	for i := range list.Items {
		m := &list.Items[i]
		id := meta.InstanceID(m.Labels)
		if len(m.OwnerReferences) > 0 || id == "" || known(id) || now.Sub(m.CreationTimestamp.Time) < grace || m.Name != render.InstanceLockName(s.cfg.Provider, id) {
			continue
		}
		uid := m.UID
		lock := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: m.Namespace, Name: m.Name}}
		if err := s.client.Delete(ctx, lock, client.Preconditions{UID: &uid}); err != nil && !apierrors.IsNotFound(err) && !apierrors.IsConflict(err) {
			s.log.Warn("orphan sweep: instance lock", "id", id, "error", err)
			continue
		}
		s.log.Info("orphan sweep: removed the lock of a create that died before its HostedCluster", "id", id)
	}
}

// sweepTombstones removes this provider's expired deletion records. A ConfigMap labelled as one that the SP did not
// write (another name, another instance, an expiry beyond the retention) is left alone and reported.
func (s *Converger) sweepTombstones(ctx context.Context, now time.Time) {
	var list metav1.PartialObjectMetadataList
	list.SetGroupVersionKind(corev1.SchemeGroupVersion.WithKind("ConfigMapList"))
	if err := s.client.List(ctx, &list, client.InNamespace(s.site.Namespace()),
		client.MatchingLabels{meta.LabelProvider: s.cfg.Provider, meta.LabelTombstone: "true"}); err != nil {
		s.log.Warn("orphan sweep: listing deletion records", "error", err)
		return
	}
	for i := range list.Items {
		m := &list.Items[i]
		id := m.Annotations[meta.AnnotationTombstoneOf]
		if why := untrustedTombstone(m, s.cfg.Provider, id, now, s.cfg.DeleteKeyRetention); why != "" {
			s.log.Warn("orphan sweep: left alone a deletion record the SP did not write", "name", m.Name, "why", why)
			continue
		}
		if !expired(m.Annotations, now) {
			continue
		}
		uid := m.UID
		cm := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: m.Namespace, Name: m.Name}}
		if err := s.client.Delete(ctx, cm, client.Preconditions{UID: &uid}); err != nil && !apierrors.IsNotFound(err) && !apierrors.IsConflict(err) {
			s.log.Warn("orphan sweep: deletion record", "name", m.Name, "error", err)
			continue
		}
		s.log.Info("orphan sweep: removed an expired deletion record", "id", m.Annotations[meta.AnnotationTombstoneOf])
	}
}
