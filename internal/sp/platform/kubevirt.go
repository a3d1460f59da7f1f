package platform

import (
	"time"

	hyperv1 "github.com/openshift/hypershift/api/hypershift/v1beta1"
	"k8s.io/apimachinery/pkg/api/resource"
	"k8s.io/utils/ptr"
)

// Worker sizes a KubeVirt request may leave out.
var (
	DefaultWorkerCores      uint32 = 2
	DefaultWorkerMemory            = resource.MustParse("8Gi")
	DefaultWorkerRootVolume        = resource.MustParse("32Gi")
)

// MinWorkerRootVolume is the smallest KubeVirt root volume the hcp CLI accepts; the SP refuses smaller ones.
var MinWorkerRootVolume = resource.MustParse("16Gi")

// kubevirt: workers are KubeVirt VMs, on the hub or on an external infrastructure cluster. Its NodePools replace
// their VMs to roll out a change.
var kubevirt = Platform{
	Name: KubeVirt, HyperShift: hyperv1.KubevirtPlatform,
	ProvisioningTimeout: 45 * time.Minute, OperationTimeout: 90 * time.Minute,
	InfraCluster: true,
	API:          "kubevirt.io/v1", APIResources: []string{"virtualmachines"},
	Rules: func(r Request) {
		if r.WorkerStorage != nil && r.WorkerStorage.Cmp(MinWorkerRootVolume) < 0 {
			r.Fail("nodes.workers.storage", "must be at least 16GB for a KubeVirt root volume")
		}
	},
	HostedCluster: func(c Cluster) hyperv1.PlatformSpec {
		kv := &hyperv1.KubevirtPlatformSpec{}
		if c.BaseDomain == "" {
			kv.BaseDomainPassthrough = ptr.To(true)
		}
		if c.InfraCredentials != "" {
			kv.Credentials = &hyperv1.KubevirtPlatformCredentials{
				InfraKubeConfigSecret: &hyperv1.KubeconfigSecretRef{Name: c.InfraCredentials, Key: "kubeconfig"},
				InfraNamespace:        c.InfraNamespace,
			}
		}
		return hyperv1.PlatformSpec{Type: hyperv1.KubevirtPlatform, Kubevirt: kv}
	},
	NodePool: func(c Cluster, np *hyperv1.NodePoolSpec) {
		np.Arch = hyperv1.ArchitectureAMD64
		np.Management = hyperv1.NodePoolManagement{UpgradeType: hyperv1.UpgradeTypeReplace, AutoRepair: false}
		cores := DefaultWorkerCores
		if c.WorkerCores != nil {
			cores = *c.WorkerCores
		}
		memory := DefaultWorkerMemory.DeepCopy()
		if c.WorkerMemory != nil {
			memory = c.WorkerMemory.DeepCopy()
		}
		root := DefaultWorkerRootVolume.DeepCopy()
		if c.WorkerStorage != nil {
			root = c.WorkerStorage.DeepCopy()
		}
		np.Platform = hyperv1.NodePoolPlatform{Type: hyperv1.KubevirtPlatform, Kubevirt: &hyperv1.KubevirtNodePoolPlatform{
			Compute: &hyperv1.KubevirtCompute{Cores: ptr.To(cores), Memory: &memory},
			RootVolume: &hyperv1.KubevirtRootVolume{KubevirtVolume: hyperv1.KubevirtVolume{
				Type:       hyperv1.KubevirtVolumeTypePersistent,
				Persistent: &hyperv1.KubevirtPersistentVolume{Size: &root},
			}},
			NetworkInterfaceMultiQueue: ptr.To(hyperv1.MultiQueueEnable),
			AttachDefaultNetwork:       ptr.To(true),
		}}
	},
	// A resize changes the VMs' cores, memory and root volume size; the NodePool replaces every VM.
	Resized: func(have, want hyperv1.NodePoolPlatform) bool {
		h, w := have.Kubevirt, want.Kubevirt
		if h == nil || w == nil {
			return true // not a KubeVirt NodePool: nothing of it to resize
		}
		if h.Compute == nil || h.RootVolume == nil || h.RootVolume.Persistent == nil || h.RootVolume.Persistent.Size == nil {
			return false
		}
		return ptr.Deref(h.Compute.Cores, 0) == ptr.Deref(w.Compute.Cores, 0) &&
			h.Compute.Memory != nil && h.Compute.Memory.Cmp(*w.Compute.Memory) == 0 &&
			h.RootVolume.Persistent.Size.Cmp(*w.RootVolume.Persistent.Size) == 0
	},
	Resize: func(next *hyperv1.NodePoolPlatform, want hyperv1.NodePoolPlatform) {
		kv, w := next.Kubevirt, want.Kubevirt
		if kv == nil || w == nil {
			return
		}
		if kv.Compute == nil {
			kv.Compute = &hyperv1.KubevirtCompute{}
		}
		kv.Compute.Cores, kv.Compute.Memory = w.Compute.Cores, w.Compute.Memory
		if kv.RootVolume == nil || kv.RootVolume.Persistent == nil {
			kv.RootVolume = w.RootVolume
		} else {
			kv.RootVolume.Persistent.Size = w.RootVolume.Persistent.Size
		}
	},
}
