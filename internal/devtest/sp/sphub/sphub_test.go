package sphub

import (
	"context"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
	hyperv1 "github.com/openshift/hypershift/api/hypershift/v1beta1"
	corev1 "k8s.io/api/core/v1"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/tools/clientcmd"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/dcm-sp/acm-cluster-sp/internal/sp/render"
)

var hub *Hub

func TestMain(m *testing.M) {
	os.Exit(RunTests(m, Options{}, func(h *Hub) func() { hub = h; return nil }))
}

func ctx(t *testing.T) context.Context {
	c, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	t.Cleanup(cancel)
	return c
}

// The API server enforces the real HostedCluster schema: an unknown platform type is rejected with the enum.
func TestHubRejectsInvalidHostedCluster(t *testing.T) {
	ns := hub.NewNamespace(t, "invalid")
	hc := render.Render(render.Examples()["kubevirt-minimal"]).HostedCluster
	hc.Namespace = ns
	u, err := toUnstructured(hc)
	if err != nil {
		t.Fatal(err)
	}
	if err := unstructured.SetNestedField(u.Object, "NotAPlatform", "spec", "platform", "type"); err != nil {
		t.Fatal(err)
	}
	err = hub.Client.Create(ctx(t), u)
	if !apierrors.IsInvalid(err) || !strings.Contains(err.Error(), "spec.platform.type") || !strings.Contains(err.Error(), "KubeVirt") {
		t.Fatalf("want a schema rejection naming spec.platform.type and its enum, got %v", err)
	}

	// Immutable fields are enforced by the CRD's CEL rules too.
	valid := render.Render(render.Examples()["kubevirt-minimal"]).HostedCluster
	valid.Namespace = ns
	valid.Finalizers = nil
	if err := hub.Client.Create(ctx(t), valid); err != nil {
		t.Fatal(err)
	}
	valid.Spec.InfraID = "changed-infra-id"
	if err := hub.Client.Update(ctx(t), valid); !apierrors.IsInvalid(err) {
		t.Fatalf("changing the immutable infraID: want Invalid, got %v", err)
	}
}

// Every rendering variant is accepted by the API server with the real CRDs (server-side dry run) and reads back.
func TestRenderedObjectsAccepted(t *testing.T) {
	ns := hub.NewNamespace(t, "render")
	for name, in := range render.Examples() {
		in.Namespace = ns
		objs := render.Render(in)
		all := []client.Object{}
		for _, s := range objs.Secrets {
			all = append(all, s)
		}
		all = append(all, objs.HostedCluster, objs.NodePool)
		if objs.ManagedCluster != nil {
			all = append(all, objs.ManagedCluster)
		}
		if objs.KlusterletAddonConfig != nil {
			objs.KlusterletAddonConfig.SetNamespace(ns)
			all = append(all, objs.KlusterletAddonConfig)
		}
		for _, o := range all {
			if err := hub.Client.Create(ctx(t), o, client.DryRunAll); err != nil {
				t.Errorf("%s: %T %s rejected: %v", name, o, o.GetName(), err)
			}
		}
	}
	// And one for real, read back through the typed client.
	in := render.Examples()["baremetal"]
	in.Namespace = ns
	hc := render.Render(in).HostedCluster
	if err := hub.Client.Create(ctx(t), hc); err != nil {
		t.Fatal(err)
	}
	var got hyperv1.HostedCluster
	if err := hub.Client.Get(ctx(t), client.ObjectKeyFromObject(hc), &got); err != nil {
		t.Fatal(err)
	}
	if got.Spec.Platform.Agent == nil || got.Spec.Platform.Agent.AgentNamespace != "hardware-inventory" || got.Spec.DNS.BaseDomain != "example.com" {
		t.Fatalf("read back %+v", got.Spec.Platform)
	}
}

// The CRDs are installed by server-side apply; applying them again is a no-op and all are Established.
func TestCRDsServerSideApplied(t *testing.T) {
	if err := InstallCRDs(ctx(t), hub.Client); err != nil {
		t.Fatalf("re-applying the CRDs: %v", err)
	}
	names := CRDNames()
	if len(names) != 14 {
		t.Fatalf("embedded CRDs: %v", names)
	}
	for _, n := range names {
		var crd apiextensionsv1.CustomResourceDefinition
		if err := hub.Client.Get(ctx(t), client.ObjectKey{Name: n}, &crd); err != nil {
			t.Fatalf("%s: %v", n, err)
		}
		if !established(&crd) {
			t.Errorf("%s not Established", n)
		}
		managed := false
		for _, mf := range crd.ManagedFields {
			managed = managed || (mf.Manager == FieldManager && mf.Operation == metav1.ManagedFieldsOperationApply)
		}
		if !managed {
			t.Errorf("%s: not owned by a server-side apply of %s: %+v", n, FieldManager, crd.ManagedFields)
		}
	}
}

