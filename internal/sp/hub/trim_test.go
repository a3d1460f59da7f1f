package hub_test

import (
	"bytes"
	"os"
	"path/filepath"
	"reflect"
	"testing"
	"time"

	hyperv1 "github.com/openshift/hypershift/api/hypershift/v1beta1"
	"k8s.io/apimachinery/pkg/api/equality"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/yaml"

	clusterv1 "open-cluster-management.io/api/cluster/v1"

	"github.com/dcm-sp/acm-cluster-sp/internal/devtest/sp/simulator"
	"github.com/dcm-sp/acm-cluster-sp/internal/sp/clusters"
	"github.com/dcm-sp/acm-cluster-sp/internal/sp/hub"
	"github.com/dcm-sp/acm-cluster-sp/internal/sp/meta"
	"github.com/dcm-sp/acm-cluster-sp/internal/sp/render"
	"github.com/dcm-sp/acm-cluster-sp/internal/sp/wire"
)

// The cache keeps trimmed HostedClusters and NodePools (trim.go). Whatever the SP shows or decides from a cluster's
// objects must read the same from the trimmed copies: the resource (status, message, workers, endpoints,
// operation, ETag) at many points in time, on the operator's recorded shapes and along the simulated timeline.
func TestTrimChangesNothingTheSPReads(t *testing.T) {
	type shape struct {
		name string
		hc   *hyperv1.HostedCluster
		nps  []*hyperv1.NodePool
	}
	var shapes []shape
	files, err := filepath.Glob("../status/testdata/recorded/*.yaml")
	if err != nil || len(files) == 0 {
		t.Fatalf("recorded shapes: %v (%d files)", err, len(files))
	}
	for _, f := range files {
		hc, nps := loadRecorded(t, f)
		shapes = append(shapes, shape{filepath.Base(f), hc, nps})
	}
	tl := simulator.TestTimeline()
	for _, frac := range []float64{0, 0.1, 0.2, 0.4, 0.5, 0.7, 0.9, 1.0, 1.2, 1.6} {
		hc, np := rendered(t)
		now := time.Now()
		hc.Annotations[simulator.AnnotationStarted] = now.Add(-time.Duration(frac * float64(tl.ReadyAfter))).UTC().Format(time.RFC3339Nano)
		p := simulator.Step(simulator.Observed{HC: hc, NodePools: []*hyperv1.NodePool{np}, Now: now}, tl)
		if p.HCStatus != nil {
			hc.Status = *p.HCStatus
		}
		if st, ok := p.NPStatus[np.Name]; ok {
			np.Status = st
		}
		shapes = append(shapes, shape{"simulated", hc, []*hyperv1.NodePool{np}})
	}
	settings := clusters.ViewSettings{DefaultWorkerCount: 2}
	settings.Status.DegradedGracePeriod = 15 * time.Minute
	settings.Status.DeletionWarnAfter = 15 * time.Minute
	for _, s := range shapes {
		before := s.hc.DeepCopy()
		trimmed := hub.TrimHostedCluster(s.hc)
		var trimmedNPs []*hyperv1.NodePool
		for _, np := range s.nps {
			trimmedNPs = append(trimmedNPs, hub.TrimNodePool(np))
		}
		if !equality.Semantic.DeepEqual(before, s.hc) {
			t.Fatalf("%s: trimming changed the object it was given", s.name)
		}
		// The decoder's spare capacity is not kept (the cache holds every cluster's conditions).
		if c := trimmed.Status.Conditions; cap(c) != len(c) {
			t.Errorf("%s: trimmed conditions: length %d, capacity %d", s.name, len(c), cap(c))
		}
		for _, np := range trimmedNPs {
			if c := np.Status.Conditions; cap(c) != len(c) {
				t.Errorf("%s: trimmed NodePool conditions: length %d, capacity %d", s.name, len(c), cap(c))
			}
		}
		for _, age := range []time.Duration{0, time.Minute, 10 * time.Minute, time.Hour, 30 * 24 * time.Hour} {
			now := s.hc.CreationTimestamp.Add(age)
			full := clusters.BuildCluster(clusters.View{ID: "x", HostedCluster: s.hc, NodePools: s.nps}, now, settings)
			trim := clusters.BuildCluster(clusters.View{ID: "x", HostedCluster: trimmed, NodePools: trimmedNPs}, now, settings)
			if !reflect.DeepEqual(full, trim) {
				t.Errorf("%s at +%s: the trimmed objects read\n%+v\nthe full ones\n%+v", s.name, age, trim, full)
			}
		}
	}
	// And it does keep less: the recorded completed cluster loses its operator-only spec and status (its conditions,
	// which the status function reads, are most of what remains).
	hc, _ := loadRecorded(t, "../status/testdata/recorded/4-completed.yaml")
	full, _ := yaml.Marshal(hc)
	small, _ := yaml.Marshal(hub.TrimHostedCluster(hc))
	if len(small) >= len(full)*9/10 {
		t.Errorf("trimmed HostedCluster is %d bytes of %d", len(small), len(full))
	}
	t.Logf("recorded completed HostedCluster: %d bytes as YAML, %d trimmed", len(full), len(small))
}

