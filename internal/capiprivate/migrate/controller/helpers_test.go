package controller_test

import (
	"context"
	"encoding/json"
	"fmt"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/go-logr/logr"
	"github.com/go-logr/logr/testr"
	hyperv1 "github.com/openshift/hypershift/api/hypershift/v1beta1"
	admissionv1 "k8s.io/api/admissionregistration/v1"
	corev1 "k8s.io/api/core/v1"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/interceptor"

	"github.com/dcm-sp/acm-cluster-sp/internal/capiprivate/inject"
	"github.com/dcm-sp/acm-cluster-sp/internal/capiprivate/migrate/controller"
	"github.com/dcm-sp/acm-cluster-sp/internal/capiprivate/migrate/plan"
	"github.com/dcm-sp/acm-cluster-sp/internal/devtest/capi/capipods"
	"github.com/dcm-sp/acm-cluster-sp/internal/devtest/testwait"
)

// The provider-like kinds the tests install in the standard infrastructure group: a pair (standard and private
// CRD) the migrator must move like any discovered kind, and a kind without a private CRD.
const (
	infraGroup        = "infrastructure.cluster.x-k8s.io"
	privateInfraGroup = "infrastructure.cluster.hypershift.openshift.io"
)

// exampleCRD is a namespaced CRD of kind in group, version v1alpha1, any fields, with a status subresource;
// private ones carry capi-private's label.
func exampleCRD(group, plural, kind string, private bool) *apiextensionsv1.CustomResourceDefinition {
	crd := &apiextensionsv1.CustomResourceDefinition{
		ObjectMeta: metav1.ObjectMeta{Name: plural + "." + group},
		Spec: apiextensionsv1.CustomResourceDefinitionSpec{
			Group: group, Scope: apiextensionsv1.NamespaceScoped,
			Names: apiextensionsv1.CustomResourceDefinitionNames{Plural: plural, Kind: kind, ListKind: kind + "List", Singular: strings.ToLower(kind)},
			Versions: []apiextensionsv1.CustomResourceDefinitionVersion{{
				Name: "v1alpha1", Served: true, Storage: true,
				Schema: &apiextensionsv1.CustomResourceValidation{OpenAPIV3Schema: &apiextensionsv1.JSONSchemaProps{
					Type: "object", XPreserveUnknownFields: ptr.To(true)}},
				Subresources: &apiextensionsv1.CustomResourceSubresources{Status: &apiextensionsv1.CustomResourceSubresourceStatus{}},
			}},
		},
	}
	if private {
		crd.Labels = map[string]string{controller.PrivateCRDLabel: "true"}
	}
	return crd
}

// installKind installs the standard CRD of plural/kind in the infrastructure group and, withPrivate, its private
// twin; it waits until both are served and removes them when the test ends.
func installKind(t *testing.T, plural, kind string, withPrivate bool) {
	t.Helper()
	crds := []*apiextensionsv1.CustomResourceDefinition{exampleCRD(infraGroup, plural, kind, false)}
	if withPrivate {
		crds = append(crds, exampleCRD(privateInfraGroup, plural, kind, true))
	}
	for _, crd := range crds {
		if err := harness.Client.Create(t.Context(), crd); err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { _ = harness.Client.Delete(context.Background(), crd) })
	}
	testwait.For(t, time.Minute, kind+" CRDs served", func() bool {
		for _, crd := range crds {
			list := &unstructured.UnstructuredList{}
			list.SetGroupVersionKind(schema.GroupVersionKind{Group: crd.Spec.Group, Version: "v1alpha1", Kind: kind + "List"})
			if err := harness.Client.List(t.Context(), list, client.InNamespace("default")); err != nil {
				return false
			}
		}
		return true
	})
}

func exampleObject(group, kind, namespace, name string) *unstructured.Unstructured {
	u := &unstructured.Unstructured{}
	u.SetGroupVersionKind(schema.GroupVersionKind{Group: group, Version: "v1alpha1", Kind: kind})
	u.SetNamespace(namespace)
	u.SetName(name)
	return u
}

