package provision

import (
	"context"
	"encoding/json"
	"slices"
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

// An instance's deletion record (tombstone) is a ConfigMap in the SP's namespace, written before a DELETE starts
// the deletion of a cluster that was created with an Idempotency-Key or is deleted with one, and kept — not owned
// by the HostedCluster — for deleteKeyRetention after the last such DELETE. It holds the keys of the DELETEs that
// were answered 204, so that a replay of one of them is answered 204 again once the cluster is gone (to DCM's
// Environment Agent any 4xx is a failure), while a DELETE of an id this SP never had, or with another key, stays a
// 404. It also keeps a late replay of a keyed create from bringing the deleted cluster back. This file is the
// Writer's side; the leader's orphan sweep removes expired records (sweepTombstones, cleanup.go).

// maxDeleteKeys bounds the keys a record holds (the newest are kept).
const maxDeleteKeys = 16

// tombstoneName is the name of an instance's deletion record.
func tombstoneName(provider, id string) string {
	return render.InstanceLockName(provider, id) + ".deleted"
}

// tombstone reads an instance's deletion record; nil when there is none, it has expired, or it is not one the SP
// wrote (untrusted: reported and ignored).
func (s *Writer) tombstone(ctx context.Context, id string) (*corev1.ConfigMap, error) {
	var cm corev1.ConfigMap
	err := s.client.Get(ctx, client.ObjectKey{Namespace: s.site.Namespace(), Name: tombstoneName(s.cfg.Provider, id)}, &cm)
	switch {
	case apierrors.IsNotFound(err):
		return nil, nil
	case err != nil:
		return nil, hubapi.Failure(err, "reading the deletion record of instance %s", id)
	case expired(cm.Annotations, s.now()):
		return nil, nil
	}
	if why := untrustedTombstone(&cm, s.cfg.Provider, id, s.now(), s.cfg.DeleteKeyRetention); why != "" {
		s.log.Warn("ignored a deletion record the SP did not write", "name", cm.Name, "why", why)
		return nil, nil
	}
	return &cm, nil
}

// tombstoneSkew is how far a record's expiry may lie beyond now + deleteKeyRetention (clocks of replicas differ).
const tombstoneSkew = time.Minute

// untrustedTombstone says why a ConfigMap under an instance's deletion record name is not a record this SP wrote
// for that instance ("" when it may be trusted): anyone who may write ConfigMaps in the SP's namespace could
// otherwise make a keyed DELETE of an id never seen answer 204, or keep a keyed create refused forever. A record
// carries the SP's labels, names the instance, and expires at most deleteKeyRetention from now.
func untrustedTombstone(cm metav1.Object, provider, id string, now time.Time, retention time.Duration) string {
	l, a := cm.GetLabels(), cm.GetAnnotations()
	switch {
	case l[meta.LabelProvider] != provider || l[meta.LabelManagedBy] != meta.ManagedByValue || l[meta.LabelTombstone] != "true":
		return "not labelled as this provider's deletion record"
	case a[meta.AnnotationTombstoneOf] != id || cm.GetName() != tombstoneName(provider, id):
		return "it names another instance"
	}
	t, err := time.Parse(time.RFC3339, a[meta.AnnotationExpiresAt])
	if err != nil {
		return "no valid expiry"
	}
	if t.After(now.Add(retention + tombstoneSkew)) {
		return "it expires later than deleteKeyRetention from now"
	}
	return ""
}

func expired(annotations map[string]string, now time.Time) bool {
	t, err := time.Parse(time.RFC3339, annotations[meta.AnnotationExpiresAt])
	return err != nil || !now.Before(t)
}

func deleteKeys(annotations map[string]string) []string {
	var keys []string
	_ = json.Unmarshal([]byte(annotations[meta.AnnotationDeleteKeys]), &keys)
	return keys
}

// withKey returns keys with key appended (once; the newest maxDeleteKeys kept).
func withKey(keys []string, key string) []string {
	if key == "" || slices.Contains(keys, key) {
		return keys
	}
	keys = append(keys, key)
	return keys[max(0, len(keys)-maxDeleteKeys):]
}

// deletedBefore answers a DELETE of an instance without HostedCluster: 204 (nil) when it replays, with the same
// Idempotency-Key, a DELETE this SP answered 204 within the retention; a 404 otherwise.
func (s *Writer) deletedBefore(ctx context.Context, id, key string) error {
	notFound := clusters.NotFound("cluster %s not found", id)
	if key == "" {
		return notFound
	}
	t, err := s.tombstone(ctx, id)
	if err != nil {
		return err
	}
	if t == nil || !slices.Contains(deleteKeys(t.Annotations), key) {
		return notFound
	}
	s.log.Info("replayed DELETE of a deleted cluster answered from its deletion record", "id", id, "idempotencyKey", key)
	return nil
}

// rememberDelete writes (or extends) the deletion record of a cluster about to be deleted, when it was created with
// an Idempotency-Key or this DELETE carries one; the seed's unkeyed contract writes nothing.
func (s *Writer) rememberDelete(ctx context.Context, hc *hyperv1.HostedCluster, id, key string) error {
	createKey := hc.Annotations[meta.AnnotationIdempotencyKey]
	if key == "" && createKey == "" {
		return nil
	}
	name := tombstoneName(s.cfg.Provider, id)
	for attempt := 0; attempt < 5; attempt++ {
		now := s.now()
		expires := now.Add(s.cfg.DeleteKeyRetention).UTC().Format(time.RFC3339)
		var cur corev1.ConfigMap
		err := s.client.Get(ctx, client.ObjectKey{Namespace: s.site.Namespace(), Name: name}, &cur)
		if apierrors.IsNotFound(err) {
			keys, _ := json.Marshal(withKey(nil, key))
			labels := map[string]string{meta.LabelProvider: s.cfg.Provider, meta.LabelManagedBy: meta.ManagedByValue, meta.LabelTombstone: "true"}
			cm := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: s.site.Namespace(), Name: name, Labels: labels,
				Annotations: map[string]string{meta.AnnotationTombstoneOf: id, meta.AnnotationDeleteKeys: string(keys),
					meta.AnnotationIdempotencyKey: createKey, meta.AnnotationExpiresAt: expires}}}
			if err = s.client.Create(ctx, cm); err == nil || !apierrors.IsAlreadyExists(err) {
				return recordErr(err, id)
			}
			continue // another replica's DELETE wrote it meanwhile
		} else if err != nil {
			return recordErr(err, id)
		}
		keys := deleteKeys(cur.Annotations)
		if expired(cur.Annotations, now) {
			keys = nil // an older deletion of a reused id: its keys are no longer answered
		}
		encoded, _ := json.Marshal(withKey(keys, key))
		patch := client.MergeFromWithOptions(cur.DeepCopy(), client.MergeFromWithOptimisticLock{})
		if cur.Annotations == nil {
			cur.Annotations = map[string]string{}
		}
		if untrustedTombstone(&cur, s.cfg.Provider, id, now, s.cfg.DeleteKeyRetention) != "" {
			keys = nil // not the SP's: none of its keys were answered by this SP
			encoded, _ = json.Marshal(withKey(keys, key))
		}
		if cur.Labels == nil {
			cur.Labels = map[string]string{}
		}
		cur.Labels[meta.LabelProvider], cur.Labels[meta.LabelManagedBy], cur.Labels[meta.LabelTombstone] = s.cfg.Provider, meta.ManagedByValue, "true"
		cur.Annotations[meta.AnnotationTombstoneOf] = id
		cur.Annotations[meta.AnnotationDeleteKeys], cur.Annotations[meta.AnnotationExpiresAt] = string(encoded), expires
		if createKey != "" {
			cur.Annotations[meta.AnnotationIdempotencyKey] = createKey
		}
		if err = s.client.Patch(ctx, &cur, patch); err == nil || !apierrors.IsConflict(err) && !apierrors.IsNotFound(err) {
			return recordErr(err, id)
		}
	}
	return clusters.Unavailable("the deletion record of instance %s kept changing; retry", id)
}

func recordErr(err error, id string) error {
	if err == nil {
		return nil
	}
	return hubapi.Failure(err, "recording the deletion of instance %s", id)
}
