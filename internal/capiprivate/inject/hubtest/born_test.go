package hubtest

import (
	"fmt"
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/dcm-sp/acm-cluster-sp/internal/capiprivate/inject"
	migratecontroller "github.com/dcm-sp/acm-cluster-sp/internal/capiprivate/migrate/controller"
	"github.com/dcm-sp/acm-cluster-sp/internal/capiprivate/migrate/plan"
	"github.com/dcm-sp/acm-cluster-sp/internal/devtest/capi/capipods"
	"github.com/dcm-sp/acm-cluster-sp/internal/devtest/capi/injecttest"
	"github.com/dcm-sp/acm-cluster-sp/internal/devtest/capi/installtest"
	"github.com/dcm-sp/acm-cluster-sp/internal/devtest/testwait"
)

// recordedDeployments are the components whose recorded Deployments the born-private test runs: the two that
// watch and write Machines.
var recordedDeployments = []string{"cluster-api", "capi-provider"}

// After the install (injector registered, classifier running), a HostedCluster is created and HyperShift makes its
// control plane namespace (with its hosted-control-plane label, nothing else) and at once its cluster-api and
// capi-provider Deployments: kube-controller-manager's Deployment and ReplicaSet controllers create their Pods, and
// every Pod carries the sidecar, from the first one. The namespace gets its loopback Secret. Beside it, the
// namespaces of a legacy HostedCluster (classified legacy when the install found it) and of one whose migration
// rolled back (scope legacy again, the switch's marker left on its namespace) get the same Deployments, and none
// of their Pods is injected. The born cluster's namespace carries nothing but HyperShift's own label and this
// test's registration label: the injector decides it from its HostedCluster, which only the classifier marks.
func TestBornPrivate(t *testing.T) {
	ctx := t.Context()
	hcNamespace := fmt.Sprintf("born-%d", nsCounter.Add(1))
	typed, err := client.New(env.Config, client.Options{Scheme: migratecontroller.Scheme()})
	if err != nil {
		t.Fatal(err)
	}
	if err := typed.Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: hcNamespace}}); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { env.DeleteNamespace(hcNamespace) })

	// Before the install: a legacy cluster, and one whose migration rolled back (its HostedCluster as the rollback
	// leaves it; its namespace still marked, as a switch that was undone could leave it).
	legacy := capipods.LegacyHostedCluster(hcNamespace, "legacy", 1, 1)
	legacy.Deployments = false
	rolledBack := capipods.LegacyHostedCluster(hcNamespace, "rolled-back", 1, 1)
	rolledBack.Deployments = false
	rolledBack.Annotations = map[string]string{plan.ScopeAnnotation: plan.ScopeLegacy, plan.FailedAnnotation: "external-writer"}
	for _, spec := range []capipods.HostedClusterSpec{legacy, rolledBack} {
		for _, o := range spec.Objects() {
			if err := typed.Create(ctx, o); err != nil {
				t.Fatalf("%s: %v", spec.Name, err)
			}
		}
		t.Cleanup(func() { env.DeleteNamespace(spec.ControlPlaneNamespace()) })
	}
	labelNamespace(t, rolledBack.ControlPlaneNamespace(), map[string]string{inject.MarkerLabel: inject.MarkerValue})

	// The install: the classifier's startup scan marks the legacy cluster.
	stop, err := installtest.StartClassifier(env.Config, hcNamespace, logger().WithName("classifier"))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if err := stop(); err != nil {
			t.Error(err)
		}
	})
	testwait.For(t, time.Minute, "the classifier's scope: legacy on the legacy HostedCluster", func() bool {
		return annotationsOf(t, typed, hcNamespace, legacy.Name)[plan.ScopeAnnotation] == plan.ScopeLegacy
	})

	// A cluster born private: the HostedCluster, then (without waiting for anything) HyperShift's namespace and
	// Deployments.
	born := capipods.HostedClusterSpec{Namespace: hcNamespace, Name: "born"}
	if err := typed.Create(ctx, born.HostedCluster()); err != nil {
		t.Fatal(err)
	}
	cp := born.ControlPlaneNamespace()
	if err := typed.Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: cp, Labels: map[string]string{capipods.HostedControlPlaneLabel: "true"}}}); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { env.DeleteNamespace(cp) })
	for _, ns := range []string{cp, legacy.ControlPlaneNamespace(), rolledBack.ControlPlaneNamespace()} {
		labelNamespace(t, ns, map[string]string{TestLabel: main.name}) // this test's registration
		runRecordedDeployments(t, typed, ns)
	}

	for _, c := range []struct {
		ns       string
		injected bool
	}{{cp, true}, {legacy.ControlPlaneNamespace(), false}, {rolledBack.ControlPlaneNamespace(), false}} {
		pods := deploymentPods(t, typed, c.ns)
		for _, p := range pods {
			if inject.PodInjected(&p) != c.injected {
				t.Errorf("%s/%s: injected %v, want %v", p.Namespace, p.Name, inject.PodInjected(&p), c.injected)
			}
		}
		t.Logf("%s: %d Pods, injected %v", c.ns, len(pods), c.injected)
	}
	if a := annotationsOf(t, typed, hcNamespace, born.Name); a[plan.PrivateTypesAnnotation] != "true" || a[plan.ScopeAnnotation] != "" {
		t.Errorf("the born HostedCluster's annotations %v: not classified private", a)
	}
	loopbackSecret(t, cp, "the born cluster's loopback Secret", servesLoopback)
	for _, ns := range []string{legacy.ControlPlaneNamespace()} {
		if err := typed.Get(ctx, types.NamespacedName{Namespace: ns, Name: inject.LoopbackSecret}, &corev1.Secret{}); err == nil {
			t.Errorf("the legacy namespace %s got a loopback Secret", ns)
		}
	}
}

