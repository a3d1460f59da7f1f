package inject

import (
	"maps"
	"slices"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	"github.com/google/go-cmp/cmp/cmpopts"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/utils/ptr"

	"github.com/dcm-sp/acm-cluster-sp/internal/capiprivate/inject/injecttest"
)

// withServiceAccountVolume adds what kube-apiserver's ServiceAccount admission plugin adds before mutating
// webhooks run (the hub tests use the real plugin): the projected kube-api-access volume, mounted read-only at the
// service-account path of every container.
func withServiceAccountVolume(pod *corev1.Pod) *corev1.Pod {
	pod = pod.DeepCopy()
	const name = "kube-api-access-abcde"
	pod.Spec.Volumes = append(pod.Spec.Volumes, corev1.Volume{Name: name, VolumeSource: corev1.VolumeSource{Projected: &corev1.ProjectedVolumeSource{
		DefaultMode: ptr.To[int32](0o644),
		Sources: []corev1.VolumeProjection{
			{ServiceAccountToken: &corev1.ServiceAccountTokenProjection{ExpirationSeconds: ptr.To[int64](3607), Path: "token"}},
			{ConfigMap: &corev1.ConfigMapProjection{LocalObjectReference: corev1.LocalObjectReference{Name: "kube-root-ca.crt"}, Items: []corev1.KeyToPath{{Key: "ca.crt", Path: "ca.crt"}}}},
			{DownwardAPI: &corev1.DownwardAPIProjection{Items: []corev1.DownwardAPIVolumeFile{{Path: "namespace", FieldRef: &corev1.ObjectFieldSelector{APIVersion: "v1", FieldPath: "metadata.namespace"}}}}},
		},
	}}})
	mount := corev1.VolumeMount{Name: name, MountPath: ServiceAccountMountPath, ReadOnly: true}
	for _, list := range [][]corev1.Container{pod.Spec.InitContainers, pod.Spec.Containers} {
		for i := range list {
			list[i].VolumeMounts = append(list[i].VolumeMounts, mount)
		}
	}
	return pod
}

func fixturePod(t *testing.T, component string) *corev1.Pod {
	t.Helper()
	f, err := injecttest.Load(component, "clusters-demo")
	if err != nil {
		t.Fatal(err)
	}
	return withServiceAccountVolume(f.Pod(component + "-7d9f8-abcde"))
}

func testConfig() *Config {
	c := DefaultConfig("registry.example/capi-private:test")
	return &c
}

// What each recorded component must get rerouted: read from HyperShift's rendered Deployments, independently of
// DefaultReroutes (a test of the table).
var wantRerouted = map[string][]string{
	"cluster-api":                    {"manager"},
	"capi-provider":                  {"manager"},
	"cluster-autoscaler":             {"cluster-autoscaler"},
	"machine-approver":               {"machine-approver"},
	"hosted-cluster-config-operator": {"hosted-cluster-config-operator"},
	"karpenter-operator":             {"karpenter-operator"},
	injecttest.Operator:              {"operator"},
}

func TestInjectRecordedComponents(t *testing.T) {
	c := testConfig()
	for _, comp := range append(slices.Clone(injecttest.ControlPlaneComponents), injecttest.Operator) {
		t.Run(comp, func(t *testing.T) {
			in := fixturePod(t, comp)
			out, d := Inject(in, c)
			if d.Result != Injected {
				t.Fatalf("result %s (%s), want injected", d.Result, d.Reason)
			}
			if !slices.Equal(d.Rerouted, wantRerouted[comp]) || len(d.Skipped) != 0 {
				t.Fatalf("rerouted %v skipped %v, want %v", d.Rerouted, d.Skipped, wantRerouted[comp])
			}
			CheckInjected(t, in, out, c, wantRerouted[comp])
		})
	}
}

