package provision

import (
	"context"
	"time"

	hyperv1 "github.com/openshift/hypershift/api/hypershift/v1beta1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
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
// spec is a conflict. Two names for one id can therefore never become two HostedClusters. This file is the
// Writer's side; the Converger gives the lock to its HostedCluster (ensureInstanceLock, converge.go) and the
// orphan sweep removes the locks of creates that died (sweepLocks, cleanup.go).

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