// A trimmed ManagedCluster reads the same to the SP — the resource (its console URL), the index's name and instance
// label — as the klusterlet's full one, and keeps none of its conditions, capacity, version or other claims.
func TestTrimManagedCluster(t *testing.T) {
	hc, np := rendered(t)
	mc := render.Render(render.Input{ID: "x", Provider: "p", Name: "trim", Namespace: "clusters", Platform: clusters.KubeVirt,
		SpecJSON: `{}`, ManagedCluster: true}).ManagedCluster
	if mc == nil {
		t.Fatal("render made no ManagedCluster")
	}
	now := metav1.Now()
	mc.Status = clusterv1.ManagedClusterStatus{
		Conditions: []metav1.Condition{
			{Type: clusterv1.ManagedClusterConditionJoined, Status: metav1.ConditionTrue, Reason: "ManagedClusterJoined", LastTransitionTime: now},
			{Type: clusterv1.ManagedClusterConditionAvailable, Status: metav1.ConditionTrue, Reason: "ManagedClusterAvailable", LastTransitionTime: now},
		},
		Capacity:      clusterv1.ResourceList{"cpu": resource.MustParse("16")},
		Version:       clusterv1.ManagedClusterVersion{Kubernetes: "v1.30.4"},
		ClusterClaims: []clusterv1.ManagedClusterClaim{{Name: "id.openshift.io", Value: "u"}, {Name: clusters.ConsoleURLClaim, Value: "https://console.example"}, {Name: "kubeversion.open-cluster-management.io", Value: "v1.30.4"}},
	}
	before := mc.DeepCopy()
	trimmed := hub.TrimManagedCluster(mc)
	if !equality.Semantic.DeepEqual(before, mc) {
		t.Fatal("trimming changed the object it was given")
	}
	settings := clusters.ViewSettings{DefaultWorkerCount: 2}
	at := hc.CreationTimestamp.Add(time.Hour)
	full := clusters.BuildCluster(clusters.View{ID: "x", HostedCluster: hc, NodePools: []*hyperv1.NodePool{np}, ManagedCluster: mc}, at, settings)
	trim := clusters.BuildCluster(clusters.View{ID: "x", HostedCluster: hc, NodePools: []*hyperv1.NodePool{np}, ManagedCluster: trimmed}, at, settings)
	if !reflect.DeepEqual(full, trim) {
		t.Errorf("the trimmed ManagedCluster reads\n%+v\nthe full one\n%+v", trim, full)
	}
	_, fullURL := clusters.Endpoints(clusters.View{ID: "x", HostedCluster: hc, ManagedCluster: mc})
	_, trimURL := clusters.Endpoints(clusters.View{ID: "x", HostedCluster: hc, ManagedCluster: trimmed})
	if fullURL != "https://console.example" || trimURL != fullURL {
		t.Errorf("console URL %q from the trimmed ManagedCluster, %q from the full one", trimURL, fullURL)
	}
	if trimmed.Name != mc.Name || meta.InstanceID(trimmed.Labels) != meta.InstanceID(mc.Labels) || meta.InstanceID(mc.Labels) == "" {
		t.Errorf("metadata: %s %v, want %s %v", trimmed.Name, trimmed.Labels, mc.Name, mc.Labels)
	}
	if len(mc.Annotations) == 0 || trimmed.Annotations != nil {
		t.Errorf("annotations: %v trimmed, %v before; want none kept", trimmed.Annotations, mc.Annotations)
	}
	if len(trimmed.Status.Conditions) != 0 || trimmed.Status.Capacity != nil || trimmed.Status.Version.Kubernetes != "" || len(trimmed.Status.ClusterClaims) != 1 {
		t.Errorf("trimmed status keeps more than the console URL claim: %+v", trimmed.Status)
	}
}

