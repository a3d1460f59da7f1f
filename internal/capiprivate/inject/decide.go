package inject

import (
	"fmt"
	"slices"
	"strconv"
	"strings"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/labels"
)

// Result is what Inject decided for a Pod.
type Result string

// Results of Inject (the `result` label of capi_private_inject_pods_total).
const (
	// NotTarget: the Pod is no configured component's: admitted unchanged.
	NotTarget Result = "not_target"
	// AlreadyInjected: the Pod carries the sidecar already: admitted unchanged.
	AlreadyInjected Result = "already_injected"
	// Injected: the sidecar was added and Decision.Rerouted rerouted.
	Injected Result = "injected"
	// Refused: the Pod is a target that cannot be injected safely; admission denies it (Decision.Reason).
	Refused Result = "refused"
)

// Decision explains Inject's outcome.
type Decision struct {
	Result Result
	// Component is the matched component ("" for NotTarget).
	Component string
	// Rerouted are the containers now pointed at the sidecar; Skipped the configured containers left alone, with
	// why.
	Rerouted []string
	Skipped  map[string]string
	// Reason says why a Pod was refused.
	Reason string
}

// Target names the component a Pod belongs to under c, and the containers to reroute; ok is false for Pods of
// no configured component.
func (c *Config) Target(pod *corev1.Pod) (component string, containers []string, ok bool) {
	if c.ComponentLabel != "" {
		if comp, has := pod.Labels[c.ComponentLabel]; has {
			if list, found := c.Reroutes[comp]; found {
				return comp, list, true
			}
		}
	}
	if c.OperatorSelector != nil && !c.OperatorSelector.Empty() && c.OperatorSelector.Matches(labels.Set(pod.Labels)) {
		return OperatorComponent, c.OperatorContainers, true
	}
	return "", nil, false
}

// Inject decides what the injector does to pod under c and returns the Pod to admit: pod itself when nothing
// changes, otherwise a mutated copy. A Refused decision means the Pod must be denied.
//
// For an injected Pod: the sidecar is the first init container (restartPolicy Always) and mounts, at the
// service-account path, the CA of the Pod's own kube-api-access volume and no token (UpstreamCAVolume), so it
// reaches kube-apiserver like an in-cluster client that forwards its callers' tokens; each rerouted container gets
// KUBERNETES_SERVICE_HOST=127.0.0.1, KUBERNETES_SERVICE_PORT(_HTTPS)=Port and, at the service-account path, the
// APIAccessVolume instead of kube-api-access. Containers not rerouted, and every kubeconfig with an explicit
// server, are left as they are.
func Inject(pod *corev1.Pod, c *Config) (*corev1.Pod, Decision) {
	comp, containers, ok := c.Target(pod)
	if !ok {
		return pod, Decision{Result: NotTarget}
	}
	d := Decision{Component: comp, Skipped: map[string]string{}}
	if PodInjected(pod) {
		d.Result = AlreadyInjected
		return pod, d
	}
	if reason := unsafePod(pod, c); reason != "" {
		return pod, refuse(d, reason)
	}
	out := pod.DeepCopy()
	var apiAccess, upstreamCA *corev1.Volume
	for _, name := range containers {
		i := slices.IndexFunc(out.Spec.Containers, func(ct corev1.Container) bool { return ct.Name == name })
		if i < 0 {
			d.Skipped[name] = "no such container"
			continue
		}
		vol, reason := serviceAccountVolume(out, &out.Spec.Containers[i])
		if reason != "" {
			d.Skipped[name] = reason
			continue
		}
		if apiAccess == nil {
			if apiAccess, reason = apiAccessVolume(vol); reason == "" {
				upstreamCA, reason = upstreamCAVolume(vol)
			}
			if reason != "" {
				return pod, refuse(d, fmt.Sprintf("container %s: %s", name, reason))
			}
		}
		reroute(&out.Spec.Containers[i], c.Port)
		d.Rerouted = append(d.Rerouted, name)
	}
	if len(d.Rerouted) == 0 {
		return pod, refuse(d, "no configured container can be rerouted ("+describe(d.Skipped)+"): it would talk to kube-apiserver unproxied")
	}
	out.Spec.Volumes = append(out.Spec.Volumes, *apiAccess, tlsVolume(), *upstreamCA)
	out.Spec.InitContainers = slices.Insert(out.Spec.InitContainers, 0, sidecar(c))
	if out.Annotations == nil {
		out.Annotations = map[string]string{}
	}
	out.Annotations[InjectedAnnotation] = InjectedValue
	out.Annotations[ReroutedAnnotation] = strings.Join(d.Rerouted, ",")
	d.Result = Injected
	return out, d
}

func refuse(d Decision, reason string) Decision {
	d.Result, d.Reason = Refused, reason
	return d
}

// unsafePod is why a target Pod cannot take the sidecar at all ("" if it can).
func unsafePod(pod *corev1.Pod, c *Config) string {
	if pod.Spec.HostNetwork {
		return "the Pod uses the host network: its 127.0.0.1 is the node's"
	}
	for _, list := range [][]corev1.Container{pod.Spec.InitContainers, pod.Spec.Containers} {
		for _, ct := range list {
			for _, p := range ct.Ports {
				if p.ContainerPort == c.Port || p.ContainerPort == c.HealthPort {
					return fmt.Sprintf("container %s declares port %d, which the sidecar needs", ct.Name, p.ContainerPort)
				}
			}
		}
	}
	if slices.ContainsFunc(pod.Spec.Volumes, func(v corev1.Volume) bool {
		return v.Name == APIAccessVolume || v.Name == TLSVolume || v.Name == UpstreamCAVolume
	}) {
		return "the Pod already has a volume named " + APIAccessVolume + ", " + TLSVolume + " or " + UpstreamCAVolume
	}
	return ""
}

