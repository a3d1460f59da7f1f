package capipods

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	hyperv1 "github.com/openshift/hypershift/api/hypershift/v1beta1"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"sigs.k8s.io/controller-runtime/pkg/client"
)

func TestLedger(t *testing.T) {
	l := NewLedger()
	changed := l.Changed()
	a := l.Create("ns1", "km-a")
	select {
	case <-changed:
	default:
		t.Fatal("Create did not signal a change")
	}
	b := l.Create("ns1", "km-b")
	c := l.Create("ns2", "km-c")
	if a.ProviderID != "kubevirt://ledger-1" || a.Node != "ledger-1" || c.ProviderID != "kubevirt://ledger-3" {
		t.Fatalf("providerIDs %s %s %s", a.ProviderID, b.ProviderID, c.ProviderID)
	}
	if !l.Delete(b.ProviderID) || l.Delete(b.ProviderID) || l.Delete("kubevirt://ledger-99") {
		t.Fatal("Delete: want true once, then false")
	}
	if got, want := l.Stats(), (Stats{Creates: 3, Deletes: 1, Live: 2, RepeatedDeletes: 2}); got != want {
		t.Errorf("Stats %s, want %s", got, want)
	}
	if got, want := l.StatsFor("ns1"), (Stats{Creates: 2, Deletes: 1, Live: 1}); got != want {
		t.Errorf("StatsFor(ns1) %s, want %s", got, want)
	}
	if got := l.StatsFor("none"); got != (Stats{}) {
		t.Errorf("StatsFor(none) %s", got)
	}
	var ids []string
	for _, in := range l.Instances() {
		ids = append(ids, in.ProviderID)
	}
	if !slices.Equal(ids, []string{"kubevirt://ledger-1", "kubevirt://ledger-3"}) {
		t.Errorf("Instances %v", ids)
	}
	if _, ok := l.Lookup(b.ProviderID); ok {
		t.Error("deleted instance still found")
	}
	data := l.ConfigMapData()
	want := map[string]string{
		"creates": "3", "deletes": "1", "live": "2", "repeatedDeletes": "2",
		"instances": "kubevirt://ledger-1 ns1/km-a\nkubevirt://ledger-3 ns2/km-c",
		"ns.ns1":    "creates=2 deletes=1 live=1", "ns.ns2": "creates=1 deletes=0 live=1",
	}
	if diff := cmp.Diff(want, data); diff != "" {
		t.Errorf("ConfigMapData (-want +got):\n%s", diff)
	}
	reg := prometheus.NewRegistry()
	reg.MustRegister(l)
	expected := `
# HELP capitest_ledger_instance_creates_total Instances the ledger created, by namespace of the KubevirtMachine.
# TYPE capitest_ledger_instance_creates_total counter
capitest_ledger_instance_creates_total{namespace="ns1"} 2
capitest_ledger_instance_creates_total{namespace="ns2"} 1
# HELP capitest_ledger_instance_deletes_total Instances the ledger deleted, by namespace of the KubevirtMachine that created them.
# TYPE capitest_ledger_instance_deletes_total counter
capitest_ledger_instance_deletes_total{namespace="ns1"} 1
# HELP capitest_ledger_instances Live instances of the ledger.
# TYPE capitest_ledger_instances gauge
capitest_ledger_instances 2
`
	if err := testutil.GatherAndCompare(reg, strings.NewReader(expected)); err != nil {
		t.Error(err)
	}
}

