package app

import (
	"context"
	"fmt"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	hyperv1 "github.com/openshift/hypershift/api/hypershift/v1beta1"
	"github.com/prometheus/common/expfmt"
	"github.com/prometheus/common/model"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/dcm-sp/acm-cluster-sp/internal/sp/clusters"
	"github.com/dcm-sp/acm-cluster-sp/internal/sp/render"
	"github.com/dcm-sp/acm-cluster-sp/internal/sp/wire"
)

// The hub's own capacity for what a create writes, the ceiling of the SP's creates/s: the objects of a KubeVirt
// create written straight to kube-apiserver, shaped as the SP writes them — the instance lock, the HostedCluster,
// then at once the lock's owner reference, the two Secrets, the NodePool and the ManagedCluster — from as many
// workers as the SP's create row has clients. They go to a namespace and a provider the SP does not serve, so
// nothing reconciles them.
const (
	rawNS       = "bench-raw"
	rawProvider = "sp-bench-raw"
	// writesPerCreate is what a KubeVirt create writes (docs/performance.md lists them).
	writesPerCreate = 7
)

var rawSeq atomic.Int64

// rawCreates writes b.N creates' objects from c workers; it returns creates/s and each create's latency.
func rawCreates(b *testing.B, s *seeder, c int) (float64, pct) {
	ctx := context.Background()
	if err := s.c.Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: rawNS}}); err != nil && !apierrors.IsAlreadyExists(err) {
		b.Fatal(err)
	}
	rate, p := createsFrom(b, c, func() (time.Duration, error) {
		start := time.Now()
		err := s.rawCreate(ctx, fmt.Sprintf("r%06d", rawSeq.Add(1)))
		return time.Since(start), err
	})
	b.ReportMetric(rate*writesPerCreate, "writes/s")
	return rate, p
}

// rawCreate writes one create's objects as the SP does, without the SP.
func (s *seeder) rawCreate(ctx context.Context, name string) error {
	id := "raw-" + name
	spec, err := wire.ParseSpec([]byte(kubevirtBody(name, 2)), clusters.SpecContext{Namespace: rawNS, DefaultPlatform: "kubevirt"})
	if err != nil {
		return err
	}
	objs := render.Render(render.Input{
		ID: id, Provider: rawProvider, Name: name, Namespace: rawNS, InfraID: name + "-raw",
		Platform: clusters.KubeVirt, SpecJSON: spec.JSON, ReleaseImage: s.release, OpenShiftVersion: "4.17.29",
		ControllerAvailabilityPolicy: hyperv1.HighlyAvailable, WorkerCount: 2,
		WorkerMemory: spec.Workers.Memory, WorkerStorage: spec.Workers.Storage, WorkerCores: ptr.To(uint32(4)),
		PullSecret: []byte(`{"auths":{}}`), EtcdEncryptionKey: make([]byte, 32), ManagedCluster: true,
	})
	lock := render.InstanceLock(rawProvider, rawNS, id, spec.JSON)
	hc := objs.HostedCluster
	for _, o := range []client.Object{lock, hc} {
		if err := s.c.Create(ctx, o); err != nil {
			return err
		}
	}
	owner := []metav1.OwnerReference{{APIVersion: hyperv1.GroupVersion.String(), Kind: "HostedCluster", Name: hc.Name, UID: hc.UID, Controller: ptr.To(false)}}
	lock.OwnerReferences = owner
	writes := []func() error{func() error { return s.c.Update(ctx, lock) }}
	children := []client.Object{objs.NodePool}
	for _, sec := range objs.Secrets {
		children = append(children, sec)
	}
	for _, o := range children {
		o.SetOwnerReferences(owner)
	}
	for _, o := range append(children, objs.ManagedCluster) { // cluster-scoped: no owner in a namespace
		writes = append(writes, func() error { return s.c.Create(ctx, o) })
	}
	if len(writes)+2 != writesPerCreate {
		return fmt.Errorf("a create writes %d objects here, writesPerCreate says %d", len(writes)+2, writesPerCreate)
	}
	errs := make(chan error, len(writes))
	for _, w := range writes {
		go func() { errs <- w() }()
	}
	for range writes {
		if err := <-errs; err != nil {
			return err
		}
	}
	return nil
}

// hubRequests is what kube-apiserver has served so far, from its apiserver_request_total: reads (GET and LIST) and
// writes (CREATE, UPDATE, PATCH, DELETE), whoever sent them. Watches and the rest are left out.
func hubRequests(b *testing.B) (reads, writes float64) {
	cs, err := kubernetes.NewForConfig(testHub.Config)
	if err != nil {
		b.Fatal(err)
	}
	raw, err := cs.RESTClient().Get().AbsPath("/metrics").DoRaw(context.Background())
	if err != nil {
		b.Fatal(err)
	}
	parser := expfmt.NewTextParser(model.UTF8Validation)
	families, err := parser.TextToMetricFamilies(strings.NewReader(string(raw)))
	if err != nil {
		b.Fatal(err)
	}
	for _, m := range families["apiserver_request_total"].GetMetric() {
		for _, l := range m.GetLabel() {
			if l.GetName() != "verb" {
				continue
			}
			switch l.GetValue() {
			case "GET", "LIST":
				reads += m.GetCounter().GetValue()
			case "POST", "CREATE", "PUT", "UPDATE", "PATCH", "APPLY", "DELETE":
				writes += m.GetCounter().GetValue()
			}
		}
	}
	return reads, writes
}

// perCreate measures the hub requests made while f runs n creates, per create.
func perCreate(b *testing.B, f func() int) string {
	r0, w0 := hubRequests(b)
	n := f()
	r1, w1 := hubRequests(b)
	if n == 0 {
		return "–"
	}
	return fmt.Sprintf("%.1f reads, %.1f writes", (r1-r0)/float64(n), (w1-w0)/float64(n))
}
