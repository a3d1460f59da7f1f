// Package security is the SP's use of k8s.io/apiserver, the machinery every Kubernetes extension server uses: who
// is calling (delegated authentication — bearer tokens through the hub's TokenReview, client certificates against
// a CA file), what they may do (delegated authorization — SubjectAccessReview against the hub's RBAC), and HTTPS
// with certificates reloaded from disk when they change (counting the reloads that fail). Nothing here is
// hand-rolled: the package only configures the library and names the SP's authorization attributes.
//
// Authorization attributes (README, "Security"): API group authAPIGroup (default clusters.acm-cluster-sp.dcm.io),
// version v1alpha1, resource "clusters", verbs create/get/list/patch/delete, the instance id as resource name, and
// the SP's namespace — so both ClusterRoleBindings and RoleBindings in that namespace grant access. Reading a
// cluster's admin kubeconfig is its own permission: subresource "kubeconfig", verb "get".
package security

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"strings"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"k8s.io/apimachinery/pkg/util/wait"
	apiserverapi "k8s.io/apiserver/pkg/apis/apiserver"
	"k8s.io/apiserver/pkg/authentication/authenticator"
	"k8s.io/apiserver/pkg/authentication/authenticatorfactory"
	"k8s.io/apiserver/pkg/authentication/request/union"
	"k8s.io/apiserver/pkg/authentication/user"
	"k8s.io/apiserver/pkg/authorization/authorizer"
	"k8s.io/apiserver/pkg/authorization/authorizerfactory"
	"k8s.io/apiserver/pkg/server/dynamiccertificates"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
)

// Modes.
const (
	ModeKubernetes = "kubernetes"
	ModeNone       = "none"
)

// Resource names of the authorization checks.
const (
	Resource           = "clusters"
	SubresourceKubecfg = "kubeconfig"
	APIVersion         = "v1alpha1"
)

// The library's own cache lifetimes (those of k8s.io/apiserver's delegating options, as kube-rbac-proxy and
// metrics-server use them): a revoked token or binding stops working within them.
const (
	TokenCacheTTL = 10 * time.Second
	AllowCacheTTL = 10 * time.Second
	DenyCacheTTL  = 10 * time.Second
	reviewTimeout = 10 * time.Second
)

// retryBackoff is k8s.io/apiserver's DefaultAuthWebhookRetryBackoff (importing its options package would link the
// whole generic API server): 5 tries, 0.5 s growing by 1.5×.
func retryBackoff() *wait.Backoff {
	return &wait.Backoff{Duration: 500 * time.Millisecond, Factor: 1.5, Jitter: 0.2, Steps: 5}
}

// Options configure a Guard.
type Options struct {
	Mode         string // ModeKubernetes or ModeNone
	Anonymous    bool   // ModeKubernetes: requests without credentials are system:anonymous
	ClientCAFile string // ModeKubernetes: CA of accepted client certificates ("" = bearer tokens only)
	// APIAudiences (ModeKubernetes): audiences of tokens bound to this service. When set, only such tokens are
	// accepted — a token a caller sends to the SP cannot also be used against the hub — unless AcceptHubTokens.
	APIAudiences []string
	// AcceptHubTokens (with APIAudiences): tokens for the hub's own audience are accepted too.
	AcceptHubTokens bool
	APIGroup        string
	Namespace       string // namespace of the authorization checks (the SP's)
	// Hub is where TokenReviews and SubjectAccessReviews go (ModeKubernetes).
	Hub *rest.Config
	// Registry receives the TLS reload metrics (nil: not exported); Log their state changes.
	Registry prometheus.Registerer
	Log      *slog.Logger
}

// Guard authenticates and authorizes API requests.
type Guard struct {
	o        Options
	authn    authenticator.Request
	authz    authorizer.Authorizer
	clientCA *dynamiccertificates.DynamicFileCAContent
	*reloads
}

