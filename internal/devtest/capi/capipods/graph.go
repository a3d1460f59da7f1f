package capipods

import (
	"fmt"
	"slices"

	hyperv1 "github.com/openshift/hypershift/api/hypershift/v1beta1"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/utils/ptr"
	clusterv1 "sigs.k8s.io/cluster-api/api/core/v1beta2"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/dcm-sp/acm-cluster-sp/internal/capiprivate/groups"
)

// Groups chooses the API groups a hosted cluster's Cluster API objects are written in.
type Groups int

const (
	// StandardGroups writes them as a legacy HyperShift does: in the standard groups, i.e. the platform's standard CRDs
	// and the standard CAPK CRDs, for managers in Direct mode. Also what a client of the proxy writes.
	StandardGroups Groups = iota
	// PrivateGroups writes them straight into the private groups, refs included: what the proxy stores for a
	// proxied client, and what the migrator writes.
	PrivateGroups
)

func (g Groups) String() string {
	if g == PrivateGroups {
		return "private"
	}
	return "standard"
}

// Group is the group a standard group's objects are written in.
func (g Groups) Group(standard string) string {
	if g == PrivateGroups {
		if p, ok := groups.Default.ToPrivate(standard); ok {
			return p
		}
	}
	return standard
}

// APIVersion is <Group(standard)>/<version>.
func (g Groups) APIVersion(standard, version string) string { return g.Group(standard) + "/" + version }

// Labels of the simulated workloads.
const (
	// SimulateLabel marks the simulated Deployments and their Pods, which the DeploymentPlayer runs (value "true").
	SimulateLabel = "capipods.capi-private.dcm.io/simulate"
	// RoleLabel names what a simulated Pod runs (RoleCAPI, RoleProvider, …).
	RoleLabel = "capipods.capi-private.dcm.io/role"
	// ComponentLabel is the label HyperShift puts on each control plane component's Pods, naming the component.
	ComponentLabel = "hypershift.openshift.io/control-plane-component"
)

// Roles of HyperShift's per-control-plane Deployments: the ones a migration quiesces, and the CAPI readers that
// move with the switch.
const (
	RoleCAPI                 = "cluster-api"
	RoleProvider             = "capi-provider"
	RoleControlPlaneOperator = "control-plane-operator"
	RoleAutoscaler           = "cluster-autoscaler"
	RoleMachineApprover      = "machine-approver"
	// RoleHCCO (hosted-cluster-config-operator) reads Machines; RoleKarpenterOperator reads the Cluster. Both run
	// idle here (a Pod, no manager): what matters is which groups their Pods would see.
	RoleHCCO              = "hosted-cluster-config-operator"
	RoleKarpenterOperator = "karpenter-operator"
)

// ControlPlaneRoles are the simulated Deployments of every hosted control plane namespace, in creation order
// (RoleKarpenterOperator only with HostedClusterSpec.Karpenter, as HyperShift runs it only with AutoNode).
var ControlPlaneRoles = []string{RoleControlPlaneOperator, RoleCAPI, RoleProvider, RoleAutoscaler, RoleMachineApprover, RoleHCCO}

// mainContainer is each role's main container, named as in HyperShift's rendered Deployments (the recorded
// fixtures in inject/injecttest/testdata/hypershift).
var mainContainer = map[string]string{
	RoleCAPI: "manager", RoleProvider: "manager", RoleControlPlaneOperator: "control-plane-operator",
	RoleAutoscaler: "cluster-autoscaler", RoleMachineApprover: "machine-approver",
	RoleHCCO: "hosted-cluster-config-operator", RoleKarpenterOperator: "karpenter-operator",
}

// MachineDeploymentSpec is one MachineDeployment (with its machine template, bootstrap Secret and, if asked,
// MachineHealthCheck) of a hosted cluster, as HyperShift makes one per NodePool.
type MachineDeploymentSpec struct {
	Name     string
	Replicas int32
}

// HostedClusterSpec describes a hosted cluster in HyperShift's shape.
type HostedClusterSpec struct {
	// Namespace and Name of the HostedCluster; its control plane lives in ControlPlaneNamespace(Namespace, Name).
	Namespace, Name string
	// InfraID names the Cluster, the infrastructure cluster and the kubeconfig Secret (default Name).
	InfraID string
	// Groups the Cluster API objects are written in.
	Groups Groups
	// Platform gives the infrastructure kinds (KubeVirt when unset). The HostedCluster's own platform spec stays
	// KubeVirt's whatever it is: nothing here reads it.
	Platform Platform
	// MachineDeployments of the cluster.
	MachineDeployments []MachineDeploymentSpec
	// MachineHealthChecks adds one MachineHealthCheck per MachineDeployment, as HyperShift does with autoRepair.
	MachineHealthChecks bool
	// Annotations of the HostedCluster (e.g. hypershift.openshift.io/scope: legacy).
	Annotations map[string]string
	// Deployments adds the simulated control plane Deployments (ControlPlaneRoles, and karpenter-operator with
	// Karpenter) with DeploymentReplicas replicas (0 is 0: created but not running); Proxied points their
	// containers at a sidecar on loopback (ProxiedEnv), so their pods run Proxied.
	Deployments        bool
	DeploymentReplicas int32
	Proxied            bool
	Karpenter          bool
}

