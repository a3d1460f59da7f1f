package hubtest

import (
	"context"
	"testing"
	"time"

	authorizationv1 "k8s.io/api/authorization/v1"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/dcm-sp/acm-cluster-sp/internal/capiprivate/rbacmirror"
	"github.com/dcm-sp/acm-cluster-sp/internal/devtest/capi/injecttest"
	"github.com/dcm-sp/acm-cluster-sp/internal/devtest/testwait"
)

// allowed asks kube-apiserver whether the service account may verb resource in group in ns.
func allowed(t *testing.T, ns, sa, verb, group, resource string) bool {
	t.Helper()
	sar := &authorizationv1.SubjectAccessReview{Spec: authorizationv1.SubjectAccessReviewSpec{
		User: "system:serviceaccount:" + ns + ":" + sa, Groups: []string{"system:serviceaccounts", "system:serviceaccounts:" + ns},
		ResourceAttributes: &authorizationv1.ResourceAttributes{Namespace: ns, Verb: verb, Group: group, Resource: resource},
	}}
	if err := env.Client.Create(context.Background(), sar); err != nil {
		t.Fatal(err)
	}
	return sar.Status.Allowed
}

func twinRole(ns, name string) (*rbacv1.Role, error) {
	r := &rbacv1.Role{}
	return r, env.Client.Get(context.Background(), types.NamespacedName{Namespace: ns, Name: rbacmirror.TwinName(name)}, r)
}

// The mirror keeps HyperShift's autoscaler Role and binding twinned as they change: twins appear once the
// namespace is selected, follow rule changes, are restored when edited, disappear when the original stops granting
// a standard group (the binding's twin with them) or is deleted (garbage collector); and kube-apiserver grants the
// service account the private groups exactly while the twins exist.
func TestRBACMirrorFollowsHyperShiftRoles(t *testing.T) {
	ctx := context.Background()
	startMirror(t, ctx)
	ns := namespace(t, "mirror", "none", false)
	f, err := injecttest.Load("cluster-autoscaler", ns)
	if err != nil {
		t.Fatal(err)
	}
	for _, o := range f.RBAC() {
		create(t, o)
	}
	const sa, group = "cluster-autoscaler", "cluster.hypershift.openshift.io"
	if allowed(t, ns, sa, "list", group, "machinesets") {
		t.Fatal("the private group is granted before any twin")
	}
	// The mirror had its chance: a Role created after this one, in a selected namespace, gets its twin (one worker,
	// keys in arrival order), this one none.
	selected := namespace(t, "mirror-selected", "none", false)
	labelNamespace(t, selected, map[string]string{MirrorLabel: "on"})
	g, _ := injecttest.Load("cluster-autoscaler", selected)
	create(t, g.Role)
	testwait.For(t, 30*time.Second, "the twin in the selected namespace", func() bool {
		_, err := twinRole(selected, g.Role.Name)
		return err == nil
	})
	if _, err := twinRole(ns, f.Role.Name); !apierrors.IsNotFound(err) {
		t.Fatalf("a twin in a namespace the mirror does not select: %v", err)
	}

	labelNamespace(t, ns, map[string]string{MirrorLabel: "on"})
	testwait.For(t, 30*time.Second, "the private group granted through the twins", func() bool {
		return allowed(t, ns, sa, "list", group, "machinesets")
	})
	twin, _ := twinRole(ns, f.Role.Name)
	if len(twin.Rules) != 2 || len(twin.OwnerReferences) != 1 || twin.OwnerReferences[0].UID != f.Role.UID {
		t.Fatalf("twin %+v", twin)
	}

	f.Role.Rules = f.Role.Rules[:1] // HyperShift re-renders its Role without the infrastructure rule
	update(t, f.Role)
	testwait.For(t, 30*time.Second, "the twin following the change", func() bool {
		r, err := twinRole(ns, f.Role.Name)
		return err == nil && len(r.Rules) == 1
	})
	if allowed(t, ns, sa, "list", "infrastructure.cluster.hypershift.openshift.io", "kubevirtmachines") {
		t.Fatal("a rule the original dropped is still granted")
	}

	twin, _ = twinRole(ns, f.Role.Name)
	twin.Rules[0].Verbs = []string{"*"}
	twin.Rules[0].Resources = []string{"*"}
	update(t, twin)
	testwait.For(t, 30*time.Second, "the edited twin restored", func() bool {
		r, err := twinRole(ns, f.Role.Name)
		return err == nil && len(r.Rules[0].Resources) > 1
	})

	f.Role.Rules = []rbacv1.PolicyRule{{APIGroups: []string{""}, Resources: []string{"configmaps"}, Verbs: []string{"get"}}}
	update(t, f.Role)
	testwait.For(t, 30*time.Second, "the twins removed once nothing standard is granted", func() bool {
		_, err := twinRole(ns, f.Role.Name)
		b := &rbacv1.RoleBinding{}
		berr := env.Client.Get(ctx, types.NamespacedName{Namespace: ns, Name: rbacmirror.TwinName(f.RoleBinding.Name)}, b)
		return apierrors.IsNotFound(err) && apierrors.IsNotFound(berr)
	})
	if allowed(t, ns, sa, "list", group, "machinesets") {
		t.Fatal("the private group is still granted without twins")
	}

	f.Role.Rules = g.Role.Rules
	update(t, f.Role)
	testwait.For(t, 30*time.Second, "the twins back", func() bool { return allowed(t, ns, sa, "list", group, "machinesets") })
	if err := env.Client.Delete(ctx, f.Role); err != nil {
		t.Fatal(err)
	}
	testwait.For(t, time.Minute, "the garbage collector deleting the twin with its original", func() bool {
		_, err := twinRole(ns, f.Role.Name)
		return apierrors.IsNotFound(err)
	})
}

func labelNamespace(t *testing.T, ns string, labels map[string]string) {
	t.Helper()
	n := &corev1.Namespace{}
	if err := env.Client.Get(context.Background(), types.NamespacedName{Name: ns}, n); err != nil {
		t.Fatal(err)
	}
	for k, v := range labels {
		n.Labels[k] = v
	}
	update(t, n)
}

// update writes o, re-reading and retrying on a conflict (the mirror or HyperShift may write in between).
func update(t *testing.T, o client.Object) {
	t.Helper()
	for range 10 {
		err := env.Client.Update(context.Background(), o)
		if err == nil {
			return
		}
		if !apierrors.IsConflict(err) {
			t.Fatal(err)
		}
		latest := o.DeepCopyObject().(client.Object)
		if err := env.Client.Get(context.Background(), client.ObjectKeyFromObject(o), latest); err != nil {
			t.Fatal(err)
		}
		o.SetResourceVersion(latest.GetResourceVersion())
	}
	t.Fatalf("updating %s: conflicts", o.GetName())
}
