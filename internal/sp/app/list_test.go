package app

import (
	"context"
	"fmt"
	"net/http"
	"sync"
	"testing"

	"k8s.io/utils/ptr"

	"github.com/dcm-sp/acm-cluster-sp/pkg/api"
)

// createMany creates n clusters in parallel and returns their ids.
func createMany(t testing.TB, sp *testSP, prefix string, n int) []string {
	t.Helper()
	ids := make([]string, n)
	var wg sync.WaitGroup
	sem := make(chan struct{}, 8)
	errs := make(chan string, n)
	for i := 0; i < n; i++ {
		wg.Add(1)
		sem <- struct{}{}
		go func(i int) {
			defer wg.Done()
			defer func() { <-sem }()
			name := fmt.Sprintf("%s-%04d", prefix, i)
			code, c, raw := sp.create(t, name, kubevirtBody(name, 1))
			if code != http.StatusCreated {
				errs <- fmt.Sprintf("%s: %d %s", name, code, raw)
				return
			}
			ids[i] = c.Id
		}(i)
	}
	wg.Wait()
	close(errs)
	for e := range errs {
		t.Fatal(e)
	}
	return ids
}

// listAll follows next_page_token; between pages it calls between(pageNumber).
func listAll(t testing.TB, sp *testSP, pageSize int32, between func(page int)) []api.Cluster {
	t.Helper()
	var all []api.Cluster
	params := &api.ListClustersParams{MaxPageSize: ptr.To(pageSize)}
	for page := 0; ; page++ {
		resp, err := sp.Client.ListClustersWithResponse(context.Background(), params)
		if err != nil || resp.JSON200 == nil {
			t.Fatalf("page %d: %v %s", page, err, resp.Body)
		}
		if len(resp.JSON200.Results) > int(pageSize) {
			t.Fatalf("page %d has %d results, max %d", page, len(resp.JSON200.Results), pageSize)
		}
		all = append(all, resp.JSON200.Results...)
		if resp.JSON200.NextPageToken == nil || *resp.JSON200.NextPageToken == "" {
			return all
		}
		params.PageToken = resp.JSON200.NextPageToken
		if between != nil {
			between(page)
		}
	}
}

// listClusters is how many clusters TestListPagination pages through: 20 pages of 4, and mutations on four of them.
const listClusters = 80

// LIST pages through 80 clusters with max_page_size 4 without loss or duplicates, in (create_time, id) order —
// also while clusters are created and deleted between pages.
func TestListPagination(t *testing.T) {
	t.Parallel()
	cfg := testConfig("pages")
	sp := startSP(t, cfg, Options{})
	ids := createMany(t, sp, "pg", listClusters)

	all := listAll(t, sp, 4, nil)
	if len(all) != listClusters {
		t.Fatalf("listed %d clusters, want %d", len(all), listClusters)
	}
	seen := map[string]bool{}
	for i, c := range all {
		if seen[c.Id] {
			t.Fatalf("duplicate %s", c.Id)
		}
		seen[c.Id] = true
		if i > 0 {
			prev := all[i-1]
			if c.CreateTime.Before(prev.CreateTime) || (c.CreateTime.Equal(prev.CreateTime) && c.Id < prev.Id) {
				t.Fatalf("order broken at %d: %s/%s after %s/%s", i, c.CreateTime, c.Id, prev.CreateTime, prev.Id)
			}
		}
	}
	for _, id := range ids {
		if !seen[id] {
			t.Fatalf("%s missing from the list", id)
		}
	}

	// Now mutate between pages: delete clusters not yet visited and already visited, and create new ones.
	deleted := map[string]bool{}
	var extra []string
	all = listAll(t, sp, 4, func(page int) {
		if page%5 != 0 {
			return
		}
		for _, id := range []string{ids[listClusters-1-page], ids[page]} { // one ahead of the cursor, one behind
			if resp, err := sp.Client.DeleteClusterWithResponse(context.Background(), id, nil); err != nil || resp.StatusCode() != http.StatusNoContent {
				t.Fatalf("delete %s: %v %d", id, err, resp.StatusCode())
			}
			deleted[id] = true
		}
		name := fmt.Sprintf("pgx-%02d", page)
		if code, c, raw := sp.create(t, name, kubevirtBody(name, 1)); code != http.StatusCreated {
			t.Fatalf("create %s: %d %s", name, code, raw)
		} else {
			extra = append(extra, c.Id)
		}
	})
	seen = map[string]bool{}
	for _, c := range all {
		if seen[c.Id] {
			t.Fatalf("duplicate %s while mutating", c.Id)
		}
		seen[c.Id] = true
	}
	for _, id := range ids {
		if !deleted[id] && !seen[id] {
			t.Fatalf("%s skipped while others were created and deleted", id)
		}
	}
	// Clusters created during the walk sort after the cursor (newer create_time) and are all seen.
	for _, id := range extra {
		if !seen[id] {
			t.Errorf("cluster %s created during the walk not listed", id)
		}
	}
}
