package app

import (
	"context"
	"fmt"
	"net/http"
	"slices"
	"strings"
	"testing"
	"time"

	cloudevents "github.com/cloudevents/sdk-go/v2"

	"github.com/dcm-sp/acm-cluster-sp/internal/devtest/sp/faultproxy"
	"github.com/dcm-sp/acm-cluster-sp/internal/devtest/sp/simulator"
	"github.com/dcm-sp/acm-cluster-sp/internal/sp/status"
)

// The dcm-2026 vocabulary end to end, in GET and in the events the stream acknowledged: create → PROGRESSING →
// ACTIVE → (scale) PROGRESSING → ACTIVE → DEGRADED when the NodePool loses a node → ACTIVE once it is replaced →
// DELETING → DELETED. No word of the seed's appears, nothing is FAILED, LIST speaks the same words, and the events
// of a running cluster carry output_spec (its endpoints, never a kubeconfig).
func TestDCM2026Vocabulary(t *testing.T) {
	t.Parallel()
	const ns, provider = "events", "sp-2026"
	cfg := eventsConfig(ns, provider, testHub.NATSURL)
	cfg.StatusVocabulary = status.VocabularyDCM2026
	sp := startSP(t, cfg, Options{})
	name := uniqueName("v26")
	id := "inst-" + name
	stream := watchEvents(t, testHub.NATSURL, provider, id)
	var gets []string
	wait := func(want string) {
		t.Helper()
		_, seen := sp.waitStatus(t, id, want, 90*time.Second)
		for _, st := range seen {
			if len(gets) == 0 || gets[len(gets)-1] != st {
				gets = append(gets, st)
			}
		}
	}

	code, c, raw := sp.create(t, id, fmt.Sprintf(kubevirt417, name))
	if code != http.StatusCreated || c.Status != "PROGRESSING" {
		t.Fatalf("create: %d %s", code, raw)
	}
	gets = append(gets, string(c.Status))
	wait("ACTIVE")
	_, active := stream.until("ACTIVE", 60*time.Second)
	if active.OutputSpec == nil || !strings.HasPrefix(active.OutputSpec.APIEndpoint, "https://") || !strings.HasPrefix(active.OutputSpec.ConsoleURL, "https://console-openshift-console.") {
		t.Fatalf("ACTIVE event without output_spec: %+v", active)
	}
	if code, _, raw := do(t, http.MethodGet, sp.URL+"/api/v1alpha1/clusters?max_page_size=100", "", nil); code != http.StatusOK || !strings.Contains(string(raw), `"id":"`+id+`"`) {
		t.Fatalf("LIST: %d", code)
	} else if strings.Contains(string(raw), `"status":"READY"`) {
		t.Fatalf("LIST speaks the seed's words: %s", raw)
	}

	code, _, patched, raw := sp.patch(t, id, `{"spec":{"nodes":{"workers":{"count":3}}}}`, "")
	if code != http.StatusOK || patched.Status != "PROGRESSING" {
		t.Fatalf("scale: %d %s", code, raw)
	}
	gets = append(gets, string(patched.Status))
	wait("ACTIVE")
	stream.until("PROGRESSING", 90*time.Second)
	stream.until("ACTIVE", 90*time.Second)

	failMode(t, ns, name, simulator.FailNodeLost)
	wait("DEGRADED")
	if _, cl := sp.get(t, id); !strings.Contains(cl.StatusMessage, "workers 2/3 ready") {
		t.Fatalf("DEGRADED message %q", cl.StatusMessage)
	}
	_, degraded := stream.until("DEGRADED", 90*time.Second)
	if degraded.OutputSpec == nil || degraded.OutputSpec.APIEndpoint != active.OutputSpec.APIEndpoint {
		t.Fatalf("DEGRADED event: %+v", degraded)
	}
	failMode(t, ns, name, "")
	wait("ACTIVE")
	stream.until("ACTIVE", 60*time.Second)

	if resp, err := sp.Client.DeleteClusterWithResponse(context.Background(), id, nil); err != nil || resp.StatusCode() != http.StatusNoContent {
		t.Fatalf("DELETE: %v", err)
	}
	wait("DELETED")
	seq, deleted := stream.until("DELETED", 60*time.Second)
	if deleted.OutputSpec != nil {
		t.Fatalf("DELETED event with output_spec: %+v", deleted)
	}

	want := []string{"PROGRESSING", "ACTIVE", "PROGRESSING", "ACTIVE", "DEGRADED", "ACTIVE", "DELETING", "DELETED"}
	if !slices.Equal(seq, want) {
		t.Fatalf("events %v, want %v", seq, want)
	}
	// GET: the same words (a poll may miss DELETING, which lasts a moment; 404 counts as DELETED).
	if got := slices.DeleteFunc(slices.Clone(gets), func(s string) bool { return s == "DELETING" }); !slices.Equal(got, slices.DeleteFunc(slices.Clone(want), func(s string) bool { return s == "DELETING" })) {
		t.Fatalf("GET saw %v, want %v", gets, want)
	}
	for _, ev := range stream.events {
		if raw := string(ev.Data()); strings.Contains(raw, "kubeconfig") {
			t.Fatalf("an event carries a kubeconfig key: %s", raw)
		}
		checkNoSeedWords(t, ev)
	}
}