func listExample(t *testing.T, group, kind, namespace string) []unstructured.Unstructured {
	t.Helper()
	list := &unstructured.UnstructuredList{}
	list.SetGroupVersionKind(schema.GroupVersionKind{Group: group, Version: "v1alpha1", Kind: kind + "List"})
	if err := harness.Client.List(t.Context(), list, client.InNamespace(namespace)); err != nil {
		t.Fatal(err)
	}
	return list.Items
}

// denyPolicy installs a ValidatingAdmissionPolicy denying operations on every resource of apiGroups in namespaces
// (the fault injection), waits until check says it is in effect, and returns a function removing it.
func denyPolicy(t *testing.T, name string, namespaces []string, ops []admissionv1.OperationType, apiGroups []string, check func() bool) func() {
	t.Helper()
	ctx := t.Context()
	policy := &admissionv1.ValidatingAdmissionPolicy{
		ObjectMeta: metav1.ObjectMeta{Name: name},
		Spec: admissionv1.ValidatingAdmissionPolicySpec{
			FailurePolicy: ptr.To(admissionv1.Fail),
			MatchConstraints: &admissionv1.MatchResources{ResourceRules: []admissionv1.NamedRuleWithOperations{{
				RuleWithOperations: admissionv1.RuleWithOperations{Operations: ops,
					Rule: admissionv1.Rule{APIGroups: apiGroups, APIVersions: []string{"*"}, Resources: []string{"*"}}},
			}}},
			Validations: []admissionv1.Validation{{Expression: "false", Message: "denied by the test's fault injection"}},
		},
	}
	binding := &admissionv1.ValidatingAdmissionPolicyBinding{
		ObjectMeta: metav1.ObjectMeta{Name: name},
		Spec: admissionv1.ValidatingAdmissionPolicyBindingSpec{
			PolicyName: name, ValidationActions: []admissionv1.ValidationAction{admissionv1.Deny},
			MatchResources: &admissionv1.MatchResources{NamespaceSelector: &metav1.LabelSelector{
				MatchExpressions: []metav1.LabelSelectorRequirement{{Key: corev1.LabelMetadataName, Operator: metav1.LabelSelectorOpIn, Values: namespaces}}}},
		},
	}
	for _, o := range []client.Object{policy, binding} {
		if err := harness.Client.Create(ctx, o); err != nil {
			t.Fatal(err)
		}
	}
	var once sync.Once
	remove := func() {
		once.Do(func() {
			_ = harness.Client.Delete(context.Background(), binding)
			_ = harness.Client.Delete(context.Background(), policy)
		})
	}
	t.Cleanup(remove)
	testwait.For(t, 30*time.Second, "the ValidatingAdmissionPolicy "+name+" to take effect", check)
	return remove
}

// deniedDryRunDelete reports whether a dry-run delete of obj is denied by the test's fault injection.
func deniedDryRunDelete(ctx context.Context, obj client.Object) bool {
	err := harness.Client.Delete(ctx, obj, client.DryRunAll)
	return err != nil && strings.Contains(err.Error(), "fault injection")
}

// writeCounter wraps a client and records every write except dry runs, the events' and the ones it is told to
// ignore.
type writeCounter struct {
	mu     sync.Mutex
	writes []string
	ignore func(verb string, obj client.Object, patch []byte) bool
}

func (w *writeCounter) add(verb string, obj client.Object, patch []byte) {
	if w.ignore != nil && w.ignore(verb, obj, patch) {
		return
	}
	w.mu.Lock()
	defer w.mu.Unlock()
	w.writes = append(w.writes, fmt.Sprintf("%s %s %s/%s", verb, obj.GetObjectKind().GroupVersionKind().Kind, obj.GetNamespace(), obj.GetName()))
}

func (w *writeCounter) list() []string {
	w.mu.Lock()
	defer w.mu.Unlock()
	return slices.Clone(w.writes)
}

func dryRun(opts []string) bool { return len(opts) > 0 }

