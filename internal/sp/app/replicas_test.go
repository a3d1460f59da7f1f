package app

import (
	"context"
	"fmt"
	"net/http"
	"path"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	hyperv1 "github.com/openshift/hypershift/api/hypershift/v1beta1"
	corev1 "k8s.io/api/core/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/dcm-sp/acm-cluster-sp/internal/devtest/sp/faultproxy"
	"github.com/dcm-sp/acm-cluster-sp/internal/sp/meta"
	"github.com/dcm-sp/acm-cluster-sp/internal/sp/render"
)

// hostedClustersOf lists the HostedClusters of an instance on the API server.
func hostedClustersOf(t *testing.T, ns, id string) []string {
	t.Helper()
	var list hyperv1.HostedClusterList
	if err := testHub.Client.List(context.Background(), &list, client.InNamespace(ns), client.MatchingLabels{meta.LabelInstanceID: id}); err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, hc := range list.Items {
		names = append(names, hc.Name)
	}
	return names
}

// The same instance id with two different names, sent at the same moment to two replicas whose caches know
// neither, becomes one HostedCluster: one request is created (201), the other is a conflict (409 with a problem
// document). Without the hub-side instance lock both were created — two clusters for one id.
func TestSameIDTwoNamesOnTwoReplicas(t *testing.T) {
	t.Parallel()
	const ns = "shared"
	cfg := testConfig(ns)
	cfg.ProviderName = "sp-race"
	a, b := startSP(t, cfg, Options{}), startSP(t, cfg, Options{})
	for round := range 5 {
		id := fmt.Sprintf("inst-%d-%s", round, uniqueName("race"))
		names := []string{uniqueName("racea"), uniqueName("raceb")}
		codes := make([]int, 2)
		raws := make([][]byte, 2)
		headers := make([]http.Header, 2)
		var start, done sync.WaitGroup
		start.Add(1)
		for i, sp := range []*testSP{a, b} {
			done.Add(1)
			go func() {
				defer done.Done()
				start.Wait()
				codes[i], headers[i], raws[i] = do(t, http.MethodPost, sp.URL+"/api/v1alpha1/clusters?id="+id, "application/json", []byte(kubevirtBody(names[i], 1)))
			}()
		}
		start.Done()
		done.Wait()
		winner := -1
		for i, code := range codes {
			switch code {
			case http.StatusCreated:
				if winner >= 0 {
					t.Fatalf("round %d: both names created for %s: %v", round, id, hostedClustersOf(t, ns, id))
				}
				winner = i
			case http.StatusConflict:
				p := assertProblem(t, code, headers[i], raws[i], http.StatusConflict, "instance "+id)
				t.Logf("round %d: the loser was told: %s", round, *p.Detail)
			default:
				t.Fatalf("round %d: replica %d answered %d %s", round, i, code, raws[i])
			}
		}
		if winner < 0 {
			t.Fatalf("round %d: neither create succeeded: %v", round, codes)
		}
		if got := hostedClustersOf(t, ns, id); len(got) != 1 || got[0] != names[winner] {
			t.Fatalf("round %d: HostedClusters of %s: %v, want [%s]", round, id, got, names[winner])
		}
		// Through the winner: its create waited for its own cache, the other replica's may not have the cluster yet.
		deleteAndWait(t, []*testSP{a, b}[winner], ns, id, names[winner])
	}
}

