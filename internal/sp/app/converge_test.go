package app

import (
	"context"
	"fmt"
	"net/http"
	"strings"
	"testing"
	"time"

	hyperv1 "github.com/openshift/hypershift/api/hypershift/v1beta1"
	coordinationv1 "k8s.io/api/coordination/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/util/retry"
	"k8s.io/utils/ptr"
	clusterv1 "open-cluster-management.io/api/cluster/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/dcm-sp/acm-cluster-sp/internal/devtest/sp/faultproxy"
	"github.com/dcm-sp/acm-cluster-sp/internal/devtest/testwait"
	"github.com/dcm-sp/acm-cluster-sp/internal/sp/config"
	"github.com/dcm-sp/acm-cluster-sp/internal/sp/hub"
	"github.com/dcm-sp/acm-cluster-sp/internal/sp/meta"
	"github.com/dcm-sp/acm-cluster-sp/internal/sp/reconcile"
	"github.com/dcm-sp/acm-cluster-sp/internal/sp/render"
	"github.com/dcm-sp/acm-cluster-sp/pkg/api"
)

// holdLease makes "another replica" the leader of an SP's lease, so that replica's own reconciler never runs and
// the only writes it makes are those of its API requests. release lets a real replica take over.
func holdLease(t *testing.T, cfg config.Config) (release func()) {
	t.Helper()
	now := metav1.NewMicroTime(time.Now())
	l := &coordinationv1.Lease{ObjectMeta: metav1.ObjectMeta{Name: cfg.ProviderName + "-leader", Namespace: cfg.LeaseNamespace()},
		Spec: coordinationv1.LeaseSpec{HolderIdentity: ptr.To("another-replica"), LeaseDurationSeconds: ptr.To[int32](3600), AcquireTime: &now, RenewTime: &now}}
	if err := testHub.Client.Create(context.Background(), l); err != nil {
		t.Fatal(err)
	}
	return func() {
		if err := testHub.Client.Delete(context.Background(), l); err != nil && !apierrors.IsNotFound(err) {
			t.Fatal(err)
		}
	}
}

// childrenOf waits until a cluster is converged: its Secrets and NodePool exist and are owned by the
// HostedCluster, its ManagedCluster exists, all labelled with the provider. The reconciler converges asynchronously
// (a READY cluster may still lack a Secret it recreates), so this waits for the state rather than reading it once.
func childrenOf(t *testing.T, ns, id, name, provider string, secrets int) {
	t.Helper()
	var last error
	if !testwait.Poll(60*time.Second, func() bool { last = childrenErr(ns, id, name, provider, secrets); return last == nil }) {
		t.Fatalf("cluster %s not converged within 60s: %v", id, last)
	}
}

// childrenErr says what is missing or wrong in a cluster's converged state (nil: nothing).
func childrenErr(ns, id, name, provider string, secrets int) error {
	ctx := context.Background()
	var hc hyperv1.HostedCluster
	if err := testHub.Client.Get(ctx, client.ObjectKey{Namespace: ns, Name: name}, &hc); err != nil {
		return err
	}
	owned := func(kind string, o client.Object) error {
		if o.GetLabels()[meta.LabelProvider] != provider || meta.InstanceID(o.GetLabels()) != id {
			return fmt.Errorf("%s %s labels %v", kind, o.GetName(), o.GetLabels())
		}
		for _, r := range o.GetOwnerReferences() {
			if r.UID == hc.UID && r.Kind == "HostedCluster" {
				return nil
			}
		}
		return fmt.Errorf("%s %s is not owned by HostedCluster %s: %v", kind, o.GetName(), name, o.GetOwnerReferences())
	}
	var np hyperv1.NodePool
	if err := testHub.Client.Get(ctx, client.ObjectKey{Namespace: ns, Name: name}, &np); err != nil {
		return fmt.Errorf("NodePool: %w", err)
	}
	if err := owned("NodePool", &np); err != nil {
		return err
	}
	var lock corev1.ConfigMap
	if err := testHub.Client.Get(ctx, client.ObjectKey{Namespace: ns, Name: render.InstanceLockName(provider, id)}, &lock); err != nil {
		return fmt.Errorf("instance lock: %w", err)
	}
	if err := owned("ConfigMap", &lock); err != nil {
		return err
	}
	var list corev1.SecretList
	if err := testHub.Client.List(ctx, &list, client.InNamespace(ns), client.MatchingLabels{meta.LabelInstanceID: id, meta.LabelManagedBy: meta.ManagedByValue}); err != nil {
		return err
	}
	var mine []string
	for i := range list.Items {
		if list.Items[i].Name == hub.AdminKubeconfigName(name) {
			continue // the operator's
		}
		if err := owned("Secret", &list.Items[i]); err != nil {
			return err
		}
		mine = append(mine, list.Items[i].Name)
	}
	if len(mine) != secrets {
		return fmt.Errorf("SP Secrets %v, want %d", mine, secrets)
	}
	var mc clusterv1.ManagedCluster
	if err := testHub.Client.Get(ctx, client.ObjectKey{Name: name}, &mc); err != nil || meta.InstanceID(mc.Labels) != id {
		return fmt.Errorf("ManagedCluster: %v %v", err, mc.Labels)
	}
	return nil
}

