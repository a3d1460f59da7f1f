package hubtest

import (
	"context"
	"slices"
	"testing"
	"time"

	authorizationv1 "k8s.io/api/authorization/v1"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
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

// The mirror keeps HyperShift's autoscaler Role and binding twinned as they change (and a Role HyperShift did not
// write has none): twins appear once the namespace is selected, follow rule changes, are restored when edited, disappear when the original stops granting
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
	if err := f.CreateRBAC(ctx, env.Client); err != nil {
		t.Fatal(err)
	}
	const sa, group = "cluster-autoscaler", "cluster.hypershift.openshift.io"
	if allowed(t, ns, sa, "list", group, "machinesets") {
		t.Fatal("the private group is granted before any twin")
	}
	// The mirror had its chance: a Role created after this one, in a selected namespace, gets its twin (one worker,
	// keys in arrival order), this one none.
	selected := namespace(t, "mirror-selected", "none", false)
	labelNamespace(t, selected, map[string]string{MirrorLabel: "on"})
	// A Role someone other than HyperShift wrote there, granting a standard group, is created first and gets none.
	foreign := &rbacv1.Role{ObjectMeta: metav1.ObjectMeta{Namespace: selected, Name: "tenant-capi"},
		Rules: []rbacv1.PolicyRule{{APIGroups: []string{"cluster.x-k8s.io"}, Resources: []string{"machines"}, Verbs: []string{"get"}}}}
	create(t, foreign)
	g, _ := injecttest.Load("cluster-autoscaler", selected)
	if err := g.CreateAsHyperShift(ctx, env.Client, g.Role); err != nil {
		t.Fatal(err)
	}
	testwait.For(t, 30*time.Second, "the twin in the selected namespace", func() bool {
		_, err := twinRole(selected, g.Role.Name)
		return err == nil
	})
	if _, err := twinRole(ns, f.Role.Name); !apierrors.IsNotFound(err) {
		t.Fatalf("a twin in a namespace the mirror does not select: %v", err)
	}
	if _, err := twinRole(selected, foreign.Name); !apierrors.IsNotFound(err) {
		t.Fatalf("a twin of a Role HyperShift did not write: %v", err)
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

// A Role created first under the twin's name of HyperShift's Role is a squatter: the mirror leaves it as it is,
// never binds it (HyperShift's ServiceAccount gains nothing it grants), and reports it — a Warning event on the
// original and capi_private_rbac_mirror_squatted_total{kind="Role"}.
func TestRBACMirrorReportsASquatter(t *testing.T) {
	ctx := context.Background()
	metrics := startMirror(t, ctx)
	ns := namespace(t, "mirror-squatted", "none", false)
	f, err := injecttest.Load("cluster-autoscaler", ns)
	if err != nil {
		t.Fatal(err)
	}
	squatter := &rbacv1.Role{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: rbacmirror.TwinName(f.Role.Name)},
		Rules: []rbacv1.PolicyRule{{APIGroups: []string{""}, Resources: []string{"configmaps"}, Verbs: []string{"get"}}}}
	create(t, squatter)
	if err := f.CreateRBAC(ctx, env.Client); err != nil {
		t.Fatal(err)
	}
	labelNamespace(t, ns, map[string]string{MirrorLabel: "on"})
	testwait.For(t, time.Minute, "the TwinSquatted event on "+f.Role.Name, func() bool {
		events := &corev1.EventList{}
		if err := env.Client.List(ctx, events, client.InNamespace(ns)); err != nil {
			return false
		}
		return slices.ContainsFunc(events.Items, func(e corev1.Event) bool {
			return e.Reason == "TwinSquatted" && e.InvolvedObject.Kind == "Role" && e.InvolvedObject.Name == f.Role.Name
		})
	})
	got := &rbacv1.Role{}
	if err := env.Client.Get(ctx, client.ObjectKeyFromObject(squatter), got); err != nil {
		t.Fatal(err)
	}
	if !equality.Semantic.DeepEqual(got.Rules, squatter.Rules) || got.Labels[rbacmirror.TwinLabel] != "" || len(got.OwnerReferences) != 0 {
		t.Errorf("the squatter was changed: %+v", got)
	}
	// A binding's twin is written only once the Role's trusted twin exists, which the squatter never is.
	if err := env.Client.Get(ctx, types.NamespacedName{Namespace: ns, Name: rbacmirror.TwinName(f.RoleBinding.Name)}, &rbacv1.RoleBinding{}); !apierrors.IsNotFound(err) {
		t.Errorf("a twin binding of the squatted name: %v", err)
	}
	if allowed(t, ns, "cluster-autoscaler", "get", "", "configmaps") {
		t.Error("HyperShift's ServiceAccount was granted what the squatter grants")
	}
	if v := scrape(t, metrics, `capi_private_rbac_mirror_squatted_total{kind="Role"}`); v < 1 {
		t.Errorf("capi_private_rbac_mirror_squatted_total{kind=\"Role\"} = %v", v)
	}
}
