package inject_test

import (
	"slices"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/utils/ptr"

	"github.com/dcm-sp/acm-cluster-sp/internal/capiprivate/inject"
	"github.com/dcm-sp/acm-cluster-sp/internal/devtest/capi/injecttest"
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
	mount := corev1.VolumeMount{Name: name, MountPath: inject.ServiceAccountMountPath, ReadOnly: true}
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

func testConfig() *inject.Config {
	c := inject.DefaultConfig("registry.example/capi-private:test")
	return &c
}

// TestDefaultTableIsHyperShifts: the built-in table reroutes what HyperShift's rendered Deployments say.
func TestDefaultTableIsHyperShifts(t *testing.T) {
	for comp, want := range injecttest.Rerouted {
		got := inject.DefaultReroutes[comp]
		if comp == injecttest.Operator {
			got = inject.DefaultConfig("i").OperatorContainers
		}
		if !slices.Equal(got, want) {
			t.Errorf("%s: table %v, recorded Deployment says %v", comp, got, want)
		}
	}
	if len(inject.DefaultReroutes) != len(injecttest.ControlPlaneComponents) {
		t.Errorf("the table has %d components, %d are recorded", len(inject.DefaultReroutes), len(injecttest.ControlPlaneComponents))
	}
}

func TestInjectRecordedComponents(t *testing.T) {
	c := testConfig()
	for _, comp := range append(slices.Clone(injecttest.ControlPlaneComponents), injecttest.Operator) {
		t.Run(comp, func(t *testing.T) {
			in := fixturePod(t, comp)
			out, d := inject.Inject(in, c)
			if d.Result != inject.Injected {
				t.Fatalf("result %s (%s), want injected", d.Result, d.Reason)
			}
			if !slices.Equal(d.Rerouted, injecttest.Rerouted[comp]) || len(d.Skipped) != 0 {
				t.Fatalf("rerouted %v skipped %v, want %v", d.Rerouted, d.Skipped, injecttest.Rerouted[comp])
			}
			injecttest.CheckInjected(t, in, out, c, injecttest.Rerouted[comp])
		})
	}
}

func TestInjectDecisions(t *testing.T) {
	base := func(t *testing.T) *corev1.Pod { return fixturePod(t, "cluster-api") }
	cases := []struct {
		name   string
		pod    func(*testing.T) *corev1.Pod
		config func(*inject.Config)
		want   inject.Result
		reason string
		routed []string
	}{
		{name: "other component", want: inject.NotTarget, pod: func(t *testing.T) *corev1.Pod {
			p := base(t)
			p.Labels[inject.DefaultComponentLabel] = "etcd"
			return p
		}},
		{name: "no component label", want: inject.NotTarget, pod: func(t *testing.T) *corev1.Pod {
			p := base(t)
			delete(p.Labels, inject.DefaultComponentLabel)
			return p
		}},
		{name: "already injected", want: inject.AlreadyInjected, pod: func(t *testing.T) *corev1.Pod {
			p, _ := inject.Inject(base(t), testConfig())
			return p
		}},
		{name: "host network", want: inject.Refused, reason: "host network", pod: func(t *testing.T) *corev1.Pod {
			p := base(t)
			p.Spec.HostNetwork = true
			return p
		}},
		{name: "port taken", want: inject.Refused, reason: "declares port 16443", pod: func(t *testing.T) *corev1.Pod {
			p := base(t)
			p.Spec.Containers[0].Ports = append(p.Spec.Containers[0].Ports, corev1.ContainerPort{ContainerPort: inject.DefaultPort})
			return p
		}},
		{name: "no token mounted", want: inject.Refused, reason: "manager: no service-account token mounted", pod: func(t *testing.T) *corev1.Pod {
			f, _ := injecttest.Load("cluster-api", "ns")
			return f.Pod("p") // automountServiceAccountToken false would leave it like this
		}},
		{name: "no CA to give the sidecar", want: inject.Refused, reason: "projects no CA ConfigMap", pod: func(t *testing.T) *corev1.Pod {
			p := base(t)
			for _, v := range p.Spec.Volumes {
				if v.Projected != nil {
					v.Projected.Sources = slices.DeleteFunc(v.Projected.Sources, func(s corev1.VolumeProjection) bool { return s.ConfigMap != nil })
				}
			}
			return p
		}},
		{name: "container renamed upstream", want: inject.Refused, reason: "manager: no such container", pod: func(t *testing.T) *corev1.Pod {
			p := base(t)
			p.Spec.Containers[0].Name = "controller"
			return p
		}},
		{name: "one of two missing", want: inject.Injected, routed: []string{"manager"}, pod: base,
			config: func(c *inject.Config) { c.Reroutes["cluster-api"] = []string{"manager", "gone"} }},
		{name: "table from flags", want: inject.Injected, routed: []string{"token-minter"}, pod: func(t *testing.T) *corev1.Pod { return fixturePod(t, "capi-provider") },
			config: func(c *inject.Config) { c.Reroutes["capi-provider"] = []string{"token-minter"} }},
		{name: "operator selector changed", want: inject.NotTarget, pod: func(t *testing.T) *corev1.Pod { return fixturePod(t, injecttest.Operator) },
			config: func(c *inject.Config) {
				c.OperatorSelector = labels.SelectorFromSet(labels.Set{"app": "private-operator"})
			}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			c := testConfig()
			if tc.config != nil {
				tc.config(c)
			}
			in := tc.pod(t)
			out, d := inject.Inject(in, c)
			if d.Result != tc.want || !strings.Contains(d.Reason, tc.reason) {
				t.Fatalf("result %s reason %q, want %s containing %q", d.Result, d.Reason, tc.want, tc.reason)
			}
			if tc.want != inject.Injected {
				if out != in {
					t.Fatal("a Pod that is not injected was changed")
				}
				return
			}
			if !slices.Equal(d.Rerouted, tc.routed) {
				t.Fatalf("rerouted %v, want %v", d.Rerouted, tc.routed)
			}
			injecttest.CheckInjected(t, in, out, c, tc.routed)
		})
	}
}

func TestRerouteReplacesRoutingEnv(t *testing.T) {
	in := fixturePod(t, "cluster-api")
	in.Spec.Containers[0].Env = append(in.Spec.Containers[0].Env, corev1.EnvVar{Name: "KUBERNETES_SERVICE_HOST", Value: "10.0.0.1"})
	out, d := inject.Inject(in, testConfig())
	if d.Result != inject.Injected {
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
		mod  func(*inject.Config)
		want string
	}{
		"default":           {mod: func(*inject.Config) {}},
		"no image":          {mod: func(c *inject.Config) { c.Image = "" }, want: "no sidecar image"},
		"same ports":        {mod: func(c *inject.Config) { c.HealthPort = c.Port }, want: "two different ports"},
		"empty containers":  {mod: func(c *inject.Config) { c.Reroutes["x"] = nil }, want: `component "x"`},
		"operator, no list": {mod: func(c *inject.Config) { c.OperatorContainers = nil }, want: "operator containers"},
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
		if _, _, err := inject.ParseReroute(in); (err == nil) != ok {
			t.Errorf("ParseReroute(%q) = %v", in, err)
		}
	}
}
