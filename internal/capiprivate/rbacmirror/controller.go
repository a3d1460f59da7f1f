package rbacmirror

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/tools/record"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/builder"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/handler"
	"sigs.k8s.io/controller-runtime/pkg/predicate"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"
)

// DefaultNamespaceSelector selects hosted control plane namespaces (HyperShift labels them so).
const DefaultNamespaceSelector = "hypershift.openshift.io/hosted-control-plane=true"

// DefaultClusterRoles are the ClusterRoles mirrored: the HyperShift operator's.
var DefaultClusterRoles = []string{"hypershift-operator"}

// Controller keeps the twins: of the Roles and RoleBindings HyperShift wrote (WrittenByHyperShift) in namespaces
// NamespaceSelector selects, and of the
// ClusterRoles named ClusterRoles with the ClusterRoleBindings (and selected namespaces' RoleBindings) that bind
// them. A twin is created, updated or deleted whenever its original or its role changes; deleting the original
// deletes it (garbage collector, owner reference).
type Controller struct {
	Client            client.Client
	Mirror            *Mirror
	NamespaceSelector labels.Selector
	ClusterRoles      []string
	// Recorder and Squatted report a squatter (optional): an event on the original, and
	// capi_private_rbac_mirror_squatted_total{kind}.
	Recorder record.EventRecorder
	Squatted *prometheus.CounterVec
}

// NewSquatted registers capi_private_rbac_mirror_squatted_total{kind} with reg.
func NewSquatted(reg prometheus.Registerer) (*prometheus.CounterVec, error) {
	c := prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "capi_private_rbac_mirror_squatted_total",
		Help: "Times the RBAC mirror found its twin's name taken by an object that is not its twin (not labelled, or not owned by the original), by kind of the original.",
	}, []string{"kind"})
	return c, reg.Register(c)
}

// squatRetry is when a twin whose name was squatted is looked at again (the squatter's removal also enqueues it).
const squatRetry = 5 * time.Minute

// squatted: the twin's name is held by an object that is not the mirror's twin of the original.
type squatted struct{ key types.NamespacedName }

func (e *squatted) Error() string {
	return fmt.Sprintf("%s exists and is not the capi-private twin of its original: left alone, never bound", e.key)
}

// done reports a squatter on original (an event and the metric) and looks again later; other errors go back to the
// work queue.
func (c *Controller) done(original client.Object, kind string, err error) (reconcile.Result, error) {
	var sq *squatted
	if !errors.As(err, &sq) {
		return reconcile.Result{}, err
	}
	if c.Recorder != nil {
		c.Recorder.Eventf(original, corev1.EventTypeWarning, "TwinSquatted", "%s", sq.Error())
	}
	if c.Squatted != nil {
		c.Squatted.WithLabelValues(kind).Inc()
	}
	return reconcile.Result{RequeueAfter: squatRetry}, nil
}

// notTwin keeps originals: the controller never mirrors a twin.
var notTwin = predicate.NewPredicateFuncs(func(o client.Object) bool { return o.GetLabels()[TwinLabel] != "true" })

