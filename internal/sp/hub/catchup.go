package hub

import (
	"context"
	"fmt"
	"strconv"
	"time"

	hyperv1 "github.com/openshift/hypershift/api/hypershift/v1beta1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/dcm-sp/acm-cluster-sp/internal/sp/meta"
)

// CatchUp waits until the caches of HostedClusters and NodePools hold at least what the API server holds now. It
// lists them (metadata only, a quorum read, in pages) and waits until every cached object is at the listed
// resourceVersion or a later one, every listed object is cached, and nothing the server no longer has is still
// cached (unless created after the list).
//
// A new leader calls it before it re-reports every status: during a handover the previous leader may still have
// published, moments ago, a change this replica's watch has not delivered yet, and re-reporting from a cache that
// lags would announce an older status after a newer one.
func (h *Hub) CatchUp(ctx context.Context, within time.Duration) error {
	if !h.Watching("hostedclusters") || !h.Watching("nodepools") {
		return nil // nothing cached to be behind
	}
	ctx, cancel := context.WithTimeout(ctx, within)
	defer cancel()
	for _, k := range []struct {
		kind   string
		cached func() client.ObjectList
	}{
		{"HostedCluster", func() client.ObjectList { return &hyperv1.HostedClusterList{} }},
		{"NodePool", func() client.ObjectList { return &hyperv1.NodePoolList{} }},
	} {
		want, listRV, err := h.serverVersions(ctx, k.kind)
		if err != nil {
			return fmt.Errorf("catching up with the %ss: %w", k.kind, err)
		}
		t := time.NewTicker(20 * time.Millisecond)
		for {
			behind, err := h.behind(ctx, k.cached(), want, listRV)
			if err != nil {
				t.Stop()
				return err
			}
			if behind == "" {
				break
			}
			select {
			case <-ctx.Done():
				t.Stop()
				return fmt.Errorf("the %s cache is still behind the API server after %v: %s", k.kind, within, behind)
			case <-t.C:
			}
		}
		t.Stop()
	}
	return nil
}

// serverVersions lists a kind's objects of this SP on the API server: their resourceVersions and the list's.
func (h *Hub) serverVersions(ctx context.Context, kind string) (map[types.NamespacedName]uint64, uint64, error) {
	want := map[types.NamespacedName]uint64{}
	var listRV uint64
	l := &metav1.PartialObjectMetadataList{}
	l.SetGroupVersionKind(hyperv1.GroupVersion.WithKind(kind + "List"))
	cont := ""
	for {
		if err := h.Client.List(ctx, l, client.InNamespace(h.opts.Namespace), client.MatchingLabelsSelector{Selector: meta.Selector()},
			client.Limit(500), client.Continue(cont)); err != nil {
			return nil, 0, err
		}
		if listRV == 0 { // the pages of one list share the first page's snapshot
			listRV = rv(l.ResourceVersion)
		}
		for _, o := range l.Items {
			want[types.NamespacedName{Namespace: o.Namespace, Name: o.Name}] = rv(o.ResourceVersion)
		}
		if cont = l.Continue; cont == "" {
			return want, listRV, nil
		}
	}
}

// behind names one way the cache is behind the server's list ("" when it is not).
func (h *Hub) behind(ctx context.Context, list client.ObjectList, want map[types.NamespacedName]uint64, listRV uint64) (string, error) {
	if err := h.cache.List(ctx, list, client.InNamespace(h.opts.Namespace)); err != nil {
		return "", err
	}
	seen := 0
	var lag string
	check := func(o client.Object) {
		key := types.NamespacedName{Namespace: o.GetNamespace(), Name: o.GetName()}
		got := rv(o.GetResourceVersion())
		w, listed := want[key]
		switch {
		case listed:
			seen++
			if got < w && lag == "" {
				lag = fmt.Sprintf("%s at resourceVersion %d, the server has %d", key, got, w)
			}
		case got <= listRV && lag == "":
			lag = fmt.Sprintf("%s is gone from the server", key)
		}
	}
	switch l := list.(type) {
	case *hyperv1.HostedClusterList:
		for i := range l.Items {
			check(&l.Items[i])
		}
	case *hyperv1.NodePoolList:
		for i := range l.Items {
			check(&l.Items[i])
		}
	}
	if lag == "" && seen < len(want) {
		lag = fmt.Sprintf("%d of %d objects not cached yet", len(want)-seen, len(want))
	}
	return lag, nil
}

// rv reads a resourceVersion as the number etcd makes it (an unparsable one reads as 0: never behind).
func rv(s string) uint64 {
	n, _ := strconv.ParseUint(s, 10, 64)
	return n
}
