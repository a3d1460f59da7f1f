package app

import (
	"context"
	"encoding/json"
	"fmt"
	"log/slog"
	"maps"
	"net/http"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/google/uuid"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/dcm-sp/acm-cluster-sp/internal/devtest/sp/envagent"
	"github.com/dcm-sp/acm-cluster-sp/internal/devtest/sp/faultproxy"
	"github.com/dcm-sp/acm-cluster-sp/internal/devtest/testlog"
	"github.com/dcm-sp/acm-cluster-sp/pkg/api"
)

// agentSpec is a create body as DCM's Environment Agent sends it: the bare snake_case spec, with the read-only
// fields the control plane's catalog merges in (all empty), no instance id.
func agentSpec(name string, workers int) []byte {
	return []byte(fmt.Sprintf(`{"service_type":"cluster","version":"1.30","metadata":{"name":%q},"nodes":{"workers":{"count":%d,"cpu":4,"memory":"16GB","storage":"120GB"}},"provider_hints":{"acm":{"platform":"kubevirt"}},"api_endpoint":"","console_url":"","kubeconfig":""}`, name, workers))
}

// keyed sends a request with an Idempotency-Key ("" for none).
func keyed(t testing.TB, method, url, key string, body []byte) (int, http.Header, []byte) {
	t.Helper()
	req, err := http.NewRequest(method, url, strings.NewReader(string(body)))
	if err != nil {
		t.Fatal(err)
	}
	if body != nil {
		req.Header.Set("Content-Type", "application/json")
	}
	if key != "" {
		req.Header.Set("Idempotency-Key", key)
	}
	return send(t, req)
}

func idOf(t testing.TB, raw []byte) string {
	t.Helper()
	var c api.Cluster
	if err := json.Unmarshal(raw, &c); err != nil {
		t.Fatalf("answer %s: %v", raw, err)
	}
	return c.Id
}

// tombstonesOf lists the deletion records of an instance on the hub.
func tombstonesOf(t testing.TB, ns, id string) []corev1.ConfigMap {
	t.Helper()
	var list corev1.ConfigMapList
	if err := testHub.Client.List(context.Background(), &list, client.InNamespace(ns), client.MatchingLabels{"dcm-tombstone": "true"}); err != nil {
		t.Fatal(err)
	}
	var out []corev1.ConfigMap
	for _, cm := range list.Items {
		if cm.Annotations["dcm-tombstone-of"] == id {
			out = append(out, cm)
		}
	}
	return out
}

