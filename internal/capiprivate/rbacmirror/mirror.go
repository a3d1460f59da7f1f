// Package rbacmirror gives HyperShift's RBAC its private twin: for every Role and ClusterRole that grants a
// standard Cluster API group to HyperShift's identities, a twin granting the same on the private groups (and every
// binding of it, a twin binding), owned by the original so it follows it. Through the proxy each component's own
// token reaches kube-apiserver, which authorizes the private groups the proxy forwards to; HyperShift's Roles name
// only the standard ones, and HyperShift re-renders them, so the private rules live in objects of their own.
//
// What a twin grants is decided by the pure functions of this file, with the proxy's own translation rule
// (apiGroups, and the resourceNames of rules on customresourcedefinitions); the controller only observes and
// writes.
package rbacmirror

import (
	"encoding/json"
	"fmt"
	"slices"
	"strings"

	rbacv1 "k8s.io/api/rbac/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	k8stypes "k8s.io/apimachinery/pkg/types"
	"k8s.io/utils/ptr"

	"github.com/dcm-sp/acm-cluster-sp/internal/capiprivate/groups"
	"github.com/dcm-sp/acm-cluster-sp/internal/capiprivate/translate"
)

// Names and marks of twins.
const (
	// TwinPrefix starts a twin's name: capi-private:<original>.
	TwinPrefix = "capi-private:"
	// TwinLabel=true marks every twin (the controller never mirrors a twin, and only ever changes or deletes
	// objects that carry it).
	TwinLabel = "capi-private.hypershift.openshift.io/rbac-twin"
)

// TwinName is the twin of the object named name.
func TwinName(name string) string { return TwinPrefix + name }

// Mirror computes twins for one group mapping.
type Mirror struct {
	m  *groups.Mapping
	tr *translate.Translator
}

// New is a Mirror of m (groups.Default in production).
func New(m *groups.Mapping) *Mirror { return &Mirror{m: m, tr: translate.New(m)} }

// Rules is the private twin of rules: for each rule granting a mapped standard group, the same rule (resources,
// resource names, verbs) on the private groups only; for each rule naming CRDs of mapped groups, the same rule
// naming only their private CRDs. Nothing else is granted: wildcards already cover the private groups, and every
// other group is the original's to grant. Subresources such as <resource>/finalizers follow exactly as granted.
func (mi *Mirror) Rules(rules []rbacv1.PolicyRule) ([]rbacv1.PolicyRule, error) {
	translated, err := mi.translate(rules)
	if err != nil {
		return nil, err
	}
	var out []rbacv1.PolicyRule
	for i, r := range rules {
		t := translated[i]
		if len(r.NonResourceURLs) > 0 || len(t.APIGroups) != len(r.APIGroups) || len(t.ResourceNames) != len(r.ResourceNames) {
			continue // non-resource rules name no group; a length change would mean a rule the proxy never writes
		}
		if gs := changed(r.APIGroups, t.APIGroups, mi.m.IsPrivate); len(gs) > 0 {
			out = append(out, rbacv1.PolicyRule{APIGroups: gs, Resources: slices.Clone(r.Resources), ResourceNames: slices.Clone(r.ResourceNames), Verbs: slices.Clone(r.Verbs)})
		}
		if names := changed(r.ResourceNames, t.ResourceNames, func(string) bool { return true }); len(names) > 0 && slices.Contains(r.APIGroups, "apiextensions.k8s.io") {
			out = append(out, rbacv1.PolicyRule{APIGroups: []string{"apiextensions.k8s.io"}, Resources: slices.Clone(r.Resources), ResourceNames: names, Verbs: slices.Clone(r.Verbs)})
		}
	}
	return out, nil
}

// translate renames the rules' groups the way the proxy renames a Role written through it.
func (mi *Mirror) translate(rules []rbacv1.PolicyRule) ([]rbacv1.PolicyRule, error) {
	body, err := json.Marshal(rbacv1.Role{TypeMeta: metav1.TypeMeta{APIVersion: "rbac.authorization.k8s.io/v1", Kind: "Role"}, Rules: rules})
	if err != nil {
		return nil, err
	}
	res, err := mi.tr.RequestObject(body, translate.Context{})
	if err != nil {
		return nil, fmt.Errorf("translating rules: %w", err)
	}
	var role rbacv1.Role
	if err := json.Unmarshal(res.Body, &role); err != nil {
		return nil, err
	}
	if len(role.Rules) != len(rules) {
		return nil, fmt.Errorf("translation changed the number of rules")
	}
	return role.Rules, nil
}

// changed lists the values of after that translation changed (and keep accepts).
func changed(before, after []string, keep func(string) bool) []string {
	var out []string
	for i := range after {
		if after[i] != before[i] && keep(after[i]) && !slices.Contains(out, after[i]) {
			out = append(out, after[i])
		}
	}
	return out
}

// TwinRole is the twin of role, or nil when it grants no standard Cluster API group.
func (mi *Mirror) TwinRole(role *rbacv1.Role) (*rbacv1.Role, error) {
	rules, err := mi.Rules(role.Rules)
	if err != nil || len(rules) == 0 {
		return nil, err
	}
	return &rbacv1.Role{ObjectMeta: twinMeta(role.Namespace, role.Name, ownerRef("Role", role.Name, role.UID)), Rules: rules}, nil
}

