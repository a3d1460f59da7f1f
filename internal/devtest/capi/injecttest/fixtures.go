// Package injecttest holds what the sidecar injection is tested against, for tests and the dev command only:
// HyperShift's own rendered objects (Deployments, ServiceAccounts, Roles and bindings of each CAPI-dependent
// component and of the operator), recorded as YAML under testdata/hypershift with their source in
// openshift/hypershift, and a kubelet stand-in that materializes what an admitted Pod's container would see —
// its environment and the files of its volumes — so a client can be built from exactly that.
//
// It is test and dev machinery: import it only from tests and the dev command, never from a production path.
package injecttest

import (
	"bytes"
	"context"
	"embed"
	"fmt"
	"io/fs"
	"maps"
	"path"
	"strings"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/yaml"
)

//go:embed testdata/hypershift
var recorded embed.FS

// Rerouted is what each recorded component must get rerouted, read off HyperShift's rendered Deployments by hand
// (independently of inject.DefaultReroutes, which tests check against it).
var Rerouted = map[string][]string{
	"cluster-api":                    {"manager"},
	"capi-provider":                  {"manager"},
	"cluster-autoscaler":             {"cluster-autoscaler"},
	"machine-approver":               {"machine-approver"},
	"hosted-cluster-config-operator": {"hosted-cluster-config-operator"},
	"karpenter-operator":             {"karpenter-operator"},
	"operator":                       {"operator"},
}

// The recorded components: the per-control-plane components that talk CAPI (their pods carry
// hypershift.openshift.io/control-plane-component: <name>) and the HyperShift operator.
var (
	ControlPlaneComponents = []string{
		"cluster-api", "capi-provider", "cluster-autoscaler", "machine-approver",
		"hosted-cluster-config-operator", "karpenter-operator",
	}
	Operator = "operator"
)

// Placeholders HyperShift's fixtures use for the control plane namespace and the operator's namespace.
const (
	hcpPlaceholder      = "hcp-namespace"
	hcpAssetPlaceholder = "HCP_NAMESPACE"
	operatorNamespace   = "hypershift"
)

// Fixture is one component's recorded objects, placed in a namespace. Absent kinds are nil.
type Fixture struct {
	Component          string
	Deployment         *appsv1.Deployment
	ServiceAccount     *corev1.ServiceAccount
	Role               *rbacv1.Role
	RoleBinding        *rbacv1.RoleBinding
	ClusterRole        *rbacv1.ClusterRole
	ClusterRoleBinding *rbacv1.ClusterRoleBinding
	// Sources maps each file to the upstream path it records (its second comment line).
	Sources map[string]string
}

// Load reads component's recorded objects and places them in namespace: HyperShift's placeholder namespaces are
// replaced, and server-set fields (resourceVersion, ownerReferences to a HostedControlPlane with no uid) cleared.
func Load(component, namespace string) (*Fixture, error) {
	dir := path.Join("testdata/hypershift", component)
	entries, err := fs.ReadDir(recorded, dir)
	if err != nil {
		return nil, fmt.Errorf("no recorded fixture %q: %w", component, err)
	}
	f := &Fixture{Component: component, Sources: map[string]string{}}
	for _, e := range entries {
		raw, err := recorded.ReadFile(path.Join(dir, e.Name()))
		if err != nil {
			return nil, err
		}
		f.Sources[e.Name()] = sourceOf(raw)
		if err := f.decode(e.Name(), place(raw, component, namespace)); err != nil {
			return nil, fmt.Errorf("%s/%s: %w", component, e.Name(), err)
		}
	}
	f.normalize(namespace)
	return f, nil
}

// place rewrites the control plane placeholders (which HyperShift renders as the namespace everywhere: labels,
// affinities, names); the operator's namespace is set structurally in normalize.
func place(raw []byte, component, namespace string) []byte {
	if component == Operator {
		return raw
	}
	raw = bytes.ReplaceAll(raw, []byte(hcpAssetPlaceholder), []byte(namespace))
	return bytes.ReplaceAll(raw, []byte(hcpPlaceholder), []byte(namespace))
}

func sourceOf(raw []byte) string {
	lines := strings.SplitN(string(raw), "\n", 3)
	if len(lines) < 2 {
		return ""
	}
	return strings.TrimSpace(strings.TrimPrefix(lines[1], "#"))
}

func (f *Fixture) decode(file string, raw []byte) error {
	targets := map[string]any{
		"deployment.yaml": &f.Deployment, "serviceaccount.yaml": &f.ServiceAccount, "role.yaml": &f.Role,
		"rolebinding.yaml": &f.RoleBinding, "clusterrole.yaml": &f.ClusterRole, "clusterrolebinding.yaml": &f.ClusterRoleBinding,
	}
	t, ok := targets[file]
	if !ok {
		return fmt.Errorf("unexpected file")
	}
	return yaml.UnmarshalStrict(raw, t)
}

