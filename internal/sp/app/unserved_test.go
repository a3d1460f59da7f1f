package app

import (
	"context"
	"net/http"
	"strings"
	"testing"
	"time"

	hyperv1 "github.com/openshift/hypershift/api/hypershift/v1beta1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/dcm-sp/acm-cluster-sp/internal/sp/meta"
	"github.com/dcm-sp/acm-cluster-sp/internal/sp/operation"
)

// A HostedCluster of a platform the SP does not serve (an AWS one, labelled for this SP and carrying a stored
// spec that says kubevirt) is reported, never read or changed as a platform it is not: GET answers it FAILED with
// no platform, a PATCH is a 422 naming its type, and the reconciler, once it has looked at it, renders nothing
// for it.
func TestPlatformNotServedOnTheHub(t *testing.T) {
	t.Parallel()
	const ns = "pages" // nobody plays an operator here: the HostedCluster stays as written
	cfg := testConfig(ns)
	cfg.ProviderName = "sp-unserved"
	sp := startSP(t, cfg, Options{})
	ctx := context.Background()

	id, name := uniqueName("aws-id"), uniqueName("aws")
	hc := &hyperv1.HostedCluster{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name, Labels: meta.Labels(cfg.ProviderName, id),
			Annotations: map[string]string{meta.AnnotationSpec: `{"version":"4.17","metadata":{"name":"` + name + `"},"nodes":{"workers":{"count":2}},"provider_hints":{"acm":{"platform":"kubevirt"}}}`}},
		Spec: hyperv1.HostedClusterSpec{
			Release:    hyperv1.Release{Image: "quay.io/openshift-release-dev/ocp-release:4.17.29-x86_64"},
			PullSecret: corev1.LocalObjectReference{Name: name + "-pull-secret"},
			Etcd: hyperv1.EtcdSpec{ManagementType: hyperv1.Managed, Managed: &hyperv1.ManagedEtcdSpec{Storage: hyperv1.ManagedEtcdStorageSpec{
				Type: hyperv1.PersistentVolumeEtcdStorage, PersistentVolume: &hyperv1.PersistentVolumeEtcdStorageSpec{}}}},
			Networking: hyperv1.ClusterNetworking{NetworkType: hyperv1.OVNKubernetes},
			Platform: hyperv1.PlatformSpec{Type: hyperv1.AWSPlatform, AWS: &hyperv1.AWSPlatformSpec{Region: "us-east-1",
				RolesRef: hyperv1.AWSRolesRef{ControlPlaneOperatorARN: "arn:aws:iam::1:role/cpo", ImageRegistryARN: "arn:aws:iam::1:role/ir",
					IngressARN: "arn:aws:iam::1:role/in", KubeCloudControllerARN: "arn:aws:iam::1:role/kcc", NetworkARN: "arn:aws:iam::1:role/net",
					NodePoolManagementARN: "arn:aws:iam::1:role/np", StorageARN: "arn:aws:iam::1:role/st"}}},
			Services: []hyperv1.ServicePublishingStrategyMapping{
				{Service: hyperv1.APIServer, ServicePublishingStrategy: hyperv1.ServicePublishingStrategy{Type: hyperv1.LoadBalancer}},
				{Service: hyperv1.OAuthServer, ServicePublishingStrategy: hyperv1.ServicePublishingStrategy{Type: hyperv1.Route}},
				{Service: hyperv1.Konnectivity, ServicePublishingStrategy: hyperv1.ServicePublishingStrategy{Type: hyperv1.Route}},
				{Service: hyperv1.Ignition, ServicePublishingStrategy: hyperv1.ServicePublishingStrategy{Type: hyperv1.Route}},
			},
		},
	}
	if err := testHub.Client.Create(ctx, hc); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = testHub.Client.Delete(context.Background(), hc) })

	// The reconciler had its chance: it looked at the cluster and refused to converge it.
	waitFor(t, 60*time.Second, "the reconciler to refuse the AWS HostedCluster", func() bool {
		return counterWhere(t, sp.App.Registry, "acm_sp_reconciles_total", "result", "error") >= 1
	})
	var nps hyperv1.NodePoolList
	if err := testHub.Client.List(ctx, &nps, client.InNamespace(ns), client.MatchingLabels{meta.LabelInstanceID: id}); err != nil || len(nps.Items) != 0 {
		t.Fatalf("the reconciler rendered %d NodePools for an AWS HostedCluster (%v)", len(nps.Items), err)
	}
	if left := leftoversIn(t, ns, id, name); len(left) != 1 || left[0] != "HostedCluster/"+name {
		t.Fatalf("objects of the AWS cluster on the hub: %v, want only its HostedCluster", left)
	}

	var c struct{ Status, StatusMessage, Platform string }
	waitFor(t, 60*time.Second, "GET of the AWS cluster", func() bool {
		code, got := sp.get(t, id)
		c.Status, c.StatusMessage, c.Platform = string(got.Status), got.StatusMessage, string(got.Platform)
		return code == http.StatusOK
	})
	if c.Status != "FAILED" || c.Platform != "" || !strings.Contains(c.StatusMessage, `"AWS"`) {
		t.Fatalf("GET: status %s %q, platform %q; want FAILED naming AWS and no platform", c.Status, c.StatusMessage, c.Platform)
	}
	var before, after hyperv1.HostedCluster
	if err := testHub.Client.Get(ctx, client.ObjectKeyFromObject(hc), &before); err != nil {
		t.Fatal(err)
	}
	code, header, _, body := sp.patch(t, id, `{"spec":{"nodes":{"workers":{"count":3}}}}`, "")
	assertProblem(t, code, header, body, http.StatusUnprocessableEntity, `"AWS"`)
	if err := testHub.Client.Get(ctx, client.ObjectKeyFromObject(hc), &after); err != nil {
		t.Fatal(err)
	}
	if after.Annotations[operation.Annotation] != "" || after.Annotations[meta.AnnotationSpec] != before.Annotations[meta.AnnotationSpec] {
		t.Fatalf("the refused PATCH recorded an operation or a spec: %v", after.Annotations)
	}
}
