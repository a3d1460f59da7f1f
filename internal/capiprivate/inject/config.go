// Package inject is capi-private's sidecar injector: a mutating admission webhook that adds the capi-private proxy
// as a native sidecar to the Pods of the HyperShift components that talk Cluster API for a private cluster, and
// points only their management-cluster clients at it, plus the controller that keeps each such namespace's
// loopback CA and serving certificate (the Secret LoopbackSecret) current. HyperShift keeps owning and re-rendering
// its Deployments; only the admitted Pods differ.
//
// Which Pods are injected: kube-apiserver sends only Pods whose labels select a configured component, a control
// plane component's in a hosted control plane namespace, the operator's in a namespace labelled
// MarkerLabel=MarkerValue (WebhookConfiguration). The injector decides a control plane namespace's route from its
// HostedCluster (the pure RouteOf, fed by Routes), and Inject re-checks the Pod against the same Config and
// builds it. The HTTP handler only decodes, asks and encodes.
package inject

import (
	"fmt"
	"slices"
	"strings"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	"k8s.io/apimachinery/pkg/labels"

	"github.com/dcm-sp/acm-cluster-sp/internal/capiprivate/proxy"
)

// The marker and what the injector writes. The install sets MarkerLabel on the private HyperShift operator's
// namespace; the migrator sets it on a locked HostedCluster's control plane namespace at its switch step (RouteOf)
// and removes it on rollback.
const (
	// MarkerLabel=MarkerValue on a Namespace puts its matching Pods under injection.
	MarkerLabel = "hypershift.openshift.io/private-capi-proxy"
	MarkerValue = "true"

	// InjectedAnnotation=InjectedValue on an admitted Pod records the injection; ReroutedAnnotation lists the
	// containers whose API client now goes through the sidecar (comma-separated).
	InjectedAnnotation = "hypershift.openshift.io/private-capi-proxy"
	InjectedValue      = "injected"
	ReroutedAnnotation = "capi-private.hypershift.openshift.io/rerouted-containers"

	// SidecarName is the injected init container (restartPolicy Always: a native sidecar).
	SidecarName = "capi-private-proxy"
	// APIAccessVolume is the projected service-account volume of the rerouted containers (token and namespace as
	// the Pod's own kube-api-access volume, ca.crt the loopback CA); TLSVolume is the sidecar's key pair.
	APIAccessVolume = "capi-private-api-access"
	// UpstreamCAVolume is the sidecar's service-account volume: the CA of the Pod's own, without its token.
	UpstreamCAVolume = "capi-private-upstream-ca"
	TLSVolume        = "capi-private-proxy-tls"

	// LoopbackSecret is the per-namespace Secret with the loopback CA bundle and the sidecar's key pair.
	LoopbackSecret = "capi-private-loopback"
	// Keys of LoopbackSecret: CABundleKey the CAs clients trust (current first), CertKey the serving chain for
	// 127.0.0.1, KeyKey its private key. CAKeyKey, the current CA's private key, is kept out of the namespace: in
	// the Secret CAKeySecret(namespace) of the injector's own namespace.
	CABundleKey = "ca.crt"
	CAKeyKey    = "ca.key"
	CertKey     = "tls.crt"
	KeyKey      = "tls.key"

	// ServiceAccountMountPath is where client-go's in-cluster config reads token, ca.crt and namespace.
	ServiceAccountMountPath = proxy.InClusterDir
	// TLSMountPath is where the sidecar reads tls.crt and tls.key.
	TLSMountPath = "/var/run/capi-private/tls"

	// DefaultComponentLabel is the Pod label HyperShift puts on each control plane component's Pods.
	DefaultComponentLabel = "hypershift.openshift.io/control-plane-component"
	// DefaultOperatorSelector selects the HyperShift operator's Pods.
	DefaultOperatorSelector = "hypershift.openshift.io/operator-component=operator"
)

// Defaults of Config.
const (
	DefaultPort       int32 = 16443
	DefaultHealthPort int32 = 16441
)

// DefaultCommand runs capi-private in its image.
var DefaultCommand = []string{"/capi-private"}