// A replica whose cache lags (its informers' watches are cut and they cannot relist) learns from the API server: DCM's
// retry of a create that another replica made is answered 200 with the cluster, the same id with another name is
// 409, another id with the cluster's name is 409; nothing new is created.
func TestCreateOnALaggingReplica(t *testing.T) {
	t.Parallel()
	const ns = "shared"
	cfg := testConfig(ns)
	cfg.ProviderName = "sp-lag"
	a := startSP(t, cfg, Options{})
	px, err := faultproxy.Start(testHub.Config)
	if err != nil {
		t.Fatal(err)
	}
	defer px.Close()
	lagging := startSP(t, cfg, Options{RestConfig: px.Config()})
	// Every informer of the lagging replica is frozen, not only the HostedClusters': its index learns of a cluster
	// from the NodePools too (a NodePool alone makes the instance known), and an informer whose watch is cut
	// relists. The SP's own reads of the API server pass.
	var refusedHCs, refusedNPs atomic.Int32
	px.SetRule(func(r faultproxy.Request) faultproxy.Verdict {
		v := faultproxy.FreezeCaches(r)
		if v == faultproxy.Abort {
			switch path.Base(r.Path) {
			case "hostedclusters":
				refusedHCs.Add(1)
			case "nodepools":
				refusedNPs.Add(1)
			}
		}
		return v
	})
	if px.DropWatches() == 0 {
		t.Fatal("the lagging replica has no watch to cut")
	}
	waitFor(t, 30*time.Second, "the lagging replica's HostedCluster and NodePool informers to be refused after their watches were cut", func() bool {
		return refusedHCs.Load() > 0 && refusedNPs.Load() > 0
	})

	name := uniqueName("lag")
	id := "inst-" + name
	body := kubevirtBody(name, 1)
	code, created, raw := a.create(t, id, body)
	if code != http.StatusCreated {
		t.Fatalf("create on the first replica: %d %s", code, raw)
	}
	if _, ok := lagging.App.Hub.Index().Get(id); ok {
		t.Fatal("the lagging replica's cache has the cluster: the test does not show a lagging cache")
	}

	code, again, raw := lagging.create(t, id, body)
	if code != http.StatusOK || again.Id != created.Id || !strings.Contains(string(raw), name) {
		t.Fatalf("retried create on the lagging replica: %d %s", code, raw)
	}
	post := func(id, body string) (int, http.Header, []byte) {
		return do(t, http.MethodPost, lagging.URL+"/api/v1alpha1/clusters?id="+id, "application/json", []byte(body))
	}
	code, h, raw := post(id, kubevirtBody(uniqueName("lag2"), 1))
	assertProblem(t, code, h, raw, http.StatusConflict, "instance "+id+" exists with a different spec")
	code, h, raw = post("inst-other-"+name, body)
	assertProblem(t, code, h, raw, http.StatusConflict, name)
	if got := hostedClustersOf(t, ns, id); len(got) != 1 {
		t.Fatalf("HostedClusters of %s: %v", id, got)
	}
	var lock corev1.ConfigMap
	waitFor(t, 60*time.Second, "the instance lock owned by the HostedCluster", func() bool {
		err := testHub.Client.Get(context.Background(), client.ObjectKey{Namespace: ns, Name: render.InstanceLockName("sp-lag", id)}, &lock)
		return err == nil && len(lock.OwnerReferences) == 1
	})
	if len(lock.OwnerReferences) != 1 || lock.OwnerReferences[0].Name != name {
		t.Fatalf("the instance lock is owned by %v", lock.OwnerReferences)
	}
	// DCM deletes what it just created, through the replica that has not seen it: 204, not a 404 that would leave
	// the cluster running while DCM believes it gone. The rig still holds the cache back when the DELETE is sent; a
	// cache that caught up afterwards does not matter: the DELETE was already decided.
	if _, ok := lagging.App.Hub.Index().Get(id); ok {
		px.SetRule(nil)
		deleteAndWait(t, a, ns, id, name)
		t.Fatal("the lagging replica's cache has the cluster before the DELETE: the test does not show a lagging cache")
	}
	if code, _, raw := do(t, http.MethodDelete, lagging.URL+"/api/v1alpha1/clusters/"+id, "", nil); code != http.StatusNoContent {
		t.Fatalf("DELETE on the lagging replica: %d %s", code, raw)
	}
	var hc hyperv1.HostedCluster
	if err := testHub.Client.Get(context.Background(), client.ObjectKey{Namespace: ns, Name: name}, &hc); err != nil || hc.DeletionTimestamp == nil {
		t.Fatalf("after the DELETE on the lagging replica: %v, deletion %v", err, hc.DeletionTimestamp)
	}
	px.SetRule(nil)
	deleteAndWait(t, a, ns, id, name)
}
