package app

import (
	"context"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	hyperv1 "github.com/openshift/hypershift/api/hypershift/v1beta1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/client-go/tools/clientcmd"
	"k8s.io/utils/ptr"
	clusterv1 "open-cluster-management.io/api/cluster/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/dcm-sp/acm-cluster-sp/internal/devtest/testwait"
	"github.com/dcm-sp/acm-cluster-sp/internal/sp/hubapi"
	"github.com/dcm-sp/acm-cluster-sp/internal/sp/meta"
	"github.com/dcm-sp/acm-cluster-sp/pkg/api"
)

// The design document's two example payloads (api/v1alpha1/examples/design-*.json), posted verbatim, create clusters
// that the simulated operator takes to READY; GET then exposes the endpoint, console URL and a kubeconfig equal to the
// operator's Secret.
func TestDesignExamplesReachReady(t *testing.T) {
	t.Parallel()
	sp := shared(t)
	examples := map[string]string{"kubevirt": readExample(t, "design-kubevirt.json"), "baremetal": readExample(t, "design-baremetal.json")}
	for platform, body := range examples {
		t.Run(platform, func(t *testing.T) {
			t.Parallel()
			code, c, raw := sp.create(t, "", body)
			if code != http.StatusCreated {
				t.Fatalf("POST: %d %s", code, raw)
			}
			if !justCreated(c.Status) || c.Platform != platform || c.ProvisioningType != api.Hypershift ||
				c.Version != "4.15" || c.OpenshiftVersion != "4.15.45" || ptr.Deref(c.Kubeconfig, "") != "" || c.ApiEndpoint != "" || c.Namespace != "clusters" ||
				c.Path != "clusters/"+c.Id || c.Nodes.Workers.Total != 3 || c.Nodes.ControlPlane.Total != 3 {
				t.Fatalf("created resource: %s", raw)
			}
			var spec api.ClusterSpec
			if err := json.Unmarshal(c.Spec, &spec); err != nil {
				t.Fatal(err)
			}
			if spec.Nodes == nil || spec.Nodes.Workers == nil || *spec.Nodes.Workers.Count != 3 || spec.ProviderHints.Acm.BaseDomain == nil {
				t.Fatalf("spec not echoed in canonical form: %s", raw)
			}
			ready, seen := sp.waitStatus(t, c.Id, "READY", 90*time.Second)
			seen = append([]string{string(c.Status)}, seen...)
			if !slices.Contains(seen, "PROVISIONING") || slices.Contains(seen, "FAILED") || slices.Contains(seen, "UNAVAILABLE") {
				t.Errorf("status sequence %v, want PROVISIONING before READY", seen)
			}
			if !strings.HasPrefix(ready.ApiEndpoint, "https://127.") || !strings.HasSuffix(ready.ApiEndpoint, ":6443") {
				t.Errorf("api_endpoint %q", ready.ApiEndpoint)
			}
			if ready.ConsoleUrl == "" || ready.Nodes.Workers.Ready != 3 || ready.Nodes.ControlPlane.Ready != 3 {
				t.Errorf("READY resource %+v", ready)
			}
			kc, err := base64.StdEncoding.DecodeString(ptr.Deref(ready.Kubeconfig, ""))
			if err != nil {
				t.Fatalf("kubeconfig is not base64: %v", err)
			}
			var secret corev1.Secret
			name := spec.Metadata.Name
			if err := testHub.Client.Get(context.Background(), client.ObjectKey{Namespace: "clusters", Name: name + "-admin-kubeconfig"}, &secret); err != nil {
				t.Fatal(err)
			}
			if string(kc) != string(secret.Data["kubeconfig"]) {
				t.Fatal("kubeconfig differs from the operator's Secret")
			}
			if _, err := clientcmd.Load(kc); err != nil {
				t.Fatalf("kubeconfig does not parse: %v", err)
			}
			// The spec GET returns is the one POST echoed.
			if a, b := mustJSON(t, c.Spec), mustJSON(t, ready.Spec); a != b {
				t.Errorf("GET spec %s != POST spec %s", b, a)
			}
			// ACM: ManagedCluster with the managed-by, instance-id and service-type labels, and the KlusterletAddonConfig once ACM's namespace exists.
			var mc clusterv1.ManagedCluster
			if err := testHub.Client.Get(context.Background(), client.ObjectKey{Name: name}, &mc); err != nil || mc.Labels[meta.LabelInstanceID] != c.Id {
				t.Fatalf("ManagedCluster: %v %v", err, mc.Labels)
			}
			waitFor(t, 60*time.Second, "KlusterletAddonConfig", func() bool {
				kac := &unstructured.Unstructured{}
				kac.SetGroupVersionKind(hubapi.KlusterletAddonConfigGVK)
				return testHub.Client.Get(context.Background(), client.ObjectKey{Namespace: name, Name: name}, kac) == nil
			})
			if platform == "baremetal" {
				if got := reservedAgents(t, c.Id); len(got) != 3 {
					t.Fatalf("reserved Agents %v, want 3", got)
				}
			}
		})
	}
}