func TestMachineStep(t *testing.T) {
	ready := machineObservation{HasFinalizer: true, ClusterFound: true, InfrastructureProvisioned: true, MachineFound: true, BootstrapReady: true}
	with := func(f func(*machineObservation)) machineObservation { o := ready; f(&o); return o }
	for _, tc := range []struct {
		name string
		obs  machineObservation
		want machineAction
	}{
		{"new object without a Cluster waits", machineObservation{}, waitAction},
		{"Cluster found: finalizer first", machineObservation{ClusterFound: true}, addFinalizer},
		{"no owner Machine yet", with(func(o *machineObservation) { o.MachineFound = false }), waitAction},
		{"no bootstrap data yet", with(func(o *machineObservation) { o.BootstrapReady = false }), waitAction},
		{"infrastructure not provisioned", with(func(o *machineObservation) { o.InfrastructureProvisioned = false }), waitAction},
		{"everything ready: create the instance", ready, createInstance},
		{"Machine being deleted: no new instance", with(func(o *machineObservation) { o.MachineDeleting = true }), waitAction},
		{"providerID recorded: provision the Node", with(func(o *machineObservation) { o.ProviderID = "kubevirt://ledger-1" }), provisionNode},
		{"ready: nothing to do", with(func(o *machineObservation) { o.ProviderID, o.Ready = "kubevirt://ledger-1", true }), waitAction},
		{"migrated twin arrives ready: Node untouched", with(func(o *machineObservation) {
			o.ProviderID, o.Ready, o.HasFinalizer = "kubevirt://ledger-1", true, true
		}), waitAction},
		{"Machine deleting before Ready: no Node", with(func(o *machineObservation) { o.ProviderID, o.MachineDeleting = "kubevirt://ledger-1", true }), waitAction},
		{"paused: nothing, even with everything ready", with(func(o *machineObservation) { o.Paused = true }), waitAction},
		{"paused while deleting: instance kept", with(func(o *machineObservation) { o.Paused, o.Deleting, o.ProviderID = true, true, "kubevirt://ledger-1" }), waitAction},
		{"deleting with an instance", with(func(o *machineObservation) { o.Deleting, o.ProviderID = true, "kubevirt://ledger-1" }), deleteInstance},
		{"deleting, Cluster gone", machineObservation{Deleting: true, HasFinalizer: true, ProviderID: "kubevirt://ledger-1"}, deleteInstance},
		{"deleting without an instance", with(func(o *machineObservation) { o.Deleting = true }), removeFinalizer},
		{"deleting, not ours to finalize", machineObservation{Deleting: true, ProviderID: "kubevirt://ledger-1"}, waitAction},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if got := machineStep(tc.obs); got != tc.want {
				t.Errorf("machineStep(%+v) = %s, want %s", tc.obs, got, tc.want)
			}
		})
	}
}

func TestModeAndRole(t *testing.T) {
	for _, tc := range []struct {
		name string
		env  []corev1.EnvVar
		want Mode
	}{
		{"no routing: the kubelet's service address", nil, Direct},
		{"IPv4 loopback", []corev1.EnvVar{{Name: "KUBERNETES_SERVICE_HOST", Value: "127.0.0.1"}}, Proxied},
		{"IPv6 loopback", []corev1.EnvVar{{Name: "KUBERNETES_SERVICE_HOST", Value: "::1"}}, Proxied},
		{"localhost", []corev1.EnvVar{{Name: "KUBERNETES_SERVICE_HOST", Value: "localhost"}}, Proxied},
		{"another address", []corev1.EnvVar{{Name: "KUBERNETES_SERVICE_HOST", Value: "10.0.0.1"}}, Direct},
		{"only the port", []corev1.EnvVar{{Name: "KUBERNETES_SERVICE_PORT", Value: "16443"}}, Direct},
		{"from a field", []corev1.EnvVar{{Name: "KUBERNETES_SERVICE_HOST", ValueFrom: &corev1.EnvVarSource{FieldRef: &corev1.ObjectFieldSelector{FieldPath: "status.podIP"}}}}, Direct},
	} {
		t.Run(tc.name, func(t *testing.T) {
			spec := corev1.PodSpec{Containers: []corev1.Container{{Name: "sidecar-less"}, {Name: "manager", Env: tc.env}}}
			if got := ModeOf(spec); got != tc.want {
				t.Errorf("ModeOf = %s, want %s", got, tc.want)
			}
		})
	}
	pod := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Labels: map[string]string{RoleLabel: RoleProvider}}}
	if RoleOf(pod) != RoleProvider {
		t.Error(RoleOf(pod))
	}
}

// refGroups collects every apiVersion and apiGroup value of an unstructured object.
func refGroups(v any, out map[string]bool) {
	switch x := v.(type) {
	case map[string]any:
		for k, e := range x {
			if s, ok := e.(string); ok && (k == "apiVersion" || k == "apiGroup") {
				out[s] = true
			}
			refGroups(e, out)
		}
	case []any:
		for _, e := range x {
			refGroups(e, out)
		}
	}
}