// serviceAccountVolume is the Pod volume mounted at the service-account path of ct, or why there is none to
// replace (a container without a token is not given one).
func serviceAccountVolume(pod *corev1.Pod, ct *corev1.Container) (*corev1.Volume, string) {
	i := slices.IndexFunc(ct.VolumeMounts, func(m corev1.VolumeMount) bool {
		return strings.TrimSuffix(m.MountPath, "/") == ServiceAccountMountPath
	})
	if i < 0 {
		return nil, "no service-account token mounted"
	}
	if ct.VolumeMounts[i].SubPath != "" || ct.VolumeMounts[i].SubPathExpr != "" {
		return nil, "the service-account mount uses a subPath"
	}
	name := ct.VolumeMounts[i].Name
	j := slices.IndexFunc(pod.Spec.Volumes, func(v corev1.Volume) bool { return v.Name == name })
	if j < 0 {
		return nil, "the service-account mount names no volume"
	}
	return &pod.Spec.Volumes[j], ""
}

// apiAccessVolume builds the rerouted containers' service-account volume from the Pod's own: the same token and
// namespace projections, ca.crt from LoopbackSecret.
func apiAccessVolume(orig *corev1.Volume) (*corev1.Volume, string) {
	if orig.Projected == nil {
		return nil, "the service-account volume " + orig.Name + " is not a projected volume"
	}
	v := &corev1.Volume{Name: APIAccessVolume, VolumeSource: corev1.VolumeSource{Projected: &corev1.ProjectedVolumeSource{
		DefaultMode: orig.Projected.DefaultMode,
	}}}
	var token bool
	for _, src := range orig.Projected.Sources {
		switch {
		case src.ServiceAccountToken != nil:
			token = true
			v.Projected.Sources = append(v.Projected.Sources, *src.DeepCopy())
		case src.DownwardAPI != nil:
			v.Projected.Sources = append(v.Projected.Sources, *src.DeepCopy())
		}
	}
	if !token {
		return nil, "the service-account volume " + orig.Name + " projects no token"
	}
	v.Projected.Sources = append(v.Projected.Sources, corev1.VolumeProjection{Secret: &corev1.SecretProjection{
		LocalObjectReference: corev1.LocalObjectReference{Name: LoopbackSecret},
		Items:                []corev1.KeyToPath{{Key: CABundleKey, Path: "ca.crt"}},
	}})
	return v, ""
}

// upstreamCAVolume is the sidecar's service-account volume: only the CA projections (ConfigMaps) of the Pod's own
// kube-api-access volume. The sidecar forwards its callers' tokens and needs none of its own: the Pod's token is
// not mounted into it.
func upstreamCAVolume(orig *corev1.Volume) (*corev1.Volume, string) {
	v := &corev1.Volume{Name: UpstreamCAVolume, VolumeSource: corev1.VolumeSource{Projected: &corev1.ProjectedVolumeSource{
		DefaultMode: orig.Projected.DefaultMode,
	}}}
	for _, src := range orig.Projected.Sources {
		if src.ConfigMap != nil {
			v.Projected.Sources = append(v.Projected.Sources, *src.DeepCopy())
		}
	}
	if len(v.Projected.Sources) == 0 {
		return nil, "the service-account volume " + orig.Name + " projects no CA ConfigMap"
	}
	return v, ""
}

// routeEnv are the variables client-go's in-cluster config reads, and the HTTPS one some clients read.
var routeEnv = []string{"KUBERNETES_SERVICE_HOST", "KUBERNETES_SERVICE_PORT", "KUBERNETES_SERVICE_PORT_HTTPS"}

// reroute points ct's in-cluster client at the sidecar: the routing variables (replacing any the container set)
// and APIAccessVolume at the service-account path.
func reroute(ct *corev1.Container, port int32) {
	ct.Env = slices.DeleteFunc(ct.Env, func(e corev1.EnvVar) bool { return slices.Contains(routeEnv, e.Name) })
	p := strconv.Itoa(int(port))
	ct.Env = append(ct.Env,
		corev1.EnvVar{Name: routeEnv[0], Value: "127.0.0.1"}, corev1.EnvVar{Name: routeEnv[1], Value: p}, corev1.EnvVar{Name: routeEnv[2], Value: p})
	for i, m := range ct.VolumeMounts {
		if strings.TrimSuffix(m.MountPath, "/") == ServiceAccountMountPath {
			ct.VolumeMounts[i] = corev1.VolumeMount{Name: APIAccessVolume, MountPath: ServiceAccountMountPath, ReadOnly: true}
		}
	}
}

func describe(skipped map[string]string) string {
	if len(skipped) == 0 {
		return "none configured"
	}
	keys := make([]string, 0, len(skipped))
	for k := range skipped {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	parts := make([]string, 0, len(keys))
	for _, k := range keys {
		parts = append(parts, k+": "+skipped[k])
	}
	return strings.Join(parts, "; ")
}
