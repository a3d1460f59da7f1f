package hubtest

import (
	"context"
	"encoding/json"
	"fmt"
	"net"
	"net/http"
	"net/url"
	"strings"
	"testing"
	"time"

	hyperv1 "github.com/openshift/hypershift/api/hypershift/v1beta1"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/kubernetes"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/dcm-sp/acm-cluster-sp/internal/capiprivate/groups"
	"github.com/dcm-sp/acm-cluster-sp/internal/capiprivate/inject"
	"github.com/dcm-sp/acm-cluster-sp/internal/capiprivate/migrate/plan"
	"github.com/dcm-sp/acm-cluster-sp/internal/capiprivate/rbacmirror"
	"github.com/dcm-sp/acm-cluster-sp/internal/devtest/capi/capihub"
	"github.com/dcm-sp/acm-cluster-sp/internal/devtest/capi/capipods"
	"github.com/dcm-sp/acm-cluster-sp/internal/devtest/capi/injecttest"
	"github.com/dcm-sp/acm-cluster-sp/internal/devtest/testwait"
)

// MirrorLabel selects the namespaces the test's RBAC mirror works on.
const MirrorLabel = "capi-private-test/mirror"

// pod is one injected Pod on the hub, and what two of its containers see.
type pod struct {
	obj      *corev1.Pod
	set      *podSet
	sidecar  *injecttest.ContainerView
	rerouted *injecttest.ContainerView
}

// e2eCluster is a private hosted cluster whose component Pods (cluster-api and capi-provider in the control plane
// namespace, the HyperShift operator in its own namespace) were created from HyperShift's recorded Deployments and
// admitted through the injector, with HyperShift's RBAC.
type e2eCluster struct {
	hc        *capipods.HostedCluster
	ns        string
	pods      map[string]*pod
	sets      []*podSet
	kubelet   *injecttest.Kubelet
	operatorN string
}

// startE2E writes the hosted cluster, marks its control plane namespace (labelled for the mirror or not), admits
// the Pods and starts their sidecars; the fake control-plane-operator runs straight to kube-apiserver (it is not
// an injected component).
func startE2E(t *testing.T, ctx context.Context, h *capipods.Harness, mirrored bool) *e2eCluster {
	t.Helper()
	name := fmt.Sprintf("e2e-%d", nsCounter.Add(1))
	cpSet, opSet := newPodSet(t, ctx, name), newPodSet(t, ctx, name+"-op")
	e := &e2eCluster{pods: map[string]*pod{}, sets: []*podSet{cpSet, opSet}, kubelet: newKubelet(t)}
	e.hc = createMarkedCluster(t, ctx, h, name, mirrored)
	e.ns = e.hc.Namespace()
	e.operatorN = namespace(t, "hypershift-"+name, opSet.name, true)
	installRBAC(t, ctx, e.ns, "cluster-api", "capi-provider")
	installRBAC(t, ctx, e.operatorN, injecttest.Operator)
	if mirrored {
		waitTwins(t, e.ns)
	}
	for _, ns := range []string{e.ns, e.operatorN} {
		loopbackSecret(t, ns, "the loopback Secret of "+ns, servesLoopback)
		testwait.For(t, 30*time.Second, "kube-root-ca.crt in "+ns, func() bool {
			return env.Client.Get(ctx, types.NamespacedName{Namespace: ns, Name: "kube-root-ca.crt"}, &corev1.ConfigMap{}) == nil
		})
	}
	e.admit(t, ctx, "cluster-api", e.ns, cpSet)
	e.admit(t, ctx, "capi-provider", e.ns, cpSet)
	e.admit(t, ctx, injecttest.Operator, e.operatorN, opSet)
	cpSet.startSidecar(t, e.pods["cluster-api"])
	opSet.startSidecar(t, e.pods[injecttest.Operator])
	cpo, err := h.StartPod(ctx, capipods.Direct, capipods.RoleControlPlaneOperator, e.ns)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = cpo.Stop() })
	return e
}

func newKubelet(t *testing.T) *injecttest.Kubelet {
	t.Helper()
	cs, err := kubernetes.NewForConfig(env.Config)
	if err != nil {
		t.Fatal(err)
	}
	hub, _ := url.Parse(env.Config.Host)
	return &injecttest.Kubelet{Client: cs, ServiceHost: hub.Hostname(), ServicePort: hub.Port(), Root: t.TempDir()}
}

