package simulator

import (
	"context"
	"errors"
	"strings"

	hyperv1 "github.com/openshift/hypershift/api/hypershift/v1beta1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"
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

// annotationSkipNamespaceDeletion on a HostedCluster keeps its control plane namespace when it is deleted.
const annotationSkipNamespaceDeletion = "hypershift.openshift.io/skip-delete-hosted-controlplane-namespace"

// controlPlaneNamespace is the operator's control plane namespace of a HostedCluster, with the labels it sets.
func controlPlaneNamespace(hc *hyperv1.HostedCluster) *corev1.Namespace {
	return &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{
		Name: hc.Namespace + "-" + strings.ReplaceAll(hc.Name, ".", "-"),
		Labels: map[string]string{
			"hypershift.openshift.io/hosted-control-plane":   "true",
			"pod-security.kubernetes.io/enforce":             "privileged",
			"pod-security.kubernetes.io/audit":               "privileged",
			"pod-security.kubernetes.io/warn":                "privileged",
			"security.openshift.io/scc.podSecurityLabelSync": "false",
		},
	}}
}

// ensureControlPlaneNamespace creates the control plane namespace, or adopts an existing one by giving it the
// operator's labels — whoever it belonged to, as the operator's createOrUpdate does.
func (s *Simulator) ensureControlPlaneNamespace(ctx context.Context, hc *hyperv1.HostedCluster) error {
	want := controlPlaneNamespace(hc)
	var ns corev1.Namespace
	err := s.Client.Get(ctx, client.ObjectKeyFromObject(want), &ns)
	switch {
	case apierrors.IsNotFound(err):
		return client.IgnoreAlreadyExists(s.Client.Create(ctx, want))
	case err != nil:
		return err
	case ns.DeletionTimestamp != nil:
		return nil // the operator's createOrUpdate fails until it is gone; the next reconcile makes it again
	}
	before := ns.DeepCopy()
	changed := false
	for k, v := range want.Labels {
		if ns.Labels[k] != v {
			if ns.Labels == nil {
				ns.Labels = map[string]string{}
			}
			ns.Labels[k], changed = v, true
		}
	}
	if !changed {
		return nil
	}
	return s.Client.Patch(ctx, &ns, client.MergeFrom(before))
}

// errNamespaceTerminating: the control plane namespace is still being deleted; the operator keeps its finalizer
// on the HostedCluster until it is gone.
var errNamespaceTerminating = errors.New("the control plane namespace is still being deleted")

// deleteControlPlaneNamespace deletes the control plane namespace (unless the HostedCluster says to keep it) and
// returns errNamespaceTerminating until it is gone.
func (s *Simulator) deleteControlPlaneNamespace(ctx context.Context, hc *hyperv1.HostedCluster) error {
	if hc.Annotations[annotationSkipNamespaceDeletion] == "true" {
		return nil
	}
	err := s.Client.Delete(ctx, controlPlaneNamespace(hc))
	switch {
	case apierrors.IsNotFound(err):
		return nil
	case err != nil && !apierrors.IsConflict(err): // Conflict: already terminating
		return err
	}
	return errNamespaceTerminating
}