// client wraps c.
func (w *writeCounter) client(c client.WithWatch) client.WithWatch {
	return interceptor.NewClient(c, interceptor.Funcs{
		Create: func(ctx context.Context, c client.WithWatch, obj client.Object, opts ...client.CreateOption) error {
			co := &client.CreateOptions{}
			co.ApplyOptions(opts)
			if !dryRun(co.DryRun) {
				w.add("create", obj, nil)
			}
			return c.Create(ctx, obj, opts...)
		},
		Update: func(ctx context.Context, c client.WithWatch, obj client.Object, opts ...client.UpdateOption) error {
			w.add("update", obj, nil)
			return c.Update(ctx, obj, opts...)
		},
		Patch: func(ctx context.Context, c client.WithWatch, obj client.Object, p client.Patch, opts ...client.PatchOption) error {
			data, _ := p.Data(obj)
			w.add("patch", obj, data)
			return c.Patch(ctx, obj, p, opts...)
		},
		Delete: func(ctx context.Context, c client.WithWatch, obj client.Object, opts ...client.DeleteOption) error {
			do := &client.DeleteOptions{}
			do.ApplyOptions(opts)
			if !dryRun(do.DryRun) {
				w.add("delete", obj, nil)
			}
			return c.Delete(ctx, obj, opts...)
		},
		SubResourceUpdate: func(ctx context.Context, c client.Client, sub string, obj client.Object, opts ...client.SubResourceUpdateOption) error {
			w.add("update/"+sub, obj, nil)
			return c.SubResource(sub).Update(ctx, obj, opts...)
		},
		SubResourcePatch: func(ctx context.Context, c client.Client, sub string, obj client.Object, p client.Patch, opts ...client.SubResourcePatchOption) error {
			w.add("patch/"+sub, obj, nil)
			return c.SubResource(sub).Patch(ctx, obj, p, opts...)
		},
	})
}

// startRefusing starts the migrator for a cluster it must refuse: every write it makes but the report of what
// blocks the cluster is counted, and so is every look that ends in a wait.
func (r *rig) startRefusing() (*writeCounter, *waitCounter) {
	r.t.Helper()
	base, err := client.NewWithWatch(env.TokenConfig(env.AdminToken), client.Options{Scheme: controller.Scheme()})
	if err != nil {
		r.t.Fatal(err)
	}
	writes := &writeCounter{ignore: onlyBlockedReport}
	waits := &waitCounter{}
	r.start(func(o *controller.RunOptions) { o.Client = writes.client(base); o.OnWait = waits.hook })
	return writes, waits
}

// onlyBlockedReport tells the migrator's report of what blocks a HostedCluster (a patch of its blocked
// annotations, nothing else) from the writes a migration makes.
func onlyBlockedReport(verb string, obj client.Object, patch []byte) bool {
	if _, ok := obj.(*hyperv1.HostedCluster); !ok || verb != "patch" {
		return false
	}
	var body struct {
		Metadata map[string]json.RawMessage `json:"metadata"`
	}
	if json.Unmarshal(patch, &body) != nil {
		return false
	}
	var ann map[string]any
	if json.Unmarshal(body.Metadata["annotations"], &ann) != nil {
		return false
	}
	for k := range body.Metadata {
		if k != "annotations" && k != "resourceVersion" {
			return false
		}
	}
	for k := range ann {
		if k != plan.BlockedAnnotation && k != plan.BlockedSinceAnnotation {
			return false
		}
	}
	return true
}

// deleteWatch watches kinds (group/version/Kind) in namespace and records every object deleted; notMarked lists
// those whose last state lacked the delete-for-move annotation.
type deleteWatch struct {
	mu        sync.Mutex
	deleted   []string
	notMarked []string
}

func watchDeletes(t *testing.T, namespace string, kinds ...schema.GroupVersionKind) *deleteWatch {
	t.Helper()
	wc, err := client.NewWithWatch(env.TokenConfig(env.AdminToken), client.Options{Scheme: controller.Scheme()})
	if err != nil {
		t.Fatal(err)
	}
	d := &deleteWatch{}
	ctx, cancel := context.WithCancel(context.Background())
	t.Cleanup(cancel)
	for _, gvk := range kinds {
		list := &unstructured.UnstructuredList{}
		list.SetGroupVersionKind(gvk.GroupVersion().WithKind(gvk.Kind + "List"))
		w, err := wc.Watch(ctx, list, client.InNamespace(namespace))
		if err != nil {
			t.Fatal(err)
		}
		go func() {
			defer w.Stop()
			for ev := range w.ResultChan() {
				u, ok := ev.Object.(*unstructured.Unstructured)
				if ev.Type != watch.Deleted || !ok {
					continue
				}
				d.mu.Lock()
				what := u.GetKind() + "/" + u.GetName()
				d.deleted = append(d.deleted, what)
				if _, marked := u.GetAnnotations()[plan.DeleteForMoveAnnotation]; !marked {
					d.notMarked = append(d.notMarked, what)
				}
				d.mu.Unlock()
			}
		}()
	}
	return d
}