// A create interrupted after each of its writes to the hub — the SP process gone at that point, as the hub sees it:
// every later request of that process fails, its rollback included — is completed by the next replica's
// reconciler: the cluster reaches READY with every child in place, and DCM's retry of the same POST is answered
// 200 with it. Interrupted after its first write, the instance lock, there is no cluster yet: DCM's retry creates
// it (201), since the lock carries the same spec.
func TestCreateInterruptedAfterEachWriteConverges(t *testing.T) {
	t.Parallel()
	cases := []struct {
		platform string
		writes   int // writes of one create: lock, HostedCluster, lock owner, pull secret, etcd key, NodePool, ManagedCluster (+ 2 Agents)
		secrets  int
	}{
		{"kubevirt", 7, 2},
		{"baremetal", 9, 2},
	}
	for _, c := range cases {
		for k := 1; k < c.writes; k++ {
			t.Run(fmt.Sprintf("%s after write %d of %d", c.platform, k, c.writes), func(t *testing.T) {
				t.Parallel()
				const ns = "faults"
				cfg := testConfig(ns)
				cfg.ProviderName = fmt.Sprintf("sp-cut-%s-%d", c.platform[:2], k)
				release := holdLease(t, cfg)
				px, err := faultproxy.Start(testHub.Config)
				if err != nil {
					t.Fatal(err)
				}
				defer px.Close()
				dying := launchSP(t, cfg, Options{RestConfig: px.Config()})
				defer dying.stop()

				name := uniqueName("cut")
				id := "inst-" + name
				body := kubevirtBody(name, 2)
				if c.platform == "baremetal" {
					body = baremetalBody(name, agentPool(t, 2), 2)
				}
				before := px.Writes()
				px.SetRule(faultproxy.CutAfterWrites(k, nil))
				// The answer: 503 while the HostedCluster is not stored (DCM retries), 201 once it is (the
				// reconciler completes the rest).
				code, _, raw := dying.create(t, id, body)
				if want := map[bool]int{true: http.StatusServiceUnavailable, false: http.StatusCreated}[k < 2]; code != want {
					t.Fatalf("create through a hub that went away after write %d: %d %s, want %d", k, code, raw, want)
				}
				if got := px.Writes() - before; got != k {
					t.Fatalf("%d writes reached the hub, want %d", got, k)
				}
				dying.stop()
				release()

				next := launchSP(t, cfg, Options{})
				defer next.stop()
				waitFor(t, 60*time.Second, "the leader's reconciler to take over", next.App.Leading)
				if k == 1 { // only the lock was written
					if code, _, raw := next.create(t, id, body); code != http.StatusCreated {
						t.Fatalf("retried create after the lock alone: %d %s", code, raw)
					}
				}
				c2, seen := next.waitStatus(t, id, "READY", 90*time.Second)
				t.Logf("statuses after the restart: %v", seen)
				childrenOf(t, ns, id, name, cfg.ProviderName, c.secrets)
				if c.platform == "baremetal" && len(reservedAgents(t, id)) != 2 {
					t.Fatalf("Agents reserved: %v", reservedAgents(t, id))
				}
				// DCM retries the POST that failed: the same id and spec is the cluster, 200.
				code, again, raw := next.create(t, id, body)
				if code != http.StatusOK || again.Id != c2.Id || again.Status != api.READY {
					t.Fatalf("retried create: %d %s", code, raw)
				}
				deleteAndWait(t, next, ns, id, name)
			})
		}
	}
}

// deleteAndWait deletes a cluster through the API and waits until nothing of it is left on the hub.
func deleteAndWait(t *testing.T, sp *testSP, ns, id, name string) {
	t.Helper()
	if code, _, raw := do(t, http.MethodDelete, sp.URL+"/api/v1alpha1/clusters/"+id, "", nil); code != http.StatusNoContent {
		t.Fatalf("delete %s: %d %s", id, code, raw)
	}
	waitFor(t, 60*time.Second, "nothing left of "+id, func() bool { return len(leftoversIn(t, ns, id, name)) == 0 })
}