func (f *Fixture) normalize(namespace string) {
	var namespaced []metav1.Object
	if f.Deployment != nil {
		namespaced = append(namespaced, f.Deployment)
	}
	if f.ServiceAccount != nil {
		namespaced = append(namespaced, f.ServiceAccount)
	}
	if f.Role != nil {
		namespaced = append(namespaced, f.Role)
	}
	if f.RoleBinding != nil {
		namespaced = append(namespaced, f.RoleBinding)
		setSubjectNamespaces(f.RoleBinding.Subjects, namespace)
	}
	for _, m := range namespaced {
		m.SetNamespace(namespace)
		m.SetResourceVersion("")
		m.SetOwnerReferences(nil)
	}
	if f.ClusterRoleBinding != nil {
		setSubjectNamespaces(f.ClusterRoleBinding.Subjects, namespace)
	}
}

func setSubjectNamespaces(subjects []rbacv1.Subject, namespace string) {
	for i := range subjects {
		if subjects[i].Kind == rbacv1.ServiceAccountKind {
			subjects[i].Namespace = namespace
		}
	}
}

// Pod is the Pod the Deployment's ReplicaSet would create (before admission): the template's metadata and spec,
// named name.
func (f *Fixture) Pod(name string) *corev1.Pod {
	t := f.Deployment.Spec.Template
	return &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{
			Name: name, Namespace: f.Deployment.Namespace,
			Labels: maps.Clone(t.Labels), Annotations: maps.Clone(t.Annotations),
		},
		Spec: *t.Spec.DeepCopy(),
	}
}

// WaitEffective creates dry-run Pods of component in namespace ns (where the injector must inject them: a private
// cluster's control plane namespace, or a marked one for the operator; it must hold the component's
// ServiceAccount) until one comes back injected: the webhook registration has reached kube-apiserver's admission
// chain. It gives up when ctx ends or exited is closed.
func WaitEffective(ctx context.Context, c client.Client, component, ns string, exited <-chan struct{}) error {
	f, err := Load(component, ns)
	if err != nil {
		return err
	}
	for {
		pod := f.Pod("probe")
		err := c.Create(ctx, pod, client.DryRunAll)
		if err == nil && injected(pod) {
			return nil
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("the injector never injected a %s Pod in %s (last error %v)", component, ns, err)
		case <-exited:
			return fmt.Errorf("the injector exited")
		case <-time.After(100 * time.Millisecond):
		}
	}
}

// injected reports whether pod carries an init container that always restarts: a native sidecar (the probe does
// not trust the injector's own helpers).
func injected(pod *corev1.Pod) bool {
	for _, c := range pod.Spec.InitContainers {
		if c.RestartPolicy != nil && *c.RestartPolicy == corev1.ContainerRestartPolicyAlways {
			return true
		}
	}
	return false
}

// writers are the field managers HyperShift writes each recorded component's objects with. kube-apiserver names a
// create's manager after the client's User-Agent, which hypershift-operator/main.go sets to
// "hypershift-operator-manager" and control-plane-operator/main.go to "hypershift-controlplane-manager". The
// operator renders the control-plane-operator and the CAPI manager and provider
// (hypershift-operator/controllers/hostedcluster/hostedcluster_controller.go: reconcileControlPlaneOperator,
// reconcileCAPIManager, reconcileCAPIProvider, with OmitOwnerReference); the control-plane-operator renders the
// other components. The operator's own objects come from `hypershift install` (no entry: the client's default).
var writers = map[string]string{
	"cluster-api":                    "hypershift-operator-manager",
	"capi-provider":                  "hypershift-operator-manager",
	"cluster-autoscaler":             "hypershift-controlplane-manager",
	"machine-approver":               "hypershift-controlplane-manager",
	"hosted-cluster-config-operator": "hypershift-controlplane-manager",
	"karpenter-operator":             "hypershift-controlplane-manager",
}

// CreateRBAC creates the fixture's ServiceAccount, Roles and bindings with c as HyperShift writes them (its field
// manager); objects that exist are left as they are.
func (f *Fixture) CreateRBAC(ctx context.Context, c client.Client) error {
	for _, o := range f.RBAC() {
		if err := f.CreateAsHyperShift(ctx, c, o); client.IgnoreAlreadyExists(err) != nil {
			return fmt.Errorf("creating %s's %T %s: %w", f.Component, o, o.GetName(), err)
		}
	}
	return nil
}

// CreateAsHyperShift creates o, one of the fixture's objects, with c as HyperShift writes it (its field manager).
func (f *Fixture) CreateAsHyperShift(ctx context.Context, c client.Client, o client.Object) error {
	var opts []client.CreateOption
	if m := writers[f.Component]; m != "" {
		opts = append(opts, client.FieldOwner(m))
	}
	return c.Create(ctx, o, opts...)
}

// RBAC is the fixture's ServiceAccount, Roles and bindings that exist, in creation order.
func (f *Fixture) RBAC() []client.Object {
	var out []client.Object
	if f.ServiceAccount != nil {
		out = append(out, f.ServiceAccount)
	}
	if f.Role != nil {
		out = append(out, f.Role)
	}
	if f.RoleBinding != nil {
		out = append(out, f.RoleBinding)
	}
	if f.ClusterRole != nil {
		out = append(out, f.ClusterRole)
	}
	if f.ClusterRoleBinding != nil {
		out = append(out, f.ClusterRoleBinding)
	}
	return out
}
