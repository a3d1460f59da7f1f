package render

import (
	"bytes"

	hyperv1 "github.com/openshift/hypershift/api/hypershift/v1beta1"
	"k8s.io/apimachinery/pkg/api/resource"
	"k8s.io/utils/ptr"

	"github.com/dcm-sp/acm-cluster-sp/internal/sp/clusters"
	"github.com/dcm-sp/acm-cluster-sp/internal/sp/meta"
)

// Examples are representative inputs, one per rendering variant. The golden tests render them, and the hub tests
// create the result on a real API server (server-side dry-run) to prove the CRDs accept every variant.
func Examples() map[string]Input {
	base := Input{
		ID: "inst-0001", Provider: "acm-cluster-sp", Name: "dev-cluster-01", Namespace: "clusters", InfraID: "dev-cluster-01-x7k2p",
		SpecJSON:          `{"metadata":{"name":"dev-cluster-01"},"service_type":"cluster","version":"4.17"}`,
		ReleaseImage:      "quay.io/openshift-release-dev/ocp-release:4.17.12-multi",
		OpenShiftVersion:  "4.17.12",
		WorkerCount:       2,
		PullSecret:        []byte(`{"auths":{"quay.io":{"auth":"ZHVtbXk6ZHVtbXk="}}}`),
		EtcdEncryptionKey: bytes.Repeat([]byte{7}, 32),
		ManagedCluster:    true, KlusterletAddonConfig: true, HostingClusterName: "local-cluster",
		Finalizers: []string{meta.FinalizerStatus},
	}
	minimal := base
	minimal.Platform = clusters.KubeVirt

	full := base
	full.Platform = clusters.KubeVirt
	full.ControllerAvailabilityPolicy = hyperv1.HighlyAvailable
	full.ControlPlaneCPU = ptr.To[int64](4)
	full.ControlPlaneMemory = ptr.To(resource.MustParse("16Gi"))
	full.WorkerCount = 3
	full.WorkerCores = ptr.To[uint32](8)
	full.WorkerMemory = ptr.To(resource.MustParse("32Gi"))
	full.WorkerStorage = ptr.To(resource.MustParse("250Gi"))
	full.BaseDomain = "example.com"
	full.SSHPublicKey = "ssh-ed25519 AAAAC3NzaC1lZDI1NTE5AAAAIDummyKeyForGoldenTests dev@example.com"
	full.InfraKubeconfig = []byte("apiVersion: v1\nkind: Config\nclusters: []\n")
	full.InfraNamespace = "guest-vms"

	single := base
	single.Platform = clusters.KubeVirt
	single.ControllerAvailabilityPolicy = hyperv1.SingleReplica
	single.WorkerCount = 1
	single.ManagedCluster, single.KlusterletAddonConfig = false, false

	bm := base
	bm.ID, bm.Name, bm.InfraID = "inst-0002", "prod-cluster-01", "prod-cluster-01-a1b2c"
	bm.Platform = clusters.BareMetal
	bm.WorkerCount = 3
	bm.BaseDomain = "example.com"
	bm.AgentNamespace = "hardware-inventory"
	bm.ControlPlaneCPU = ptr.To[int64](4)

	return map[string]Input{"kubevirt-minimal": minimal, "kubevirt-full": full, "kubevirt-single-replica": single, "baremetal": bm}
}
