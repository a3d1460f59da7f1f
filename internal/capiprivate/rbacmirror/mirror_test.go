package rbacmirror

import (
	"testing"

	"github.com/google/go-cmp/cmp"
	"github.com/google/go-cmp/cmp/cmpopts"
	rbacv1 "k8s.io/api/rbac/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"

	"github.com/dcm-sp/acm-cluster-sp/internal/capiprivate/groups"
	"github.com/dcm-sp/acm-cluster-sp/internal/devtest/capi/injecttest"
)

const (
	privCluster = "cluster.hypershift.openshift.io"
	privInfra   = "infrastructure.cluster.hypershift.openshift.io"
	privAddons  = "addons.cluster.hypershift.openshift.io"
	privIPAM    = "ipam.cluster.hypershift.openshift.io"
)

func rule(groups, resources, verbs []string, names ...string) rbacv1.PolicyRule {
	return rbacv1.PolicyRule{APIGroups: groups, Resources: resources, Verbs: verbs, ResourceNames: names}
}

var all = []string{"*"}

// The twins of HyperShift's own Roles, read off the recorded fixtures by hand.
func TestTwinsOfRecordedRoles(t *testing.T) {
	capiGroups := []string{privInfra, privAddons, privCluster} // in the order HyperShift lists the standard ones
	want := map[string][]rbacv1.PolicyRule{
		"cluster-api":   {rule(capiGroups, all, all)},
		"capi-provider": {rule(capiGroups, all, all)},
		"cluster-autoscaler": {
			rule([]string{privCluster}, []string{"machinedeployments", "machinedeployments/scale", "machines", "machinesets", "machinesets/scale", "machinepools", "machinepools/scale"}, all),
			rule([]string{privInfra}, all, []string{"get", "list", "watch"}),
		},
		"machine-approver":               {rule([]string{privCluster}, []string{"machines", "machines/status"}, []string{"get", "list", "watch"})},
		"hosted-cluster-config-operator": {rule([]string{privCluster}, []string{"machinesets", "machines"}, []string{"get", "patch", "update", "delete", "list", "watch"})},
		"karpenter-operator":             {rule([]string{privCluster}, []string{"clusters"}, []string{"get", "list", "watch"})},
	}
	mi := New(groups.Default)
	for _, comp := range injecttest.ControlPlaneComponents {
		t.Run(comp, func(t *testing.T) {
			f, err := injecttest.Load(comp, "clusters-demo")
			if err != nil {
				t.Fatal(err)
			}
			f.Role.UID = "uid-1"
			twin, err := mi.TwinRole(f.Role)
			if err != nil {
				t.Fatal(err)
			}
			if diff := cmp.Diff(want[comp], twin.Rules, cmpopts.EquateEmpty()); diff != "" {
				t.Fatalf("twin rules (-want +got):\n%s", diff)
			}
			if twin.Name != "capi-private:"+f.Role.Name || twin.Namespace != "clusters-demo" || twin.Labels[TwinLabel] != "true" {
				t.Fatalf("twin meta %+v", twin.ObjectMeta)
			}
			if o := twin.OwnerReferences; len(o) != 1 || o[0].Kind != "Role" || o[0].UID != "uid-1" || !*o[0].Controller {
				t.Fatalf("owner %+v", o)
			}
			b := TwinRoleBinding(f.RoleBinding)
			if b.RoleRef.Name != twin.Name || !cmp.Equal(b.Subjects, f.RoleBinding.Subjects) {
				t.Fatalf("twin binding %+v", b)
			}
		})
	}
}

func TestTwinOfOperatorClusterRole(t *testing.T) {
	f, err := injecttest.Load(injecttest.Operator, "hypershift")
	if err != nil {
		t.Fatal(err)
	}
	twin, err := New(groups.Default).TwinClusterRole(f.ClusterRole)
	if err != nil {
		t.Fatal(err)
	}
	want := []rbacv1.PolicyRule{
		rule([]string{privInfra, privAddons, privCluster}, all, all),
		rule([]string{privIPAM}, []string{"ipaddressclaims", "ipaddressclaims/status"}, all),
		rule([]string{privIPAM}, []string{"ipaddresses", "ipaddresses/status"}, []string{"create", "delete", "get", "list", "update", "watch"}),
	}
	if diff := cmp.Diff(want, twin.Rules, cmpopts.EquateEmpty()); diff != "" {
		t.Fatalf("operator twin (-want +got):\n%s", diff)
	}
	if b := TwinClusterRoleBinding(f.ClusterRoleBinding); b.RoleRef.Name != "capi-private:hypershift-operator" || b.Subjects[0].Namespace != "hypershift" {
		t.Fatalf("twin binding %+v", b)
	}
}