func TestSeedContent(t *testing.T) {
	var sets unstructured.UnstructuredList
	sets.SetAPIVersion("hive.openshift.io/v1")
	sets.SetKind("ClusterImageSetList")
	if err := hub.Client.List(ctx(t), &sets); err != nil {
		t.Fatal(err)
	}
	want := 1 // the release candidate
	for _, p := range SeedReleases {
		want += len(p)
	}
	if len(sets.Items) != want {
		t.Fatalf("%d ClusterImageSets, want %d", len(sets.Items), want)
	}
	var agents unstructured.UnstructuredList
	agents.SetAPIVersion("agent-install.openshift.io/v1beta1")
	agents.SetKind("AgentList")
	if err := hub.Client.List(ctx(t), &agents, client.InNamespace("hardware-inventory")); err != nil {
		t.Fatal(err)
	}
	if len(agents.Items) != 10 {
		t.Fatalf("%d Agents, want 10", len(agents.Items))
	}
	cpu, _, _ := unstructured.NestedInt64(agents.Items[0].Object, "status", "inventory", "cpu", "count")
	if cpu == 0 {
		t.Fatalf("Agent status not written: %v", agents.Items[0].Object["status"])
	}
	var cm corev1.ConfigMap
	if err := hub.Client.Get(ctx(t), client.ObjectKey{Namespace: "hypershift", Name: "supported-versions"}, &cm); err != nil || !strings.Contains(cm.Data["supported-versions"], "4.15") {
		t.Fatalf("supported-versions: %v %v", cm.Data, err)
	}
}

// The kubeconfig file works for a fresh client (what `kubectl --kubeconfig` uses).
func TestKubeconfigFile(t *testing.T) {
	cfg, err := clientcmd.BuildConfigFromFlags("", hub.KubeconfigPath)
	if err != nil {
		t.Fatal(err)
	}
	if !strings.HasPrefix(cfg.Host, "https://127.0.0.1:") {
		t.Fatalf("hub not on loopback: %s", cfg.Host)
	}
	c, err := client.New(cfg, client.Options{Scheme: Scheme()})
	if err != nil {
		t.Fatal(err)
	}
	var nss corev1.NamespaceList
	if err := c.List(ctx(t), &nss); err != nil {
		t.Fatal(err)
	}
}

// The embedded NATS server has JetStream and the status stream: publish with an ack, consume with a durable consumer.
func TestNATSJetStream(t *testing.T) {
	if !strings.HasPrefix(hub.NATSURL, "nats://127.0.0.1:") {
		t.Fatalf("NATS not on loopback: %s", hub.NATSURL)
	}
	nc, err := nats.Connect(hub.NATSURL)
	if err != nil {
		t.Fatal(err)
	}
	defer nc.Close()
	js, err := jetstream.New(nc)
	if err != nil {
		t.Fatal(err)
	}
	ack, err := js.Publish(ctx(t), "dcm.providers.acm-cluster-sp.cluster.instances.inst-1.status", []byte(`{"hello":"world"}`))
	if err != nil || ack.Stream != StatusStream {
		t.Fatalf("publish: %+v %v", ack, err)
	}
	if _, err := js.Publish(ctx(t), "dcm.cluster", []byte(`{"second":true}`)); err != nil {
		t.Fatal(err)
	}
	if _, err := js.Publish(ctx(t), "elsewhere.subject", []byte(`x`)); err == nil {
		t.Fatal("a subject outside the stream was acked")
	}
	cons, err := js.CreateOrUpdateConsumer(ctx(t), StatusStream, jetstream.ConsumerConfig{Durable: "devhub-test", AckPolicy: jetstream.AckExplicitPolicy})
	if err != nil {
		t.Fatal(err)
	}
	batch, err := cons.Fetch(2, jetstream.FetchMaxWait(5*time.Second))
	if err != nil {
		t.Fatal(err)
	}
	var got []string
	for msg := range batch.Messages() {
		got = append(got, string(msg.Data()))
		if err := msg.Ack(); err != nil {
			t.Fatal(err)
		}
	}
	if len(got) != 2 || got[0] != `{"hello":"world"}` {
		t.Fatalf("consumed %v", got)
	}
}

func toUnstructured(obj client.Object) (*unstructured.Unstructured, error) {
	m, err := runtimeDefaultUnstructuredConverter(obj)
	if err != nil {
		return nil, err
	}
	return &unstructured.Unstructured{Object: m}, nil
}

func runtimeDefaultUnstructuredConverter(obj client.Object) (map[string]any, error) {
	return runtime.DefaultUnstructuredConverter.ToUnstructured(obj)
}

// kube-apiserver stops and starts again on the same address, certificates and etcd: the same client reaches it
// afterwards and finds what was stored before. (Last in this file: the hub is down for a moment.)
func TestAPIServerRestart(t *testing.T) {
	c := hub.Client
	cm := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: "before-restart", Namespace: "default"}, Data: map[string]string{"k": "v"}}
	if err := c.Create(ctx(t), cm); err != nil {
		t.Fatal(err)
	}
	if err := hub.StopAPIServer(); err != nil {
		t.Fatal(err)
	}
	if err := c.Get(ctx(t), client.ObjectKeyFromObject(cm), &corev1.ConfigMap{}); err == nil {
		t.Fatal("the API server answered while stopped")
	}
	if err := hub.StartAPIServer(); err != nil {
		t.Fatal(err)
	}
	var got corev1.ConfigMap
	if err := c.Get(ctx(t), client.ObjectKeyFromObject(cm), &got); err != nil || got.Data["k"] != "v" {
		t.Fatalf("after the restart: %v %v", err, got.Data)
	}
}