// SetupWithManager registers the four reconcilers.
func (c *Controller) SetupWithManager(mgr ctrl.Manager) error {
	nsToAll := func(newList func() client.ObjectList) handler.EventHandler {
		return handler.EnqueueRequestsFromMapFunc(func(ctx context.Context, o client.Object) []reconcile.Request {
			return c.requestsIn(ctx, newList(), o.GetName())
		})
	}
	// A role, or its twin (a binding's twin waits for the role's twin), enqueues the bindings of the original.
	roleToBindings := handler.EnqueueRequestsFromMapFunc(func(ctx context.Context, o client.Object) []reconcile.Request {
		return c.bindingsOf(ctx, &rbacv1.RoleBindingList{}, o.GetNamespace(), "Role", originalName(o))
	})
	clusterRoleToBindings := handler.EnqueueRequestsFromMapFunc(func(ctx context.Context, o client.Object) []reconcile.Request {
		return append(c.bindingsOf(ctx, &rbacv1.RoleBindingList{}, "", "ClusterRole", originalName(o)),
			c.bindingsOf(ctx, &rbacv1.ClusterRoleBindingList{}, "", "ClusterRole", originalName(o))...)
	})
	steps := []error{
		ctrl.NewControllerManagedBy(mgr).Named("capi-private-rbac-roles").
			For(&rbacv1.Role{}, builder.WithPredicates(notTwin)).Owns(&rbacv1.Role{}).
			Watches(&corev1.Namespace{}, nsToAll(func() client.ObjectList { return &rbacv1.RoleList{} })).
			Complete(reconcile.Func(c.reconcileRole)),
		ctrl.NewControllerManagedBy(mgr).Named("capi-private-rbac-rolebindings").
			For(&rbacv1.RoleBinding{}, builder.WithPredicates(notTwin)).Owns(&rbacv1.RoleBinding{}).
			Watches(&corev1.Namespace{}, nsToAll(func() client.ObjectList { return &rbacv1.RoleBindingList{} })).
			Watches(&rbacv1.Role{}, roleToBindings).
			Watches(&rbacv1.ClusterRole{}, clusterRoleToBindings).
			Complete(reconcile.Func(c.reconcileRoleBinding)),
		ctrl.NewControllerManagedBy(mgr).Named("capi-private-rbac-clusterroles").
			For(&rbacv1.ClusterRole{}, builder.WithPredicates(notTwin)).Owns(&rbacv1.ClusterRole{}).
			Complete(reconcile.Func(c.reconcileClusterRole)),
		ctrl.NewControllerManagedBy(mgr).Named("capi-private-rbac-clusterrolebindings").
			For(&rbacv1.ClusterRoleBinding{}, builder.WithPredicates(notTwin)).Owns(&rbacv1.ClusterRoleBinding{}).
			Watches(&rbacv1.ClusterRole{}, clusterRoleToBindings).
			Complete(reconcile.Func(c.reconcileClusterRoleBinding)),
	}
	for _, err := range steps {
		if err != nil {
			return err
		}
	}
	return nil
}

func (c *Controller) reconcileRole(ctx context.Context, req reconcile.Request) (reconcile.Result, error) {
	role := &rbacv1.Role{}
	if err := c.Client.Get(ctx, req.NamespacedName, role); err != nil || role.Labels[TwinLabel] == "true" {
		return reconcile.Result{}, client.IgnoreNotFound(err)
	}
	var desired *rbacv1.Role
	if ok, err := c.selected(ctx, role.Namespace); err != nil {
		return reconcile.Result{}, err
	} else if ok && role.DeletionTimestamp == nil {
		if desired, err = c.Mirror.TwinRole(role); err != nil {
			return reconcile.Result{}, err
		}
		if desired != nil && !WrittenByHyperShift(role) {
			desired = nil
			if c.Recorder != nil {
				c.Recorder.Event(role, corev1.EventTypeWarning, "NotMirrored",
					"grants standard Cluster API groups but HyperShift did not write it (no HostedControlPlane owner, no HyperShift field manager): no twin on the private groups")
			}
		}
	}
	return c.done(role, "Role", ensure(ctx, c.Client, &rbacv1.Role{}, role, desired))
}

func (c *Controller) reconcileClusterRole(ctx context.Context, req reconcile.Request) (reconcile.Result, error) {
	role := &rbacv1.ClusterRole{}
	if err := c.Client.Get(ctx, req.NamespacedName, role); err != nil || role.Labels[TwinLabel] == "true" {
		return reconcile.Result{}, client.IgnoreNotFound(err)
	}
	desired, err := c.twinClusterRole(role)
	if err != nil {
		return reconcile.Result{}, err
	}
	return c.done(role, "ClusterRole", ensure(ctx, c.Client, &rbacv1.ClusterRole{}, role, desired))
}