// DefaultReroutes is the component table read from HyperShift's rendered Deployments: each CAPI-dependent
// component's container whose in-cluster client talks to the management cluster. Containers that reach the hosted
// cluster by kubeconfig (the provider's token-minter, karpenter's cloud-token-minter, the availability probers) are
// not listed; the autoscaler's and HCCO's main containers are, and keep their --kubeconfig / --target-kubeconfig
// for the hosted cluster untouched (an explicit server is never rerouted).
var DefaultReroutes = map[string][]string{
	"cluster-api":                    {"manager"},
	"capi-provider":                  {"manager"},
	"cluster-autoscaler":             {"cluster-autoscaler"},
	"machine-approver":               {"machine-approver"},
	"hosted-cluster-config-operator": {"hosted-cluster-config-operator"},
	"karpenter-operator":             {"karpenter-operator"},
}

// OperatorComponent names the HyperShift operator in decisions and metrics.
const OperatorComponent = "hypershift-operator"

// Config is what the injector injects, and into which Pods.
type Config struct {
	// Image and Command run `capi-private proxy` in the sidecar; ImagePullPolicy defaults to IfNotPresent.
	Image           string
	Command         []string
	ImagePullPolicy corev1.PullPolicy
	// Port is the sidecar's HTTPS listener on 127.0.0.1; HealthPort serves its /metrics, /healthz and /readyz on
	// the Pod's addresses (the kubelet probes the Pod IP).
	Port, HealthPort int32
	// Resources of the sidecar.
	Resources corev1.ResourceRequirements
	// ComponentLabel's value names a control plane Pod's component; Reroutes maps a component to the containers
	// whose API client is rerouted.
	ComponentLabel string
	Reroutes       map[string][]string
	// OperatorSelector selects the HyperShift operator's Pods; OperatorContainers are rerouted in them.
	OperatorSelector   labels.Selector
	OperatorContainers []string
}

// DefaultConfig is the configuration for image, with HyperShift's component table.
func DefaultConfig(image string) Config {
	sel, _ := labels.Parse(DefaultOperatorSelector)
	reroutes := map[string][]string{}
	for k, v := range DefaultReroutes {
		reroutes[k] = slices.Clone(v)
	}
	return Config{
		Image: image, Command: slices.Clone(DefaultCommand), ImagePullPolicy: corev1.PullIfNotPresent,
		Port: DefaultPort, HealthPort: DefaultHealthPort,
		Resources: corev1.ResourceRequirements{
			Requests: corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("10m"), corev1.ResourceMemory: resource.MustParse("32Mi")},
			Limits:   corev1.ResourceList{corev1.ResourceMemory: resource.MustParse("256Mi")},
		},
		ComponentLabel: DefaultComponentLabel, Reroutes: reroutes,
		OperatorSelector: sel, OperatorContainers: []string{"operator"},
	}
}

// Validate reports what makes c unusable.
func (c *Config) Validate() error {
	var problems []string
	if c.Image == "" {
		problems = append(problems, "no sidecar image")
	}
	if len(c.Command) == 0 {
		problems = append(problems, "no sidecar command")
	}
	if c.Port <= 0 || c.Port > 65535 || c.HealthPort <= 0 || c.HealthPort > 65535 || c.Port == c.HealthPort {
		problems = append(problems, fmt.Sprintf("ports %d and %d: two different ports in 1-65535", c.Port, c.HealthPort))
	}
	if c.ComponentLabel == "" && len(c.Reroutes) > 0 {
		problems = append(problems, "components without a component label")
	}
	for comp, containers := range c.Reroutes {
		if comp == "" || len(containers) == 0 {
			problems = append(problems, fmt.Sprintf("component %q: a name and at least one container", comp))
		}
	}
	if c.OperatorSelector != nil && !c.OperatorSelector.Empty() && len(c.OperatorContainers) == 0 {
		problems = append(problems, "an operator selector without operator containers")
	}
	if len(problems) > 0 {
		return fmt.Errorf("injector configuration: %s", strings.Join(problems, "; "))
	}
	return nil
}

// ParseReroute reads one component table entry, COMPONENT=CONTAINER[,CONTAINER...].
func ParseReroute(s string) (string, []string, error) {
	comp, list, ok := strings.Cut(s, "=")
	var containers []string
	for _, c := range strings.Split(list, ",") {
		if c = strings.TrimSpace(c); c != "" {
			containers = append(containers, c)
		}
	}
	if !ok || strings.TrimSpace(comp) == "" || len(containers) == 0 {
		return "", nil, fmt.Errorf("%q: want COMPONENT=CONTAINER[,CONTAINER...]", s)
	}
	return strings.TrimSpace(comp), containers, nil
}

// components is the table's component names, sorted.
func (c *Config) components() []string {
	out := make([]string, 0, len(c.Reroutes))
	for k := range c.Reroutes {
		out = append(out, k)
	}
	slices.Sort(out)
	return out
}
