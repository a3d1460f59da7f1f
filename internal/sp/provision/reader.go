package provision

import (
	"context"
	"log/slog"
	"sync"
	"sync/atomic"
	"time"

	"github.com/dcm-sp/acm-cluster-sp/internal/sp/clusters"
	"github.com/dcm-sp/acm-cluster-sp/internal/sp/hubapi"
	"github.com/dcm-sp/acm-cluster-sp/internal/sp/status"
)

// Reader answers GET, LIST, the admin kubeconfig and the provisionable versions from the read model, keeping each
// cluster's resource as last built (viewCache).
type Reader struct {
	deps
	views  *viewCache    // every cluster's resource as last built (GET, LIST)
	builds atomic.Uint64 // numbers the builds views keeps (clusters.Cluster.Build)
}

// NewReader returns the reader. Services.IndexChanged, registered with the index, makes it build a changed cluster
// afresh.
func NewReader(p Ports, cfg Config, log *slog.Logger) *Reader {
	return &Reader{deps: newDeps(p, cfg, log), views: newViewCache()}
}

// Get returns one cluster from the caches. The cluster is shared with the caches: callers only read it.
func (s *Reader) Get(_ context.Context, id string) (*clusters.Cluster, error) {
	if err := ready(s.site); err != nil {
		return nil, err
	}
	now := s.now()
	if c, ok := s.views.get(id, now); ok {
		return presented(s.cfg, c), nil
	}
	since := s.views.sequence()
	v, ok := s.index.Get(id)
	if !ok || v.Gone() {
		return nil, clusters.NotFound("cluster %s not found", id)
	}
	c := s.build(v, now, since)
	if c.Status == status.Ready && !c.HasKubeconfig() {
		s.log.Warn("cluster READY but its admin kubeconfig Secret is not in the cache yet", "id", id)
	}
	return presented(s.cfg, c), nil
}

// build assembles a cluster's resource from a view read after s.views.sequence() returned since, and caches it
// (shared from then on: never changed).
func (s *Reader) build(v clusters.View, now time.Time, since uint64) *clusters.Cluster {
	c := clusters.BuildCluster(v, now, s.cfg.viewSettings())
	c.Build = s.builds.Add(1)
	s.views.put(v.ID, since, &c, now)
	return &c
}

// Kubeconfig reads the admin kubeconfig of a cluster Get returned (only for callers allowed to see it).
func (s *Reader) Kubeconfig(ctx context.Context, c *clusters.Cluster) ([]byte, error) {
	if !c.HasKubeconfig() {
		return nil, nil
	}
	data, err := s.site.Kubeconfig(ctx, c.Kubeconfig)
	if err != nil {
		return nil, hubapi.Failure(err, "reading the admin kubeconfig of cluster %s", c.ID)
	}
	return data, nil
}

// List returns one page of clusters in (create_time, id) order and the token of the next page ("" on the last).
func (s *Reader) List(_ context.Context, pageSize *int, pageToken string) ([]*clusters.Cluster, string, error) {
	size, err := clusters.PageSize(pageSize)
	if err != nil {
		return nil, "", err
	}
	var after *clusters.Key
	if pageToken != "" {
		k, err := clusters.DecodePageToken(pageToken)
		if err != nil {
			return nil, "", err
		}
		after = &k
	}
	if err := ready(s.site); err != nil {
		return nil, "", err
	}
	now := s.now()
	since := s.views.sequence()
	buf := pages.Get().(*[]clusters.View)
	views, more := s.index.AppendPage((*buf)[:0], after, size)
	defer func() {
		clear(views) // the pool holds no cached objects
		*buf = views[:0]
		pages.Put(buf)
	}()
	out := make([]*clusters.Cluster, len(views))
	for i, v := range views {
		c, ok := s.views.get(v.ID, now)
		if !ok {
			c = s.build(v, now, since)
		}
		out[i] = presented(s.cfg, c)
	}
	next := ""
	if more && len(views) > 0 {
		last := views[len(views)-1]
		next = clusters.EncodePageToken(clusters.Key{Created: last.HostedCluster.CreationTimestamp.Time, ID: last.ID})
	}
	return out, next, nil
}

// pages are the views of LIST pages, reused: a page of 50 views is about 6 KB a LIST would otherwise allocate.
var pages = sync.Pool{New: func() any { return new([]clusters.View) }}

// KubernetesVersions lists the Kubernetes minors this hub can provision now (registration capabilities).
func (s *Reader) KubernetesVersions(ctx context.Context) []string {
	c, err := releases(ctx, s.catalog, s.cfg.Matrix)
	if err != nil {
		s.log.Warn("cannot compute the supported Kubernetes versions", "error", err)
		return nil
	}
	return c.KubernetesMinors()
}
