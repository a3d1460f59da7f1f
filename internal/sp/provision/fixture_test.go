package provision

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/google/uuid"
	configv1 "github.com/openshift/api/config/v1"
	hyperv1 "github.com/openshift/hypershift/api/hypershift/v1beta1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	clusterv1 "open-cluster-management.io/api/cluster/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/fake"
	"sigs.k8s.io/controller-runtime/pkg/client/interceptor"

	"github.com/dcm-sp/acm-cluster-sp/internal/sp/clusters"
	"github.com/dcm-sp/acm-cluster-sp/internal/sp/hub"
	"github.com/dcm-sp/acm-cluster-sp/internal/sp/hubapi"
	"github.com/dcm-sp/acm-cluster-sp/internal/sp/inventory"
	"github.com/dcm-sp/acm-cluster-sp/internal/sp/meta"
	"github.com/dcm-sp/acm-cluster-sp/internal/sp/versions"
)

// The unit tests run the services over controller-runtime's fake client and the SP's own read model (hub.Index,
// in memory), which the fixture feeds from every write the way the hub's informers would — synchronously, so a
// write is visible to the next read of the index.

const (
	testNS       = "clusters"
	testAgentNS  = "hardware-inventory"
	testProvider = "acm-test"
	testInfraEnv = "production-infraenv"
)

// testEpoch is the fixture's clock: every object the fake API server creates is stamped with it.
var testEpoch = time.Date(2026, 11, 26, 10, 0, 0, 0, time.UTC)

type fixture struct {
	t       *testing.T
	client  client.WithWatch
	index   *hub.Index
	catalog *fakeCatalog
	site    *fakeSite
	svc     Services

	mu    sync.Mutex
	fails []failure // injected API-server failures, in order of registration
	// before, when set, runs before the next create reaches the fake API server, once (a rival writing first).
	before func(ctx context.Context, c client.Client, obj client.Object)
	// onCreate, when set, sees every create before it reaches the fake API server (set it before the writes).
	onCreate func(obj client.Object)
	// unseen, when set, makes the index miss the writes of the objects it is true of (their informers' events come
	// later, or never); lagging misses them all (a replica whose caches have not seen another one's create yet).
	unseen func(obj client.Object) bool
}

// failure makes the fake API server refuse a verb on a kind (and name, if set) with err.
type failure struct {
	verb, kind, name string
	err              error
}

type option func(*Config)

// lagging is the unseen of an index that sees no write.
func lagging(client.Object) bool { return true }

func manageACM(c *Config) { c.ManageACMObjects = true }

func newFixture(t *testing.T, opts ...option) *fixture {
	t.Helper()
	f := &fixture{t: t, index: hub.NewIndex(testProvider), site: &fakeSite{synced: true}}
	scheme := hub.Scheme()
	for _, gvk := range []schema.GroupVersionKind{hubapi.AgentGVK, hubapi.KlusterletAddonConfigGVK} {
		scheme.AddKnownTypeWithName(gvk, &unstructured.Unstructured{})
		scheme.AddKnownTypeWithName(gvk.GroupVersion().WithKind(gvk.Kind+"List"), &unstructured.UnstructuredList{})
	}
	f.client = fake.NewClientBuilder().WithScheme(scheme).WithInterceptorFuncs(f.apiServer()).Build()
	f.catalog = &fakeCatalog{client: f.client, infraEnvs: []string{testInfraEnv}, clusterNamespaces: map[string]bool{}, sets: []versions.ImageSet{
		imageSet("4.17.29"), imageSet("4.18.22"),
	}}
	cfg := Config{
		Provider:           testProvider,
		Spec:               clusters.SpecContext{Namespace: testNS, AgentNamespace: testAgentNS, DefaultPlatform: "kubevirt", BaseDomain: "example.com", DefaultInfraEnv: testInfraEnv},
		DefaultWorkerCount: 2,
		PullSecret:         func(context.Context) ([]byte, error) { return []byte(`{"auths":{}}`), nil },
		Matrix:             versions.DefaultMatrix(),
		Platforms:          func() []string { return []string{"kubevirt", "baremetal"} },
		CacheWait:          time.Second,
	}
	for _, o := range opts {
		o(&cfg)
	}
	f.svc = New(Ports{Client: f.client, Index: f.index, Catalog: f.catalog, Site: f.site}, cfg, nil)
	f.index.OnChange(f.svc.IndexChanged)
	now := func() time.Time { return testEpoch.Add(time.Minute) }
	f.svc.Writer.now, f.svc.Reader.now, f.svc.Converger.now = now, now, now
	return f
}

