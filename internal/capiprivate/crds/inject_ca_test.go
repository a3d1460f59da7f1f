package crds_test

import (
	"bytes"
	"context"
	"testing"

	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/dcm-sp/acm-cluster-sp/internal/capiprivate/crds"
)

// A CA-bundle injector (OpenShift's service-ca operator, cert-manager's cainjector) owns the caBundle of a CRD
// annotated for it: Install leaves that caBundle alone instead of forcing its own, and forces its own again once
// the annotation is gone. The injector is played as it works: an update of the CRD under its own field manager.
func TestInstallLeavesInjectedCABundle(t *testing.T) {
	ctx := context.Background() // the clean-up reinstalls after t.Context() is done
	name := "machines" + crds.PrivateSuffix
	ours := env.WebhookClientConfig().CABundle
	// The injector's bundle: a different one that still verifies the test webhook (its CA twice), so the other
	// tests of the package keep converting.
	injected := append(append([]byte{}, ours...), ours...)
	set := func(manager string, mutate func(*apiextensionsv1.CustomResourceDefinition)) {
		t.Helper()
		var crd apiextensionsv1.CustomResourceDefinition
		if err := env.Client.Get(ctx, client.ObjectKey{Name: name}, &crd); err != nil {
			t.Fatal(err)
		}
		mutate(&crd)
		if err := env.Client.Update(ctx, &crd, client.FieldOwner(manager)); err != nil {
			t.Fatal(err)
		}
	}
	caBundle := func() []byte {
		t.Helper()
		var crd apiextensionsv1.CustomResourceDefinition
		if err := env.Client.Get(ctx, client.ObjectKey{Name: name}, &crd); err != nil {
			t.Fatal(err)
		}
		return crd.Spec.Conversion.Webhook.ClientConfig.CABundle
	}
	install := func() {
		t.Helper()
		if err := crds.Install(ctx, env.Client, crds.InstallOptions{ClientConfig: env.WebhookClientConfig()}); err != nil {
			t.Fatal(err)
		}
	}
	t.Cleanup(func() {
		set("kubectl", func(crd *apiextensionsv1.CustomResourceDefinition) {
			delete(crd.Annotations, crds.AnnotationInjectCABundle)
		})
		install()
	})

	for _, c := range []struct {
		annotation, value string
	}{
		{crds.AnnotationInjectCABundle, "true"},
		{crds.AnnotationInjectCAFrom, "capi-private/capi-private-webhook"},
	} {
		t.Run(c.annotation, func(t *testing.T) {
			set("kubectl", func(crd *apiextensionsv1.CustomResourceDefinition) {
				delete(crd.Annotations, crds.AnnotationInjectCABundle)
				delete(crd.Annotations, crds.AnnotationInjectCAFrom)
				crd.Annotations[c.annotation] = c.value
			})
			set("service-ca-operator", func(crd *apiextensionsv1.CustomResourceDefinition) {
				crd.Spec.Conversion.Webhook.ClientConfig.CABundle = injected
			})
			install()
			if got := caBundle(); !bytes.Equal(got, injected) {
				t.Errorf("after install, caBundle is %d bytes (ours %d), want the injector's %d bytes", len(got), len(ours), len(injected))
			}
			install()
			if got := caBundle(); !bytes.Equal(got, injected) {
				t.Errorf("after a second install, caBundle is %d bytes, want the injector's %d bytes", len(got), len(injected))
			}
		})
	}

	// Without an injector annotation the caBundle is capi-private's to set: Install forces its own.
	set("kubectl", func(crd *apiextensionsv1.CustomResourceDefinition) {
		delete(crd.Annotations, crds.AnnotationInjectCABundle)
		delete(crd.Annotations, crds.AnnotationInjectCAFrom)
	})
	install()
	if got := caBundle(); !bytes.Equal(got, ours) {
		t.Errorf("without an injector annotation, caBundle is %d bytes, want ours (%d bytes)", len(got), len(ours))
	}
}

func TestCABundleToApply(t *testing.T) {
	own, cur := []byte("own"), []byte("injected")
	for _, c := range []struct {
		name        string
		annotations map[string]string
		current     []byte
		own         []byte
		want        []byte
		ok          bool
	}{
		{"no CRD yet", nil, nil, own, own, true},
		{"no injector: ours forced", map[string]string{"x": "y"}, cur, own, own, true},
		{"no injector, none of ours", nil, cur, nil, nil, false},
		{"service-ca false is no injector", map[string]string{crds.AnnotationInjectCABundle: "false"}, cur, own, own, true},
		{"service-ca: the injector's kept", map[string]string{crds.AnnotationInjectCABundle: "true"}, cur, own, cur, true},
		{"cert-manager: the injector's kept", map[string]string{crds.AnnotationInjectCAFrom: "ns/cert"}, cur, own, cur, true},
		{"cert-manager secret", map[string]string{crds.AnnotationInjectCAFromSecret: "ns/s"}, cur, own, cur, true},
		{"cert-manager apiserver CA", map[string]string{crds.AnnotationInjectAPIServerCA: "true"}, cur, own, cur, true},
		{"injector not yet written: none", map[string]string{crds.AnnotationInjectCABundle: "true"}, nil, own, nil, false},
	} {
		got, ok := crds.CABundleToApply(c.own, c.annotations, c.current)
		if ok != c.ok || !bytes.Equal(got, c.want) {
			t.Errorf("%s: (%q, %v), want (%q, %v)", c.name, got, ok, c.want, c.ok)
		}
	}
}
