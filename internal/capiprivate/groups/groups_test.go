package groups

import (
	"slices"
	"strings"
	"testing"
)

func TestDefaultTable(t *testing.T) {
	want := []Row{
		{"cluster.x-k8s.io", "cluster.hypershift.openshift.io"},
		{"addons.cluster.x-k8s.io", "addons.cluster.hypershift.openshift.io"},
		{"ipam.cluster.x-k8s.io", "ipam.cluster.hypershift.openshift.io"},
		{"infrastructure.cluster.x-k8s.io", "infrastructure.cluster.hypershift.openshift.io"},
	}
	if got := Default.Rows(); !slices.Equal(got, want) {
		t.Fatalf("Default rows = %v, want %v", got, want)
	}
}

func TestRequestResponseAreInverse(t *testing.T) {
	cases := []struct {
		view, stored string
		mapped       bool
	}{
		{"cluster.x-k8s.io", "cluster.hypershift.openshift.io", true},
		{"infrastructure.cluster.x-k8s.io", "infrastructure.cluster.hypershift.openshift.io", true},
		{"cluster.x-k8s.io.platform.invalid", "cluster.x-k8s.io", true},
		{"ipam.cluster.x-k8s.io.platform.invalid", "ipam.cluster.x-k8s.io", true},
		// The table is closed.
		{"bootstrap.cluster.x-k8s.io", "bootstrap.cluster.x-k8s.io", false},
		{"controlplane.cluster.x-k8s.io", "controlplane.cluster.x-k8s.io", false},
		{"runtime.cluster.x-k8s.io", "runtime.cluster.x-k8s.io", false},
		{"capi-provider.agent-install.openshift.io", "capi-provider.agent-install.openshift.io", false},
		{"hypershift.openshift.io", "hypershift.openshift.io", false},
		{"kubevirt.io", "kubevirt.io", false},
		{"", "", false},
		// An escape group of an unmapped group is not an escape group.
		{"bootstrap.cluster.x-k8s.io.platform.invalid", "bootstrap.cluster.x-k8s.io.platform.invalid", false},
	}
	for _, c := range cases {
		got, ok := Default.Request(c.view)
		if got != c.stored || ok != c.mapped {
			t.Errorf("Request(%q) = %q, %v; want %q, %v", c.view, got, ok, c.stored, c.mapped)
		}
		back, ok := Default.Response(got)
		if back != c.view || ok != c.mapped {
			t.Errorf("Response(%q) = %q, %v; want %q, %v", got, back, ok, c.view, c.mapped)
		}
	}
	// Private groups are not in the view: a request leaves them alone, a response shows them standard.
	if g, ok := Default.Request("cluster.hypershift.openshift.io"); ok || g != "cluster.hypershift.openshift.io" {
		t.Errorf("Request(private) = %q, %v", g, ok)
	}
}

func TestPredicates(t *testing.T) {
	if !Default.IsStandard("cluster.x-k8s.io") || Default.IsStandard("cluster.hypershift.openshift.io") {
		t.Error("IsStandard")
	}
	if !Default.IsPrivate("ipam.cluster.hypershift.openshift.io") || Default.IsPrivate("ipam.cluster.x-k8s.io") {
		t.Error("IsPrivate")
	}
	if !Default.IsEscaped("addons.cluster.x-k8s.io.platform.invalid") || Default.IsEscaped("addons.cluster.x-k8s.io") {
		t.Error("IsEscaped")
	}
	if e, ok := Default.Escape("cluster.x-k8s.io"); !ok || e != "cluster.x-k8s.io.platform.invalid" {
		t.Errorf("Escape = %q, %v", e, ok)
	}
	if _, ok := Default.Escape("bootstrap.cluster.x-k8s.io"); ok {
		t.Error("Escape of an unmapped group")
	}
	if p, ok := Default.ToPrivate("addons.cluster.x-k8s.io"); !ok || p != "addons.cluster.hypershift.openshift.io" {
		t.Errorf("ToPrivate = %q, %v", p, ok)
	}
	if s, ok := Default.ToStandard("addons.cluster.hypershift.openshift.io"); !ok || s != "addons.cluster.x-k8s.io" {
		t.Errorf("ToStandard = %q, %v", s, ok)
	}
}

