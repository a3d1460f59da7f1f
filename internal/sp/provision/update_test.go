package provision

import (
	"testing"

	hyperv1 "github.com/openshift/hypershift/api/hypershift/v1beta1"
	"k8s.io/apimachinery/pkg/api/resource"
	"k8s.io/utils/ptr"

	"github.com/dcm-sp/acm-cluster-sp/internal/sp/operation"
)

func TestETagMatches(t *testing.T) {
	const etag = `"abc123"`
	for _, c := range []struct {
		ifMatch string
		want    bool
	}{{"", true}, {"*", true}, {`"abc123"`, true}, {`W/"abc123"`, true}, {`"x", "abc123"`, true}, {`"x"`, false}, {`abc123`, false}} {
		if got := etagMatches(c.ifMatch, etag); got != c.want {
			t.Errorf("If-Match %q: %v, want %v", c.ifMatch, got, c.want)
		}
	}
}

// A NodePool is "in spec" for an operation when the one field the operation changes has its target; nothing else
// is compared (other fields must stay byte-stable, never synced).
func TestNodePoolInSpec(t *testing.T) {
	kv := func(cores uint32, mem, root string) *hyperv1.NodePool {
		m, r := resource.MustParse(mem), resource.MustParse(root)
		np := &hyperv1.NodePool{}
		np.Spec.Replicas = ptr.To[int32](2)
		np.Spec.Release.Image = "img:4.17.29-multi"
		np.Spec.Platform.Type = hyperv1.KubevirtPlatform
		np.Spec.Platform.Kubevirt = &hyperv1.KubevirtNodePoolPlatform{Compute: &hyperv1.KubevirtCompute{Cores: ptr.To(cores), Memory: &m},
			RootVolume: &hyperv1.KubevirtRootVolume{KubevirtVolume: hyperv1.KubevirtVolume{Persistent: &hyperv1.KubevirtPersistentVolume{Size: &r}}}}
		return np
	}
	desired := kv(4, "32Gi", "120Gi")
	agent := &hyperv1.NodePool{Spec: hyperv1.NodePoolSpec{Platform: hyperv1.NodePoolPlatform{Type: hyperv1.AgentPlatform}}}
	cases := []struct {
		name string
		rec  operation.Record
		np   *hyperv1.NodePool
		want bool
	}{
		{"upgrade pending", operation.Record{Kind: operation.Upgrade, ReleaseImage: "img:4.18.22-multi"}, kv(4, "16Gi", "120Gi"), false},
		{"upgrade done (sizes ignored)", operation.Record{Kind: operation.Upgrade, ReleaseImage: "img:4.17.29-multi"}, kv(4, "16Gi", "120Gi"), true},
		{"scale pending", operation.Record{Kind: operation.Scale, Replicas: 3}, kv(4, "16Gi", "120Gi"), false},
		{"scale done", operation.Record{Kind: operation.Scale, Replicas: 2}, kv(4, "16Gi", "120Gi"), true},
		{"resize pending", operation.Record{Kind: operation.Resize}, kv(4, "16Gi", "120Gi"), false},
		{"resize done (same quantity, other spelling)", operation.Record{Kind: operation.Resize}, kv(4, "32768Mi", "120Gi"), true},
		{"resize on bare metal: nothing to sync", operation.Record{Kind: operation.Resize}, agent, true},
	}
	for _, c := range cases {
		want := desired
		if c.np.Spec.Platform.Kubevirt == nil {
			want = agent
		}
		if got := nodePoolInSpec(&c.rec, c.np, want); got != c.want {
			t.Errorf("%s: %v, want %v", c.name, got, c.want)
		}
	}
}