// apiServer plays what the fake client does not: it stamps new objects with a UID and the creation time, refuses
// what a test injected, and feeds the index from every write (the hub's informers).
func (f *fixture) apiServer() interceptor.Funcs {
	return interceptor.Funcs{
		Create: func(ctx context.Context, c client.WithWatch, obj client.Object, opts ...client.CreateOption) error {
			if before := f.takeBefore(); before != nil {
				before(ctx, c, obj)
			}
			if f.onCreate != nil {
				f.onCreate(obj)
			}
			if err := f.injected("create", obj); err != nil {
				return err
			}
			if obj.GetUID() == "" {
				obj.SetUID(types.UID(uuid.NewString()))
			}
			if ct := obj.GetCreationTimestamp(); ct.IsZero() {
				obj.SetCreationTimestamp(metav1.NewTime(testEpoch))
			}
			if err := c.Create(ctx, obj, opts...); err != nil {
				return err
			}
			f.observe(ctx, c, obj)
			return nil
		},
		Update: func(ctx context.Context, c client.WithWatch, obj client.Object, opts ...client.UpdateOption) error {
			if err := f.injected("update", obj); err != nil {
				return err
			}
			if err := c.Update(ctx, obj, opts...); err != nil {
				return err
			}
			f.observe(ctx, c, obj)
			return nil
		},
		Patch: func(ctx context.Context, c client.WithWatch, obj client.Object, patch client.Patch, opts ...client.PatchOption) error {
			if err := f.injected("patch", obj); err != nil {
				return err
			}
			if err := c.Patch(ctx, obj, patch, opts...); err != nil {
				return err
			}
			f.observe(ctx, c, obj)
			return nil
		},
		Delete: func(ctx context.Context, c client.WithWatch, obj client.Object, opts ...client.DeleteOption) error {
			if err := f.injected("delete", obj); err != nil {
				return err
			}
			cur := obj.DeepCopyObject().(client.Object) // as the informer last saw it: the index finds it by its labels
			_ = c.Get(ctx, client.ObjectKeyFromObject(obj), cur)
			if err := c.Delete(ctx, obj, opts...); err != nil {
				return err
			}
			f.observe(ctx, c, cur)
			return nil
		},
	}
}

func imageSet(version string) versions.ImageSet {
	return versions.ImageSet{Name: "img" + version + "-multi-appsub", ReleaseImage: "quay.io/openshift-release-dev/ocp-release:" + version + "-multi", Visible: true}
}

// fail registers an injected failure.
func (f *fixture) fail(verb, kind, name string, err error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.fails = append(f.fails, failure{verb, kind, name, err})
}

func (f *fixture) injected(verb string, obj client.Object) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	for _, x := range f.fails {
		if x.verb == verb && x.kind == kindOf(obj) && (x.name == "" || x.name == obj.GetName()) {
			return x.err
		}
	}
	return nil
}

// takeBefore returns the pending before hook, once.
func (f *fixture) takeBefore() func(context.Context, client.Client, client.Object) {
	f.mu.Lock()
	defer f.mu.Unlock()
	b := f.before
	f.before = nil
	return b
}

// observe feeds the index from the API server's state of a written object, as the informers would.
func (f *fixture) observe(ctx context.Context, c client.Client, obj client.Object) {
	f.mu.Lock()
	unseen := f.unseen
	f.mu.Unlock()
	if unseen != nil && unseen(obj) {
		return
	}
	switch o := obj.(type) {
	case *hyperv1.HostedCluster:
		mirror(ctx, c, o, f.index.PutHostedCluster, f.index.DeleteHostedCluster)
	case *hyperv1.NodePool:
		mirror(ctx, c, o, f.index.PutNodePool, f.index.DeleteNodePool)
	case *clusterv1.ManagedCluster:
		mirror(ctx, c, o, f.index.PutManagedCluster, f.index.DeleteManagedCluster)
	case *corev1.Secret:
		md := func(s *corev1.Secret) *metav1.PartialObjectMetadata {
			return &metav1.PartialObjectMetadata{ObjectMeta: s.ObjectMeta}
		}
		mirror(ctx, c, o, func(s *corev1.Secret) { f.index.PutSecret(md(s)) }, func(s *corev1.Secret) { f.index.DeleteSecret(md(s)) })
	}
}

// mirror reads obj back from the API server and puts it into the index, or deletes it from there when it is gone.
func mirror[T client.Object](ctx context.Context, c client.Client, obj T, put, del func(T)) {
	cur := obj.DeepCopyObject().(T)
	switch err := c.Get(ctx, client.ObjectKeyFromObject(obj), cur); {
	case apierrors.IsNotFound(err):
		del(obj)
	case err == nil:
		put(cur)
	}
}

