package inject

import (
	"slices"

	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
)

// Rules is the RBAC of `capi-private inject` (a ClusterRole bound to its identity): read Namespaces and
// HostedClusters, list HostedControlPlanes (a namespace's route); read and
// write only the Secrets named LoopbackSecret (kube-apiserver authorizes a list or watch by name when its field
// selector names one object, which is how the injector's cache asks); create Secrets (a create cannot be limited
// by name). The webhook itself needs no permission.
func Rules() []rbacv1.PolicyRule {
	return []rbacv1.PolicyRule{
		{APIGroups: []string{""}, Resources: []string{"namespaces"}, Verbs: []string{"get", "list", "watch"}},
		{APIGroups: []string{HostedClusterKind.Group}, Resources: []string{"hostedclusters"}, Verbs: []string{"get", "list", "watch"}},
		{APIGroups: []string{HostedClusterKind.Group}, Resources: []string{"hostedcontrolplanes"}, Verbs: []string{"list"}},
		{APIGroups: []string{""}, Resources: []string{"secrets"}, ResourceNames: []string{LoopbackSecret},
			Verbs: []string{"get", "list", "watch", "update", "patch"}},
		{APIGroups: []string{""}, Resources: []string{"secrets"}, Verbs: []string{"create"}},
	}
}

// KeyRules is what the certificate controller needs in its own namespace (a Role there): the Secrets that keep the
// namespaces' loopback certificates and CA keys (CAKeySecret; a create is allowed by Rules), deleted with their
// namespace, and listed when the controller starts (to forget those of namespaces that went while no injector ran;
// a list there reads nothing get does not). The admission policy capi-private-inject-secrets limits every write and
// delete there to those names.
func KeyRules() []rbacv1.PolicyRule {
	return []rbacv1.PolicyRule{{APIGroups: []string{""}, Resources: []string{"secrets"}, Verbs: []string{"get", "list", "update", "delete"}}}
}

// LeaderElectionRules is what --leader-elect needs in --leader-election-namespace (a Role).
func LeaderElectionRules() []rbacv1.PolicyRule {
	return []rbacv1.PolicyRule{
		{APIGroups: []string{"coordination.k8s.io"}, Resources: []string{"leases"}, Verbs: []string{"get", "create", "update"}},
		{APIGroups: []string{""}, Resources: []string{"events"}, Verbs: []string{"create", "patch"}},
	}
}

// PodInjected reports whether pod carries the proxy sidecar (the migrator's rollout waits until every new Pod of a
// marked namespace's components does, and until none does after a rollback).
func PodInjected(pod *corev1.Pod) bool {
	return slices.ContainsFunc(pod.Spec.InitContainers, func(c corev1.Container) bool { return c.Name == SidecarName })
}