// roles are the simulated Deployments of s.
func (s HostedClusterSpec) roles() []string {
	if s.Karpenter {
		return append(slices.Clone(ControlPlaneRoles), RoleKarpenterOperator)
	}
	return ControlPlaneRoles
}

// ProxiedEnv is what a pod template's main container sets to run Proxied: its in-cluster client talks to a
// sidecar on loopback (the injector sets the same on the Pods it injects).
var ProxiedEnv = []corev1.EnvVar{{Name: "KUBERNETES_SERVICE_HOST", Value: "127.0.0.1"}, {Name: "KUBERNETES_SERVICE_PORT", Value: "16443"}}

func (s HostedClusterSpec) infraID() string {
	if s.InfraID != "" {
		return s.InfraID
	}
	return s.Name
}

// ControlPlaneNamespace is the hosted control plane namespace.
func (s HostedClusterSpec) ControlPlaneNamespace() string {
	return ControlPlaneNamespace(s.Namespace, s.Name)
}

// ClusterName is the Cluster API Cluster's name (the infraID).
func (s HostedClusterSpec) ClusterName() string { return s.infraID() }

// UserDataSecret is the bootstrap data Secret of a MachineDeployment's Machines.
func UserDataSecret(md string) string { return "user-data-" + md }

// Objects returns every object of the hosted cluster in creation order (owners and referenced objects first):
// the control plane namespace, HostedCluster, HostedControlPlane, the platform's infrastructure cluster, Cluster, then per
// MachineDeployment its user-data Secret, the platform's machine template, MachineDeployment and MachineHealthCheck, then
// the Deployments, each after its ServiceAccount. Cluster API objects are unstructured, in s.Groups; the others are typed.
func (s HostedClusterSpec) Objects() []client.Object {
	ns, infra := s.ControlPlaneNamespace(), s.infraID()
	hcKey := s.Namespace + "/" + s.Name
	out := []client.Object{
		&corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns, Labels: map[string]string{HostedControlPlaneLabel: "true"},
			Annotations: map[string]string{HostedClusterAnnotation: hcKey}}},
		s.hostedCluster(),
		s.hostedControlPlane(),
	}
	p, shape := s.platform(), s.platform().shapes()
	if shape.Cluster == nil {
		shape.Cluster = map[string]any{}
	}
	kc := s.capi(p.Group, p.Version, p.Cluster, infra, shape.Cluster)
	kc.SetAnnotations(map[string]string{HostedClusterAnnotation: hcKey})
	if p.ExternallyManaged {
		kc.SetAnnotations(map[string]string{HostedClusterAnnotation: hcKey, clusterv1.ManagedByAnnotation: "external"})
	}
	cluster := s.capi(ClusterGroup, "v1beta2", "Cluster", infra, map[string]any{
		"controlPlaneRef":   map[string]any{"apiGroup": hyperv1.GroupVersion.Group, "kind": "HostedControlPlane", "name": s.Name},
		"infrastructureRef": map[string]any{"apiGroup": s.Groups.Group(p.Group), "kind": p.Cluster, "name": infra},
	})
	cluster.SetAnnotations(map[string]string{HostedClusterAnnotation: hcKey})
	out = append(out, kc, cluster)

	// Cluster API's defaulting webhooks do not run here (no CAPI webhook server), so objects are written as they
	// would be stored after defaulting: cluster-name labels on objects, selectors and templates, and the rollout.
	for _, md := range s.MachineDeployments {
		selector := map[string]any{clusterv1.MachineDeploymentNameLabel: md.Name, clusterv1.ClusterNameLabel: infra}
		out = append(out,
			&corev1.Secret{
				ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: UserDataSecret(md.Name), Labels: map[string]string{clusterv1.ClusterNameLabel: infra}},
				Data:       map[string][]byte{"value": []byte("#ignition for " + md.Name)},
			},
			s.capi(p.Group, p.Version, p.Template, md.Name, s.templateSpec(ns)),
			s.capi(ClusterGroup, "v1beta2", "MachineDeployment", md.Name, map[string]any{
				"clusterName": infra,
				"replicas":    int64(md.Replicas),
				"rollout": map[string]any{"strategy": map[string]any{
					"type":          "RollingUpdate",
					"rollingUpdate": map[string]any{"maxSurge": int64(1), "maxUnavailable": int64(0)},
				}},
				"selector": map[string]any{"matchLabels": selector},
				"template": map[string]any{
					"metadata": map[string]any{"labels": selector},
					"spec": map[string]any{
						"clusterName":       infra,
						"bootstrap":         map[string]any{"dataSecretName": UserDataSecret(md.Name)},
						"infrastructureRef": map[string]any{"apiGroup": s.Groups.Group(p.Group), "kind": p.Template, "name": md.Name},
					},
				},
			}),
		)
		if s.MachineHealthChecks {
			out = append(out, s.capi(ClusterGroup, "v1beta2", "MachineHealthCheck", md.Name, map[string]any{
				"clusterName": infra,
				"selector":    map[string]any{"matchLabels": selector},
				"checks": map[string]any{
					"nodeStartupTimeoutSeconds": int64(1200),
					"unhealthyNodeConditions": []any{
						map[string]any{"type": "Ready", "status": "False", "timeoutSeconds": int64(480)},
						map[string]any{"type": "Ready", "status": "Unknown", "timeoutSeconds": int64(480)},
					},
				},
				"remediation": map[string]any{"triggerIf": map[string]any{"unhealthyLessThanOrEqualTo": int64(2)}},
			}))
		}
	}
	if s.Deployments {
		for _, role := range s.roles() {
			// Each Deployment's ServiceAccount first, as HyperShift writes it: with ServiceAccount admission on
			// (capihub.Options.ServiceAccounts), a Pod of a missing one is refused.
			out = append(out, &corev1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: role}}, s.deployment(role))
		}
	}
	return out
}

