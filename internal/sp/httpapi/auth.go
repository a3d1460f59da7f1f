package httpapi

import (
	"context"
	"errors"
	"log/slog"
	"net/http"

	"github.com/go-chi/chi/v5"
	"k8s.io/apiserver/pkg/authentication/user"

	"github.com/dcm-sp/acm-cluster-sp/internal/sp/clusters"
	"github.com/dcm-sp/acm-cluster-sp/internal/sp/security"
)

// Guard decides who is calling and what they may do (internal/sp/security implements it).
type Guard interface {
	Authenticate(r *http.Request) (user.Info, error)
	Authorize(ctx context.Context, u user.Info, a security.Action) (bool, error)
	AuthorizePath(ctx context.Context, u user.Info, verb, path string) (bool, error)
}

// openPaths answer reads without credentials: DCM polls health unauthenticated and kubelets probe /livez and
// /readyz. They reveal no URL, host name or credential (see internal/sp/health).
var openPaths = map[string]bool{
	"/livez": true, "/readyz": true,
	"/health": true, "/api/v1alpha1/health": true, "/api/v1alpha1/clusters/health": true,
}

// isOpen is the one place that decides whether a request skips authentication and authorization: a GET or HEAD of
// an open path spelled exactly as the route is (the escaped path, as the router matches it — a decoded path would
// let /api/v1alpha1/clusters/%68ealth through as "…/health" and route it to {clusterId}). Any other method on an open
// path is authenticated like every API call, so an anonymous caller learns nothing about it.
func isOpen(r *http.Request) bool {
	return (r.Method == http.MethodGet || r.Method == http.MethodHead) && openPaths[r.URL.EscapedPath()]
}

// routeVerbs is the one place that maps an API operation to its authorization verb. An operation of the OpenAPI
// document that is neither open nor listed here is refused (TestEveryOperationHasAnAuthorizationRule).
var routeVerbs = map[string]map[string]string{
	"/api/v1alpha1/clusters":             {http.MethodPost: "create", http.MethodGet: "list"},
	"/api/v1alpha1/clusters/{clusterId}": {http.MethodGet: "get", http.MethodPatch: "patch", http.MethodDelete: "delete"},
}

type callerKey struct{}

// caller is who sent a request, and from where (authenticate puts it in the request's context).
type caller struct {
	user   user.Info
	remote string
}

// userFrom returns the authenticated caller of a request (nil for an open path).
func userFrom(ctx context.Context) user.Info {
	if c, _ := ctx.Value(callerKey{}).(*caller); c != nil {
		return c.user
	}
	return nil
}

// remoteFrom returns the address an authenticated request came from.
func remoteFrom(ctx context.Context) string {
	if c, _ := ctx.Value(callerKey{}).(*caller); c != nil {
		return c.remote
	}
	return ""
}

// authenticate runs before routing: every request except the open paths must carry valid credentials (or be
// anonymous when that is configured). The answer never echoes the credential nor names a realm. An authenticated
// request is bounded from here by requestTimeout, its hub calls included (authorization's as well): a hanging hub
// gives a 504, not a stuck handler. Caller and deadline go into the request's context (requestContext).
func (s *Server) authenticate(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if isOpen(r) {
			next.ServeHTTP(w, r)
			return
		}
		u, err := s.guard.Authenticate(r)
		switch {
		case errors.Is(err, security.ErrUnauthenticated):
			w.Header().Set("WWW-Authenticate", "Bearer")
			writeProblem(w, r, http.StatusUnauthorized, "authentication required: send a valid bearer token (Authorization: Bearer …) or a client certificate", nil)
			return
		case err != nil:
			s.log.Warn("authentication could not be checked", "error", err)
			w.Header().Set("Retry-After", "1")
			writeProblem(w, r, http.StatusServiceUnavailable, "authentication could not be checked with the hub just now; retry shortly", nil)
			return
		}
		requestContextOf(r.Context()).authenticated(caller{user: u, remote: r.RemoteAddr}, s.requestTimeout)
		next.ServeHTTP(w, r)
	})
}

// authorize runs after routing, for the API operations: the caller must be allowed the operation's verb on
// clusters (with the instance id as resource name where there is one).
func (s *Server) authorize(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if isOpen(r) {
			next.ServeHTTP(w, r)
			return
		}
		pattern := chi.RouteContext(r.Context()).RoutePattern()
		verb := routeVerbs[pattern][r.Method]
		if verb == "" {
			writeProblem(w, r, http.StatusForbidden, "no authorization rule for "+r.Method+" "+pattern, nil)
			return
		}
		name := chi.URLParam(r, "clusterId")
		if verb == "create" {
			name = createdID(r.URL.Query().Get("id"), r.Header.Get("Idempotency-Key"))
		}
		if !s.allowed(w, r, security.Action{Verb: verb, Name: name}) {
			return
		}
		next.ServeHTTP(w, r)
	})
}

