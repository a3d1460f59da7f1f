package crds

import (
	"context"
	"encoding/base64"
	"errors"
	"fmt"
	"slices"
	"time"

	"golang.org/x/sync/errgroup"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/rest"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/dcm-sp/acm-cluster-sp/internal/capiprivate/groups"
)

// FieldManager is the server-side-apply field manager of everything capi-private installs.
const FieldManager = "capi-private"

// InstallOptions configure Install.
type InstallOptions struct {
	// ClientConfig reaches the conversion webhook: a Service (default DefaultClientConfig) or a URL, plus the
	// caBundle that verifies it.
	ClientConfig apiextensionsv1.WebhookClientConfig
	// ProbeNamespace is where the dry-run probe Machine is "created" (default "default"; it must exist).
	ProbeNamespace string
	// Timeout bounds the wait for Established and for the probe (default 2 minutes).
	Timeout time.Duration
}

// Install server-side applies the private CRDs (field manager capi-private, forcing ownership) — except the
// caBundle of a CRD annotated for a CA-bundle injector, which stays the injector's —, waits until every one is
// Established, then probes the conversion webhook with a dryRun=All create of a v1beta1 Machine,
// retrying until it passes or the timeout expires.
//
// Only names ending in PrivateSuffix are ever written, and CRDs are never deleted: a CRD that is no longer
// generated stays as it is.
func Install(ctx context.Context, c client.Client, opts InstallOptions) error {
	if opts.ClientConfig.Service == nil && opts.ClientConfig.URL == nil {
		opts.ClientConfig = DefaultClientConfig()
	}
	if opts.ProbeNamespace == "" {
		opts.ProbeNamespace = "default"
	}
	if opts.Timeout == 0 {
		opts.Timeout = 2 * time.Minute
	}
	crds, err := Private(opts.ClientConfig)
	if err != nil {
		return err
	}
	for _, crd := range crds {
		if !hasPrivateSuffix(crd.GetName()) { // Private checks this too; the write is what must never happen.
			return fmt.Errorf("refusing to write CRD %s: not a private CRD", crd.GetName())
		}
	}
	if err := keepInjectedCABundles(ctx, c, crds); err != nil {
		return err
	}
	pending, err := Apply(ctx, c, crds, FieldManager)
	if err != nil {
		return err
	}
	ctx, cancel := context.WithTimeout(ctx, opts.Timeout)
	defer cancel()
	if err := WaitEstablished(ctx, c, pending); err != nil {
		return err
	}
	var probeErr error
	err = wait.PollUntilContextCancel(ctx, 250*time.Millisecond, true, func(ctx context.Context) (bool, error) {
		probeErr = Probe(ctx, c, opts.ProbeNamespace)
		return probeErr == nil, nil
	})
	if err != nil {
		return fmt.Errorf("conversion webhook probe (dryRun=All create of a v1beta1 Machine) did not pass: %w", errors.Join(err, probeErr))
	}
	return nil
}

// NewClient is a client for cfg that reads and writes CRDs (apiextensions.k8s.io/v1): what Install, Apply and
// WaitEstablished take.
func NewClient(cfg *rest.Config) (client.Client, error) {
	scheme := runtime.NewScheme()
	if err := apiextensionsv1.AddToScheme(scheme); err != nil {
		return nil, err
	}
	return client.New(cfg, client.Options{Scheme: scheme})
}

// applyWorkers bounds the CRDs applied at once.
const applyWorkers = 4

// Apply server-side applies crds as fieldManager (forcing ownership), a few at a time, and returns those whose
// answer is not yet Established (a CRD applied unchanged answers with its Established condition, so a re-install
// waits for nothing).
func Apply(ctx context.Context, c client.Client, crds []*unstructured.Unstructured, fieldManager string) ([]*unstructured.Unstructured, error) {
	established := make([]bool, len(crds))
	g, gctx := errgroup.WithContext(ctx)
	g.SetLimit(applyWorkers)
	for i, crd := range crds {
		g.Go(func() error {
			obj := crd.DeepCopy()
			if err := c.Apply(gctx, client.ApplyConfigurationFromUnstructured(obj), client.FieldOwner(fieldManager), client.ForceOwnership); err != nil {
				return fmt.Errorf("applying CRD %s: %w", crd.GetName(), err)
			}
			established[i] = conditionTrue(obj, string(apiextensionsv1.Established))
			return nil
		})
	}
	if err := g.Wait(); err != nil {
		return nil, err
	}
	var pending []*unstructured.Unstructured
	for i, crd := range crds {
		if !established[i] {
			pending = append(pending, crd)
		}
	}
	return pending, nil
}

// conditionTrue reports whether obj's status has condition typ with status True.
func conditionTrue(obj *unstructured.Unstructured, typ string) bool {
	conds, _, _ := unstructured.NestedSlice(obj.Object, "status", "conditions")
	for _, c := range conds {
		if m, ok := c.(map[string]any); ok && m["type"] == typ && m["status"] == string(apiextensionsv1.ConditionTrue) {
			return true
		}
	}
	return false
}

// WaitEstablished waits until every CRD of crds is Established, or ctx ends. A CRD seen Established is not read
// again.
func WaitEstablished(ctx context.Context, c client.Client, crds []*unstructured.Unstructured) error {
	pending := slices.Clone(crds)
	err := wait.PollUntilContextCancel(ctx, 100*time.Millisecond, true, func(ctx context.Context) (bool, error) {
		for len(pending) > 0 {
			var got apiextensionsv1.CustomResourceDefinition
			if err := c.Get(ctx, client.ObjectKey{Name: pending[0].GetName()}, &got); err != nil || !Established(&got) {
				return false, nil
			}
			pending = pending[1:]
		}
		return true, nil
	})
	if err != nil {
		return fmt.Errorf("waiting for CRD %s to be Established: %w", pending[0].GetName(), err)
	}
	return nil
}