func TestRules(t *testing.T) {
	crd := []string{"customresourcedefinitions"}
	get := []string{"get"}
	cases := []struct {
		name string
		in   []rbacv1.PolicyRule
		want []rbacv1.PolicyRule
	}{
		{"nothing standard", []rbacv1.PolicyRule{rule([]string{"", "apps"}, all, all)}, nil},
		{"wildcard group already covers the private ones", []rbacv1.PolicyRule{rule(all, all, all)}, nil},
		{"unmapped CAPI groups stay with the original", []rbacv1.PolicyRule{rule([]string{"bootstrap.cluster.x-k8s.io", "controlplane.cluster.x-k8s.io"}, all, all)}, nil},
		{"finalizers as granted", []rbacv1.PolicyRule{rule([]string{"cluster.x-k8s.io"}, []string{"machines/finalizers"}, []string{"update"})},
			[]rbacv1.PolicyRule{rule([]string{privCluster}, []string{"machines/finalizers"}, []string{"update"})}},
		{"resource names kept", []rbacv1.PolicyRule{rule([]string{"cluster.x-k8s.io"}, []string{"clusters"}, get, "demo")},
			[]rbacv1.PolicyRule{rule([]string{privCluster}, []string{"clusters"}, get, "demo")}},
		{"CRD names mapped", []rbacv1.PolicyRule{rule([]string{"apiextensions.k8s.io"}, crd, get, "machines.cluster.x-k8s.io", "foos.example.com")},
			[]rbacv1.PolicyRule{rule([]string{"apiextensions.k8s.io"}, crd, get, "machines."+privCluster)}},
		{"CRDs without names", []rbacv1.PolicyRule{rule([]string{"apiextensions.k8s.io"}, crd, get)}, nil},
		{"non-resource URL", []rbacv1.PolicyRule{{NonResourceURLs: []string{"/healthz"}, Verbs: get}}, nil},
		{"duplicate groups once", []rbacv1.PolicyRule{rule([]string{"cluster.x-k8s.io", privCluster, "cluster.x-k8s.io"}, all, get)},
			[]rbacv1.PolicyRule{rule([]string{privCluster}, all, get)}},
	}
	mi := New(groups.Default)
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			got, err := mi.Rules(tc.in)
			if err != nil {
				t.Fatal(err)
			}
			if diff := cmp.Diff(tc.want, got, cmpopts.EquateEmpty()); diff != "" {
				t.Fatalf("(-want +got):\n%s", diff)
			}
		})
	}
	if r, err := mi.TwinRole(&rbacv1.Role{Rules: cases[0].in}); r != nil || err != nil {
		t.Fatalf("a Role granting no standard group has a twin: %v %v", r, err)
	}
}

// A twin binding keeps only ServiceAccounts, and a RoleBinding's twin only those of its own namespace.
func TestTwinSubjects(t *testing.T) {
	sa := func(ns, name string) rbacv1.Subject {
		return rbacv1.Subject{Kind: rbacv1.ServiceAccountKind, Namespace: ns, Name: name}
	}
	user := rbacv1.Subject{Kind: rbacv1.UserKind, APIGroup: rbacv1.GroupName, Name: "mallory"}
	group := rbacv1.Subject{Kind: rbacv1.GroupKind, APIGroup: rbacv1.GroupName, Name: "system:authenticated"}
	for _, c := range []struct {
		name      string
		namespace string
		in, want  []rbacv1.Subject
	}{
		{"HyperShift's component", "hcp", []rbacv1.Subject{sa("hcp", "cluster-api")}, []rbacv1.Subject{sa("hcp", "cluster-api")}},
		{"a person and a group dropped", "hcp", []rbacv1.Subject{user, sa("hcp", "cluster-api"), group}, []rbacv1.Subject{sa("hcp", "cluster-api")}},
		{"another namespace's account dropped", "hcp", []rbacv1.Subject{sa("tenant", "builder")}, nil},
		{"cluster binding: any namespace's account", "", []rbacv1.Subject{sa("hypershift", "operator"), user}, []rbacv1.Subject{sa("hypershift", "operator")}},
	} {
		if got := TwinSubjects(c.in, c.namespace); !cmp.Equal(got, c.want, cmpopts.EquateEmpty()) {
			t.Errorf("%s: %v, want %v", c.name, got, c.want)
		}
	}
	b := &rbacv1.RoleBinding{RoleRef: rbacv1.RoleRef{Kind: "Role", Name: "r"}, Subjects: []rbacv1.Subject{user}}
	b.Namespace, b.Name = "hcp", "r"
	if tw := TwinRoleBinding(b); tw != nil {
		t.Errorf("a binding of nobody the twin may bind has twin %+v", tw)
	}
}