// One Idempotency-Key is one cluster, wherever and whenever it arrives: 20 concurrent creates with the key and no
// ?id=, spread over two replicas, make exactly one cluster and all answer 2xx with its id and Location (one 201);
// after both replicas are gone a new one answers the replay 200 with the same cluster; the same key with another
// spec is a 422 problem. A keyed DELETE is answered 204 again when replayed after the cluster is gone; another key,
// no key, or an id this SP never had is a 404; and a late replay of the create does not bring the cluster back. The
// deletion record answers replays across a restart; forged records are not trusted, nor swept.
func TestIdempotencyKeyAcrossReplicas(t *testing.T) {
	t.Parallel()
	const ns = "shared"
	cfg := testConfig(ns)
	cfg.ProviderName = "sp-idem"
	a, b := launchSP(t, cfg, Options{}), launchSP(t, cfg, Options{})
	defer a.stop()
	defer b.stop()
	name, key := uniqueName("idem-key"), uuid.NewString()
	body := agentSpec(name, 1)
	type answer struct {
		code         int
		id, location string
		raw          []byte
	}
	answers := make([]answer, 20)
	var start, done sync.WaitGroup
	start.Add(1)
	for i := range answers {
		sp := []*testSP{a, b}[i%2]
		done.Add(1)
		go func() {
			defer done.Done()
			start.Wait()
			code, h, raw := keyed(t, http.MethodPost, sp.URL+"/api/v1alpha1/clusters", key, body)
			answers[i] = answer{code: code, location: h.Get("Location"), raw: raw}
			if code < 300 {
				answers[i].id = idOf(t, raw)
			}
		}()
	}
	start.Done()
	done.Wait()
	id, created := answers[0].id, 0
	for i, ans := range answers {
		if ans.code != http.StatusCreated && ans.code != http.StatusOK {
			t.Fatalf("answer %d: %d %s", i, ans.code, ans.raw)
		}
		if ans.code == http.StatusCreated {
			created++
		}
		if ans.id != id || ans.location != "/api/v1alpha1/clusters/"+id {
			t.Fatalf("answer %d: id %q Location %q, want %q", i, ans.id, ans.location, id)
		}
	}
	if got := hostedClustersOf(t, ns, id); created != 1 || len(got) != 1 || got[0] != name {
		t.Fatalf("%d created, HostedClusters of %s: %v", created, id, got)
	}

	// Both replicas gone: a new one finds the key's cluster on the hub.
	a.stop()
	b.stop()
	var logs testlog.Buffer
	c := startSP(t, cfg, Options{Log: slog.New(slog.NewTextHandler(&logs, nil))})
	code, h, raw := keyed(t, http.MethodPost, c.URL+"/api/v1alpha1/clusters", key, body)
	if code != http.StatusOK || idOf(t, raw) != id || h.Get("Location") != "/api/v1alpha1/clusters/"+id {
		t.Fatalf("replay after the restart: %d %s %s", code, h.Get("Location"), raw)
	}
	if !strings.Contains(logs.String(), "idempotencyKey="+key) {
		t.Fatalf("the audit log does not record the key: %s", logs.String())
	}
	code, h, raw = keyed(t, http.MethodPost, c.URL+"/api/v1alpha1/clusters", key, agentSpec(name, 3))
	assertProblem(t, code, h, raw, http.StatusUnprocessableEntity, "Idempotency-Key")
	if _, cl := c.get(t, id); cl.Nodes.Workers.Total != 1 {
		t.Fatalf("the cluster changed: %+v", cl.Nodes)
	}

	deleteKey := "del-" + key
	if code, _, raw := keyed(t, http.MethodDelete, c.URL+"/api/v1alpha1/clusters/"+id, deleteKey, nil); code != http.StatusNoContent {
		t.Fatalf("keyed DELETE: %d %s", code, raw)
	}
	waitFor(t, 60*time.Second, "the HostedCluster gone from the hub", func() bool { return len(hostedClustersOf(t, ns, id)) == 0 })
	if code, _, raw := keyed(t, http.MethodDelete, c.URL+"/api/v1alpha1/clusters/"+id, deleteKey, nil); code != http.StatusNoContent {
		t.Fatalf("replayed keyed DELETE after the cluster is gone: %d %s", code, raw)
	}
	for _, d := range []struct{ id, key string }{{id, "another-key"}, {id, ""}, {"never-" + name, deleteKey}} {
		code, h, raw := keyed(t, http.MethodDelete, c.URL+"/api/v1alpha1/clusters/"+d.id, d.key, nil)
		assertProblem(t, code, h, raw, http.StatusNotFound, "not found")
	}
	code, h, raw = keyed(t, http.MethodPost, c.URL+"/api/v1alpha1/clusters", key, body)
	assertProblem(t, code, h, raw, http.StatusConflict, "was deleted")
	if got := hostedClustersOf(t, ns, id); len(got) != 0 {
		t.Fatalf("the late replay brought the cluster back: %v", got)
	}
	records := tombstonesOf(t, ns, id)
	if len(records) != 1 {
		t.Fatalf("deletion records of %s: %d", id, len(records))
	}
	expires, err := time.Parse(time.RFC3339, records[0].Annotations["dcm-expires-at"])
	if err != nil || expires.Before(time.Now().Add(23*time.Hour)) || expires.After(time.Now().Add(25*time.Hour)) {
		t.Fatalf("deletion record expires %v (%v), want in 24h", expires, err)
	}
	// The record is on the hub, not in a process: a new SP answers the replay from it.
	c.stop()
	c = startSP(t, cfg, Options{})
	if code, _, raw := keyed(t, http.MethodDelete, c.URL+"/api/v1alpha1/clusters/"+id, deleteKey, nil); code != http.StatusNoContent {
		t.Fatalf("replayed keyed DELETE after a restart: %d %s", code, raw)
	}
	// Records the SP did not write are not trusted (a keyed DELETE of an id it never had stays a 404), and the
	// sweep leaves them alone: one under another instance's name, one without the SP's labels, one expiring later
	// than deleteKeyRetention allows.
	forged := map[string]func(cm *corev1.ConfigMap, fid string){
		"renamed": func(*corev1.ConfigMap, string) {},
		"unlabelled": func(cm *corev1.ConfigMap, fid string) {
			cm.Annotations["dcm-tombstone-of"] = fid
			delete(cm.Labels, "managed-by")
		},
		"long-lived": func(cm *corev1.ConfigMap, fid string) {
			cm.Annotations["dcm-tombstone-of"] = fid
			cm.Annotations["dcm-expires-at"] = time.Now().Add(10 * 365 * 24 * time.Hour).UTC().Format(time.RFC3339)
		},
	}
	var forgedNames []string
	for kind, edit := range forged {
		fid := "forged-" + kind + "-" + name
		cm := corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: strings.Replace(records[0].Name, id, fid, 1),
			Labels: maps.Clone(records[0].Labels), Annotations: maps.Clone(records[0].Annotations)}}
		edit(&cm, fid)
		if err := testHub.Client.Create(context.Background(), &cm); err != nil {
			t.Fatal(err)
		}
		forgedNames = append(forgedNames, cm.Name)
		code, h, raw := keyed(t, http.MethodDelete, c.URL+"/api/v1alpha1/clusters/"+fid, deleteKey, nil)
		assertProblem(t, code, h, raw, http.StatusNotFound, "not found")
	}
	c.App.Service.SweepOrphans(context.Background(), func(string) bool { return true }, time.Hour)
	for _, n := range forgedNames {
		var cm corev1.ConfigMap
		if err := testHub.Client.Get(context.Background(), client.ObjectKey{Namespace: ns, Name: n}, &cm); err != nil {
			t.Fatalf("the sweep touched the forged record %s: %v", n, err)
		}
		if err := testHub.Client.Delete(context.Background(), &cm); err != nil {
			t.Fatal(err)
		}
	}

	// Once expired, the record answers nothing and the leader's sweep removes it.
	rec := records[0]
	rec.Annotations["dcm-expires-at"] = time.Now().Add(-time.Minute).UTC().Format(time.RFC3339)
	if err := testHub.Client.Update(context.Background(), &rec); err != nil {
		t.Fatal(err)
	}
	code, h, raw = keyed(t, http.MethodDelete, c.URL+"/api/v1alpha1/clusters/"+id, deleteKey, nil)
	assertProblem(t, code, h, raw, http.StatusNotFound, "not found")
	c.App.Service.SweepOrphans(context.Background(), func(string) bool { return true }, time.Hour)
	if got := tombstonesOf(t, ns, id); len(got) != 0 {
		t.Fatalf("expired deletion record not swept: %v", got)
	}
}