// ErrUnauthenticated means the request carries no credentials (and anonymous access is off) or invalid ones.
var ErrUnauthenticated = errors.New("unauthenticated")

// Unauthenticated is the user of ModeNone: every request, allowed everything.
var Unauthenticated user.Info = &user.DefaultInfo{Name: "anonymous (auth: none)", Groups: []string{user.AllUnauthenticated}}

// New builds the Guard. In ModeKubernetes it prepares (but does not call) the hub's review APIs.
func New(o Options) (*Guard, error) {
	g := &Guard{o: o, reloads: newReloads(o.Registry, o.Log)}
	if o.Mode == ModeNone {
		return g, nil
	}
	if o.Mode != ModeKubernetes {
		return nil, fmt.Errorf("auth mode %q (kubernetes, none)", o.Mode)
	}
	cfg := rest.CopyConfig(o.Hub)
	cfg.Timeout = reviewTimeout
	cs, err := kubernetes.NewForConfig(cfg)
	if err != nil {
		return nil, fmt.Errorf("auth: hub client: %w", err)
	}
	ac := authenticatorfactory.DelegatingAuthenticatorConfig{
		Anonymous:                &apiserverapi.AnonymousAuthConfig{Enabled: o.Anonymous},
		TokenAccessReviewClient:  cs.AuthenticationV1(),
		TokenAccessReviewTimeout: reviewTimeout,
		WebhookRetryBackoff:      retryBackoff(),
		CacheTTL:                 TokenCacheTTL,
	}
	if o.ClientCAFile != "" {
		ca, err := dynamiccertificates.NewDynamicCAContentFromFile("client-ca", o.ClientCAFile)
		if err != nil {
			return nil, fmt.Errorf("config: clientCAFile: %w", err)
		}
		g.clientCA = ca
		ac.ClientCertificateCAContentProvider = ca
	}
	if g.authn, err = authenticatorFor(ac, o.APIAudiences, o.AcceptHubTokens); err != nil {
		return nil, fmt.Errorf("auth: %w", err)
	}
	zc := authorizerfactory.DelegatingAuthorizerConfig{
		SubjectAccessReviewClient: cs.AuthorizationV1(),
		AllowCacheTTL:             AllowCacheTTL,
		DenyCacheTTL:              DenyCacheTTL,
		WebhookRetryBackoff:       retryBackoff(),
	}
	if g.authz, err = zc.New(); err != nil {
		return nil, fmt.Errorf("auth: %w", err)
	}
	return g, nil
}

// authenticatorFor builds the delegating authenticator. With audiences, its TokenReviews ask for this service's
// audiences; with acceptHub too, it is two authenticators tried in turn: that one (which checks client
// certificates), then one for tokens of the hub's own audience (which falls back to anonymous when configured) —
// so a token bound to this service and a token for the hub are both accepted, and any other token is refused by
// both. As in an API server's authentication filter, the audiences a TokenReview asks for are those of the
// request's context.
func authenticatorFor(ac authenticatorfactory.DelegatingAuthenticatorConfig, audiences []string, acceptHub bool) (authenticator.Request, error) {
	if len(audiences) == 0 {
		a, _, err := ac.New()
		return a, err
	}
	bound := ac
	bound.APIAudiences = audiences
	if !acceptHub {
		only, _, err := bound.New()
		if err != nil {
			return nil, err
		}
		return authenticator.RequestFunc(func(r *http.Request) (*authenticator.Response, bool, error) {
			return only.AuthenticateRequest(r.WithContext(authenticator.WithAudiences(r.Context(), audiences)))
		}), nil
	}
	bound.Anonymous = nil
	hubOnly := ac
	hubOnly.ClientCertificateCAContentProvider = nil
	first, _, err := bound.New()
	if err != nil {
		return nil, err
	}
	second, _, err := hubOnly.New()
	if err != nil {
		return nil, err
	}
	withAudiences := authenticator.RequestFunc(func(r *http.Request) (*authenticator.Response, bool, error) {
		return first.AuthenticateRequest(r.WithContext(authenticator.WithAudiences(r.Context(), audiences)))
	})
	return union.New(withAudiences, second), nil
}

