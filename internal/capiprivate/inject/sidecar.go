package inject

import (
	"fmt"
	"path"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/utils/ptr"

	"github.com/dcm-sp/acm-cluster-sp/internal/capiprivate/proxy"
)

// sidecar is the proxy container: `capi-private proxy` serving HTTPS on 127.0.0.1:Port with the namespace's
// loopback key pair (reloaded when the Secret changes), health and metrics on HealthPort (metrics only to a token
// allowed to get /metrics: proxy.MetricsSelfReview), passthrough auth (each
// rerouted container's own token reaches kube-apiserver), upstream from the kubelet's KUBERNETES_SERVICE_*
// variables and the cluster's CA, the only file of its service-account mount (UpstreamCAVolume: no token). Its
// startup probe holds the Pod's containers until it is ready.
func sidecar(c *Config) corev1.Container {
	health := &corev1.HTTPGetAction{Port: intstr.FromInt32(c.HealthPort), Scheme: corev1.URISchemeHTTP}
	probe := func(p string, period, failures int32) *corev1.Probe {
		h := *health
		h.Path = p
		return &corev1.Probe{ProbeHandler: corev1.ProbeHandler{HTTPGet: &h}, PeriodSeconds: period, FailureThreshold: failures, TimeoutSeconds: 2}
	}
	return corev1.Container{
		Name: SidecarName, Image: c.Image, ImagePullPolicy: c.ImagePullPolicy,
		Command: append([]string(nil), c.Command...),
		Args: []string{
			"proxy",
			fmt.Sprintf("--listen=127.0.0.1:%d", c.Port),
			fmt.Sprintf("--metrics-listen=:%d", c.HealthPort),
			"--metrics-auth=" + string(proxy.MetricsSelfReview),
			"--tls-cert-file=" + path.Join(TLSMountPath, CertKey),
			"--tls-private-key-file=" + path.Join(TLSMountPath, KeyKey),
		},
		RestartPolicy: ptr.To(corev1.ContainerRestartPolicyAlways),
		Ports:         []corev1.ContainerPort{{Name: "capi-proxy", ContainerPort: c.HealthPort, Protocol: corev1.ProtocolTCP}},
		StartupProbe:  probe("/readyz", 1, 120),
		LivenessProbe: probe("/healthz", 10, 3),
		Resources:     *c.Resources.DeepCopy(),
		SecurityContext: &corev1.SecurityContext{
			AllowPrivilegeEscalation: ptr.To(false),
			Capabilities:             &corev1.Capabilities{Drop: []corev1.Capability{"ALL"}},
			ReadOnlyRootFilesystem:   ptr.To(true),
			RunAsNonRoot:             ptr.To(true),
			SeccompProfile:           &corev1.SeccompProfile{Type: corev1.SeccompProfileTypeRuntimeDefault},
		},
		VolumeMounts: []corev1.VolumeMount{
			{Name: TLSVolume, MountPath: TLSMountPath, ReadOnly: true},
			{Name: UpstreamCAVolume, MountPath: ServiceAccountMountPath, ReadOnly: true},
		},
		TerminationMessagePolicy: corev1.TerminationMessageFallbackToLogsOnError,
	}
}

// tlsVolume holds the sidecar's serving key pair, and nothing else of LoopbackSecret.
func tlsVolume() corev1.Volume {
	return corev1.Volume{Name: TLSVolume, VolumeSource: corev1.VolumeSource{Secret: &corev1.SecretVolumeSource{
		SecretName: LoopbackSecret,
		Items:      []corev1.KeyToPath{{Key: CertKey, Path: CertKey}, {Key: KeyKey, Path: KeyKey}},
	}}}
}