// seed creates objects on the fake API server (and in the index, as the informers would).
func (f *fixture) seed(objs ...client.Object) {
	f.t.Helper()
	for _, o := range objs {
		if err := f.client.Create(context.Background(), o); err != nil {
			f.t.Fatalf("seeding %s %s: %v", kindOf(o), o.GetName(), err)
		}
	}
}

func (f *fixture) get(obj client.Object, namespace, name string) error {
	return f.client.Get(context.Background(), client.ObjectKey{Namespace: namespace, Name: name}, obj)
}

func (f *fixture) hostedCluster(name string) *hyperv1.HostedCluster {
	f.t.Helper()
	var hc hyperv1.HostedCluster
	if err := f.get(&hc, testNS, name); err != nil {
		f.t.Fatalf("HostedCluster %s: %v", name, err)
	}
	return &hc
}

// exists reports whether an object of that kind and name is on the API server.
func (f *fixture) exists(obj client.Object, namespace, name string) bool {
	f.t.Helper()
	err := f.get(obj, namespace, name)
	if err != nil && !apierrors.IsNotFound(err) {
		f.t.Fatalf("reading %s %s: %v", kindOf(obj), name, err)
	}
	return err == nil
}

// create runs a create and fails the test on an error.
func (f *fixture) create(id, key, body string) *clusters.Cluster {
	f.t.Helper()
	c, created, err := f.svc.Create(context.Background(), id, key, []byte(body))
	if err != nil || !created {
		f.t.Fatalf("create %s: created %v, %v", id, created, err)
	}
	return c
}

// installed makes a cluster's HostedCluster report a completed installation of version (as the operator would).
func (f *fixture) installed(name, version string) {
	f.t.Helper()
	hc := f.hostedCluster(name)
	hc.Status.Version = &hyperv1.ClusterVersionStatus{History: []configv1.UpdateHistory{{State: configv1.CompletedUpdate, Version: version,
		Image: "quay.io/openshift-release-dev/ocp-release:" + version + "-multi"}}}
	hc.Status.Version.Desired.Image = hc.Spec.Release.Image
	if err := f.client.Update(context.Background(), hc); err != nil {
		f.t.Fatalf("marking %s installed: %v", name, err)
	}
}

func kubevirtBody(name string, workers int) string {
	return fmt.Sprintf(`{"spec":{"version":"4.17","metadata":{"name":%q},"nodes":{"workers":{"count":%d,"cpu":4,"memory":"16GB","storage":"120GB"}},"provider_hints":{"acm":{"platform":"kubevirt"}}}}`, name, workers)
}

func baremetalBody(name string, workers int) string {
	return fmt.Sprintf(`{"spec":{"version":"4.17","metadata":{"name":%q},"nodes":{"workers":{"count":%d,"cpu":8}},"provider_hints":{"acm":{"platform":"baremetal","base_domain":"example.com","infra_env":%q,"agent_labels":{"location":"lab"}}}}}`, name, workers, testInfraEnv)
}

// agent is an Agent of the test InfraEnv that a cluster of baremetalBody may reserve.
func agent(name string) *unstructured.Unstructured {
	u := &unstructured.Unstructured{Object: map[string]any{
		"spec": map[string]any{"approved": true, "role": "auto-assign"},
		"status": map[string]any{
			"conditions": []any{map[string]any{"type": "Validated", "status": "True"}, map[string]any{"type": "Bound", "status": "False", "reason": "Unbound"}},
			"inventory": map[string]any{"cpu": map[string]any{"count": int64(16)}, "memory": map[string]any{"physicalBytes": int64(64 << 30)},
				"disks": []any{map[string]any{"sizeBytes": int64(500 << 30), "installationEligibility": map[string]any{"eligible": true}}}},
		},
	}}
	u.SetGroupVersionKind(hubapi.AgentGVK)
	u.SetNamespace(testAgentNS)
	u.SetName(name)
	u.SetLabels(map[string]string{meta.LabelInfraEnv: testInfraEnv, "location": "lab"})
	return u
}

// reservedFor lists the Agents carrying an instance's reservation.
func (f *fixture) reservedFor(id string) []string {
	f.t.Helper()
	agents, err := f.catalog.Agents(context.Background())
	if err != nil {
		f.t.Fatal(err)
	}
	var out []string
	for _, a := range agents {
		if a.Labels[meta.LabelInstanceID] == id {
			out = append(out, a.Name)
		}
	}
	return out
}

type fakeCatalog struct {
	client            client.Client
	sets              []versions.ImageSet
	infraEnvs         []string
	kac               bool
	clusterNamespaces map[string]bool
}