// platform is the hosted cluster's platform (KubeVirt unless set).
func (s HostedClusterSpec) platform() Platform {
	if s.Platform.Name == "" {
		return KubeVirt
	}
	return s.Platform
}

// templateSpec is a NodePool's machine template spec on s's platform.
func (s HostedClusterSpec) templateSpec(ns string) map[string]any {
	if t := s.platform().shapes().Template; t != nil {
		return t
	}
	return map[string]any{"template": map[string]any{"spec": map[string]any{
		"virtualMachineTemplate": map[string]any{
			"metadata": map[string]any{"namespace": ns},
			"spec": map[string]any{"runStrategy": "Always", "template": map[string]any{"spec": map[string]any{
				"domain": map[string]any{"cpu": map[string]any{"cores": int64(2)}, "memory": map[string]any{"guest": "4Gi"}, "devices": map[string]any{}},
			}}},
		},
	}}}
}

func (s HostedClusterSpec) capi(standardGroup, version, kind, name string, spec map[string]any) *unstructured.Unstructured {
	u := &unstructured.Unstructured{Object: map[string]any{
		"apiVersion": s.Groups.APIVersion(standardGroup, version),
		"kind":       kind,
		"metadata":   map[string]any{"name": name, "namespace": s.ControlPlaneNamespace()},
		"spec":       spec,
	}}
	if kind == "MachineDeployment" || kind == "MachineHealthCheck" {
		u.SetLabels(map[string]string{clusterv1.ClusterNameLabel: s.infraID()})
	}
	return u
}

func (s HostedClusterSpec) services() []hyperv1.ServicePublishingStrategyMapping {
	var out []hyperv1.ServicePublishingStrategyMapping
	for _, svc := range []hyperv1.ServiceType{hyperv1.APIServer, hyperv1.OAuthServer, hyperv1.Konnectivity, hyperv1.Ignition} {
		out = append(out, hyperv1.ServicePublishingStrategyMapping{
			Service: svc, ServicePublishingStrategy: hyperv1.ServicePublishingStrategy{Type: hyperv1.Route},
		})
	}
	return out
}

// HostedCluster is the HostedCluster object alone (as a user creates it, before any operator has seen it).
func (s HostedClusterSpec) HostedCluster() *hyperv1.HostedCluster { return s.hostedCluster() }

func (s HostedClusterSpec) hostedCluster() *hyperv1.HostedCluster {
	return &hyperv1.HostedCluster{
		ObjectMeta: metav1.ObjectMeta{Namespace: s.Namespace, Name: s.Name, Annotations: s.Annotations},
		Spec: hyperv1.HostedClusterSpec{
			Release:    hyperv1.Release{Image: "quay.io/openshift-release-dev/ocp-release:4.20.0-multi"},
			InfraID:    s.infraID(),
			Platform:   s.platform().spec(),
			Networking: hyperv1.ClusterNetworking{NetworkType: hyperv1.OVNKubernetes},
			Etcd:       hyperv1.EtcdSpec{ManagementType: hyperv1.Managed, Managed: &hyperv1.ManagedEtcdSpec{Storage: hyperv1.ManagedEtcdStorageSpec{Type: hyperv1.PersistentVolumeEtcdStorage}}},
			PullSecret: corev1.LocalObjectReference{Name: "pull-secret"},
			Services:   s.services(),
		},
	}
}