// The reconciler confirms a status that stepped back (a cache whose NodePools left before their HostedCluster's
// deletion arrived) by reading the instance from the API server: LiveView shows what the hub has right after a
// write no cache had to see, leaves out a NodePool of another instance, and shows no HostedCluster once it is gone.
func TestLiveViewReadsTheHub(t *testing.T) {
	t.Parallel()
	sp := shared(t)
	ctx := context.Background()
	name := uniqueName("live")
	id := "inst-" + name
	if code, _, raw := sp.create(t, id, kubevirtBody(name, 1)); code != http.StatusCreated {
		t.Fatalf("%d %s", code, raw)
	}
	key := client.ObjectKey{Namespace: "clusters", Name: name}
	var hc hyperv1.HostedCluster
	if err := testHub.Client.Get(ctx, key, &hc); err != nil {
		t.Fatal(err)
	}
	np := &hyperv1.NodePool{ObjectMeta: metav1.ObjectMeta{Namespace: "clusters", Name: name}}
	mark := fmt.Sprintf(`{"metadata":{"annotations":{"test.dcm-sp.io/live":%q}}}`, name)
	if err := testHub.Client.Patch(ctx, np, client.RawPatch(types.MergePatchType, []byte(mark))); err != nil {
		t.Fatal(err)
	}
	probe := &hyperv1.HostedCluster{ObjectMeta: metav1.ObjectMeta{Namespace: "clusters", Name: name}}
	v, err := sp.App.Service.LiveView(ctx, id, probe)
	if err != nil || v.HostedCluster == nil || v.HostedCluster.UID != hc.UID || len(v.NodePools) != 1 ||
		v.NodePools[0].Annotations["test.dcm-sp.io/live"] != name {
		t.Fatalf("LiveView right after the NodePool changed: %v, %+v", err, v)
	}
	if v, err := sp.App.Service.LiveView(ctx, "inst-other-"+name, probe); err != nil || v.HostedCluster == nil || len(v.NodePools) != 0 {
		t.Fatalf("LiveView under another instance's id: %v, %d NodePools (want the HostedCluster and none)", err, len(v.NodePools))
	}
	deleteAndWait(t, sp, "clusters", id, name)
	if v, err := sp.App.Service.LiveView(ctx, id, probe); err != nil || v.HostedCluster != nil || v.ID != id {
		t.Fatalf("LiveView of the deleted cluster: %v, %+v", err, v)
	}
}

// A NodePool deleted by hand comes back (the stored spec is the desired state), and the cluster returns to READY.
func TestNodePoolDeletedByHandComesBack(t *testing.T) {
	t.Parallel()
	sp := shared(t)
	name := uniqueName("np")
	id := "inst-" + name
	if code, _, raw := sp.create(t, id, kubevirtBody(name, 2)); code != http.StatusCreated {
		t.Fatalf("%d %s", code, raw)
	}
	sp.waitStatus(t, id, "READY", 60*time.Second)
	var np hyperv1.NodePool
	if err := testHub.Client.Get(context.Background(), client.ObjectKey{Namespace: "clusters", Name: name}, &np); err != nil {
		t.Fatal(err)
	}
	oldUID := np.UID
	if err := testHub.Client.Delete(context.Background(), &np); err != nil {
		t.Fatal(err)
	}
	waitFor(t, 60*time.Second, "a new NodePool", func() bool {
		var got hyperv1.NodePool
		return testHub.Client.Get(context.Background(), client.ObjectKey{Namespace: "clusters", Name: name}, &got) == nil && got.UID != oldUID
	})
	_, seen := sp.waitStatus(t, id, "READY", 60*time.Second)
	t.Logf("statuses while the NodePool came back: %v", seen)
	childrenOf(t, "clusters", id, name, "sp-clusters", 2)
	deleteAndWait(t, sp, "clusters", id, name)
}