func (k *fakeCatalog) ImageSets(context.Context) ([]versions.ImageSet, error) { return k.sets, nil }
func (k *fakeCatalog) SupportedVersions(context.Context) ([]string, bool)     { return nil, false }
func (k *fakeCatalog) InfraEnvNames(context.Context) ([]string, error)        { return k.infraEnvs, nil }
func (k *fakeCatalog) ServesKlusterletAddonConfig() bool                      { return k.kac }
func (k *fakeCatalog) ClusterNamespaceExists(_ context.Context, name string) bool {
	return k.clusterNamespaces[name]
}

// Agents lists the Agents on the API server (the hub reads its cache; here the cache is always current).
func (k *fakeCatalog) Agents(ctx context.Context) ([]inventory.Agent, error) {
	var list unstructured.UnstructuredList
	list.SetGroupVersionKind(hubapi.AgentGVK.GroupVersion().WithKind("AgentList"))
	if err := k.client.List(ctx, &list, client.InNamespace(testAgentNS)); err != nil {
		return nil, err
	}
	out := make([]inventory.Agent, 0, len(list.Items))
	for i := range list.Items {
		out = append(out, inventory.FromUnstructured(&list.Items[i]))
	}
	return out, nil
}

type fakeSite struct {
	synced      bool
	kubeconfigs map[string][]byte // Secret name → content
}

func (s *fakeSite) Namespace() string      { return testNS }
func (s *fakeSite) AgentNamespace() string { return testAgentNS }
func (s *fakeSite) Synced() bool           { return s.synced }
func (s *fakeSite) Watching(string) bool   { return true }
func (s *fakeSite) Kubeconfig(_ context.Context, ref clusters.SecretRef) ([]byte, error) {
	if data, ok := s.kubeconfigs[ref.Name]; ok {
		return data, nil
	}
	return nil, apierrors.NewNotFound(schema.GroupResource{Resource: "secrets"}, ref.Name)
}

// finishDeletion plays the operator and the garbage collector for a HostedCluster being deleted: its finalizers
// go, and with it what it owns.
func (f *fixture) finishDeletion(name string) {
	f.t.Helper()
	ctx := context.Background()
	hc := f.hostedCluster(name)
	if hc.DeletionTimestamp == nil {
		f.t.Fatalf("HostedCluster %s is not being deleted", name)
	}
	hc.Finalizers = nil
	if err := f.client.Update(ctx, hc); err != nil && !apierrors.IsNotFound(err) {
		f.t.Fatal(err)
	}
	var nps hyperv1.NodePoolList
	var secrets corev1.SecretList
	var cms corev1.ConfigMapList
	for _, l := range []client.ObjectList{&nps, &secrets, &cms} {
		if err := f.client.List(ctx, l, client.InNamespace(testNS)); err != nil {
			f.t.Fatal(err)
		}
	}
	var owned []client.Object
	for i := range nps.Items {
		owned = append(owned, &nps.Items[i])
	}
	for i := range secrets.Items {
		owned = append(owned, &secrets.Items[i])
	}
	for i := range cms.Items {
		owned = append(owned, &cms.Items[i])
	}
	for _, o := range owned {
		if ownedBy(o.GetOwnerReferences(), hc) {
			if err := f.client.Delete(ctx, o); err != nil && !apierrors.IsNotFound(err) {
				f.t.Fatal(err)
			}
		}
	}
}

var (
	kacResource  = schema.GroupResource{Group: hubapi.KlusterletAddonConfigGVK.Group, Resource: "klusterletaddonconfigs"}
	errAdmission = errors.New(`admission webhook "deny.example.com" denied the request`)
)

func newHostedCluster() *hyperv1.HostedCluster { return &hyperv1.HostedCluster{} }

func objectMeta(namespace, name string) metav1.ObjectMeta {
	return metav1.ObjectMeta{Namespace: namespace, Name: name}
}

// operatorFinalizer adds the finalizer the HyperShift operator puts on every HostedCluster it manages.
func (f *fixture) operatorFinalizer(name string) {
	f.t.Helper()
	hc := f.hostedCluster(name)
	hc.Finalizers = append(hc.Finalizers, "hypershift.openshift.io/finalizer")
	if err := f.client.Update(context.Background(), hc); err != nil {
		f.t.Fatal(err)
	}
}

// installedBareMetal creates the Agents and a bare-metal cluster "metal" of instance id1 with that many workers,
// and marks it installed.
func (f *fixture) installedBareMetal(workers int, agents ...string) {
	f.t.Helper()
	for _, name := range agents {
		f.seed(agent(name))
	}
	f.create(id1, "", baremetalBody("metal", workers))
	f.installed("metal", "4.17.29")
}