func (d *deleteWatch) result() (deleted, notMarked []string) {
	d.mu.Lock()
	defer d.mu.Unlock()
	return slices.Clone(d.deleted), slices.Clone(d.notMarked)
}

// waitCounter counts the Waits the migrator decided for a HostedCluster in a phase whose reason contains a text:
// the chances it had to act and did not.
type waitCounter struct {
	mu sync.Mutex
	n  map[string]int
}

func (w *waitCounter) hook(hc types.NamespacedName, p plan.Phase, a plan.Action) {
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.n == nil {
		w.n = map[string]int{}
	}
	w.n[hc.String()+"|"+string(p)+"|"+a.Why]++
}

func (w *waitCounter) count(hc types.NamespacedName, p plan.Phase, why string) int {
	w.mu.Lock()
	defer w.mu.Unlock()
	n := 0
	for k, v := range w.n {
		if strings.HasPrefix(k, hc.String()+"|"+string(p)+"|") && strings.Contains(k, why) {
			n += v
		}
	}
	return n
}

// applyLabels server-side applies labels example.com/<v> on MachineDeployment name as field manager
// hypershift-nodepool (in the standard groups: through the proxy, c is the proxy's client).
func applyLabels(t *testing.T, c client.Client, g capipods.Groups, namespace, name string, values ...string) {
	t.Helper()
	md := capipods.NewCAPIObject(g, "MachineDeployment")
	md.SetNamespace(namespace)
	md.SetName(name)
	labels := map[string]string{}
	for _, v := range values {
		labels["example.com/"+v] = v
	}
	md.SetLabels(labels)
	if err := c.Apply(t.Context(), client.ApplyConfigurationFromUnstructured(md), client.FieldOwner("hypershift-nodepool"), client.ForceOwnership); err != nil {
		t.Fatalf("applying labels %v: %v", values, err)
	}
}

// standardKinds are the standard kinds of the harness's hosted clusters, plus ExampleMachine.
func standardKinds() []schema.GroupVersionKind {
	var out []schema.GroupVersionKind
	for _, k := range graphKinds {
		out = append(out, capipods.NewCAPIObject(capipods.StandardGroups, k).GroupVersionKind())
	}
	return append(out, schema.GroupVersionKind{Group: infraGroup, Version: "v1alpha1", Kind: "ExampleMachine"})
}

// checkExampleMachines: the ExampleMachines moved like every discovered kind: n private ones, each owned by, and
// referring by uid to, the private Machine of its name; none left in the standard group.
func checkExampleMachines(t *testing.T, r *rig, n int) {
	t.Helper()
	machines := map[string]types.UID{}
	for _, m := range r.list(capipods.PrivateGroups, "Machine") {
		machines[m.GetName()] = m.GetUID()
	}
	private := listExample(t, privateInfraGroup, "ExampleMachine", r.hc.Namespace())
	if len(private) != n {
		t.Errorf("%d private ExampleMachines, want %d", len(private), n)
	}
	for _, ex := range private {
		uid := machines[ex.GetName()]
		refs := ex.GetOwnerReferences()
		ref, _, _ := unstructured.NestedString(ex.Object, "spec", "machineRef", "uid")
		if len(refs) != 1 || refs[0].UID != uid || refs[0].APIVersion != capipods.PrivateGroups.APIVersion(capipods.ClusterGroup, "v1beta2") || ref != string(uid) {
			t.Errorf("ExampleMachine %s: owners %+v, machineRef uid %s; want the private Machine %s", ex.GetName(), refs, ref, uid)
		}
		if ex.GetAnnotations()[plan.MigratedFromUIDAnnotation] == "" {
			t.Errorf("ExampleMachine %s has no migrated-from-uid", ex.GetName())
		}
	}
	if left := listExample(t, infraGroup, "ExampleMachine", r.hc.Namespace()); len(left) != 0 {
		t.Errorf("%d standard ExampleMachines left", len(left))
	}
}