// Options are the options the guard was built with.
func (g *Guard) Options() Options { return g.o }

// Mode is the authentication mode.
func (g *Guard) Mode() string { return g.o.Mode }

// ClientCA is the dynamic client CA (nil without clientCAFile), for the TLS handshake.
func (g *Guard) ClientCA() dynamiccertificates.CAContentProvider {
	if g.clientCA == nil {
		return nil
	}
	return g.clientCA
}

// Run keeps the client CA current until ctx ends (a no-op without one).
func (g *Guard) Run(ctx context.Context) {
	if g.clientCA == nil {
		return
	}
	if err := g.clientCA.RunOnce(ctx); err != nil {
		_ = err // the file was read by New; a failure here keeps the last good bundle
	}
	go g.watch(ctx, "client-ca", g.clientCA.RunOnce)
	g.clientCA.Run(ctx, 1)
}

// Authenticate returns the caller. ErrUnauthenticated means 401; any other error means the hub could not be asked
// (503). The error never contains the credential.
func (g *Guard) Authenticate(r *http.Request) (user.Info, error) {
	if g.o.Mode == ModeNone {
		return Unauthenticated, nil
	}
	resp, ok, err := g.authn.AuthenticateRequest(r)
	switch {
	case err != nil && isUnavailable(err):
		return nil, fmt.Errorf("authentication unavailable: %w", err)
	case err != nil || !ok:
		return nil, ErrUnauthenticated
	}
	return resp.User, nil
}

// isUnavailable tells a failed TokenReview call (the hub did not answer, or refused the SP itself) from a
// rejected credential: the library reports an invalid token as "invalid bearer token" and an untrusted client
// certificate as a verification error; anything else means the review could not be made.
func isUnavailable(err error) bool {
	msg := err.Error()
	for _, rejected := range []string{"invalid bearer token", "verifying certificate", "x509:"} {
		if strings.Contains(msg, rejected) {
			return false
		}
	}
	return true
}

// Action is what a request asks to do to clusters.
type Action struct {
	Verb        string // create, get, list, patch, delete
	Subresource string // "" or "kubeconfig"
	Name        string // instance id, when the request names one
}

// Authorize asks the hub's RBAC (through a cached SubjectAccessReview) whether u may do a. An error means the
// hub could not be asked.
func (g *Guard) Authorize(ctx context.Context, u user.Info, a Action) (bool, error) {
	if g.o.Mode == ModeNone {
		return true, nil
	}
	d, _, err := g.authz.Authorize(ctx, authorizer.AttributesRecord{
		User: u, Verb: a.Verb, Namespace: g.o.Namespace, APIGroup: g.o.APIGroup, APIVersion: APIVersion,
		Resource: Resource, Subresource: a.Subresource, Name: a.Name, ResourceRequest: true,
	})
	if err != nil && d != authorizer.DecisionAllow {
		return false, fmt.Errorf("authorization unavailable: %w", err)
	}
	return d == authorizer.DecisionAllow, nil
}

// AuthorizePath asks whether u may `verb` the non-resource URL path (e.g. get /metrics).
func (g *Guard) AuthorizePath(ctx context.Context, u user.Info, verb, path string) (bool, error) {
	if g.o.Mode == ModeNone {
		return true, nil
	}
	d, _, err := g.authz.Authorize(ctx, authorizer.AttributesRecord{User: u, Verb: verb, Path: path, ResourceRequest: false})
	if err != nil && d != authorizer.DecisionAllow {
		return false, fmt.Errorf("authorization unavailable: %w", err)
	}
	return d == authorizer.DecisionAllow, nil
}
