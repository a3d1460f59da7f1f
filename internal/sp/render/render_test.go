package render

import (
	"bytes"
	"testing"

	"sigs.k8s.io/yaml"

	"github.com/dcm-sp/acm-cluster-sp/internal/devtest/golden"
	"github.com/dcm-sp/acm-cluster-sp/internal/sp/clusters"
	"github.com/dcm-sp/acm-cluster-sp/internal/sp/meta"
)

func TestRenderGolden(t *testing.T) {
	for name, in := range Examples() {
		t.Run(name, func(t *testing.T) {
			golden.Assert(t, name+".golden.yaml", renderYAML(t, Render(in)))
		})
	}
}

func renderYAML(t *testing.T, o Objects) []byte {
	t.Helper()
	var buf bytes.Buffer
	add := func(obj any) {
		b, err := yaml.Marshal(obj)
		if err != nil {
			t.Fatal(err)
		}
		buf.WriteString("---\n")
		buf.Write(b)
	}
	for _, s := range o.Secrets {
		add(s)
	}
	add(o.HostedCluster)
	add(o.NodePool)
	if o.ManagedCluster != nil {
		add(o.ManagedCluster)
	}
	if o.KlusterletAddonConfig != nil {
		add(o.KlusterletAddonConfig.Object)
	}
	return buf.Bytes()
}

// Properties every rendered set has, whatever the input.
func TestRenderInvariants(t *testing.T) {
	for name, in := range Examples() {
		o := Render(in)
		for _, s := range o.Secrets {
			if s.Labels[meta.LabelInstanceID] != in.ID || s.Labels[meta.LabelAutoCreatedForInfra] != in.InfraID || s.Labels[meta.LabelSafeToDelete] != "true" {
				t.Errorf("%s: secret %s labels %v", name, s.Name, s.Labels)
			}
		}
		for _, l := range []map[string]string{o.HostedCluster.Labels, o.NodePool.Labels} {
			if l[meta.LabelManagedBy] != "dcm" || l[meta.LabelInstanceID] != in.ID || l[meta.LabelServiceType] != "cluster" {
				t.Errorf("%s: labels %v", name, l)
			}
		}
		if o.HostedCluster.Spec.Release.Image == "" || o.NodePool.Spec.Release.Image != o.HostedCluster.Spec.Release.Image {
			t.Errorf("%s: release images HC %q NP %q", name, o.HostedCluster.Spec.Release.Image, o.NodePool.Spec.Release.Image)
		}
		if o.NodePool.Spec.Replicas == nil || *o.NodePool.Spec.Replicas != in.WorkerCount {
			t.Errorf("%s: replicas %v", name, o.NodePool.Spec.Replicas)
		}
		if in.Platform == clusters.KubeVirt {
			kv := o.NodePool.Spec.Platform.Kubevirt
			if kv == nil || kv.RootVolume == nil || kv.RootVolume.Persistent == nil || kv.RootVolume.Persistent.Size == nil {
				t.Errorf("%s: KubeVirt NodePool without a full platform block", name)
			}
			passthrough := o.HostedCluster.Spec.Platform.Kubevirt.BaseDomainPassthrough
			if (in.BaseDomain == "") != (passthrough != nil && *passthrough) {
				t.Errorf("%s: base domain %q but passthrough %v", name, in.BaseDomain, passthrough)
			}
		}
		if (o.ManagedCluster != nil) != in.ManagedCluster || (o.KlusterletAddonConfig != nil) != in.KlusterletAddonConfig {
			t.Errorf("%s: ACM objects not switched by input", name)
		}
	}
}