// A trimmed Secret's metadata reads the same to the SP — its name, version, instance label, owners, and whether it
// is a HostedCluster's kubeconfig — and keeps no annotations.
func TestTrimSecret(t *testing.T) {
	hc, _ := rendered(t)
	hc.UID = "hc-uid"
	for _, sec := range simulator.OperatorSecrets(hc, []byte("kubeconfig"), "password", true) {
		full := &metav1.PartialObjectMetadata{TypeMeta: metav1.TypeMeta{APIVersion: "v1", Kind: "Secret"}, ObjectMeta: sec.ObjectMeta}
		full.ResourceVersion = "42"
		if full.Annotations == nil {
			full.Annotations = map[string]string{"hypershift.openshift.io/cluster": hc.Namespace + "/" + hc.Name}
		}
		before := full.DeepCopy()
		trimmed := hub.TrimSecret(full)
		if !equality.Semantic.DeepEqual(before, full) {
			t.Fatalf("%s: trimming changed the object it was given", sec.Name)
		}
		if trimmed.Annotations != nil {
			t.Errorf("%s: annotations kept: %v", sec.Name, trimmed.Annotations)
		}
		if trimmed.Name != full.Name || trimmed.Namespace != full.Namespace || trimmed.ResourceVersion != "42" ||
			meta.InstanceID(trimmed.Labels) != meta.InstanceID(full.Labels) ||
			!reflect.DeepEqual(trimmed.OwnerReferences, full.OwnerReferences) ||
			hub.KubeconfigBelongs(hc.Namespace, hc.Name, hc.UID, trimmed) != hub.KubeconfigBelongs(hc.Namespace, hc.Name, hc.UID, full) {
			t.Errorf("%s: the trimmed metadata reads\n%+v\nthe full one\n%+v", sec.Name, trimmed.ObjectMeta, full.ObjectMeta)
		}
	}
}

func rendered(t *testing.T) (*hyperv1.HostedCluster, *hyperv1.NodePool) {
	spec, err := wire.ParseSpec([]byte(`{"metadata":{"name":"trim"},"version":"4.17","nodes":{"workers":{"count":2}}}`),
		clusters.SpecContext{Namespace: "clusters", DefaultPlatform: "kubevirt"})
	if err != nil {
		t.Fatal(err)
	}
	objs := render.Render(render.Input{ID: "x", Provider: "p", Name: "trim", Namespace: "clusters", InfraID: "trim-abcde",
		Platform: clusters.KubeVirt, SpecJSON: spec.JSON, ReleaseImage: "quay.io/openshift-release-dev/ocp-release:4.17.29-multi",
		OpenShiftVersion: "4.17.29", ControllerAvailabilityPolicy: hyperv1.HighlyAvailable, WorkerCount: 2,
		WorkerMemory: spec.Workers.Memory, WorkerStorage: spec.Workers.Storage, WorkerCores: ptr.To(uint32(4)),
		PullSecret: []byte(`{}`), EtcdEncryptionKey: make([]byte, 32), Finalizers: []string{meta.FinalizerStatus}})
	objs.HostedCluster.Finalizers = append(objs.HostedCluster.Finalizers, meta.FinalizerHyperShift)
	return objs.HostedCluster, objs.NodePool
}

// loadRecorded decodes one recorded stage (the status package's fixtures of the real operator's objects).
func loadRecorded(t *testing.T, path string) (*hyperv1.HostedCluster, []*hyperv1.NodePool) {
	t.Helper()
	data, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	docs := bytes.Split(data, []byte("\n---\n"))
	var hc hyperv1.HostedCluster
	if err := yaml.UnmarshalStrict(docs[0], &hc); err != nil {
		t.Fatal(err)
	}
	var nps []*hyperv1.NodePool
	for _, d := range docs[1:] {
		np := &hyperv1.NodePool{}
		if err := yaml.UnmarshalStrict(d, np); err != nil {
			t.Fatal(err)
		}
		nps = append(nps, np)
	}
	return &hc, nps
}
