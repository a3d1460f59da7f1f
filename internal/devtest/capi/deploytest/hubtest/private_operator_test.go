package hubtest

import (
	"strings"
	"testing"

	authorizationv1 "k8s.io/api/authorization/v1"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/dcm-sp/acm-cluster-sp/internal/devtest/capi/deploytest"
	"github.com/dcm-sp/acm-cluster-sp/internal/devtest/manifesttest"
)

// applyServed server-side applies, as the admin, every object of objs whose kind the hub serves (the monitoring
// kinds are not installed here) and returns copies of those it applied. A PriorityClass that exists is left
// alone (its value is immutable; another test may have created it).
func applyServed(t *testing.T, objs []*unstructured.Unstructured, owner string) []client.Object {
	t.Helper()
	var out []client.Object
	for _, o := range objs {
		if _, err := env.Client.RESTMapper().RESTMapping(o.GroupVersionKind().GroupKind(), o.GroupVersionKind().Version); meta.IsNoMatchError(err) {
			t.Logf("%s %s: kind not served on this hub, skipped", o.GetKind(), o.GetName())
			continue
		}
		obj := o.DeepCopy()
		if o.GetKind() == "PriorityClass" {
			if err := env.Client.Create(t.Context(), obj); client.IgnoreAlreadyExists(err) != nil {
				t.Fatal(err)
			}
		} else if err := env.Client.Apply(t.Context(), client.ApplyConfigurationFromUnstructured(obj), client.FieldOwner(owner), client.ForceOwnership); err != nil {
			t.Fatalf("applying %s %s/%s: %v", o.GetKind(), o.GetNamespace(), o.GetName(), err)
		}
		out = append(out, o.DeepCopy())
	}
	return out
}

// versions reads the resourceVersion of each object (by kind, namespace and name): the same version is the same
// object, never written in between.
func versions(t *testing.T, objs []client.Object) map[string]string {
	t.Helper()
	out := map[string]string{}
	for _, o := range objs {
		u := &unstructured.Unstructured{}
		u.SetGroupVersionKind(o.GetObjectKind().GroupVersionKind())
		if err := env.Client.Get(t.Context(), client.ObjectKeyFromObject(o), u); err != nil {
			t.Fatal(err)
		}
		out[u.GetKind()+" "+u.GetNamespace()+"/"+u.GetName()] = u.GetResourceVersion()
	}
	return out
}

// TestPrivateOperatorLeavesTheLegacyInstallAlone: on a hub where HyperShift's recorded install runs (the legacy
// operator) beside the standard Cluster API CRDs, applying deploy/capi-private/private-operator writes none of the
// legacy install's objects and no standard CRD — each keeps its resourceVersion, so its ClusterRoleBinding's
// subjects, its ClusterRole and every CRD's schema and conversion config are as before — and both operators' service
// accounts may work with HostedClusters and Cluster API objects, each through its own binding.
func TestPrivateOperatorLeavesTheLegacyInstallAlone(t *testing.T) {
	legacy := applyServed(t, manifesttest.Render(t, deploytest.HyperShiftInstallDir), "hypershift-install")
	var crds apiextensionsv1.CustomResourceDefinitionList
	if err := env.Client.List(t.Context(), &crds); err != nil {
		t.Fatal(err)
	}
	watched := legacy
	standard := 0
	for i := range crds.Items {
		if strings.HasSuffix(crds.Items[i].Spec.Group, "cluster.x-k8s.io") {
			crd := crds.Items[i].DeepCopy()
			crd.SetGroupVersionKind(apiextensionsv1.SchemeGroupVersion.WithKind("CustomResourceDefinition"))
			watched = append(watched, crd)
			standard++
		}
	}
	if standard == 0 || len(legacy) < 10 {
		t.Fatalf("%d standard CAPI CRDs, %d legacy objects on the hub", standard, len(legacy))
	}
	before := versions(t, watched)

	private := applyServed(t, manifesttest.Render(t, deploytest.PrivateOperatorDir), "kubectl")
	after := versions(t, watched)
	for k, v := range before {
		if after[k] != v {
			t.Errorf("%s written by the private operator's install (resourceVersion %s → %s)", k, v, after[k])
		}
	}
	t.Logf("applied %d objects of the overlay; %d legacy objects and %d standard CRDs unchanged", len(private), len(legacy), standard)

	for _, sa := range []struct{ ns, name string }{{"hypershift", "operator"}, {deploytest.PrivateOperatorNamespace, "operator"}} {
		for _, a := range []authorizationv1.ResourceAttributes{
			{Verb: "update", Group: "hypershift.openshift.io", Resource: "hostedclusters", Namespace: "clusters"},
			{Verb: "create", Group: "cluster.x-k8s.io", Resource: "machinedeployments", Namespace: "clusters-x"},
			{Verb: "create", Group: "coordination.k8s.io", Resource: "leases", Namespace: sa.ns},
		} {
			if !allowedIn(t, sa.ns, sa.name, a) {
				t.Errorf("%s/%s may not %s %s.%s in %s", sa.ns, sa.name, a.Verb, a.Resource, a.Group, a.Namespace)
			}
		}
	}
}