// createMarkedCluster writes a private hosted cluster's objects in the private groups, as HyperShift creates its
// control plane namespace with them (the HostedCluster carries the classifier's mark, a fixture here); then the
// namespace gets this test's registration label (and the mirror's).
func createMarkedCluster(t *testing.T, ctx context.Context, h *capipods.Harness, name string, mirrored bool) *capipods.HostedCluster {
	t.Helper()
	hcNamespace := namespace(t, "clusters-"+name, name, false)
	hc, err := h.CreateHostedCluster(ctx, capipods.HostedClusterSpec{
		Namespace: hcNamespace, Name: "demo", Groups: capipods.PrivateGroups,
		Annotations:        map[string]string{plan.PrivateTypesAnnotation: "true"},
		MachineDeployments: []capipods.MachineDeploymentSpec{{Name: name + "-workers", Replicas: 2}},
	})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		env.DeleteNamespace(hc.Namespace())
	})
	nsLabels := map[string]string{TestLabel: name}
	if mirrored {
		nsLabels[MirrorLabel] = "on"
	}
	patch, _ := json.Marshal(map[string]any{"metadata": map[string]any{"labels": nsLabels}})
	if err := env.Client.Patch(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: hc.Namespace()}}, client.RawPatch(types.MergePatchType, patch)); err != nil {
		t.Fatal(err)
	}
	return hc
}

// admit creates comp's Pod in ns (through the set's injector) and materializes its sidecar and its rerouted
// container as the kubelet would.
func (e *e2eCluster) admit(t *testing.T, ctx context.Context, comp, ns string, set *podSet) {
	t.Helper()
	p, err := createPod(t, comp, ns, comp+"-0")
	if err != nil || !inject.PodInjected(p) {
		t.Fatalf("%s Pod: err %v, injected %v", comp, err, p != nil && inject.PodInjected(p))
	}
	placeholderSecrets(t, ctx, p)
	pd := &pod{obj: p, set: set}
	if pd.sidecar, err = e.kubelet.Container(ctx, p, inject.SidecarName); err != nil {
		t.Fatal(err)
	}
	if pd.rerouted, err = e.kubelet.Container(ctx, p, injecttest.Rerouted[comp][0]); err != nil {
		t.Fatal(err)
	}
	e.pods[comp] = pd
}

// startComponent runs role's controllers with a client built exactly from what comp's rerouted container sees.
func (e *e2eCluster) startComponent(t *testing.T, h *capipods.Harness, comp, role string) *capipods.Manager {
	t.Helper()
	components, namespace := h.Components(role, e.ns), e.ns
	if comp == injecttest.Operator { // cluster-wide, reconciling this test's HostedCluster only
		spec := e.hc.Spec
		components, namespace = []capipods.Component{capipods.HostedClusterOperator{Name: "private-" + e.ns, Accept: func(o *hyperv1.HostedCluster) bool {
			return o.Namespace == spec.Namespace && o.Name == spec.Name
		}}}, ""
	}
	cfg, err := e.pods[comp].rerouted.InClusterConfig()
	if err != nil {
		t.Fatal(err)
	}
	if !strings.HasPrefix(cfg.Host, "https://127.0.0.1:") {
		t.Fatalf("the rerouted container's in-cluster config goes to %s, not the sidecar", cfg.Host)
	}
	m, err := capipods.StartManager(cfg, capipods.ManagerOptions{Name: e.ns + "/" + comp, Namespace: namespace, Components: components, Log: logger().WithName(comp)})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = m.Stop() })
	return m
}

// forbidden are the 403 answers kube-apiserver gave the Pods' service accounts (audit log).
func (e *e2eCluster) forbidden(t *testing.T) []capipods.AuditEvent {
	t.Helper()
	users := map[string]bool{}
	for _, p := range e.pods {
		users["system:serviceaccount:"+p.obj.Namespace+":"+p.obj.Spec.ServiceAccountName] = true
	}
	evs, err := capipods.ReadAudit(env.AuditLog, "system:serviceaccount:", func(ev *capipods.AuditEvent) bool {
		return users[ev.User.Username] && ev.Stage == "ResponseComplete" && ev.ResponseStatus.Code == http.StatusForbidden
	})
	if err != nil {
		t.Fatal(err)
	}
	return evs
}