// createdID is the instance id a create names: ?id=, else the id its Idempotency-Key derives ("" for an unkeyed
// create without ?id=, or a key the create will refuse as invalid), so that create is authorized on that id.
func createdID(id, key string) string {
	if id != "" || key == "" || clusters.CheckIdempotencyKey(key) != nil {
		return id
	}
	return clusters.KeyID(key)
}

// mayRead reports whether the caller may get cluster id. The answer to a keyed create that did not create the
// cluster — a replay with the cluster, a 409 for a deleted one, a 422 for another spec — tells that the cluster
// exists or existed: only a caller who may read it gets that answer.
func (s *Server) mayRead(ctx context.Context, id string) error {
	u := userFrom(ctx)
	ok, err := s.guard.Authorize(ctx, u, security.Action{Verb: "get", Name: id})
	switch {
	case err != nil:
		return clusters.Unavailable("authorization could not be checked with the hub just now; retry shortly")
	case !ok:
		return &forbidden{"user " + name(u) + " may not get clusters/" + id + ": a keyed create that does not create the cluster is answered only to a caller who may read it"}
	}
	return nil
}

// forbidden is a 403 decided by a handler (the middleware decides the others).
type forbidden struct{ detail string }

func (f *forbidden) Error() string { return f.detail }

func name(u user.Info) string {
	if u == nil {
		return ""
	}
	return u.GetName()
}

// allowed authorizes a and writes the 403 or 503 problem when it is not.
func (s *Server) allowed(w http.ResponseWriter, r *http.Request, a security.Action) bool {
	u := userFrom(r.Context())
	ok, err := s.guard.Authorize(r.Context(), u, a)
	if err != nil {
		s.log.Warn("authorization could not be checked", "error", err)
		w.Header().Set("Retry-After", "1")
		writeProblem(w, r, http.StatusServiceUnavailable, "authorization could not be checked with the hub just now; retry shortly", nil)
		return false
	}
	if !ok {
		target := "clusters"
		if a.Name != "" {
			target += "/" + a.Name
		}
		writeProblem(w, r, http.StatusForbidden, "user "+u.GetName()+" may not "+a.Verb+" "+target+" (grant it in the hub's RBAC: see the README's Security section)", nil)
		return false
	}
	return true
}

// protectMetrics requires get on the non-resource URL /metrics, as controller-runtime's and kube-rbac-proxy's
// metrics endpoints do.
func (s *Server) protectMetrics(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		u := userFrom(r.Context())
		ok, err := s.guard.AuthorizePath(r.Context(), u, "get", "/metrics")
		switch {
		case err != nil:
			w.Header().Set("Retry-After", "1")
			writeProblem(w, r, http.StatusServiceUnavailable, "authorization could not be checked with the hub just now; retry shortly", nil)
		case !ok:
			writeProblem(w, r, http.StatusForbidden, "user "+u.GetName()+" may not get /metrics", nil)
		default:
			next.ServeHTTP(w, r)
		}
	})
}

// kubeconfigVerdict says whether the caller may read one cluster's admin kubeconfig, and if not why
// (the value of kubeconfig_omitted).
func (s *Server) kubeconfigVerdict(ctx context.Context, id string) (bool, string) {
	ok, err := s.guard.Authorize(ctx, userFrom(ctx), security.Action{Verb: "get", Subresource: security.SubresourceKubecfg, Name: id})
	switch {
	case err != nil:
		s.log.Warn("kubeconfig authorization could not be checked; omitting it", "id", id, "error", err)
		return false, "authorization_unavailable"
	case !ok:
		return false, "forbidden"
	}
	return true, ""
}

// audit writes one structured line for a security-relevant action: who (user, groups), what, which instance, from
// where. Never the kubeconfig, never a credential.
func (s *Server) audit(ctx context.Context, action, id string, attrs ...any) {
	u := userFrom(ctx)
	name, groups := "", []string(nil)
	if u != nil {
		name, groups = u.GetName(), u.GetGroups()
	}
	remote := remoteFrom(ctx)
	s.audits.LogAttrs(ctx, slog.LevelInfo, "audit", append([]slog.Attr{
		slog.String("action", action), slog.String("user", name), slog.Any("groups", groups),
		slog.String("id", id), slog.String("remote", remote)}, argsToAttrs(attrs)...)...)
}

func argsToAttrs(args []any) []slog.Attr {
	var out []slog.Attr
	for i := 0; i+1 < len(args); i += 2 {
		if k, ok := args[i].(string); ok {
			out = append(out, slog.Any(k, args[i+1]))
		}
	}
	return out
}