// An operator deleting the HostedCluster with kubectl (not through the API) leads to DELETED and no orphans: the
// ManagedCluster, the KlusterletAddonConfig and the Secrets all go.
func TestHostedClusterDeletedWithKubectl(t *testing.T) {
	t.Parallel()
	sp := shared(t)
	name := uniqueName("kdel")
	id := "inst-" + name
	if code, _, raw := sp.create(t, id, kubevirtBody(name, 1)); code != http.StatusCreated {
		t.Fatalf("%d %s", code, raw)
	}
	sp.waitStatus(t, id, "READY", 60*time.Second)
	hc := &hyperv1.HostedCluster{ObjectMeta: metav1.ObjectMeta{Namespace: "clusters", Name: name}}
	if err := testHub.Client.Delete(context.Background(), hc); err != nil {
		t.Fatal(err)
	}
	_, seen := sp.waitStatus(t, id, "DELETED", 60*time.Second)
	if !strings.Contains(strings.Join(seen, " "), "DELETING") {
		t.Fatalf("statuses %v: no DELETING", seen)
	}
	waitFor(t, 60*time.Second, "no orphans", func() bool { return len(leftovers(t, id, name)) == 0 })
}

// An older HyperShift operator creates the admin-kubeconfig Secret without the HostedCluster's labels: the SP
// finds it by the name the HostedCluster gives and serves it.
func TestKubeconfigFromAnUnlabelledSecret(t *testing.T) {
	t.Parallel()
	sp := startSP(t, testConfig("oldop"), Options{})
	name := uniqueName("old")
	id := "inst-" + name
	if code, _, raw := sp.create(t, id, kubevirtBody(name, 1)); code != http.StatusCreated {
		t.Fatalf("%d %s", code, raw)
	}
	c, _ := sp.waitStatus(t, id, "READY", 60*time.Second)
	var sec corev1.Secret
	if err := testHub.Client.Get(context.Background(), client.ObjectKey{Namespace: "oldop", Name: hub.AdminKubeconfigName(name)}, &sec); err != nil {
		t.Fatal(err)
	}
	if len(sec.Labels) != 0 {
		t.Fatalf("the simulated older operator labelled the Secret: %v", sec.Labels)
	}
	if c.Kubeconfig == nil || *c.Kubeconfig == "" || c.KubeconfigOmitted != nil {
		t.Fatalf("no kubeconfig served from an unlabelled Secret: %+v", c)
	}
	deleteAndWait(t, sp, "oldop", id, name)
}

// Two SPs with different provider names in one namespace: each sees, serves, reconciles and sweeps only its own
// clusters.
func TestTwoProvidersShareANamespace(t *testing.T) {
	t.Parallel()
	const ns = "shared"
	a := startSP(t, func() config.Config { c := testConfig(ns); c.ProviderName = "provider-a"; return c }(), Options{})
	b := startSP(t, func() config.Config { c := testConfig(ns); c.ProviderName = "provider-b"; return c }(), Options{})
	names := map[*testSP]string{a: uniqueName("pa"), b: uniqueName("pb")}
	for sp, name := range names {
		if code, _, raw := sp.create(t, "inst-"+name, kubevirtBody(name, 1)); code != http.StatusCreated {
			t.Fatalf("%d %s", code, raw)
		}
	}
	for sp, name := range names {
		sp.waitStatus(t, "inst-"+name, "READY", 60*time.Second)
	}
	for sp, name := range names {
		other := names[a]
		if sp == a {
			other = names[b]
		}
		if code, _ := sp.get(t, "inst-"+other); code != http.StatusNotFound {
			t.Fatalf("a provider sees the other's cluster: %d", code)
		}
		resp, err := sp.Client.ListClustersWithResponse(context.Background(), &api.ListClustersParams{})
		if err != nil || resp.JSON200 == nil {
			t.Fatal(err)
		}
		for _, c := range resp.JSON200.Results {
			if c.Id != "inst-"+name {
				t.Fatalf("provider lists %s", c.Id)
			}
		}
		// A create of the other's instance id is not an idempotent replay of someone else's cluster.
		if code, _, _ := sp.create(t, "inst-"+other, kubevirtBody(other, 1)); code != http.StatusConflict {
			t.Fatalf("create of the other provider's id and name: %d", code)
		}
	}
	// Each reconciler swept orphans at its start; neither touched the other's objects.
	childrenOf(t, ns, "inst-"+names[a], names[a], "provider-a", 2)
	childrenOf(t, ns, "inst-"+names[b], names[b], "provider-b", 2)
	for sp, name := range names {
		deleteAndWait(t, sp, ns, "inst-"+name, name)
	}
}