// proxied sums every sidecar's requests: those answered 403, and all.
func (e *e2eCluster) proxied(t *testing.T) (forbidden, all float64) {
	t.Helper()
	for _, s := range e.sets {
		f, a := s.requests(t)
		forbidden, all = forbidden+f, all+a
	}
	return forbidden, all
}

// The upstream CAPI controllers, the ledger provider and a fake HyperShift operator run with clients built exactly
// from what the injected cluster-api, capi-provider and operator containers see (KUBERNETES_SERVICE_HOST/PORT and
// the token, ca.crt and namespace files of their volumes) and reconcile a private cluster through the sidecars,
// as HyperShift's service accounts with HyperShift's RBAC: with the mirrored private rules there is no 403 at
// all; without them, the private groups are refused.
func TestCAPIThroughInjectedSidecar(t *testing.T) {
	ctx := context.Background()
	workload, err := env.Kubeconfig(capihub.AdminUser, env.AdminToken)
	if err != nil {
		t.Fatal(err)
	}
	h, err := capipods.New(ctx, capipods.Options{Direct: env.TokenConfig(env.AdminToken), WorkloadKubeconfig: workload, Log: logger(),
		Platforms: []capipods.Platform{capipods.KubeVirt}}) // HyperShift's capi-provider Role here is KubeVirt's
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = h.Stop() })

	t.Run("with the mirrored rules", func(t *testing.T) {
		startMirror(t, ctx)
		e := startE2E(t, ctx, h, true)
		e.startComponent(t, h, "cluster-api", capipods.RoleCAPI)
		e.startComponent(t, h, "capi-provider", capipods.RoleProvider)
		e.startComponent(t, h, injecttest.Operator, "")
		if _, err := e.hc.WaitMachinesRunning(ctx, capipods.PrivateGroups, 2, 4*time.Minute); err != nil {
			e.dump(t, h)
			t.Fatalf("%v; 403s: %v", err, e.forbidden(t))
		}
		cp := e.pods["cluster-api"]
		cp.set.checkReload(t, ctx, e.kubelet, cp)
		cp.set.checkMetricsAuth(t, cp.obj.Namespace)
		if err := e.hc.ScaleMachineDeployment(ctx, h.Client, capipods.PrivateGroups, e.hc.Spec.MachineDeployments[0].Name, 3); err != nil {
			t.Fatal(err)
		}
		if _, err := e.hc.WaitMachinesRunning(ctx, capipods.PrivateGroups, 3, 3*time.Minute); err != nil {
			e.dump(t, h)
			t.Fatal(err)
		}
		f, all := e.proxied(t)
		if evs := e.forbidden(t); len(evs) > 0 || f > 0 {
			t.Fatalf("%d 403s in the audit log (%v), %v in the sidecars' metrics", len(evs), evs, f)
		}
		t.Logf("3 Machines Running through the sidecars: %v proxied requests, 0 answered 403 (audit log and proxy metrics agree)", all)
	})

	t.Run("without them", func(t *testing.T) {
		e := startE2E(t, ctx, h, false)
		e.startComponent(t, h, "cluster-api", capipods.RoleCAPI)
		var evs []capipods.AuditEvent
		testwait.For(t, time.Minute, "a 403 for cluster-api on a private group", func() bool {
			evs = e.forbidden(t)
			return len(evs) > 0
		})
		ev := evs[0]
		if !groups.Default.IsPrivate(ev.ObjectRef.APIGroup) || ev.User.Username != "system:serviceaccount:"+e.ns+":cluster-api" {
			t.Fatalf("first 403: %+v, want the cluster-api service account refused on a private group", ev)
		}
		if f, _ := e.proxied(t); f == 0 {
			t.Fatal("kube-apiserver refused requests the sidecar's metrics did not count as 403")
		}
		t.Logf("without the mirror: %s %s.%s refused for %s (%d 403s)", ev.Verb, ev.ObjectRef.Resource, ev.ObjectRef.APIGroup, ev.User.Username, len(evs))
	})
}