func (s HostedClusterSpec) hostedControlPlane() *hyperv1.HostedControlPlane {
	return &hyperv1.HostedControlPlane{
		ObjectMeta: metav1.ObjectMeta{
			Namespace: s.ControlPlaneNamespace(), Name: s.Name,
			Annotations: map[string]string{HostedClusterAnnotation: s.Namespace + "/" + s.Name},
		},
		Spec: hyperv1.HostedControlPlaneSpec{
			ReleaseImage: "quay.io/openshift-release-dev/ocp-release:4.20.0-multi",
			InfraID:      s.infraID(),
			IssuerURL:    "https://kubernetes.default.svc",
			DNS:          hyperv1.DNSSpec{BaseDomain: "capipods.invalid"},
			Platform:     s.platform().spec(),
			Networking:   hyperv1.ClusterNetworking{NetworkType: hyperv1.OVNKubernetes},
			Etcd:         hyperv1.EtcdSpec{ManagementType: hyperv1.Managed, Managed: &hyperv1.ManagedEtcdSpec{Storage: hyperv1.ManagedEtcdStorageSpec{Type: hyperv1.PersistentVolumeEtcdStorage}}},
			PullSecret:   corev1.LocalObjectReference{Name: "pull-secret"},
			SSHKey:       corev1.LocalObjectReference{Name: "ssh-key"},
			Services:     s.services(),
		},
	}
}

// deployment is role's Deployment, shaped as HyperShift renders one where the injector looks: the component
// label on the Pods, the main container named as HyperShift names it, with the Pod's service-account token in a
// projected kube-api-access volume (written out: capihub runs without ServiceAccount admission by default).
func (s HostedClusterSpec) deployment(role string) *appsv1.Deployment {
	selector := map[string]string{"app": role}
	ct := corev1.Container{
		Name: mainContainer[role], Image: fmt.Sprintf("capipods.invalid/%s:simulated", role),
		VolumeMounts: []corev1.VolumeMount{{Name: "kube-api-access", MountPath: "/var/run/secrets/kubernetes.io/serviceaccount", ReadOnly: true}},
	}
	if ct.Name == "" {
		ct.Name = "manager"
	}
	if s.Proxied {
		ct.Env = slices.Clone(ProxiedEnv)
	}
	tmpl := corev1.PodTemplateSpec{
		ObjectMeta: metav1.ObjectMeta{Labels: map[string]string{"app": role, SimulateLabel: "true", RoleLabel: role, ComponentLabel: role}},
		Spec: corev1.PodSpec{
			ServiceAccountName: role, AutomountServiceAccountToken: ptr.To(false),
			Containers: []corev1.Container{ct},
			Volumes: []corev1.Volume{{Name: "kube-api-access", VolumeSource: corev1.VolumeSource{Projected: &corev1.ProjectedVolumeSource{
				DefaultMode: ptr.To[int32](0o644),
				Sources: []corev1.VolumeProjection{
					{ServiceAccountToken: &corev1.ServiceAccountTokenProjection{Path: "token", ExpirationSeconds: ptr.To[int64](3607)}},
					{ConfigMap: &corev1.ConfigMapProjection{LocalObjectReference: corev1.LocalObjectReference{Name: "kube-root-ca.crt"},
						Items: []corev1.KeyToPath{{Key: "ca.crt", Path: "ca.crt"}}}},
					{DownwardAPI: &corev1.DownwardAPIProjection{Items: []corev1.DownwardAPIVolumeFile{{Path: "namespace",
						FieldRef: &corev1.ObjectFieldSelector{APIVersion: "v1", FieldPath: "metadata.namespace"}}}}},
				},
			}}}},
		},
	}
	replicas := s.DeploymentReplicas
	return &appsv1.Deployment{
		ObjectMeta: metav1.ObjectMeta{
			Namespace: s.ControlPlaneNamespace(), Name: role,
			Labels: map[string]string{SimulateLabel: "true", RoleLabel: role},
		},
		Spec: appsv1.DeploymentSpec{
			Replicas: ptr.To(replicas),
			Selector: &metav1.LabelSelector{MatchLabels: selector},
			Strategy: appsv1.DeploymentStrategy{Type: appsv1.RecreateDeploymentStrategyType},
			Template: tmpl,
		},
	}
}
