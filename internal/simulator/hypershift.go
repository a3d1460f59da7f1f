package simulator

import (
	hyperv1 "github.com/openshift/hypershift/api/hypershift/v1beta1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// What the HyperShift operator writes, as its source writes it (testdata/hypershift-operator-objects.yaml records
// each shape with its source path; TestOperatorObjectsMatchHyperShift compares). The simulator decides these names
// and fields itself: it must not take them from the SP, whose expectations they are meant to test.

// annotationHostedCluster is the annotation the operator's createOrUpdate puts on every namespaced object it
// writes for a HostedCluster: "<namespace>/<name>" (cluster-scoped objects, the control plane namespace
// included, do not get it).
const annotationHostedCluster = "hypershift.openshift.io/cluster"

func adminKubeconfigName(hc *hyperv1.HostedCluster) string   { return hc.Name + "-admin-kubeconfig" }
func kubeadminPasswordName(hc *hyperv1.HostedCluster) string { return hc.Name + "-kubeadmin-password" }

// operatorOwner is the ownerReference the operator sets on the Secrets it copies into the HostedCluster's
// namespace: no controller flag, no blockOwnerDeletion.
func operatorOwner(hc *hyperv1.HostedCluster) []metav1.OwnerReference {
	return []metav1.OwnerReference{{APIVersion: hyperv1.GroupVersion.String(), Kind: "HostedCluster", Name: hc.Name, UID: hc.UID}}
}

// OperatorSecrets are the admin kubeconfig and kubeadmin password Secrets the operator writes into the
// HostedCluster's namespace once the control plane is available. The kubeconfig Secret carries the
// HostedCluster's labels; copyLabels false plays an older operator that did not copy them.
func OperatorSecrets(hc *hyperv1.HostedCluster, kubeconfig []byte, password string, copyLabels bool) []*corev1.Secret {
	var labels map[string]string
	if copyLabels {
		labels = map[string]string{}
		for k, v := range hc.Labels {
			labels[k] = v
		}
	}
	annotations := func() map[string]string {
		return map[string]string{annotationHostedCluster: hc.Namespace + "/" + hc.Name}
	}
	return []*corev1.Secret{
		{ObjectMeta: metav1.ObjectMeta{Name: adminKubeconfigName(hc), Namespace: hc.Namespace, Labels: labels,
			Annotations: annotations(), OwnerReferences: operatorOwner(hc)},
			Type: corev1.SecretTypeOpaque, Data: map[string][]byte{"kubeconfig": kubeconfig}},
		{ObjectMeta: metav1.ObjectMeta{Name: kubeadminPasswordName(hc), Namespace: hc.Namespace,
			Annotations: annotations(), OwnerReferences: operatorOwner(hc)},
			Type: corev1.SecretTypeOpaque, Data: map[string][]byte{"password": []byte(password)}},
	}
}