func TestHostedClusterObjects(t *testing.T) {
	spec := HostedClusterSpec{
		Namespace: "clusters", Name: "hc", InfraID: "hc-abc",
		MachineDeployments:  []MachineDeploymentSpec{{Name: "np1", Replicas: 2}, {Name: "np2", Replicas: 3}},
		MachineHealthChecks: true, Deployments: true, DeploymentReplicas: 1, Proxied: true,
	}
	for _, tc := range []struct {
		groups     Groups
		wantGroups []string
	}{
		{StandardGroups, []string{"cluster.x-k8s.io/v1beta2", "hypershift.openshift.io", "infrastructure.cluster.x-k8s.io", "infrastructure.cluster.x-k8s.io/v1alpha1"}},
		{PrivateGroups, []string{"cluster.hypershift.openshift.io/v1beta2", "hypershift.openshift.io", "infrastructure.cluster.hypershift.openshift.io", "infrastructure.cluster.hypershift.openshift.io/v1alpha1"}},
	} {
		t.Run(tc.groups.String(), func(t *testing.T) {
			spec.Groups = tc.groups
			var kinds []string
			groups := map[string]bool{}
			for _, o := range spec.Objects() {
				u, ok := o.(*unstructured.Unstructured)
				if !ok {
					kinds = append(kinds, typeName(o))
					continue
				}
				kinds = append(kinds, u.GetKind()+"/"+u.GetName())
				if u.GetNamespace() != "clusters-hc" {
					t.Errorf("%s in namespace %s", u.GetName(), u.GetNamespace())
				}
				refGroups(u.Object, groups)
			}
			want := []string{"Namespace", "HostedCluster", "HostedControlPlane", "KubevirtCluster/hc-abc", "Cluster/hc-abc",
				"Secret", "KubevirtMachineTemplate/np1", "MachineDeployment/np1", "MachineHealthCheck/np1",
				"Secret", "KubevirtMachineTemplate/np2", "MachineDeployment/np2", "MachineHealthCheck/np2",
				"ServiceAccount", "Deployment", "ServiceAccount", "Deployment", "ServiceAccount", "Deployment",
				"ServiceAccount", "Deployment", "ServiceAccount", "Deployment", "ServiceAccount", "Deployment"}
			if diff := cmp.Diff(want, kinds); diff != "" {
				t.Errorf("objects (-want +got):\n%s", diff)
			}
			var got []string
			for g := range groups {
				got = append(got, g)
			}
			slices.Sort(got)
			if diff := cmp.Diff(tc.wantGroups, got); diff != "" {
				t.Errorf("apiVersions and apiGroups (-want +got):\n%s", diff)
			}
		})
	}
	objs := spec.Objects()
	md := objs[7].(*unstructured.Unstructured)
	if r, _, _ := unstructured.NestedInt64(md.Object, "spec", "replicas"); r != 2 || md.GetLabels()["cluster.x-k8s.io/cluster-name"] != "hc-abc" {
		t.Errorf("MachineDeployment %v", md.Object)
	}
	d := objs[len(objs)-1].(*appsv1.Deployment)
	if ModeOf(d.Spec.Template.Spec) != Proxied || d.Labels[SimulateLabel] != "true" || *d.Spec.Replicas != 1 {
		t.Errorf("Deployment %+v", d)
	}
}

func typeName(o client.Object) string {
	switch o.(type) {
	case *corev1.Namespace:
		return "Namespace"
	case *corev1.Secret:
		return "Secret"
	case *corev1.ServiceAccount:
		return "ServiceAccount"
	case *appsv1.Deployment:
		return "Deployment"
	case *hyperv1.HostedCluster:
		return "HostedCluster"
	case *hyperv1.HostedControlPlane:
		return "HostedControlPlane"
	}
	return fmt.Sprintf("%T", o)
}

func TestEndpointOf(t *testing.T) {
	ep, err := endpointOf("https://127.0.0.1:6443")
	if err != nil || ep.Host != "127.0.0.1" || ep.Port != 6443 {
		t.Errorf("%+v %v", ep, err)
	}
	if _, err := endpointOf("https://127.0.0.1"); err == nil {
		t.Error("no port: want an error")
	}
}

