package hub

import (
	"testing"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
)

// A Secret is served as a HostedCluster's admin kubeconfig only when it is in the cluster's namespace and either has
// HyperShift's name for it or is owned by that HostedCluster (by UID) — never because a status points at it.
func TestKubeconfigBelongs(t *testing.T) {
	owner := func(apiVersion, kind string, uid types.UID) []metav1.OwnerReference {
		return []metav1.OwnerReference{{APIVersion: apiVersion, Kind: kind, Name: "alpha", UID: uid}}
	}
	for _, c := range []struct {
		name   string
		secret metav1.ObjectMeta
		uid    types.UID
		want   bool
	}{
		{"HyperShift's name", metav1.ObjectMeta{Namespace: "clusters", Name: "alpha-admin-kubeconfig"}, "u1", true},
		{"owned by the HostedCluster's UID", metav1.ObjectMeta{Namespace: "clusters", Name: "custom",
			OwnerReferences: owner("hypershift.openshift.io/v1beta1", "HostedCluster", "u1")}, "u1", true},
		{"another cluster's admin kubeconfig", metav1.ObjectMeta{Namespace: "clusters", Name: "beta-admin-kubeconfig"}, "u1", false},
		{"owned by another HostedCluster", metav1.ObjectMeta{Namespace: "clusters", Name: "custom",
			OwnerReferences: owner("hypershift.openshift.io/v1beta1", "HostedCluster", "u2")}, "u1", false},
		{"owner of another kind with the UID", metav1.ObjectMeta{Namespace: "clusters", Name: "custom",
			OwnerReferences: owner("hypershift.openshift.io/v1beta1", "NodePool", "u1")}, "u1", false},
		{"owner in another group", metav1.ObjectMeta{Namespace: "clusters", Name: "custom",
			OwnerReferences: owner("example.com/v1", "HostedCluster", "u1")}, "u1", false},
		{"no UID known matches no owner", metav1.ObjectMeta{Namespace: "clusters", Name: "custom",
			OwnerReferences: owner("hypershift.openshift.io/v1beta1", "HostedCluster", "")}, "", false},
		{"HyperShift's name in another namespace", metav1.ObjectMeta{Namespace: "other", Name: "alpha-admin-kubeconfig"}, "u1", false},
	} {
		t.Run(c.name, func(t *testing.T) {
			if got := KubeconfigBelongs("clusters", "alpha", c.uid, &c.secret); got != c.want {
				t.Errorf("KubeconfigBelongs = %v, want %v", got, c.want)
			}
		})
	}
}
