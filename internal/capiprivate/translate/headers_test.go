package translate

import (
	"testing"
)

func TestRequestAccept(t *testing.T) {
	cases := []struct {
		in, want string
		forced   Forced
	}{
		{"", "", ForcedNone},
		{"application/json", "application/json", ForcedNone},
		{"application/vnd.kubernetes.protobuf, */*", "application/json", ForcedProtobuf},
		{"application/vnd.kubernetes.protobuf;as=Table;v=v1;g=meta.k8s.io,application/json;as=Table;v=v1;g=meta.k8s.io,application/json",
			"application/json;as=Table;v=v1;g=meta.k8s.io,application/json", ForcedProtobuf},
		{"application/vnd.kubernetes.protobuf;g=apidiscovery.k8s.io;v=v2;as=APIGroupDiscoveryList,application/json;g=apidiscovery.k8s.io;v=v2;as=APIGroupDiscoveryList,application/json;g=apidiscovery.k8s.io;v=v2beta1;as=APIGroupDiscoveryList,application/json",
			"application/json;g=apidiscovery.k8s.io;v=v2;as=APIGroupDiscoveryList,application/json;g=apidiscovery.k8s.io;v=v2beta1;as=APIGroupDiscoveryList,application/json", ForcedProtobuf},
		{"application/json;as=PartialObjectMetadataList;g=meta.k8s.io;v=v1", "application/json;as=PartialObjectMetadataList;g=meta.k8s.io;v=v1", ForcedNone},
		{"application/vnd.kubernetes.protobuf;stream=watch", "application/json;stream=watch", ForcedProtobuf},
		{"application/cbor", "application/json", ForcedCBOR},
		{"application/cbor-seq, application/json", "application/json", ForcedCBOR},
		{"application/yaml", "application/json", ForcedNone},
	}
	for _, c := range cases {
		got, forced := tr.RequestAccept(c.in)
		if got != c.want || forced != c.forced {
			t.Errorf("RequestAccept(%q) = %q, %q; want %q, %q", c.in, got, forced, c.want, c.forced)
		}
	}
}

func TestResponseWarning(t *testing.T) {
	// As recorded from kube-apiserver 1.34.10 for a v1beta1 read (testdata/upstream/headers.json).
	in := `299 - "cluster.hypershift.openshift.io/v1beta1 Machine is deprecated; use cluster.hypershift.openshift.io/v1beta2 Machine"`
	want := `299 - "cluster.x-k8s.io/v1beta1 Machine is deprecated; use cluster.x-k8s.io/v1beta2 Machine"`
	if got := tr.ResponseWarning(in); got != want {
		t.Errorf("got %q, want %q", got, want)
	}
	for in, want := range map[string]string{
		`299 - "infrastructure.cluster.hypershift.openshift.io/v1alpha1 KubevirtMachine is deprecated"`: `299 - "infrastructure.cluster.x-k8s.io/v1alpha1 KubevirtMachine is deprecated"`,
		`299 - "unknown field \"spec.foo\""`:          `299 - "unknown field \"spec.foo\""`,
		`299 - "label cluster.x-k8s.io/cluster-name"`: `299 - "label cluster.x-k8s.io/cluster-name"`,
	} {
		if got := tr.ResponseWarning(in); got != want {
			t.Errorf("ResponseWarning(%q) = %q", in, got)
		}
	}
}

func TestETags(t *testing.T) {
	h := tr.Mapping().Hash()
	up := `"C4B94F01D14E9B4B"`
	got := tr.ResponseETag(up)
	if want := `"C4B94F01D14E9B4B-` + h + `"`; got != want {
		t.Fatalf("ResponseETag = %q, want %q", got, want)
	}
	if back := tr.RequestIfNoneMatch(got); back != up {
		t.Errorf("RequestIfNoneMatch(%q) = %q, want %q", got, back, up)
	}
	if w := tr.ResponseETag(`W/"x"`); w != `W/"x-`+h+`"` || tr.RequestIfNoneMatch(w) != `W/"x"` {
		t.Errorf("weak ETag: %q → %q", w, tr.RequestIfNoneMatch(w))
	}
	for in, want := range map[string]string{
		``:                                  ``,
		`*`:                                 `*`,
		`"x"`:                               ``, // not issued by this proxy
		`"x-000000000000"`:                  ``, // issued under another table
		`"a-` + h + `", "b", "c-` + h + `"`: `"a", "c"`,
		`"-` + h + `"`:                      ``,
	} {
		if got := tr.RequestIfNoneMatch(in); got != want {
			t.Errorf("RequestIfNoneMatch(%q) = %q, want %q", in, got, want)
		}
	}
	if tr.ResponseETag("") != "" {
		t.Error("empty ETag")
	}
}