// dependentRoles are the simulated CAPI-dependent components of every rig's hosted cluster (HyperShift's names,
// read off its rendered Deployments independently of the injector's table).
var dependentRoles = []string{capipods.RoleCAPI, capipods.RoleProvider, capipods.RoleAutoscaler, capipods.RoleMachineApprover, capipods.RoleHCCO}

// sidecar reports whether pod runs a native sidecar (an init container that always restarts): the injected proxy.
func sidecar(pod *corev1.Pod) bool {
	return slices.ContainsFunc(pod.Spec.InitContainers, func(c corev1.Container) bool {
		return c.RestartPolicy != nil && *c.RestartPolicy == corev1.ContainerRestartPolicyAlways
	})
}

// dependentPods names the Pods of CAPI-dependent components in the hosted control plane namespace, with and
// without the sidecar (terminating ones included).
func (r *rig) dependentPods() (injected, uninjected []string) {
	r.t.Helper()
	list := &corev1.PodList{}
	if err := harness.Client.List(r.t.Context(), list, client.InNamespace(r.hc.Namespace())); err != nil {
		r.t.Fatal(err)
	}
	for i := range list.Items {
		p := &list.Items[i]
		role := p.Labels[capipods.ComponentLabel]
		if !slices.Contains(dependentRoles, role) && role != capipods.RoleKarpenterOperator {
			continue
		}
		if sidecar(p) {
			injected = append(injected, p.Name)
		} else {
			uninjected = append(uninjected, p.Name)
		}
	}
	return injected, uninjected
}

// marked reports whether the hosted control plane namespace carries the injector's marker.
func (r *rig) marked() bool {
	r.t.Helper()
	ns := &corev1.Namespace{}
	if err := harness.Client.Get(r.t.Context(), client.ObjectKey{Name: r.hc.Namespace()}, ns); err != nil {
		r.t.Fatal(err)
	}
	return ns.Labels[inject.MarkerLabel] == inject.MarkerValue
}

// checkRollout asserts the rollout's end state: proxied, the namespace is marked and every CAPI-dependent
// component runs only Pods with the sidecar, each Pod a new one (none of before); legacy, the namespace is
// unmarked and no Pod carries the sidecar.
func (r *rig) checkRollout(proxied bool, before []string) {
	r.t.Helper()
	testwait.For(r.t, 2*time.Minute, fmt.Sprintf("the rollout to end (proxied %v)", proxied), func() bool {
		injected, uninjected := r.dependentPods()
		if proxied {
			return len(uninjected) == 0 && len(injected) >= len(dependentRoles)
		}
		return len(injected) == 0
	})
	if r.marked() != proxied {
		r.t.Errorf("namespace marked %v, want %v", r.marked(), proxied)
	}
	injected, uninjected := r.dependentPods()
	for _, p := range append(injected, uninjected...) {
		if proxied && slices.Contains(before, p) {
			r.t.Errorf("pod %s of before the switch still runs", p)
		}
	}
}

// testLog is testr at verbosity 1 — a logged error fails the test — except controller-runtime's report that leader
// election ended after the stop the test asked for: a manager that releases its Lease on cancel reports its
// elector's end as "leader election lost" once its stop has begun, by chance before or after the test returns.
func testLog(t *testing.T) logr.Logger {
	return logr.New(stopTolerant{testr.NewWithOptions(t, testr.Options{Verbosity: 1}).GetSink()})
}

type stopTolerant struct{ logr.LogSink }

func (s stopTolerant) Error(err error, msg string, kv ...any) {
	if msg == "error received after stop sequence was engaged" && err != nil && err.Error() == "leader election lost" {
		s.LogSink.Info(0, msg, append(kv, "error", err)...)
		return
	}
	s.LogSink.Error(err, msg, kv...)
}

func (s stopTolerant) WithValues(kv ...any) logr.LogSink {
	return stopTolerant{s.LogSink.WithValues(kv...)}
}
func (s stopTolerant) WithName(name string) logr.LogSink {
	return stopTolerant{s.LogSink.WithName(name)}
}