func (c *Controller) twinClusterRole(role *rbacv1.ClusterRole) (*rbacv1.ClusterRole, error) {
	if !slices.Contains(c.ClusterRoles, role.Name) || role.DeletionTimestamp != nil {
		return nil, nil
	}
	return c.Mirror.TwinClusterRole(role)
}

func (c *Controller) reconcileRoleBinding(ctx context.Context, req reconcile.Request) (reconcile.Result, error) {
	b := &rbacv1.RoleBinding{}
	if err := c.Client.Get(ctx, req.NamespacedName, b); err != nil || b.Labels[TwinLabel] == "true" {
		return reconcile.Result{}, client.IgnoreNotFound(err)
	}
	var desired *rbacv1.RoleBinding
	ok, err := c.selected(ctx, b.Namespace)
	if err != nil {
		return reconcile.Result{}, err
	}
	if ok && b.DeletionTimestamp == nil && WrittenByHyperShift(b) {
		mirrored, err := c.roleMirrored(ctx, b.Namespace, b.RoleRef)
		if err != nil {
			return reconcile.Result{}, err
		}
		if mirrored {
			desired = TwinRoleBinding(b)
		}
	}
	return c.done(b, "RoleBinding", ensure(ctx, c.Client, &rbacv1.RoleBinding{}, b, desired))
}

func (c *Controller) reconcileClusterRoleBinding(ctx context.Context, req reconcile.Request) (reconcile.Result, error) {
	b := &rbacv1.ClusterRoleBinding{}
	if err := c.Client.Get(ctx, req.NamespacedName, b); err != nil || b.Labels[TwinLabel] == "true" {
		return reconcile.Result{}, client.IgnoreNotFound(err)
	}
	var desired *rbacv1.ClusterRoleBinding
	if b.DeletionTimestamp == nil {
		mirrored, err := c.roleMirrored(ctx, "", b.RoleRef)
		if err != nil {
			return reconcile.Result{}, err
		}
		if mirrored {
			desired = TwinClusterRoleBinding(b)
		}
	}
	return c.done(b, "ClusterRoleBinding", ensure(ctx, c.Client, &rbacv1.ClusterRoleBinding{}, b, desired))
}

// roleMirrored reports whether the role ref names a role whose twin the mirror wrote: it is read, not computed, and
// must be Trusted, so a binding's twin never binds a squatter nor a twin not written yet (its creation enqueues the
// binding again).
func (c *Controller) roleMirrored(ctx context.Context, namespace string, ref rbacv1.RoleRef) (bool, error) {
	switch ref.Kind {
	case "Role":
		role, twin := &rbacv1.Role{}, &rbacv1.Role{}
		if err := c.Client.Get(ctx, types.NamespacedName{Namespace: namespace, Name: ref.Name}, role); err != nil || role.Labels[TwinLabel] == "true" || !WrittenByHyperShift(role) {
			return false, client.IgnoreNotFound(err)
		}
		return c.twinWritten(ctx, types.NamespacedName{Namespace: namespace, Name: TwinName(ref.Name)}, twin, role)
	case "ClusterRole":
		role, twin := &rbacv1.ClusterRole{}, &rbacv1.ClusterRole{}
		if err := c.Client.Get(ctx, types.NamespacedName{Name: ref.Name}, role); err != nil || !slices.Contains(c.ClusterRoles, role.Name) {
			return false, client.IgnoreNotFound(err)
		}
		return c.twinWritten(ctx, types.NamespacedName{Name: TwinName(ref.Name)}, twin, role)
	}
	return false, nil
}

// twinWritten reports whether key holds the mirror's twin of original.
func (c *Controller) twinWritten(ctx context.Context, key types.NamespacedName, twin, original client.Object) (bool, error) {
	if err := c.Client.Get(ctx, key, twin); err != nil {
		return false, client.IgnoreNotFound(err)
	}
	return Trusted(twin, original), nil
}

