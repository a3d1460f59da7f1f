package provision

import (
	"context"
	"fmt"
	"time"

	hyperv1 "github.com/openshift/hypershift/api/hypershift/v1beta1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/dcm-sp/acm-cluster-sp/internal/sp/clusters"
	"github.com/dcm-sp/acm-cluster-sp/internal/sp/hubapi"
	"github.com/dcm-sp/acm-cluster-sp/internal/sp/meta"
	"github.com/dcm-sp/acm-cluster-sp/internal/sp/render"
)

// The instance lock (render.InstanceLock) makes an instance id a hub-side reservation: a create first creates the
// ConfigMap named after the id, then the HostedCluster; the HostedCluster then owns the lock, so it goes with the
// cluster. The replica whose cache has not seen another replica's create yet learns of it here, from the API
// server: the same spec is a retry (it goes on, and the HostedCluster's AlreadyExists makes it a replay), another
// spec is a conflict. Two names for one id can therefore never become two HostedClusters.

// staleLockAge is how long an unowned lock is taken to be a create in flight; older, its create died before its
// HostedCluster existed.
const staleLockAge = 2 * time.Minute

// lockInstance takes the instance's lock for this create (recorded in ch for the rollback), or decides from an
// existing one: nil to go on (this spec's lock), a conflict otherwise.
func (s *Writer) lockInstance(ctx context.Context, id string, spec *clusters.Spec, ch *changes) error {
	for attempt := 0; ; attempt++ {
		lock := render.InstanceLock(s.cfg.Provider, s.site.Namespace(), id, spec.JSON)
		err := s.client.Create(ctx, lock)
		switch {
		case err == nil:
			ch.add(lock)
			return nil
		case !apierrors.IsAlreadyExists(err):
			return hubapi.Failure(err, "creating the lock of instance %s", id)
		}
		var got corev1.ConfigMap
		if err := s.client.Get(ctx, client.ObjectKeyFromObject(lock), &got); err != nil {
			if apierrors.IsNotFound(err) && attempt < 3 {
				continue // released meanwhile
			}
			return hubapi.Failure(err, "reading the lock of instance %s", id)
		}
		if got.Annotations[meta.AnnotationSpec] == spec.JSON && got.DeletionTimestamp == nil {
			return nil // this request's retry, or the same request on another replica: the HostedCluster decides
		}
		stale, err := s.staleLock(ctx, &got)
		if err != nil {
			return err
		}
		if !stale || attempt >= 3 {
			if len(got.OwnerReferences) == 0 {
				return differentSpec("instance %s is being created with a different spec", id)
			}
			return differentSpec("instance %s exists with a different spec", id)
		}
		if err := s.deleteCreated(ctx, &got); err != nil {
			return hubapi.Failure(err, "removing the stale lock of instance %s", id)
		}
		s.log.Info("removed a stale instance lock", "id", id)
	}
}

// staleLock reports whether a lock no longer guards anything: its HostedCluster is gone (the garbage collector has
// not caught up yet), or it never got one and is older than a create takes.
func (s *Writer) staleLock(ctx context.Context, lock *corev1.ConfigMap) (bool, error) {
	if lock.DeletionTimestamp != nil {
		return true, nil
	}
	if len(lock.OwnerReferences) == 0 {
		return s.now().Sub(lock.CreationTimestamp.Time) > staleLockAge, nil
	}
	for _, ref := range lock.OwnerReferences {
		var hc metav1.PartialObjectMetadata
		hc.SetGroupVersionKind(hyperv1.GroupVersion.WithKind("HostedCluster"))
		err := s.client.Get(ctx, client.ObjectKey{Namespace: lock.Namespace, Name: ref.Name}, &hc)
		switch {
		case err == nil && hc.UID == ref.UID:
			return false, nil
		case err != nil && !apierrors.IsNotFound(err):
			return false, hubapi.Failure(err, "reading HostedCluster %s", ref.Name)
		}
	}
	return true, nil
}

// ensureInstanceLock makes a live cluster's lock exist, owned by its HostedCluster alone and carrying its stored
// spec. Done once per HostedCluster per process when remembered (the garbage collector, not the SP, removes it).
// taken is the lock this create has just taken, if any (no need to read it back).
func (s *Converger) ensureInstanceLock(ctx context.Context, hc *hyperv1.HostedCluster, taken *corev1.ConfigMap, remember bool) error {
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
	if remember {
		s.mu.Lock()
		s.lockDone[id] = hc.UID
		s.mu.Unlock()
	}
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