// DCM retries POSTs: the same id and spec answers 200 with the existing cluster; a different spec under that id
// or the same name under another id is a 409 that leaves the existing cluster untouched.
func TestCreateIdempotency(t *testing.T) {
	t.Parallel()
	sp := shared(t)
	name := uniqueName("idem")
	id := "inst-" + name
	body := kubevirtBody(name, 2)
	code, first, raw := sp.create(t, id, body)
	if code != http.StatusCreated || first.Id != id {
		t.Fatalf("first POST: %d %s", code, raw)
	}
	code, again, raw := sp.create(t, id, body)
	if code != http.StatusOK || again.Id != id || !again.CreateTime.Equal(first.CreateTime) {
		t.Fatalf("replay: %d %s", code, raw)
	}
	// The flat camelCase form of the same request is the same spec.
	flat := fmt.Sprintf(`{"serviceType":"cluster","version":"1.30","metadata":{"name":%q},"nodes":{"worker":{"count":2,"cpu":4,"memory":"16GB","storage":"120GB"}},"providerHints":{"acm":{"platform":"kubevirt"}}}`, name)
	if code, _, raw := sp.create(t, id, flat); code != http.StatusOK {
		t.Fatalf("replay in flat form: %d %s", code, raw)
	}
	code, h, raw2 := do(t, http.MethodPost, sp.URL+"/api/v1alpha1/clusters?id="+id, "application/json", []byte(kubevirtBody(name, 5)))
	assertProblem(t, code, h, raw2, http.StatusConflict, "different spec")
	code, h, raw2 = do(t, http.MethodPost, sp.URL+"/api/v1alpha1/clusters?id=other-"+id, "application/json", []byte(body))
	assertProblem(t, code, h, raw2, http.StatusConflict, "is used by instance "+id)
	if code, _ := sp.get(t, "other-"+id); code != http.StatusNotFound {
		t.Fatalf("the conflicting create left a cluster behind: %d", code)
	}
	if _, c := sp.get(t, id); c.Nodes.Workers.Total != 2 {
		t.Fatalf("existing cluster modified: %+v", c.Nodes)
	}
}

// Concurrent identical creates: exactly one cluster, the others get 200 or 409, never a 5xx.
func TestConcurrentCreates(t *testing.T) {
	t.Parallel()
	sp := shared(t)
	name := uniqueName("race")
	id := "inst-" + name
	body := kubevirtBody(name, 1)
	var mu sync.Mutex
	codes := map[int]int{}
	var wg sync.WaitGroup
	for i := 0; i < 8; i++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			code, _, _ := do(t, http.MethodPost, sp.URL+"/api/v1alpha1/clusters?id="+id, "application/json", []byte(body))
			mu.Lock()
			codes[code]++
			mu.Unlock()
		}()
	}
	wg.Wait()
	if codes[http.StatusCreated] != 1 || codes[http.StatusCreated]+codes[http.StatusOK]+codes[http.StatusConflict] != 8 {
		t.Fatalf("status codes %v: want exactly one 201 and only 200/409 otherwise", codes)
	}
	var list hyperv1.HostedClusterList
	if err := testHub.Client.List(context.Background(), &list, client.InNamespace("clusters"), client.MatchingLabels{meta.LabelInstanceID: id}); err != nil || len(list.Items) != 1 {
		t.Fatalf("%d HostedClusters for %s (%v)", len(list.Items), id, err)
	}
}

// DELETE answers 204, the cluster is DELETING, then gone; nothing the SP created is left on the hub.
func TestDeleteLeavesNothingBehind(t *testing.T) {
	t.Parallel()
	sp := shared(t)
	for _, platform := range []string{"kubevirt", "baremetal"} {
		t.Run(platform, func(t *testing.T) {
			name := uniqueName("del-" + platform[:2])
			body := kubevirtBody(name, 2)
			if platform == "baremetal" {
				body = baremetalBody(name, agentPool(t, 2), 2)
			}
			code, c, raw := sp.create(t, "", body)
			if code != http.StatusCreated {
				t.Fatalf("POST: %d %s", code, raw)
			}
			sp.waitStatus(t, c.Id, "READY", 90*time.Second)
			if platform == "baremetal" && len(reservedAgents(t, c.Id)) != 2 {
				t.Fatal("Agents not reserved")
			}
			resp, err := sp.Client.DeleteClusterWithResponse(context.Background(), c.Id, nil)
			if err != nil || resp.StatusCode() != http.StatusNoContent {
				t.Fatalf("DELETE: %v %d %s", err, resp.StatusCode(), resp.Body)
			}
			if _, cl := sp.get(t, c.Id); cl.Status != "" && cl.Status != api.DELETING {
				t.Fatalf("after DELETE: %s", cl.Status)
			}
			if resp, _ := sp.Client.DeleteClusterWithResponse(context.Background(), c.Id, nil); resp.StatusCode() != http.StatusNoContent && resp.StatusCode() != http.StatusNotFound {
				t.Fatalf("repeated DELETE: %d", resp.StatusCode())
			}
			sp.waitStatus(t, c.Id, "DELETED", 90*time.Second)
			waitFor(t, 60*time.Second, "no leftovers", func() bool { return len(leftovers(t, c.Id, name)) == 0 })
		})
	}
}

