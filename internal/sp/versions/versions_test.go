package versions

import (
	"errors"
	"reflect"
	"strings"
	"testing"
)

func img(v, arch string) ImageSet {
	nameArch := strings.ReplaceAll(arch, "_", "-")
	return ImageSet{Name: "img" + v + "-" + nameArch + "-appsub", ReleaseImage: "quay.io/openshift-release-dev/ocp-release:" + v + "-" + arch}
}

func TestParseRelease(t *testing.T) {
	cases := []struct {
		name, image string
		want        Release
		ok          bool
	}{
		{"img4.17.3-multi-appsub", "quay.io/openshift-release-dev/ocp-release:4.17.3-multi", Release{4, 17, 3, "", "multi"}, true},
		{"x", "quay.io/openshift-release-dev/ocp-release:4.17.12-x86_64", Release{4, 17, 12, "", "x86_64"}, true},
		{"x", "registry.local:5000/ocp/release:4.16.0", Release{4, 16, 0, "", "x86_64"}, true},
		{"x", "quay.io/openshift-release-dev/ocp-release:4.18.0-rc.2-multi", Release{4, 18, 0, "rc.2", "multi"}, true},
		{"x", "quay.io/openshift-release-dev/ocp-release:4.18.0-ec.1-aarch64", Release{4, 18, 0, "ec.1", "aarch64"}, true},
		{"img4.15.8-x86-64-appsub", "mirror.local/ocp@sha256:abcd", Release{4, 15, 8, "", "x86_64"}, true},
		{"img4.15.8-multi", "mirror.local/ocp@sha256:abcd", Release{4, 15, 8, "", "multi"}, true},
		{"my-custom-set", "mirror.local/ocp@sha256:abcd", Release{}, false},
		{"x", "quay.io/openshift-release-dev/ocp-release:latest", Release{}, false},
		{"x", "registry.local:5000/ocp-release", Release{}, false},
	}
	for _, c := range cases {
		got, ok := ParseRelease(c.name, c.image)
		if ok != c.ok || got != c.want {
			t.Errorf("ParseRelease(%q, %q) = %+v, %v; want %+v, %v", c.name, c.image, got, ok, c.want, c.ok)
		}
	}
}

func hubSets() []ImageSet {
	sets := []ImageSet{
		img("4.17.3", "multi"), img("4.17.9", "multi"), img("4.17.10", "multi"), img("4.17.10", "x86_64"),
		img("4.15.2", "multi"), img("4.15.20", "x86_64"),
		img("4.18.0-rc.2", "multi"), // pre-release: never chosen
		img("4.16.4", "aarch64"),    // wrong architecture for amd64 workers
		img("4.21.2", "multi"),      // the newest built-in minor (Kubernetes 1.34)
		img("4.22.1", "multi"),      // not in the built-in matrix
		img("4.19.5", "s390x"),      // wrong architecture
		{Name: "broken", ReleaseImage: "quay.io/x/y:nope"},
	}
	sets[3].Visible = true
	return sets
}

func TestResolve(t *testing.T) {
	cat := NewCatalog(DefaultMatrix(), hubSets(), nil)
	cases := []struct {
		req     string
		wantVer string
		wantSet string
		wantK8s string
		wantErr error
		errHas  string
	}{
		// Highest patch by semantic comparison (4.17.10 > 4.17.9), visible preferred among equal versions.
		{req: "4.17", wantVer: "4.17.10", wantSet: "img4.17.10-x86-64-appsub", wantK8s: "1.30"},
		{req: "1.30", wantVer: "4.17.10", wantSet: "img4.17.10-x86-64-appsub", wantK8s: "1.30"},
		{req: "1.30.4", wantVer: "4.17.10", wantK8s: "1.30"},
		{req: "4.17.3", wantVer: "4.17.3", wantSet: "img4.17.3-multi-appsub"},
		{req: "4.15", wantVer: "4.15.20"},
		{req: "1.28", wantVer: "4.15.20"},
		{req: "4.17.4", wantErr: ErrUnsupported, errHas: "available 4.17 patches: 4.17.10, 4.17.9, 4.17.3"},
		{req: "4.18", wantErr: ErrUnsupported, errHas: "no ClusterImageSet for OpenShift 4.18"},
		{req: "1.31", wantErr: ErrUnsupported, errHas: "no ClusterImageSet for Kubernetes 1.31 (OpenShift 4.18)"},
		{req: "4.21", wantVer: "4.21.2", wantK8s: "1.34"},
		{req: "1.34", wantVer: "4.21.2", wantK8s: "1.34"},
		{req: "1.35", wantErr: ErrUnsupported, errHas: "supported: 1.28 (OpenShift 4.15), 1.30 (OpenShift 4.17), 1.34 (OpenShift 4.21)"},
		{req: "4.22", wantErr: ErrUnsupported, errHas: "not in the version matrix"},
		{req: "4.16", wantErr: ErrUnsupported},
		{req: "latest", wantErr: ErrInvalid},
		{req: "v1.30", wantErr: ErrInvalid},
		{req: "1.30.x", wantErr: ErrInvalid},
		{req: "3.11", wantErr: ErrInvalid},
		{req: "", wantErr: ErrInvalid},
	}
	for _, c := range cases {
		got, err := cat.Resolve(c.req)
		if c.wantErr != nil {
			if !errors.Is(err, c.wantErr) {
				t.Errorf("Resolve(%q) error = %v, want %v", c.req, err, c.wantErr)
			} else if c.errHas != "" && !strings.Contains(err.Error(), c.errHas) {
				t.Errorf("Resolve(%q) error %q does not mention %q", c.req, err, c.errHas)
			}
			continue
		}
		if err != nil {
			t.Errorf("Resolve(%q): %v", c.req, err)
			continue
		}
		if got.OpenShiftVersion != c.wantVer || (c.wantSet != "" && got.ImageSetName != c.wantSet) || (c.wantK8s != "" && got.Kubernetes != c.wantK8s) {
			t.Errorf("Resolve(%q) = %+v; want version %s set %s k8s %s", c.req, got, c.wantVer, c.wantSet, c.wantK8s)
		}
		if got.Requested != c.req || got.ReleaseImage == "" {
			t.Errorf("Resolve(%q) = %+v: request not echoed or image missing", c.req, got)
		}
	}
}

