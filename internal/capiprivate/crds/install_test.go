package crds_test

import (
	"os"
	"slices"
	"strings"
	"testing"
	"time"

	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/dcm-sp/acm-cluster-sp/internal/capiprivate/crds"
	"github.com/dcm-sp/acm-cluster-sp/internal/devtest/capi/capihub"
)

var env *capihub.Env

// The test environment installs the private CRDs with crds.Install (URL client config, caBundle, probe).
func TestMain(m *testing.M) { os.Exit(capihub.Main(m, &env)) }

func listCRDs(t *testing.T) map[string]apiextensionsv1.CustomResourceDefinition {
	t.Helper()
	var list apiextensionsv1.CustomResourceDefinitionList
	if err := env.Client.List(t.Context(), &list); err != nil {
		t.Fatal(err)
	}
	out := map[string]apiextensionsv1.CustomResourceDefinition{}
	for _, crd := range list.Items {
		out[crd.Name] = crd
	}
	return out
}

func managers(crd *apiextensionsv1.CustomResourceDefinition) []string {
	var out []string
	for _, f := range crd.ManagedFields {
		out = append(out, f.Manager)
	}
	return out
}

func TestInstall(t *testing.T) {
	want, err := crds.Private(env.WebhookClientConfig())
	if err != nil {
		t.Fatal(err)
	}
	before := listCRDs(t)
	for _, u := range want {
		crd, ok := before[u.GetName()]
		if !ok {
			t.Fatalf("%s not installed", u.GetName())
		}
		if !crds.Established(&crd) {
			t.Errorf("%s not Established", crd.Name)
		}
		if !slices.Contains(managers(&crd), crds.FieldManager) {
			t.Errorf("%s: managers %v, want %s", crd.Name, managers(&crd), crds.FieldManager)
		}
	}
	if err := crds.Probe(t.Context(), env.Client, metav1.NamespaceDefault); err != nil {
		t.Errorf("probe: %v", err)
	}

	// A private-suffixed CRD capi-private does not generate (say, from a newer release) is left alone: Install
	// never deletes.
	extra := &apiextensionsv1.CustomResourceDefinition{
		ObjectMeta: metav1.ObjectMeta{Name: "widgets" + crds.PrivateSuffix},
		Spec: apiextensionsv1.CustomResourceDefinitionSpec{
			Group: strings.TrimPrefix(crds.PrivateSuffix, "."), Scope: apiextensionsv1.NamespaceScoped,
			Names: apiextensionsv1.CustomResourceDefinitionNames{Plural: "widgets", Singular: "widget", Kind: "Widget", ListKind: "WidgetList"},
			Versions: []apiextensionsv1.CustomResourceDefinitionVersion{{
				Name: "v1", Served: true, Storage: true,
				Schema: &apiextensionsv1.CustomResourceValidation{OpenAPIV3Schema: &apiextensionsv1.JSONSchemaProps{Type: "object"}},
			}},
		},
	}
	if err := env.Client.Create(t.Context(), extra); err != nil {
		t.Fatal(err)
	}
	u := &unstructured.Unstructured{}
	u.SetName(extra.Name)
	if err := crds.WaitEstablished(t.Context(), env.Client, []*unstructured.Unstructured{u}); err != nil {
		t.Fatal(err)
	}
	before = listCRDs(t)

	// Install again: idempotent, and nothing but the private CRDs it generates is written.
	if err := crds.Install(t.Context(), env.Client, crds.InstallOptions{ClientConfig: env.WebhookClientConfig()}); err != nil {
		t.Fatal(err)
	}
	after := listCRDs(t)
	ours := map[string]bool{}
	for _, u := range want {
		ours[u.GetName()] = true
	}
	for name, crd := range after {
		b, existed := before[name]
		switch {
		case !existed:
			t.Errorf("Install created %s", name)
		case !ours[name] && b.ResourceVersion != crd.ResourceVersion:
			t.Errorf("Install wrote %s, which is not one of its private CRDs", name)
		case !ours[name] && slices.Contains(managers(&crd), crds.FieldManager):
			t.Errorf("%s is managed by %s", name, crds.FieldManager)
		}
	}
	if _, ok := after[extra.Name]; !ok {
		t.Errorf("Install deleted %s", extra.Name)
	}
	for name := range before {
		if _, ok := after[name]; !ok {
			t.Errorf("%s disappeared", name)
		}
	}
}

// Install refuses to go on while the webhook cannot convert: the probe fails.
func TestInstallProbeFailsWhileWebhookDown(t *testing.T) {
	env.SetWebhookDown(true)
	defer env.SetWebhookDown(false)
	ctx := t.Context()
	start := time.Now()
	err := crds.Install(ctx, env.Client, crds.InstallOptions{ClientConfig: env.WebhookClientConfig(), Timeout: 3 * time.Second})
	t.Logf("Install gave up after %s: %v", time.Since(start), err)
	if err == nil || !strings.Contains(err.Error(), "probe") {
		t.Errorf("Install with the webhook down: %v, want a probe failure", err)
	}
	var crd apiextensionsv1.CustomResourceDefinition
	if err := env.Client.Get(ctx, client.ObjectKey{Name: "machines" + crds.PrivateSuffix}, &crd); err != nil || !crds.Established(&crd) {
		t.Errorf("private Machine CRD after a failed probe: %v", err)
	}
}