// leftovers lists what is still on the hub for an instance.
// readExample reads one of the example request bodies in api/v1alpha1/examples.
func readExample(t testing.TB, name string) string {
	t.Helper()
	data, err := os.ReadFile(filepath.Join("..", "..", "..", "api", "v1alpha1", "examples", name))
	if err != nil {
		t.Fatal(err)
	}
	return string(data)
}

func leftovers(t testing.TB, id, name string) []string {
	t.Helper()
	return leftoversIn(t, "clusters", id, name)
}

// leftoversIn lists every object an instance may leave on the hub, in the SP namespace ns.
func leftoversIn(t testing.TB, ns, id, name string) []string {
	t.Helper()
	ctx := context.Background()
	var out []string
	must := func(err error) {
		if err != nil {
			t.Fatalf("looking for leftovers of %s: %v", id, err)
		}
	}
	var hcs hyperv1.HostedClusterList
	must(testHub.Client.List(ctx, &hcs, client.InNamespace(ns), client.MatchingLabels{meta.LabelInstanceID: id}))
	for _, o := range hcs.Items {
		out = append(out, "HostedCluster/"+o.Name)
	}
	var nps hyperv1.NodePoolList
	must(testHub.Client.List(ctx, &nps, client.InNamespace(ns), client.MatchingLabels{meta.LabelInstanceID: id}))
	for _, o := range nps.Items {
		out = append(out, "NodePool/"+o.Name)
	}
	var secrets corev1.SecretList
	must(testHub.Client.List(ctx, &secrets, client.InNamespace(ns), client.MatchingLabels{meta.LabelInstanceID: id}))
	for _, o := range secrets.Items {
		out = append(out, "Secret/"+o.Name)
	}
	var locks corev1.ConfigMapList
	must(testHub.Client.List(ctx, &locks, client.InNamespace(ns), client.MatchingLabels{meta.LabelInstanceID: id}))
	for _, o := range locks.Items {
		out = append(out, "ConfigMap/"+o.Name)
	}
	var mc clusterv1.ManagedCluster
	if err := testHub.Client.Get(ctx, client.ObjectKey{Name: name}, &mc); err == nil {
		out = append(out, "ManagedCluster/"+name)
	} else if !apierrors.IsNotFound(err) {
		must(err)
	}
	kac := &unstructured.Unstructured{}
	kac.SetGroupVersionKind(hubapi.KlusterletAddonConfigGVK)
	if err := testHub.Client.Get(ctx, client.ObjectKey{Namespace: name, Name: name}, kac); err == nil {
		out = append(out, "KlusterletAddonConfig/"+name)
	} else if !apierrors.IsNotFound(err) {
		must(err)
	}
	for _, a := range reservedAgents(t, id) {
		out = append(out, "Agent reservation/"+a)
	}
	return append(out, controlPlaneNamespaceLeft(t, ns, name)...)
}

func reservedAgents(t testing.TB, id string) []string {
	var list unstructured.UnstructuredList
	list.SetGroupVersionKind(hubapi.AgentGVK.GroupVersion().WithKind("AgentList"))
	if err := testHub.Client.List(context.Background(), &list, client.InNamespace(agentNamespace), client.MatchingLabels{meta.LabelInstanceID: id}); err != nil {
		t.Fatal(err)
	}
	var out []string
	for _, a := range list.Items {
		out = append(out, a.GetName())
	}
	return out
}

func waitFor(t testing.TB, within time.Duration, what string, cond func() bool) {
	t.Helper()
	testwait.For(t, within, what, cond)
}

func mustJSON(t testing.TB, v any) string {
	b, err := json.Marshal(v)
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

// A deleted cluster's name can be used again (ACM's namespace for it is gone once the deletion completes).
func TestNameReusableAfterDelete(t *testing.T) {
	t.Parallel()
	sp := shared(t)
	name := uniqueName("again")
	code, c, raw := sp.create(t, "", kubevirtBody(name, 1))
	if code != http.StatusCreated {
		t.Fatalf("%d %s", code, raw)
	}
	sp.waitStatus(t, c.Id, "READY", 90*time.Second)
	waitFor(t, 60*time.Second, "ACM namespace created", func() bool {
		return testHub.Client.Get(context.Background(), client.ObjectKey{Name: name}, &corev1.Namespace{}) == nil
	})
	if resp, err := sp.Client.DeleteClusterWithResponse(context.Background(), c.Id, nil); err != nil || resp.StatusCode() != http.StatusNoContent {
		t.Fatalf("DELETE: %v", err)
	}
	sp.waitStatus(t, c.Id, "DELETED", 90*time.Second)
	waitFor(t, 60*time.Second, "name free again", func() bool {
		code, _, _ := sp.create(t, "", kubevirtBody(name, 1))
		return code == http.StatusCreated
	})
}