// Only the mirror's own twin is trusted: labelled and owned by the original (name and UID).
func TestTrusted(t *testing.T) {
	original := &rbacv1.Role{}
	original.Name, original.UID = "cluster-api", "u-1"
	twin := func(labelled bool, ownerName string, uid string) *rbacv1.Role {
		r := &rbacv1.Role{}
		r.Name = TwinName("cluster-api")
		if labelled {
			r.Labels = map[string]string{TwinLabel: "true"}
		}
		if ownerName != "" {
			r.OwnerReferences = []metav1.OwnerReference{ownerRef("Role", ownerName, types.UID(uid))}
		}
		return r
	}
	for _, c := range []struct {
		name string
		twin *rbacv1.Role
		want bool
	}{
		{"the mirror's twin", twin(true, "cluster-api", "u-1"), true},
		{"unlabelled squatter", twin(false, "", ""), false},
		{"labelled squatter without owner", twin(true, "", ""), false},
		{"owned by an earlier original of that name", twin(true, "cluster-api", "u-0"), false},
		{"owned by another Role", twin(true, "other", "u-1"), false},
	} {
		if got := Trusted(c.twin, original); got != c.want {
			t.Errorf("%s: %v, want %v", c.name, got, c.want)
		}
	}
}

// A Role is HyperShift's when a HostedControlPlane owns it or one of HyperShift's field managers wrote it.
func TestWrittenByHyperShift(t *testing.T) {
	hcp := metav1.OwnerReference{APIVersion: "hypershift.openshift.io/v1beta1", Kind: "HostedControlPlane", Name: "hcp", UID: "u"}
	managed := func(managers ...string) []metav1.ManagedFieldsEntry {
		var out []metav1.ManagedFieldsEntry
		for _, m := range managers {
			out = append(out, metav1.ManagedFieldsEntry{Manager: m, Operation: metav1.ManagedFieldsOperationUpdate})
		}
		return out
	}
	for _, c := range []struct {
		name   string
		owners []metav1.OwnerReference
		fields []metav1.ManagedFieldsEntry
		want   bool
	}{
		{"rendered by the control-plane-operator, owned by the HostedControlPlane", []metav1.OwnerReference{hcp}, managed("hypershift-controlplane-manager"), true},
		{"rendered by the operator, no owner", nil, managed("hypershift-operator-manager"), true},
		{"HyperShift's, edited since by a person", nil, managed("hypershift-operator-manager", "kubectl-edit"), true},
		{"owned by the HostedControlPlane only", []metav1.OwnerReference{hcp}, nil, true},
		{"created with kubectl", nil, managed("kubectl-create"), false},
		{"owned by something else", []metav1.OwnerReference{{APIVersion: "v1", Kind: "ConfigMap", Name: "x", UID: "u"}}, managed("helm"), false},
		{"a HostedControlPlane kind of another group", []metav1.OwnerReference{{APIVersion: "example.com/v1", Kind: "HostedControlPlane", Name: "x", UID: "u"}}, nil, false},
	} {
		r := &rbacv1.Role{ObjectMeta: metav1.ObjectMeta{OwnerReferences: c.owners, ManagedFields: c.fields}}
		if got := WrittenByHyperShift(r); got != c.want {
			t.Errorf("%s: %v, want %v", c.name, got, c.want)
		}
	}
}
