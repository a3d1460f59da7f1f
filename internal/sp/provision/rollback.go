package provision

import (
	"context"
	"sync"
	"time"

	hyperv1 "github.com/openshift/hypershift/api/hypershift/v1beta1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"sigs.k8s.io/controller-runtime/pkg/client"
)

// changes records what one create changed on the hub, so that its rollback undoes exactly that. Children written in
// parallel record themselves concurrently (add); it is read once they are done.
type changes struct {
	mu      sync.Mutex
	created []client.Object // in creation order
	agents  []string        // Agents this request labelled (not those a previous attempt had reserved)
}

// add records a created object (nil-safe: convergence records nothing).
func (ch *changes) add(o client.Object) {
	if ch == nil {
		return
	}
	ch.mu.Lock()
	ch.created = append(ch.created, o)
	ch.mu.Unlock()
}

// lock is the instance lock this create took, if it did.
func (ch *changes) lock() *corev1.ConfigMap {
	if ch == nil {
		return nil
	}
	ch.mu.Lock()
	defer ch.mu.Unlock()
	for _, o := range ch.created {
		if cm, ok := o.(*corev1.ConfigMap); ok {
			return cm
		}
	}
	return nil
}

// rollback deletes, in reverse order, what this request created and releases the Agents it reserved. A
// HostedCluster loses only the SP's own finalizer (optimistic lock), never the operator's. Once the HostedCluster
// is deleted, the ManagedCluster made for it is deleted whoever created it: the leader's reconciler may have
// written it first (this request then found it there), and checks the HostedCluster again only after its write.
// What the create remembered of the instance is forgotten.
func (s *Writer) rollback(ctx context.Context, id string, ch *changes) {
	rctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 30*time.Second)
	defer cancel()
	defer s.conv.Forget(id)
	for i := len(ch.created) - 1; i >= 0; i-- {
		o := ch.created[i]
		hc, isHC := o.(*hyperv1.HostedCluster)
		if isHC {
			if err := s.RemoveStatusFinalizer(rctx, hc); err != nil {
				s.log.Error("rollback: could not remove the status finalizer", "id", id, "name", hc.Name, "error", err)
			}
		}
		if err := s.deleteCreated(rctx, o); err != nil {
			s.log.Error("rollback: could not delete", "id", id, "kind", kindOf(o), "name", o.GetName(), "error", err)
		}
		if isHC && s.cfg.ManageACMObjects {
			if err := s.deleteManagedClusterOf(rctx, hc.Name, hc.UID); err != nil {
				s.log.Error("rollback: could not delete the ManagedCluster", "id", id, "name", hc.Name, "error", err)
			}
		}
	}
	for _, name := range ch.agents {
		if err := s.releaseAgent(rctx, name, id); err != nil {
			s.log.Error("rollback: could not release Agent", "id", id, "agent", name, "error", err)
		}
	}
}

// deleteCreated deletes an object this request created (preconditioned on its UID so a newer object of the same
// name is never touched).
func (s *Writer) deleteCreated(ctx context.Context, o client.Object) error {
	opts := []client.DeleteOption{client.PropagationPolicy("Background")}
	if uid := o.GetUID(); uid != "" {
		opts = append(opts, client.Preconditions{UID: &uid})
	}
	if err := s.client.Delete(ctx, o, opts...); err != nil && !apierrors.IsNotFound(err) && !apierrors.IsConflict(err) {
		return err
	}
	return nil
}