func TestSupportedVersionsFilter(t *testing.T) {
	// The operator only supports 4.17: 4.15 image sets are not candidates even though the matrix knows them.
	cat := NewCatalog(DefaultMatrix(), hubSets(), []string{"4.20", "4.19", "4.18", "4.17"})
	if got := cat.KubernetesMinors(); !reflect.DeepEqual(got, []string{"1.30"}) {
		t.Fatalf("KubernetesMinors = %v", got)
	}
	if _, err := cat.Resolve("4.15"); !errors.Is(err, ErrUnsupported) {
		t.Fatalf("4.15 resolved despite supported-versions: %v", err)
	}
	// Without the ConfigMap (nil) every matrix minor counts.
	if got := NewCatalog(DefaultMatrix(), hubSets(), nil).KubernetesMinors(); !reflect.DeepEqual(got, []string{"1.28", "1.30", "1.34"}) {
		t.Fatalf("KubernetesMinors = %v", got)
	}
	if got := NewCatalog(DefaultMatrix(), nil, nil).KubernetesMinors(); len(got) != 0 {
		t.Fatalf("empty hub advertises %v", got)
	}
}

func TestMatrix(t *testing.T) {
	m := DefaultMatrix()
	for i := 0; i <= 7; i++ {
		k, ok := m.KubernetesFor(Minor{4, 14 + i})
		if !ok || k != (Minor{1, 27 + i}) {
			t.Errorf("4.%d → %v, %v", 14+i, k, ok)
		}
	}
	// DCM's newer code maps the last three minors the same way.
	for ocp, k8s := range map[Minor]Minor{{4, 19}: {1, 32}, {4, 20}: {1, 33}, {4, 21}: {1, 34}} {
		if got, ok := m.KubernetesFor(ocp); !ok || got != k8s {
			t.Errorf("%s → %v, %v; want %s", ocp, got, ok, k8s)
		}
	}
	if _, ok := m.KubernetesFor(Minor{4, 22}); ok {
		t.Error("4.22 must not be built in")
	}

	m2, err := NewMatrix(map[string]string{"4.22": "1.35"})
	if err != nil {
		t.Fatal(err)
	}
	if o, ok := m2.OpenShiftFor(Minor{1, 35}); !ok || o != (Minor{4, 22}) {
		t.Fatalf("override not applied: %v %v", o, ok)
	}
	cat := NewCatalog(m2, hubSets(), nil)
	if r, err := cat.Resolve("1.35"); err != nil || r.OpenShiftVersion != "4.22.1" {
		t.Fatalf("Resolve(1.35) with override = %+v, %v", r, err)
	}

	bad := []struct {
		in     map[string]string
		errHas string
	}{
		{map[string]string{"4.21": "1.33"}, "OpenShift 4.20 and 4.21 both map to Kubernetes 1.33"},
		{map[string]string{"4.22": "1.34"}, "OpenShift 4.21 and 4.22 both map to Kubernetes 1.34"},
		{map[string]string{"4.x": "1.34"}, "OpenShift key"},
		{map[string]string{"4.21": "134"}, "value of 4.21"},
		{map[string]string{"1.21": "1.34"}, "not an OpenShift version"},
		{map[string]string{"4.21": "4.34"}, "not a Kubernetes version"},
	}
	for _, b := range bad {
		if _, err := NewMatrix(b.in); err == nil || !strings.Contains(err.Error(), b.errHas) {
			t.Errorf("NewMatrix(%v) error = %v, want %q", b.in, err, b.errHas)
		}
	}
}

func TestParseMatrixFile(t *testing.T) {
	got, err := ParseMatrixFile([]byte("\"4.21\": \"1.34\"\n\"4.22\": \"1.35\"\n"))
	if err != nil || !reflect.DeepEqual(got, map[string]string{"4.21": "1.34", "4.22": "1.35"}) {
		t.Fatalf("YAML: %v %v", got, err)
	}
	got, err = ParseMatrixFile([]byte(`{"4.21": "1.34"}`))
	if err != nil || got["4.21"] != "1.34" {
		t.Fatalf("JSON: %v %v", got, err)
	}
	if _, err := ParseMatrixFile([]byte("4.21: 1.34\n")); err == nil || !strings.Contains(err.Error(), "quoted string") {
		t.Fatalf("unquoted YAML number accepted: %v", err)
	}
	if _, err := ParseMatrixFile([]byte("[")); err == nil {
		t.Fatal("garbage accepted")
	}
}