// originalName is the name of the original of o when o is a twin, else o's own.
func originalName(o client.Object) string {
	if o.GetLabels()[TwinLabel] == "true" {
		return strings.TrimPrefix(o.GetName(), TwinPrefix)
	}
	return o.GetName()
}

func (c *Controller) selected(ctx context.Context, namespace string) (bool, error) {
	ns := &corev1.Namespace{}
	if err := c.Client.Get(ctx, types.NamespacedName{Name: namespace}, ns); err != nil {
		return false, client.IgnoreNotFound(err)
	}
	return c.NamespaceSelector.Matches(labels.Set(ns.Labels)), nil
}

func (c *Controller) requestsIn(ctx context.Context, list client.ObjectList, namespace string) []reconcile.Request {
	if err := c.Client.List(ctx, list, client.InNamespace(namespace)); err != nil {
		return nil
	}
	var out []reconcile.Request
	_ = forEach(list, func(o client.Object) {
		out = append(out, reconcile.Request{NamespacedName: client.ObjectKeyFromObject(o)})
	})
	return out
}

// bindingsOf are the bindings in list (in namespace, "" for all) whose roleRef is kind/name.
func (c *Controller) bindingsOf(ctx context.Context, list client.ObjectList, namespace, kind, name string) []reconcile.Request {
	if err := c.Client.List(ctx, list, client.InNamespace(namespace)); err != nil {
		return nil
	}
	var out []reconcile.Request
	_ = forEach(list, func(o client.Object) {
		var ref rbacv1.RoleRef
		switch b := o.(type) {
		case *rbacv1.RoleBinding:
			ref = b.RoleRef
		case *rbacv1.ClusterRoleBinding:
			ref = b.RoleRef
		}
		if ref.Kind == kind && ref.Name == name {
			out = append(out, reconcile.Request{NamespacedName: client.ObjectKeyFromObject(o)})
		}
	})
	return out
}

func forEach(list client.ObjectList, f func(client.Object)) error {
	switch l := list.(type) {
	case *rbacv1.RoleList:
		for i := range l.Items {
			f(&l.Items[i])
		}
	case *rbacv1.RoleBindingList:
		for i := range l.Items {
			f(&l.Items[i])
		}
	case *rbacv1.ClusterRoleBindingList:
		for i := range l.Items {
			f(&l.Items[i])
		}
	default:
		return fmt.Errorf("unexpected list %T", list)
	}
	return nil
}

// keyOf is the key of the twin of o: same namespace, TwinName.
func keyOf(o client.Object) types.NamespacedName {
	return types.NamespacedName{Namespace: o.GetNamespace(), Name: TwinName(o.GetName())}
}

// ensure makes the twin of original equal desired (nil: absent). It changes only original's Trusted twin: an
// object of another kind under the twin's name is a squatter (a *squatted error when a twin is wanted), left
// alone. A binding whose roleRef must change is replaced (roleRef is immutable).
func ensure[T client.Object](ctx context.Context, c client.Client, current T, original client.Object, desired T) error {
	key := keyOf(original)
	err := c.Get(ctx, key, current)
	exists := err == nil
	if err != nil && !apierrors.IsNotFound(err) {
		return err
	}
	if exists && !Trusted(current, original) {
		if isNil(desired) {
			return nil
		}
		return &squatted{key: key}
	}
	if isNil(desired) {
		if exists {
			return client.IgnoreNotFound(c.Delete(ctx, current, client.Preconditions{UID: ptrUID(current)}))
		}
		return nil
	}
	if !exists {
		return client.IgnoreAlreadyExists(c.Create(ctx, desired))
	}
	if sameTwin(current, desired) {
		return nil
	}
	if !sameRoleRef(current, desired) {
		if err := c.Delete(ctx, current, client.Preconditions{UID: ptrUID(current)}); client.IgnoreNotFound(err) != nil {
			return err
		}
		return client.IgnoreAlreadyExists(c.Create(ctx, desired))
	}
	desired.SetResourceVersion(current.GetResourceVersion())
	return c.Update(ctx, desired)
}
