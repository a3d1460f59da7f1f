package rbacmirror

import (
	"reflect"

	rbacv1 "k8s.io/api/rbac/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"
)

func isNil(o client.Object) bool {
	if o == nil {
		return true
	}
	v := reflect.ValueOf(o)
	return v.Kind() == reflect.Pointer && v.IsNil()
}

func ptrUID(o client.Object) *types.UID {
	uid := o.GetUID()
	return &uid
}

// sameTwin compares what a twin is made of: rules or roleRef and subjects, its label and its owner.
func sameTwin(current, desired client.Object) bool {
	if current.GetLabels()[TwinLabel] != desired.GetLabels()[TwinLabel] ||
		!equality.Semantic.DeepEqual(current.GetOwnerReferences(), desired.GetOwnerReferences()) {
		return false
	}
	switch d := desired.(type) {
	case *rbacv1.Role:
		return equality.Semantic.DeepEqual(current.(*rbacv1.Role).Rules, d.Rules)
	case *rbacv1.ClusterRole:
		return equality.Semantic.DeepEqual(current.(*rbacv1.ClusterRole).Rules, d.Rules)
	case *rbacv1.RoleBinding:
		cur := current.(*rbacv1.RoleBinding)
		return cur.RoleRef == d.RoleRef && equality.Semantic.DeepEqual(cur.Subjects, d.Subjects)
	case *rbacv1.ClusterRoleBinding:
		cur := current.(*rbacv1.ClusterRoleBinding)
		return cur.RoleRef == d.RoleRef && equality.Semantic.DeepEqual(cur.Subjects, d.Subjects)
	}
	return false
}

// sameRoleRef is false only for bindings whose roleRef differs (it cannot be updated).
func sameRoleRef(current, desired client.Object) bool {
	switch d := desired.(type) {
	case *rbacv1.RoleBinding:
		return current.(*rbacv1.RoleBinding).RoleRef == d.RoleRef
	case *rbacv1.ClusterRoleBinding:
		return current.(*rbacv1.ClusterRoleBinding).RoleRef == d.RoleRef
	}
	return true
}