// The kill switch refuses requests after kill and cancels one in flight (a watch's body read ends).
func TestKillSwitch(t *testing.T) {
	started := make(chan struct{})
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.WriteHeader(http.StatusOK)
		w.(http.Flusher).Flush()
		close(started)
		<-r.Context().Done()
	}))
	defer srv.Close()
	k := newKillSwitch()
	hc := &http.Client{Transport: k.wrap(http.DefaultTransport)}
	resp, err := hc.Get(srv.URL)
	if err != nil {
		t.Fatal(err)
	}
	<-started
	read := make(chan error, 1)
	go func() { _, err := io.ReadAll(resp.Body); read <- err }()
	k.kill()
	if err := <-read; !errors.Is(err, context.Canceled) {
		t.Errorf("in-flight body read after kill: %v, want context.Canceled", err)
	}
	_ = resp.Body.Close()
	if _, err := hc.Get(srv.URL); !errors.Is(err, errPodKilled) {
		t.Errorf("request after kill: %v", err)
	}
}

// Publish mirrors the ledger into a ConfigMap on the hub after each change.
func TestLedgerPublish(t *testing.T) {
	l := NewLedger()
	key := client.ObjectKey{Namespace: env.NewNamespace(t, "ledger"), Name: "ledger"}
	if err := l.Publish(t.Context(), harness.Client, key); err != nil {
		t.Fatal(err)
	}
	in := l.Create("ns", "km")
	l.Delete(in.ProviderID)
	l.Create("ns", "km2")
	eventually(t, 30*time.Second, "the ConfigMap follows the ledger", func(ctx context.Context) (bool, string, error) {
		cm := &corev1.ConfigMap{}
		if err := harness.Client.Get(ctx, key, cm); err != nil {
			return false, "", err
		}
		return cm.Data["creates"] == "2" && cm.Data["deletes"] == "1" && cm.Data["live"] == "1", fmt.Sprint(cm.Data), nil
	})
}

// ReadAudit reads the files kube-apiserver rotated away before the log itself, oldest first.
func TestReadAuditRotated(t *testing.T) {
	dir := t.TempDir()
	line := func(ua string) string { return `{"userAgent":"` + ua + `","verb":"get"}` + "\n" }
	for name, body := range map[string]string{
		"audit-2026-11-26T10-00-00.000.log": line("a"),
		"audit-2026-11-26T11-00-00.000.log": line("b") + "not json\n",
		"audit.log":                         line("c"),
		"audit-policy.yaml":                 line("x"),
	} {
		if err := os.WriteFile(filepath.Join(dir, name), []byte(body), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	evs, err := ReadAudit(filepath.Join(dir, "audit.log"), "", nil)
	if err != nil {
		t.Fatal(err)
	}
	var got []string
	for _, ev := range evs {
		got = append(got, ev.UserAgent)
	}
	if diff := cmp.Diff([]string{"a", "b", "c"}, got); diff != "" {
		t.Errorf("events (-want +got):\n%s", diff)
	}
}

// A rotation between opening the audit files and reading them loses nothing that was logged before: the log renamed
// away is still read through the file opened before, and the new, empty log is not mistaken for it.
func TestReadAuditRotatesWhileReading(t *testing.T) {
	dir := t.TempDir()
	log := filepath.Join(dir, "audit.log")
	line := func(ua string) string { return `{"userAgent":"` + ua + `","verb":"get"}` + "\n" }
	if err := os.WriteFile(filepath.Join(dir, "audit-2026-11-26T10-00-00.000.log"), []byte(line("a")), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(log, []byte(line("b")), 0o600); err != nil {
		t.Fatal(err)
	}
	files, err := openAudit(log)
	if err != nil {
		t.Fatal(err)
	}
	defer func() {
		for _, f := range files {
			_ = f.Close()
		}
	}()
	// kube-apiserver rotates: the log becomes a dated file and a new log starts.
	if err := os.Rename(log, filepath.Join(dir, "audit-2026-11-26T11-00-00.000.log")); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(log, []byte(line("c")), 0o600); err != nil {
		t.Fatal(err)
	}
	evs, err := readAudit(files, nil, nil)
	if err != nil {
		t.Fatal(err)
	}
	var got []string
	for _, ev := range evs {
		got = append(got, ev.UserAgent)
	}
	if diff := cmp.Diff([]string{"a", "b"}, got); diff != "" {
		t.Errorf("events logged before the call (-want +got):\n%s", diff)
	}
}
