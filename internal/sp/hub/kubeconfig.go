package hub

import (
	"strings"

	hyperv1 "github.com/openshift/hypershift/api/hypershift/v1beta1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
)

// AdminKubeconfigName is the name HyperShift gives a HostedCluster's admin kubeconfig Secret, in the
// HostedCluster's namespace (the operator's manifests.KubeConfigSecret).
func AdminKubeconfigName(hostedCluster string) string { return hostedCluster + "-admin-kubeconfig" }

// KubeconfigBelongs is the one rule that decides whether a Secret may be served as the admin kubeconfig of the
// HostedCluster name/uid in namespace ns: it is in that namespace, and either an ownerReference names the
// HostedCluster by its UID (HyperShift sets one on the Secret it writes) or the Secret has HyperShift's name for
// it. status.kubeconfig alone decides nothing: whoever can write a HostedCluster's status could point it at any
// Secret of the namespace — another cluster's admin kubeconfig included.
func KubeconfigBelongs(ns, name string, uid types.UID, s metav1.Object) bool {
	if s.GetNamespace() != ns {
		return false
	}
	if s.GetName() == AdminKubeconfigName(name) {
		return true
	}
	for _, o := range s.GetOwnerReferences() {
		if o.Kind == "HostedCluster" && o.UID == uid && uid != "" && strings.HasPrefix(o.APIVersion, hyperv1.GroupVersion.Group+"/") {
			return true
		}
	}
	return false
}
