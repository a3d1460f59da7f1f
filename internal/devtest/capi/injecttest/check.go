package injecttest

import (
	"maps"
	"slices"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	"github.com/google/go-cmp/cmp/cmpopts"
	corev1 "k8s.io/api/core/v1"

	"github.com/dcm-sp/acm-cluster-sp/internal/capiprivate/inject"
)

// CheckInjected asserts the shape of an injected Pod against the Pod before injection: the sidecar first among
// the init containers, the rerouted containers pointed at it, every other container exactly as it was.
func CheckInjected(t testing.TB, in, out *corev1.Pod, c *inject.Config, rerouted []string) {
	t.Helper()
	if len(out.Spec.InitContainers) != len(in.Spec.InitContainers)+1 || out.Spec.InitContainers[0].Name != inject.SidecarName {
		t.Fatalf("init containers %v: want the sidecar first, then %d others", names(out.Spec.InitContainers), len(in.Spec.InitContainers))
	}
	sc := out.Spec.InitContainers[0]
	if sc.RestartPolicy == nil || *sc.RestartPolicy != corev1.ContainerRestartPolicyAlways || sc.Image != c.Image {
		t.Fatalf("sidecar is not a native sidecar of the configured image: %+v", sc)
	}
	sec := sc.SecurityContext
	if sec == nil || !*sec.ReadOnlyRootFilesystem || *sec.AllowPrivilegeEscalation || !*sec.RunAsNonRoot || len(sec.Capabilities.Drop) != 1 {
		t.Fatalf("sidecar security context not hardened: %+v", sec)
	}
	if diff := cmp.Diff(in.Spec.InitContainers, out.Spec.InitContainers[1:], cmpopts.EquateEmpty()); diff != "" {
		t.Fatalf("other init containers changed:\n%s", diff)
	}
	for i, ct := range out.Spec.Containers {
		orig := in.Spec.Containers[i]
		if !slices.Contains(rerouted, ct.Name) {
			if diff := cmp.Diff(orig, ct); diff != "" {
				t.Fatalf("container %s is not rerouted but changed:\n%s", ct.Name, diff)
			}
			continue
		}
		env := map[string]string{}
		for _, e := range ct.Env {
			env[e.Name] = e.Value
		}
		port := strings.TrimSpace(strings.TrimPrefix(sc.Args[1], "--listen=127.0.0.1:"))
		if env["KUBERNETES_SERVICE_HOST"] != "127.0.0.1" || env["KUBERNETES_SERVICE_PORT"] != port || env["KUBERNETES_SERVICE_PORT_HTTPS"] != port {
			t.Fatalf("container %s: routing env %v, want 127.0.0.1:%s", ct.Name, env, port)
		}
		if got := saVolume(ct); got != inject.APIAccessVolume {
			t.Fatalf("container %s mounts %q at the service-account path, want %s", ct.Name, got, inject.APIAccessVolume)
		}
		if diff := cmp.Diff(orig.Args, ct.Args); diff != "" {
			t.Fatalf("container %s: args changed (its kubeconfigs must stay):\n%s", ct.Name, diff)
		}
	}
	if out.Annotations[inject.InjectedAnnotation] != inject.InjectedValue || out.Annotations[inject.ReroutedAnnotation] != strings.Join(rerouted, ",") {
		t.Fatalf("annotations %v", out.Annotations)
	}
	for k, v := range in.Annotations {
		if out.Annotations[k] != v {
			t.Fatalf("annotation %s changed", k)
		}
	}
	if !maps.Equal(in.Labels, out.Labels) {
		t.Fatalf("labels changed: %v → %v", in.Labels, out.Labels)
	}
	checkVolumes(t, in, out, saVolume(sc))
}

func checkVolumes(t testing.TB, in, out *corev1.Pod, sidecarMount string) {
	t.Helper()
	if diff := cmp.Diff(in.Spec.Volumes, out.Spec.Volumes[:len(in.Spec.Volumes)]); diff != "" {
		t.Fatalf("the Pod's volumes changed:\n%s", diff)
	}
	added := out.Spec.Volumes[len(in.Spec.Volumes):]
	if len(added) != 3 || added[0].Name != inject.APIAccessVolume || added[1].Name != inject.TLSVolume || added[2].Name != inject.UpstreamCAVolume {
		t.Fatalf("added volumes %v", added)
	}
	if sidecarMount != inject.UpstreamCAVolume {
		t.Fatalf("the sidecar mounts %q at the service-account path, want %s", sidecarMount, inject.UpstreamCAVolume)
	}
	var orig *corev1.Volume
	for i := range in.Spec.Volumes {
		if strings.HasPrefix(in.Spec.Volumes[i].Name, "kube-api-access-") {
			orig = &in.Spec.Volumes[i]
		}
	}
	if orig == nil {
		t.Fatal("the Pod has no kube-api-access volume")
	}
	// The sidecar's: the Pod's CA (its ConfigMap projection) and no token.
	if ca := added[2].Projected; ca == nil || len(ca.Sources) != 1 || !cmp.Equal(ca.Sources[0], orig.Projected.Sources[1]) || ca.Sources[0].ConfigMap == nil {
		t.Fatalf("the sidecar's volume %+v: want only the Pod's CA ConfigMap projection %+v", added[2], orig.Projected.Sources[1])
	}
	src := added[0].Projected.Sources
	if len(src) != 3 || !cmp.Equal(src[0], orig.Projected.Sources[0]) || !cmp.Equal(src[1], orig.Projected.Sources[2]) ||
		src[2].Secret == nil || src[2].Secret.Name != inject.LoopbackSecret || len(src[2].Secret.Items) != 1 || src[2].Secret.Items[0].Key != inject.CABundleKey {
		t.Fatalf("API access volume sources %+v: want the Pod's token and namespace, ca.crt from %s", src, inject.LoopbackSecret)
	}
	tls := added[1].Secret
	if tls == nil || tls.SecretName != inject.LoopbackSecret || len(tls.Items) != 2 {
		t.Fatalf("TLS volume %+v: want only tls.crt and tls.key of %s", added[1], inject.LoopbackSecret)
	}
}

func saVolume(ct corev1.Container) string {
	for _, m := range ct.VolumeMounts {
		if m.MountPath == inject.ServiceAccountMountPath {
			return m.Name
		}
	}
	return ""
}

func names(cs []corev1.Container) []string {
	var out []string
	for _, c := range cs {
		out = append(out, c.Name)
	}
	return out
}