// placeholderSecrets creates, empty, the Secrets p mounts that HyperShift's operator would have written (webhook
// certificates, cloud credentials, kubeconfigs of the hosted cluster): the kubelet waits for them.
func placeholderSecrets(t *testing.T, ctx context.Context, p *corev1.Pod) {
	t.Helper()
	for _, v := range p.Spec.Volumes {
		if v.Secret == nil || v.Secret.SecretName == inject.LoopbackSecret {
			continue
		}
		s := &corev1.Secret{}
		s.Namespace, s.Name = p.Namespace, v.Secret.SecretName
		if err := env.Client.Create(ctx, s); err != nil && !apierrors.IsAlreadyExists(err) {
			t.Fatal(err)
		}
	}
}

// installRBAC writes what HyperShift gives the components: ServiceAccounts, Roles, ClusterRoles and bindings
// (standard groups only).
func installRBAC(t *testing.T, ctx context.Context, ns string, components ...string) {
	t.Helper()
	for _, comp := range components {
		f, err := injecttest.Load(comp, ns)
		if err != nil {
			t.Fatal(err)
		}
		if err := f.CreateRBAC(ctx, env.Client); err != nil {
			t.Fatal(err)
		}
	}
}

// waitTwins waits for the twins of the Roles and bindings of cluster-api and capi-provider in ns, and of the
// operator's ClusterRole and binding.
func waitTwins(t *testing.T, ns string) {
	t.Helper()
	testwait.For(t, 30*time.Second, "twins of the operator's ClusterRole and binding", func() bool {
		key := types.NamespacedName{Name: rbacmirror.TwinName("hypershift-operator")}
		return env.Client.Get(context.Background(), key, &rbacv1.ClusterRole{}) == nil &&
			env.Client.Get(context.Background(), key, &rbacv1.ClusterRoleBinding{}) == nil
	})
	for _, n := range []string{"cluster-api", "capi-provider"} {
		testwait.For(t, 30*time.Second, "twins of Role and RoleBinding "+n, func() bool {
			key := types.NamespacedName{Namespace: ns, Name: rbacmirror.TwinName(n)}
			return env.Client.Get(context.Background(), key, &rbacv1.Role{}) == nil &&
				env.Client.Get(context.Background(), key, &rbacv1.RoleBinding{}) == nil
		})
	}
}

// startMirror runs `capi-private rbac-mirror` as exactly rbacmirror.Rules(), for the namespaces labelled
// MirrorLabel=on and the operator's ClusterRole, waits until its caches have synced, and returns the address of
// its /metrics.
func startMirror(t *testing.T, ctx context.Context) string {
	t.Helper()
	cfg, err := identity(ctx, fmt.Sprintf("capi-private-rbac-mirror-%d", nsCounter.Add(1)), rbacmirror.Rules())
	if err != nil {
		t.Fatal(err)
	}
	ml, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	runCtx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() {
		done <- rbacmirror.Run(runCtx, rbacmirror.RunOptions{
			Kube: cfg, NamespaceSelector: labels.SelectorFromSet(labels.Set{MirrorLabel: "on"}),
			ClusterRoles: []string{"hypershift-operator"}, MetricsListener: ml, SkipNameValidation: true, Log: logger().WithName("rbac-mirror"),
		})
	}()
	t.Cleanup(func() { cancel(); <-done })
	testwait.For(t, time.Minute, "the RBAC mirror's /readyz", func() bool {
		resp, err := http.Get("http://" + ml.Addr().String() + "/readyz")
		if err == nil {
			resp.Body.Close()
		}
		return err == nil && resp.StatusCode == http.StatusOK
	})
	return "http://" + ml.Addr().String() + "/metrics"
}

// dump logs the state of the cluster's CAPI objects (on a failure).
func (e *e2eCluster) dump(t *testing.T, h *capipods.Harness) {
	t.Helper()
	for _, kind := range []string{"Cluster", "KubevirtCluster", "MachineDeployment", "Machine", "KubevirtMachine"} {
		items, err := e.hc.List(context.Background(), h.Client, capipods.PrivateGroups, kind)
		if err != nil {
			t.Logf("%s: %v", kind, err)
			continue
		}
		for _, it := range items {
			b, _ := json.Marshal(map[string]any{"metadata": map[string]any{"name": it.GetName(), "annotations": it.GetAnnotations()}, "spec": it.Object["spec"], "status": it.Object["status"]})
			t.Logf("%s %s", kind, b)
		}
	}
}