func TestCRDName(t *testing.T) {
	if got := CRDName("machines", "cluster.x-k8s.io"); got != "machines.cluster.x-k8s.io" {
		t.Errorf("CRDName = %q", got)
	}
	for name, want := range map[string][3]string{
		"machines.cluster.x-k8s.io":                        {"machines", "cluster.x-k8s.io", "true"},
		"kubevirtmachines.infrastructure.cluster.x-k8s.io": {"kubevirtmachines", "infrastructure.cluster.x-k8s.io", "true"},
		"nodot":     {"", "", "false"},
		".leading":  {"", "", "false"},
		"trailing.": {"", "", "false"},
	} {
		p, g, ok := SplitCRDName(name)
		if p != want[0] || g != want[1] || (ok != (want[2] == "true")) {
			t.Errorf("SplitCRDName(%q) = %q, %q, %v; want %v", name, p, g, ok, want)
		}
	}
}

func TestNewRejects(t *testing.T) {
	for name, rows := range map[string][]Row{
		"empty group":       {{"", "b.example.com"}},
		"upper case":        {{"Cluster.x-k8s.io", "b.example.com"}},
		"no dot":            {{"cluster", "b.example.com"}},
		"escape suffix":     {{"a.platform.invalid", "b.example.com"}},
		"duplicate std":     {{"a.example.com", "b.example.com"}, {"a.example.com", "c.example.com"}},
		"duplicate private": {{"a.example.com", "b.example.com"}, {"c.example.com", "b.example.com"}},
		"both sides":        {{"a.example.com", "b.example.com"}, {"b.example.com", "c.example.com"}},
		"same row":          {{"a.example.com", "a.example.com"}},
		"empty label":       {{"a..example.com", "b.example.com"}},
		"dash label":        {{"-a.example.com", "b.example.com"}},
	} {
		if _, err := New(rows...); err == nil {
			t.Errorf("%s: New accepted %v", name, rows)
		}
	}
}

func TestHash(t *testing.T) {
	h := Default.Hash()
	if len(h) != 12 || strings.Trim(h, "0123456789abcdef") != "" {
		t.Fatalf("Hash = %q, want 12 hex characters", h)
	}
	rev := Default.Rows()
	slices.Reverse(rev)
	if MustNew(rev...).Hash() != h {
		t.Error("Hash depends on row order")
	}
	changed := append(Default.Rows(), Row{"other.x-k8s.io", "other.hypershift.openshift.io"})
	if MustNew(changed...).Hash() == h {
		t.Error("Hash did not change with the table")
	}
}

func TestNeedles(t *testing.T) {
	n := Default.Needles()
	var resp, req []string
	for _, b := range n.Response {
		resp = append(resp, string(b))
	}
	for _, b := range n.Request {
		req = append(req, string(b))
	}
	if want := []string{"cluster.hypershift.openshift.io", "cluster.x-k8s.io/v", `cluster.x-k8s.io"`}; !slices.Equal(resp, want) {
		t.Errorf("response needles = %q, want %q", resp, want)
	}
	if want := []string{"cluster.x-k8s.io"}; !slices.Equal(req, want) {
		t.Errorf("request needles = %q, want %q", req, want)
	}
	// Without a common label-aligned suffix, each group is its own needle.
	m := MustNew(Row{"a.example.com", "p.example.org"}, Row{"b.other.net", "q.example.org"})
	n = m.Needles()
	resp = resp[:0]
	for _, b := range n.Response {
		resp = append(resp, string(b))
	}
	want := []string{"example.org", "a.example.com/v", `a.example.com"`, "b.other.net/v", `b.other.net"`}
	if !slices.Equal(resp, want) {
		t.Errorf("response needles = %q, want %q", resp, want)
	}
	// Every needle set must catch every group it stands for.
	for _, mm := range []*Mapping{Default, m} {
		n := mm.Needles()
		for _, r := range mm.Rows() {
			if !containsAny(r.Private, n.Response) || !containsAny(`"`+r.Standard+`"`, n.Response) ||
				!containsAny(r.Standard+"/v1", n.Response) || !containsAny(r.Standard+EscapeSuffix, n.Request) ||
				!containsAny(r.Standard, n.Request) {
				t.Errorf("needles %q miss row %v", n, r)
			}
		}
	}
}

func containsAny(s string, needles [][]byte) bool {
	for _, n := range needles {
		if strings.Contains(s, string(n)) {
			return true
		}
	}
	return false
}