func checkNoSeedWords(t *testing.T, ev cloudevents.Event) {
	t.Helper()
	if st := eventData(t, ev).Status; slices.Contains([]string{"PENDING", "PROVISIONING", "READY", "UPDATING", "FAILED"}, st) {
		t.Fatalf("event status %s is not a dcm-2026 word for this timeline", st)
	}
}

// dcm-2026's UNAVAILABLE is the SP not observing the cluster: when the hub's API server stops answering for longer
// than the health threshold, GET and LIST answer every cluster UNAVAILABLE from the cache, saying what was last
// observed; once the hub answers again the cluster is ACTIVE again. The seed vocabulary is unaffected by it.
func TestDCM2026HubLost(t *testing.T) {
	t.Parallel()
	const ns = "shared"
	px, err := faultproxy.Start(testHub.Config)
	if err != nil {
		t.Fatal(err)
	}
	defer px.Close()
	cfg := testConfig(ns)
	cfg.ProviderName, cfg.StatusVocabulary = "sp-lost", status.VocabularyDCM2026
	lostAfter := Options{RestConfig: px.Config(), HubStaleAfter: 5 * time.Second}
	sp := startSP(t, cfg, lostAfter)
	seedCfg := testConfig(ns)
	seedCfg.ProviderName = "sp-lost" // the same clusters, read by a replica in the seed's words over the same proxy
	seed := startSP(t, seedCfg, lostAfter)
	name := uniqueName("lost")
	id := "inst-" + name
	if code, _, raw := sp.create(t, id, kubevirtBody(name, 1)); code != http.StatusCreated {
		t.Fatalf("create: %d %s", code, raw)
	}
	sp.waitStatus(t, id, "ACTIVE", 60*time.Second)
	px.SetRule(func(faultproxy.Request) faultproxy.Verdict { return faultproxy.Abort })
	px.DropWatches()
	lost, _ := sp.waitStatus(t, id, "UNAVAILABLE", 90*time.Second)
	if !strings.HasPrefix(lost.StatusMessage, "Not observed: the hub has not answered for ") || !strings.Contains(lost.StatusMessage, "last observed ACTIVE: Cluster is ready") {
		t.Fatalf("UNAVAILABLE message %q", lost.StatusMessage)
	}
	if code, _, raw := do(t, http.MethodGet, sp.URL+"/api/v1alpha1/clusters?max_page_size=100", "", nil); code != http.StatusOK || !strings.Contains(string(raw), `"status":"UNAVAILABLE"`) {
		t.Fatalf("LIST while the hub is lost: %d %s", code, raw)
	}
	// (LIST: a seed GET of a READY cluster reads its kubeconfig from the hub, which does not answer.)
	if code, _, raw := do(t, http.MethodGet, seed.URL+"/api/v1alpha1/clusters?max_page_size=100", "", nil); code != http.StatusOK || !strings.Contains(string(raw), `"status":"READY"`) {
		t.Fatalf("seed vocabulary while the hub is lost: %d %s", code, raw)
	}
	if code, c := sp.get(t, id); code != http.StatusOK || c.Status != "UNAVAILABLE" || c.Kubeconfig != nil && *c.Kubeconfig != "" {
		t.Fatalf("GET while the hub is lost: %d %+v (an UNAVAILABLE cluster has no kubeconfig to offer)", code, c)
	}
	px.SetRule(nil)
	sp.waitStatus(t, id, "ACTIVE", 60*time.Second)
	deleteAndWait(t, sp, ns, id, name)
}