// Objects created before the provider label existed are adopted: the reconciler labels them with its provider
// (and gives the children their ownerReferences).
func TestUnlabelledObjectsAreAdopted(t *testing.T) {
	t.Parallel()
	sp := shared(t)
	name := uniqueName("adopt")
	id := "inst-" + name
	if code, _, raw := sp.create(t, id, kubevirtBody(name, 1)); code != http.StatusCreated {
		t.Fatalf("%d %s", code, raw)
	}
	sp.waitStatus(t, id, "READY", 60*time.Second)
	ctx := context.Background()
	// The operator writes these objects too: a conflicting update is retried on a fresh read, as kubectl edit would.
	strip := func(o client.Object) {
		if err := retry.RetryOnConflict(retry.DefaultRetry, func() error {
			if err := testHub.Client.Get(ctx, client.ObjectKeyFromObject(o), o); err != nil {
				return err
			}
			l := o.GetLabels()
			delete(l, meta.LabelProvider)
			o.SetLabels(l)
			o.SetOwnerReferences(nil)
			return testHub.Client.Update(ctx, o)
		}); err != nil {
			t.Fatal(err)
		}
	}
	strip(&corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: "clusters", Name: render.PullSecretName(name)}})
	strip(&hyperv1.NodePool{ObjectMeta: metav1.ObjectMeta{Namespace: "clusters", Name: name}})
	strip(&hyperv1.HostedCluster{ObjectMeta: metav1.ObjectMeta{Namespace: "clusters", Name: name}})
	waitFor(t, 30*time.Second, "the objects adopted", func() bool {
		var hc hyperv1.HostedCluster
		var np hyperv1.NodePool
		var sec corev1.Secret
		return testHub.Client.Get(ctx, client.ObjectKey{Namespace: "clusters", Name: name}, &hc) == nil && hc.Labels[meta.LabelProvider] == "sp-clusters" &&
			testHub.Client.Get(ctx, client.ObjectKey{Namespace: "clusters", Name: name}, &np) == nil && np.Labels[meta.LabelProvider] == "sp-clusters" && len(np.OwnerReferences) == 1 &&
			testHub.Client.Get(ctx, client.ObjectKey{Namespace: "clusters", Name: render.PullSecretName(name)}, &sec) == nil && sec.Labels[meta.LabelProvider] == "sp-clusters" && len(sec.OwnerReferences) == 1
	})
	childrenOf(t, "clusters", id, name, "sp-clusters", 2)
	deleteAndWait(t, sp, "clusters", id, name)
}

// The orphan sweep removes, once older than the grace period, what belongs to this provider but to no cluster —
// the instance lock of a create that died before its HostedCluster, an unowned Secret, a ManagedCluster — and
// leaves a live cluster's lock alone.
func TestOrphanSweep(t *testing.T) {
	t.Parallel()
	const ns = "shared"
	cfg := testConfig(ns)
	cfg.ProviderName = "sp-sweep"
	ctx := context.Background()
	orphan := "inst-" + uniqueName("orph")
	lock := render.InstanceLock(cfg.ProviderName, ns, orphan, `{"metadata":{"name":"x"}}`)
	sec := &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Name: uniqueName("orph-pull-secret"), Namespace: ns, Labels: meta.Labels(cfg.ProviderName, orphan)}}
	mc := &clusterv1.ManagedCluster{ObjectMeta: metav1.ObjectMeta{Name: uniqueName("orph"), Labels: meta.Labels(cfg.ProviderName, orphan)}}
	for _, o := range []client.Object{lock, sec, mc} {
		if err := testHub.Client.Create(ctx, o); err != nil {
			t.Fatal(err)
		}
	}
	sp := startSP(t, cfg, Options{Reconciler: reconcile.Options{ResyncPeriod: 300 * time.Millisecond, OrphanGrace: time.Second}})
	name := uniqueName("live")
	id := "inst-" + name
	if code, _, raw := sp.create(t, id, kubevirtBody(name, 1)); code != http.StatusCreated {
		t.Fatalf("%d %s", code, raw)
	}
	gone := func(o client.Object) bool {
		return apierrors.IsNotFound(testHub.Client.Get(ctx, client.ObjectKeyFromObject(o), o.DeepCopyObject().(client.Object)))
	}
	waitFor(t, 30*time.Second, "the orphans swept", func() bool { return gone(lock) && gone(sec) && gone(mc) })
	// The live cluster's lock has been through two more sweeps since.
	swept := sp.App.Reconciler.Resyncs()
	waitFor(t, 60*time.Second, "two more sweeps", func() bool { return sp.App.Reconciler.Resyncs() >= swept+2 })
	childrenOf(t, ns, id, name, cfg.ProviderName, 2)
	deleteAndWait(t, sp, ns, id, name)
}
