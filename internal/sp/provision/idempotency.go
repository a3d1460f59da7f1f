package provision

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"

	"github.com/google/uuid"

	"github.com/dcm-sp/acm-cluster-sp/internal/sp/clusters"
	"github.com/dcm-sp/acm-cluster-sp/internal/sp/wire"
)

// errDifferentSpec marks a conflict of an instance id that exists (or is being created) with another spec: a 409
// under ?id=, a 422 under an Idempotency-Key reused for another request.
var errDifferentSpec = fmt.Errorf("the instance has another spec: %w", clusters.ErrInstanceKnown)

func differentSpec(format string, args ...any) error {
	return &clusters.Error{Kind: clusters.KindConflict, Message: fmt.Sprintf(format, args...), Err: errDifferentSpec}
}

// Create provisions a cluster. created is false for an idempotent replay (200). id is the request's ?id= ("" when
// absent), key its Idempotency-Key ("" when absent).
//
// Without ?id= the instance id is derived from the key (clusters.KeyID), so the same key names the same cluster on
// every replica and after restarts: the key's record is the cluster itself (its id, and the key in an annotation
// of its HostedCluster), for as long as it exists. A replay with the same spec answers 200 with it; the same key
// with another spec is a 422 (the Idempotency-Key draft's answer for a key reused with another payload). Without
// either, the id is a fresh UUID; with ?id=, the id decides as it always did (the key is only recorded).
func (s *Writer) Create(ctx context.Context, id, key string, body []byte) (*clusters.Cluster, bool, error) {
	derived := false
	if key != "" {
		if err := clusters.CheckIdempotencyKey(key); err != nil {
			return nil, false, err
		}
	}
	switch {
	case id == "" && key != "":
		id, derived = clusters.KeyID(key), true
	case id == "":
		id = uuid.NewString()
	default:
		if err := clusters.CheckID(id); err != nil {
			return nil, false, err
		}
	}
	spec, err := wire.ParseSpec(body, s.cfg.Spec)
	if err != nil {
		return nil, false, err
	}
	if err := ready(s.site); err != nil {
		return nil, false, err
	}
	if !slices.Contains(s.cfg.Platforms(), string(spec.Platform)) {
		return nil, false, clusters.Unprocessable("platform %q is not available on this provider (supported: %s)", spec.Platform, strings.Join(orNone(s.cfg.Platforms()), ", "))
	}
	if derived {
		if err := s.notDeleted(ctx, id, key); err != nil {
			return nil, false, err
		}
	}
	c, created, err := s.create(ctx, id, key, spec)
	if err != nil && clusters.KindOf(err) == clusters.KindConflict && !errors.Is(err, errDifferentSpec) {
		c, err = s.confirmReplay(ctx, id, spec, err)
	}
	if derived && errors.Is(err, errDifferentSpec) {
		err = &clusters.Error{Kind: clusters.KindUnprocessable, Err: err,
			Message: fmt.Sprintf("Idempotency-Key %q was used for a different request: instance %s exists with another spec", key, id)}
	}
	if err != nil {
		return nil, false, err
	}
	present(s.cfg, c)
	return c, created, nil
}

// confirmReplay answers a conflict met by a create racing another create of the same instance — another replica's,
// or this one's before the cache caught up — which can meet that create's objects half made (ACM's namespace of the
// name, say, before this replica sees the HostedCluster). The instance's own HostedCluster, read from the API
// server, decides: the same spec is a replay (200), anything else keeps the conflict.
func (s *Writer) confirmReplay(ctx context.Context, id string, spec *clusters.Spec, conflict error) (*clusters.Cluster, error) {
	hc, err := s.liveHostedCluster(ctx, id)
	if err != nil || hc == nil {
		return nil, conflict
	}
	return s.replay(s.conv.liveView(ctx, id, hc), spec)
}

// notDeleted refuses a create under a key-derived id whose cluster was created and deleted: a late replay of the
// create must not bring back, under DCM's back, a cluster DCM deleted. The deletion record tells (tombstone.go).
func (s *Writer) notDeleted(ctx context.Context, id, key string) error {
	if v, ok := s.index.Get(id); ok && v.HostedCluster != nil {
		return nil // it exists: a replay or a conflict, decided by the create
	}
	t, err := s.tombstone(ctx, id)
	if err != nil || t == nil {
		return err
	}
	return &clusters.Error{Kind: clusters.KindConflict, Err: clusters.ErrInstanceKnown,
		Message: fmt.Sprintf("instance %s of Idempotency-Key %q was deleted; a deleted instance is not created again", id, key)}
}