// DCM's Environment Agent, played by envagent.Agent (bare body, Idempotency-Key, retries on 5xx, any other 4xx
// final), drives create, replay and delete:
//   - its first create reaches the hub but the answer is lost (the hub connection is cut after the HostedCluster's
//     write): the SP answers 503, the agent retries, and the retry is answered 200 with the same cluster;
//   - a redelivery of the same request (same CloudEvent id) is acknowledged with the same cluster;
//   - the same spec under a new CloudEvent id is another request: a 409 (the name is taken), final at once;
//   - it deletes by DCM's resource id, which it never sent on create: 404, final, nothing deleted (the upstream
//     gap); with the one-line change that sends ?id= on create, DCM's id is the cluster's and the delete works;
//   - a keyed delete replayed after the cluster is gone is acknowledged again.
func TestAgentCreateReplayDelete(t *testing.T) {
	t.Parallel()
	const ns = "shared"
	px, err := faultproxy.Start(testHub.Config)
	if err != nil {
		t.Fatal(err)
	}
	defer px.Close()
	cfg := testConfig(ns)
	cfg.ProviderName = "sp-agent"
	cfg.ProblemTypes = "uris"
	sp := startSP(t, cfg, Options{RestConfig: px.Config()})
	var cut atomic.Bool
	px.SetRule(func(r faultproxy.Request) faultproxy.Verdict {
		if r.Method == http.MethodPost && strings.HasSuffix(r.Path, "/hostedclusters") && cut.CompareAndSwap(false, true) {
			return faultproxy.PassThenCut
		}
		return faultproxy.Pass
	})
	ctx := context.Background()
	endpoint := sp.URL + "/api/v1alpha1/clusters"
	agent := &envagent.Agent{Backoff: 200 * time.Millisecond, MaxBackoff: 2 * time.Second}
	name := uniqueName("agent")
	spec, event, resource := agentSpec(name, 1), "ce-"+uuid.NewString(), "dcm-"+name

	o := agent.Create(ctx, endpoint, event, resource, spec)
	if !o.Acknowledged || len(o.Statuses) != 2 || o.Statuses[0] != http.StatusServiceUnavailable || o.Statuses[1] != http.StatusOK {
		t.Fatalf("create with its first answer lost: %+v", o)
	}
	id := o.ID()
	if got := hostedClustersOf(t, ns, id); len(got) != 1 || o.Location != "/api/v1alpha1/clusters/"+id {
		t.Fatalf("HostedClusters of %s: %v, Location %q", id, got, o.Location)
	}
	if again := agent.Create(ctx, endpoint, event, resource, spec); !again.Acknowledged || len(again.Statuses) != 1 || again.ID() != id {
		t.Fatalf("redelivered create: %+v", again)
	}
	other := agent.Create(ctx, endpoint, "ce-"+uuid.NewString(), resource, spec)
	if other.Acknowledged || other.Error != envagent.ErrorNonRetryable || len(other.Statuses) != 1 || other.Statuses[0] != http.StatusConflict ||
		!strings.Contains(other.Body, `"type":"https://dcm-project.github.io/problems/already-exists"`) {
		t.Fatalf("same spec, new event: %+v", other)
	}

	gap := agent.Delete(ctx, endpoint, "ce-"+uuid.NewString(), resource)
	if gap.Acknowledged || gap.Error != envagent.ErrorNonRetryable || len(gap.Statuses) != 1 || gap.Statuses[0] != http.StatusNotFound {
		t.Fatalf("delete by DCM's id: %+v", gap)
	}
	if code, _ := sp.get(t, id); code != http.StatusOK {
		t.Fatalf("a 404 delete deleted something: GET %d", code)
	}

	fixed := &envagent.Agent{Backoff: 200 * time.Millisecond, MaxBackoff: 2 * time.Second, SendID: true}
	name2 := uniqueName("agent-id")
	resource2 := "dcm-" + name2
	if o := fixed.Create(ctx, endpoint, "ce-"+uuid.NewString(), resource2, agentSpec(name2, 1)); !o.Acknowledged || o.ID() != resource2 {
		t.Fatalf("create with ?id=: %+v", o)
	}
	deletes := map[string]string{id: "ce-" + uuid.NewString(), resource2: "ce-" + uuid.NewString()}
	for target, ev := range deletes {
		if o := agent.Delete(ctx, endpoint, ev, target); !o.Acknowledged || o.Statuses[0] != http.StatusNoContent {
			t.Fatalf("delete %s: %+v", target, o)
		}
	}
	waitFor(t, 60*time.Second, "both clusters gone from the hub", func() bool {
		return len(hostedClustersOf(t, ns, id))+len(hostedClustersOf(t, ns, resource2)) == 0
	})
	for target, ev := range deletes {
		if o := agent.Delete(ctx, endpoint, ev, target); !o.Acknowledged || len(o.Statuses) != 1 || o.Statuses[0] != http.StatusNoContent {
			t.Fatalf("replayed delete of %s after it is gone: %+v", target, o)
		}
	}
}