// TwinClusterRole is the twin of role, or nil when it grants no standard Cluster API group. An aggregated
// ClusterRole's twin holds the rules it has now (the twin is kept in step when they change).
func (mi *Mirror) TwinClusterRole(role *rbacv1.ClusterRole) (*rbacv1.ClusterRole, error) {
	rules, err := mi.Rules(role.Rules)
	if err != nil || len(rules) == 0 {
		return nil, err
	}
	return &rbacv1.ClusterRole{ObjectMeta: twinMeta("", role.Name, ownerRef("ClusterRole", role.Name, role.UID)), Rules: rules}, nil
}

// TwinRoleBinding binds the twin of b's role to b's ServiceAccounts of its own namespace (TwinSubjects), or is nil
// when b binds none.
func TwinRoleBinding(b *rbacv1.RoleBinding) *rbacv1.RoleBinding {
	subjects := TwinSubjects(b.Subjects, b.Namespace)
	if len(subjects) == 0 {
		return nil
	}
	ref := b.RoleRef
	ref.Name = TwinName(ref.Name)
	return &rbacv1.RoleBinding{ObjectMeta: twinMeta(b.Namespace, b.Name, ownerRef("RoleBinding", b.Name, b.UID)),
		RoleRef: ref, Subjects: subjects}
}

// TwinClusterRoleBinding binds the twin of b's ClusterRole to b's ServiceAccounts (TwinSubjects), or is nil when b
// binds none.
func TwinClusterRoleBinding(b *rbacv1.ClusterRoleBinding) *rbacv1.ClusterRoleBinding {
	subjects := TwinSubjects(b.Subjects, "")
	if len(subjects) == 0 {
		return nil
	}
	ref := b.RoleRef
	ref.Name = TwinName(ref.Name)
	return &rbacv1.ClusterRoleBinding{ObjectMeta: twinMeta("", b.Name, ownerRef("ClusterRoleBinding", b.Name, b.UID)),
		RoleRef: ref, Subjects: subjects}
}

// TwinSubjects are the subjects a twin binding keeps: ServiceAccounts only — HyperShift binds its components'
// ServiceAccounts — and, for a RoleBinding (namespace set), only those of its own namespace. A person or group
// bound by a Role someone else wrote in a control plane namespace never gains the private groups through a twin.
func TwinSubjects(subjects []rbacv1.Subject, namespace string) []rbacv1.Subject {
	var out []rbacv1.Subject
	for _, s := range subjects {
		if s.Kind == rbacv1.ServiceAccountKind && s.APIGroup == "" && (namespace == "" || s.Namespace == namespace) {
			out = append(out, s)
		}
	}
	return out
}

// Trusted reports whether twin, found under original's twin name, is the mirror's twin of it: labelled TwinLabel
// and owned by original (its UID). Anything else there is a squatter: the mirror neither changes it nor binds it.
func Trusted(twin, original metav1.Object) bool {
	if twin.GetLabels()[TwinLabel] != "true" {
		return false
	}
	return slices.ContainsFunc(twin.GetOwnerReferences(), func(r metav1.OwnerReference) bool {
		return r.UID == original.GetUID() && r.Name == original.GetName()
	})
}

func twinMeta(namespace, name string, owner metav1.OwnerReference) metav1.ObjectMeta {
	return metav1.ObjectMeta{
		Namespace: namespace, Name: TwinName(name),
		Labels:          map[string]string{TwinLabel: "true"},
		OwnerReferences: []metav1.OwnerReference{owner},
	}
}

// ownerRef makes the original the twin's controller: the garbage collector deletes the twin with it.
func ownerRef(kind, name string, uid k8stypes.UID) metav1.OwnerReference {
	return metav1.OwnerReference{APIVersion: rbacv1.SchemeGroupVersion.String(), Kind: kind, Name: name, UID: uid, Controller: ptr.To(true)}
}

// HyperShiftManagers are the field managers of HyperShift's writes: kube-apiserver names a create's or update's
// manager after the client's User-Agent, which HyperShift's operator and control-plane-operator set
// (hypershift-operator/main.go, control-plane-operator/main.go). The operator renders the cluster-api,
// capi-provider and control-plane-operator components without an owner reference; the control-plane-operator
// renders the others owned by the HostedControlPlane.
var HyperShiftManagers = []string{"hypershift-operator-manager", "hypershift-controlplane-manager"}

// WrittenByHyperShift reports whether o, a Role or RoleBinding in a control plane namespace, is HyperShift's: owned
// by a HostedControlPlane, or written by one of HyperShift's field managers. Only those are mirrored: a Role
// someone else wrote there (who may hold the standard groups, and could grant them) gets no twin on the private
// groups.
func WrittenByHyperShift(o metav1.Object) bool {
	for _, r := range o.GetOwnerReferences() {
		if r.Kind == "HostedControlPlane" && strings.HasPrefix(r.APIVersion, "hypershift.openshift.io/") {
			return true
		}
	}
	for _, f := range o.GetManagedFields() {
		if slices.Contains(HyperShiftManagers, f.Manager) {
			return true
		}
	}
	return false
}