// CheckInjected asserts the shape of an injected Pod against the Pod before injection: the sidecar first among
// the init containers, the rerouted containers pointed at it, every other container exactly as it was.
func CheckInjected(t *testing.T, in, out *corev1.Pod, c *Config, rerouted []string) {
	t.Helper()
	if len(out.Spec.InitContainers) != len(in.Spec.InitContainers)+1 || out.Spec.InitContainers[0].Name != SidecarName {
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
		if got := saVolume(ct); got != APIAccessVolume {
			t.Fatalf("container %s mounts %q at the service-account path, want %s", ct.Name, got, APIAccessVolume)
		}
		if diff := cmp.Diff(orig.Args, ct.Args); diff != "" {
			t.Fatalf("container %s: args changed (its kubeconfigs must stay):\n%s", ct.Name, diff)
		}
	}
	if out.Annotations[InjectedAnnotation] != InjectedValue || out.Annotations[ReroutedAnnotation] != strings.Join(rerouted, ",") {
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

func checkVolumes(t *testing.T, in, out *corev1.Pod, podAPIAccess string) {
	t.Helper()
	if diff := cmp.Diff(in.Spec.Volumes, out.Spec.Volumes[:len(in.Spec.Volumes)]); diff != "" {
		t.Fatalf("the Pod's volumes changed:\n%s", diff)
	}
	added := out.Spec.Volumes[len(in.Spec.Volumes):]
	if len(added) != 2 || added[0].Name != APIAccessVolume || added[1].Name != TLSVolume {
		t.Fatalf("added volumes %v", added)
	}
	if !strings.HasPrefix(podAPIAccess, "kube-api-access-") {
		t.Fatalf("the sidecar mounts %q at the service-account path, want the Pod's kube-api-access volume", podAPIAccess)
	}
	var orig *corev1.Volume
	for i := range in.Spec.Volumes {
		if in.Spec.Volumes[i].Name == podAPIAccess {
			orig = &in.Spec.Volumes[i]
		}
	}
	src := added[0].Projected.Sources
	if len(src) != 3 || !cmp.Equal(src[0], orig.Projected.Sources[0]) || !cmp.Equal(src[1], orig.Projected.Sources[2]) ||
		src[2].Secret == nil || src[2].Secret.Name != LoopbackSecret || len(src[2].Secret.Items) != 1 || src[2].Secret.Items[0].Key != CABundleKey {
		t.Fatalf("API access volume sources %+v: want the Pod's token and namespace, ca.crt from %s", src, LoopbackSecret)
	}
	tls := added[1].Secret
	if tls == nil || tls.SecretName != LoopbackSecret || len(tls.Items) != 2 {
		t.Fatalf("TLS volume %+v: want only tls.crt and tls.key of %s", added[1], LoopbackSecret)
	}
}

func saVolume(ct corev1.Container) string {
	for _, m := range ct.VolumeMounts {
		if m.MountPath == ServiceAccountMountPath {
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

func TestInjectDecisions(t *testing.T) {
	base := func(t *testing.T) *corev1.Pod { return fixturePod(t, "cluster-api") }
	cases := []struct {
		name   string
		pod    func(*testing.T) *corev1.Pod
		config func(*Config)
		want   Result
		reason string
		routed []string
	}{
		{name: "other component", want: NotTarget, pod: func(t *testing.T) *corev1.Pod {
			p := base(t)
			p.Labels[DefaultComponentLabel] = "etcd"
			return p
		}},
		{name: "no component label", want: NotTarget, pod: func(t *testing.T) *corev1.Pod {
			p := base(t)
			delete(p.Labels, DefaultComponentLabel)
			return p
		}},
		{name: "already injected", want: AlreadyInjected, pod: func(t *testing.T) *corev1.Pod {
			p, _ := Inject(base(t), testConfig())
			return p
		}},
		{name: "host network", want: Refused, reason: "host network", pod: func(t *testing.T) *corev1.Pod {
			p := base(t)
			p.Spec.HostNetwork = true
			return p
		}},
		{name: "port taken", want: Refused, reason: "declares port 16443", pod: func(t *testing.T) *corev1.Pod {
			p := base(t)
			p.Spec.Containers[0].Ports = append(p.Spec.Containers[0].Ports, corev1.ContainerPort{ContainerPort: DefaultPort})
			return p
		}},
		{name: "no token mounted", want: Refused, reason: "manager: no service-account token mounted", pod: func(t *testing.T) *corev1.Pod {
			f, _ := injecttest.Load("cluster-api", "ns")
			return f.Pod("p") // automountServiceAccountToken false would leave it like this
		}},
		{name: "container renamed upstream", want: Refused, reason: "manager: no such container", pod: func(t *testing.T) *corev1.Pod {
			p := base(t)
			p.Spec.Containers[0].Name = "controller"
			return p
		}},
		{name: "one of two missing", want: Injected, routed: []string{"manager"}, pod: base,
			config: func(c *Config) { c.Reroutes["cluster-api"] = []string{"manager", "gone"} }},
		{name: "table from flags", want: Injected, routed: []string{"token-minter"}, pod: func(t *testing.T) *corev1.Pod { return fixturePod(t, "capi-provider") },
			config: func(c *Config) { c.Reroutes["capi-provider"] = []string{"token-minter"} }},
		{name: "operator selector changed", want: NotTarget, pod: func(t *testing.T) *corev1.Pod { return fixturePod(t, injecttest.Operator) },
			config: func(c *Config) { c.OperatorSelector = labels.SelectorFromSet(labels.Set{"app": "private-operator"}) }},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			c := testConfig()
			if tc.config != nil {
				tc.config(c)
			}
			in := tc.pod(t)
			out, d := Inject(in, c)
			if d.Result != tc.want || !strings.Contains(d.Reason, tc.reason) {
				t.Fatalf("result %s reason %q, want %s containing %q", d.Result, d.Reason, tc.want, tc.reason)
			}
			if tc.want != Injected {
				if out != in {
					t.Fatal("a Pod that is not injected was changed")
				}
				return
			}
			if !slices.Equal(d.Rerouted, tc.routed) {
				t.Fatalf("rerouted %v, want %v", d.Rerouted, tc.routed)
			}
			CheckInjected(t, in, out, c, tc.routed)
		})
	}
}

func TestRerouteReplacesRoutingEnv(t *testing.T) {
	in := fixturePod(t, "cluster-api")
	in.Spec.Containers[0].Env = append(in.Spec.Containers[0].Env, corev1.EnvVar{Name: "KUBERNETES_SERVICE_HOST", Value: "10.0.0.1"})
	out, d := Inject(in, testConfig())
	if d.Result != Injected {
		t.Fatal(d.Reason)
	}
	var hosts []string
	for _, e := range out.Spec.Containers[0].Env {
		if e.Name == "KUBERNETES_SERVICE_HOST" {
			hosts = append(hosts, e.Value)
		}
	}
	if !slices.Equal(hosts, []string{"127.0.0.1"}) {
		t.Fatalf("KUBERNETES_SERVICE_HOST values %v, want only 127.0.0.1", hosts)
	}
}

func TestConfigValidate(t *testing.T) {
	for name, tc := range map[string]struct {
		mod  func(*Config)
		want string
	}{
		"default":           {mod: func(*Config) {}},
		"no image":          {mod: func(c *Config) { c.Image = "" }, want: "no sidecar image"},
		"same ports":        {mod: func(c *Config) { c.HealthPort = c.Port }, want: "two different ports"},
		"empty containers":  {mod: func(c *Config) { c.Reroutes["x"] = nil }, want: `component "x"`},
		"operator, no list": {mod: func(c *Config) { c.OperatorContainers = nil }, want: "operator containers"},
	} {
		t.Run(name, func(t *testing.T) {
			c := testConfig()
			tc.mod(c)
			err := c.Validate()
			if (err == nil) != (tc.want == "") || (err != nil && !strings.Contains(err.Error(), tc.want)) {
				t.Fatalf("Validate() = %v, want %q", err, tc.want)
			}
		})
	}
	for in, ok := range map[string]bool{"a=b": true, "a=b,c": true, "a=": false, "=b": false, "ab": false} {
		if _, _, err := ParseReroute(in); (err == nil) != ok {
			t.Errorf("ParseReroute(%q) = %v", in, err)
		}
	}
}
