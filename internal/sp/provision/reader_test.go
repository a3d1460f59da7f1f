package provision

import (
	"context"
	"slices"
	"testing"

	"github.com/dcm-sp/acm-cluster-sp/internal/sp/clusters"
)

// GET of an unknown id is a 404; nothing is answered from caches that are not synced.
func TestReaderGet(t *testing.T) {
	f := newFixture(t)
	ctx := context.Background()
	if _, err := f.svc.Get(ctx, id1); clusters.KindOf(err) != clusters.KindNotFound {
		t.Fatalf("unknown id: %v, want a 404", err)
	}
	f.create(id1, "", kubevirtBody("alpha", 2))
	first, err := f.svc.Get(ctx, id1)
	if err != nil || first.ID != id1 {
		t.Fatalf("GET: %v, %v", first, err)
	}
	// Unchanged, the resource is served as built (same build); a change of the cluster builds it afresh.
	if again, _ := f.svc.Get(ctx, id1); again.Build != first.Build {
		t.Fatalf("an unchanged cluster was rebuilt (%d, then %d)", first.Build, again.Build)
	}
	f.operatorFinalizer("alpha")
	if changed, _ := f.svc.Get(ctx, id1); changed.Build == first.Build {
		t.Fatal("a changed cluster was answered from the view cache")
	}
	f.site.synced = false
	if _, err := f.svc.Get(ctx, id1); clusters.KindOf(err) != clusters.KindUnavailable {
		t.Fatalf("caches not synced: %v, want a 503", err)
	}
	if _, _, err := f.svc.List(ctx, nil, ""); clusters.KindOf(err) != clusters.KindUnavailable {
		t.Fatalf("LIST, caches not synced: %v, want a 503", err)
	}
}

// LIST pages in (create time, id) order; the last page has no next token; a bad token or size is a 400.
func TestReaderListPages(t *testing.T) {
	f := newFixture(t)
	ctx := context.Background()
	ids := []string{id2, id1, "0b7e0f7e-8a43-4c1d-9d3f-333333333333"}
	for i, id := range ids {
		f.create(id, "", kubevirtBody("c"+string(rune('a'+i)), 2))
	}
	slices.Sort(ids)
	size := 2
	page, next, err := f.svc.List(ctx, &size, "")
	if err != nil || len(page) != 2 || next == "" || page[0].ID != ids[0] || page[1].ID != ids[1] {
		t.Fatalf("first page: %v, next %q, %v", idsOf(page), next, err)
	}
	page, next, err = f.svc.List(ctx, &size, next)
	if err != nil || len(page) != 1 || next != "" || page[0].ID != ids[2] {
		t.Fatalf("last page: %v, next %q, %v", idsOf(page), next, err)
	}
	if _, _, err := f.svc.List(ctx, &size, "not-a-token"); clusters.KindOf(err) != clusters.KindInvalid {
		t.Fatalf("bad page token: %v, want a 400", err)
	}
	zero := 0
	if _, _, err := f.svc.List(ctx, &zero, ""); clusters.KindOf(err) != clusters.KindInvalid {
		t.Fatalf("page size 0: %v, want a 400", err)
	}
}

// The kubeconfig is read only through the reference the cluster's resource carries (none: nothing is read).
func TestReaderKubeconfig(t *testing.T) {
	f := newFixture(t)
	f.site.kubeconfigs = map[string][]byte{"alpha-admin-kubeconfig": []byte("apiVersion: v1")}
	c := &clusters.Cluster{ID: id1}
	if data, err := f.svc.Kubeconfig(context.Background(), c); data != nil || err != nil {
		t.Fatalf("a cluster without kubeconfig: %q, %v", data, err)
	}
	c.Kubeconfig = clusters.SecretRef{Name: "alpha-admin-kubeconfig", Cluster: "alpha"}
	if data, err := f.svc.Kubeconfig(context.Background(), c); string(data) != "apiVersion: v1" || err != nil {
		t.Fatalf("kubeconfig: %q, %v", data, err)
	}
	c.Kubeconfig.Name = "someone-elses"
	if _, err := f.svc.Kubeconfig(context.Background(), c); err == nil || clusters.KindOf(err) == clusters.KindNotFound {
		t.Fatalf("an unreadable kubeconfig: %v, want a server-side failure (the cluster exists)", err)
	}
}

// The Kubernetes versions offered are the minors of the provisionable image sets.
func TestReaderKubernetesVersions(t *testing.T) {
	f := newFixture(t)
	if got := f.svc.KubernetesVersions(context.Background()); !slices.Equal(got, []string{"1.30", "1.31"}) {
		t.Fatalf("versions %v", got)
	}
}

func idsOf(cs []*clusters.Cluster) []string {
	out := make([]string, len(cs))
	for i, c := range cs {
		out[i] = c.ID
	}
	return out
}