func annotationsOf(t *testing.T, c client.Client, namespace, name string) map[string]string {
	t.Helper()
	hc := inject.HostedClusterMeta()
	if err := c.Get(t.Context(), types.NamespacedName{Namespace: namespace, Name: name}, hc); err != nil {
		t.Fatal(err)
	}
	return hc.Annotations
}

// runRecordedDeployments creates HyperShift's recorded cluster-api and capi-provider Deployments (with their
// ServiceAccounts and RBAC) in ns, as HyperShift's operator creates them.
func runRecordedDeployments(t *testing.T, c client.Client, ns string) {
	t.Helper()
	for _, comp := range recordedDeployments {
		f, err := injecttest.Load(comp, ns)
		if err != nil {
			t.Fatal(err)
		}
		for _, o := range f.RBAC() {
			if err := c.Create(t.Context(), o); client.IgnoreAlreadyExists(err) != nil {
				t.Fatalf("%s: %v", comp, err)
			}
		}
		if err := c.Create(t.Context(), f.Deployment); err != nil {
			t.Fatalf("%s Deployment: %v", comp, err)
		}
	}
}

// deploymentPods waits until the ReplicaSet controller has created every replica of ns's recorded Deployments
// (each ReplicaSet's status counts its Pods), and returns the Pods.
func deploymentPods(t *testing.T, c client.Client, ns string) []corev1.Pod {
	t.Helper()
	var pods corev1.PodList
	testwait.For(t, 2*time.Minute, "the Pods of the recorded Deployments in "+ns, func() bool {
		var rss appsv1.ReplicaSetList
		if err := c.List(t.Context(), &rss, client.InNamespace(ns)); err != nil {
			t.Fatal(err)
		}
		want := int32(0)
		for _, d := range recordedDeployments {
			var dep appsv1.Deployment
			if err := c.Get(t.Context(), types.NamespacedName{Namespace: ns, Name: d}, &dep); err != nil {
				return false
			}
			want += ptr.Deref(dep.Spec.Replicas, 1)
		}
		have := int32(0)
		for _, rs := range rss.Items {
			have += rs.Status.Replicas
		}
		if have < want {
			return false
		}
		if err := c.List(t.Context(), &pods, client.InNamespace(ns)); err != nil {
			t.Fatal(err)
		}
		return int32(len(pods.Items)) >= want
	})
	return pods.Items
}
