// Package deploytest proves deploy/capi-private on capi-private's test hub: it installs the rendered RBAC of the
// base and gives tests each component's identity as deployed — a token of its ServiceAccount (TokenRequest),
// with every 403 recorded — so the components' real code paths run as the install runs them. Its tests check
// the alert rules against the components' registered metrics and the manifests against the code that decides
// the same things (the injector's webhook configuration, the RBAC rules); the components run on the hub in
// deploytest/hubtest and, the migrator with the CAPI harness, deploytest/migratetest. Import it from tests only.
package deploytest

import (
	"context"
	"fmt"
	"slices"

	authenticationv1 "k8s.io/api/authentication/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/dcm-sp/acm-cluster-sp/internal/devtest/manifesttest"
)

// Dir is the kustomize base whose RBAC the tests install; Namespace is capi-private's namespace in it.
const (
	Dir       = "deploy/capi-private/base"
	Namespace = "capi-private"
)

// The private HyperShift operator's overlay, the recorded HyperShift install it is built from (which is also what
// the legacy operator runs), and the overlay's namespace.
const (
	PrivateOperatorDir       = "deploy/capi-private/private-operator"
	HyperShiftInstallDir     = PrivateOperatorDir + "/hypershift"
	PrivateOperatorNamespace = "hypershift-private"
)

// ServiceAccounts of the components, as deployed.
const (
	WebhookSA    = "capi-private-webhook"
	InjectSA     = "capi-private-inject"
	RBACMirrorSA = "capi-private-rbac-mirror"
	MigrateSA    = "capi-private-migrate"
	CRDsSA       = "capi-private-crds"
)

// rbacKinds are what ApplyRBAC installs of the rendered base.
var rbacKinds = []string{"Namespace", "ServiceAccount", "ClusterRole", "ClusterRoleBinding", "Role", "RoleBinding",
	"ValidatingAdmissionPolicy", "ValidatingAdmissionPolicyBinding"}

// ApplyRBAC server-side applies, as c (an admin), the Namespace, ServiceAccounts, Roles, ClusterRoles, bindings and
// admission policies (what RBAC cannot say) of objs (the rendered base), and returns how many it applied.
func ApplyRBAC(ctx context.Context, c client.Client, objs []*unstructured.Unstructured) (int, error) {
	n := 0
	for _, o := range objs {
		if !slices.Contains(rbacKinds, o.GetKind()) {
			continue
		}
		if err := c.Apply(ctx, client.ApplyConfigurationFromUnstructured(o.DeepCopy()), client.FieldOwner("capi-private-deploytest"), client.ForceOwnership); err != nil {
			return n, fmt.Errorf("applying %s %s: %w", o.GetKind(), o.GetName(), err)
		}
		n++
	}
	return n, nil
}

// Identity is a component's deployed identity: Config carries a token of its ServiceAccount; Forbidden records
// every 403 answered to it.
type Identity struct {
	SA        string
	Config    *rest.Config
	Forbidden *manifesttest.Forbidden
}

// As returns the identity of ServiceAccount sa of Namespace, with a token requested through admin.
func As(ctx context.Context, admin *rest.Config, sa string) (*Identity, error) {
	cs, err := kubernetes.NewForConfig(admin)
	if err != nil {
		return nil, err
	}
	tr, err := cs.CoreV1().ServiceAccounts(Namespace).CreateToken(ctx, sa,
		&authenticationv1.TokenRequest{Spec: authenticationv1.TokenRequestSpec{ExpirationSeconds: ptr.To[int64](3600)}}, metav1.CreateOptions{})
	if err != nil {
		return nil, fmt.Errorf("token for %s: %w", sa, err)
	}
	f := &manifesttest.Forbidden{}
	cfg := &rest.Config{Host: admin.Host, TLSClientConfig: rest.TLSClientConfig{CAData: admin.CAData},
		BearerToken: tr.Status.Token, QPS: 200, Burst: 400, WrapTransport: f.Wrap}
	return &Identity{SA: sa, Config: cfg, Forbidden: f}, nil
}