// Established reports whether crd has condition Established=True.
func Established(crd *apiextensionsv1.CustomResourceDefinition) bool {
	for _, c := range crd.Status.Conditions {
		if c.Type == apiextensionsv1.Established && c.Status == apiextensionsv1.ConditionTrue {
			return true
		}
	}
	return false
}

// Probe checks the conversion path of the private CRDs: a dryRun=All create of a v1beta1 Machine in namespace.
// kube-apiserver converts the request to the storage version v1beta2 and the answer back to v1beta1 through
// the webhook; the way back asks the webhook's apiVersion getter about the infrastructure ref, so the probe
// fails while the webhook is down, untrusted, or cannot read CRDs.
func Probe(ctx context.Context, c client.Client, namespace string) error {
	m := &unstructured.Unstructured{Object: map[string]any{
		"apiVersion": groups.Default.MustPrivate("cluster.x-k8s.io") + "/v1beta1",
		"kind":       "Machine",
		"metadata":   map[string]any{"generateName": "capi-private-probe-", "namespace": namespace},
		"spec": map[string]any{
			"clusterName": "capi-private-probe",
			"bootstrap":   map[string]any{"dataSecretName": "capi-private-probe"},
			"infrastructureRef": map[string]any{
				"apiVersion": groups.Default.MustPrivate("infrastructure.cluster.x-k8s.io") + "/v1alpha1",
				"kind":       "KubevirtMachine",
				"name":       "capi-private-probe",
			},
		},
	}}
	if err := c.Create(ctx, m, client.DryRunAll); err != nil {
		return err
	}
	if m.GetAPIVersion() != groups.Default.MustPrivate("cluster.x-k8s.io")+"/v1beta1" {
		return fmt.Errorf("probe answered with apiVersion %s", m.GetAPIVersion())
	}
	return nil
}

// Annotations that hand a CRD's conversion caBundle to an injector: OpenShift's service-ca operator
// (AnnotationInjectCABundle "true") or cert-manager's cainjector (the others, naming a Certificate, a Secret, or
// the API server's CA).
const (
	AnnotationInjectCABundle     = "service.beta.openshift.io/inject-cabundle"
	AnnotationInjectCAFrom       = "cert-manager.io/inject-ca-from"
	AnnotationInjectCAFromSecret = "cert-manager.io/inject-ca-from-secret"
	AnnotationInjectAPIServerCA  = "cert-manager.io/inject-apiserver-ca"
)

// injected reports whether annotations hand the conversion caBundle to an injector.
func injected(annotations map[string]string) bool {
	if annotations[AnnotationInjectCABundle] == "true" {
		return true
	}
	for _, k := range []string{AnnotationInjectCAFrom, AnnotationInjectCAFromSecret, AnnotationInjectAPIServerCA} {
		if annotations[k] != "" {
			return true
		}
	}
	return false
}

// CABundleToApply decides the caBundle Install applies to a CRD whose current annotations and caBundle are
// given (nil, nil for a CRD not yet there): its own, unless an injector owns the field; then the current value
// (applying the same value takes nothing from the injector and changes nothing), or none while the injector has
// not written one yet. ok false means: apply no caBundle at all.
func CABundleToApply(own []byte, annotations map[string]string, current []byte) (bundle []byte, ok bool) {
	switch {
	case !injected(annotations):
		return own, len(own) > 0
	case len(current) > 0:
		return current, true
	default:
		return nil, false
	}
}

// keepInjectedCABundles sets, in each CRD of crds with a Webhook conversion, the caBundle CABundleToApply
// decides from the CRD as it is on the server.
func keepInjectedCABundles(ctx context.Context, c client.Client, crds []*unstructured.Unstructured) error {
	var list apiextensionsv1.CustomResourceDefinitionList
	if err := c.List(ctx, &list, client.MatchingLabels{LabelPrivate: "true"}); err != nil {
		return fmt.Errorf("reading the installed private CRDs: %w", err)
	}
	current := map[string]*apiextensionsv1.CustomResourceDefinition{}
	for i := range list.Items {
		current[list.Items[i].Name] = &list.Items[i]
	}
	path := []string{"spec", "conversion", "webhook", "clientConfig", "caBundle"}
	for _, crd := range crds {
		if _, found, _ := unstructured.NestedMap(crd.Object, path[:4]...); !found {
			continue
		}
		own, _, _ := unstructured.NestedString(crd.Object, path...)
		ownPEM, err := base64.StdEncoding.DecodeString(own)
		if err != nil {
			return fmt.Errorf("CRD %s: caBundle: %w", crd.GetName(), err)
		}
		var annotations map[string]string
		var have []byte
		if cur := current[crd.GetName()]; cur != nil {
			annotations = cur.Annotations
			if conv := cur.Spec.Conversion; conv != nil && conv.Webhook != nil && conv.Webhook.ClientConfig != nil {
				have = conv.Webhook.ClientConfig.CABundle
			}
		}
		bundle, ok := CABundleToApply(ownPEM, annotations, have)
		if !ok {
			unstructured.RemoveNestedField(crd.Object, path...)
			continue
		}
		if err := unstructured.SetNestedField(crd.Object, base64.StdEncoding.EncodeToString(bundle), path...); err != nil {
			return err
		}
	}
	return nil
}
