package httpapi

import (
	"fmt"
	"net/http"
	"sync"

	"github.com/getkin/kin-openapi/openapi3"
	"github.com/getkin/kin-openapi/openapi3filter"
	"github.com/getkin/kin-openapi/routers"
	"github.com/go-chi/chi/v5"
)

// validator checks an API request's parameters against the OpenAPI document with kin-openapi, after chi has routed
// it. A route of the document is found by chi's pattern, which is the document's path (both name parameters
// {likeThis}), so the request is not routed a second time. Bodies are decoded and checked by the strict handlers
// and the domain, and the operations' security requirements are not evaluated here: authentication and
// authorization are the SP's own and have already run. Defaults are not written into the request: the handlers
// and the domain apply them.
//
// The verdict on an operation whose parameters all sit in the path and the query depends on nothing else, so the
// requests found valid are remembered (validated) and a repeated one — DCM polls the same clusters — is not
// checked again.
type validator struct {
	routes    map[string]map[string]*route // by pattern ("/api/v1alpha1/clusters/{clusterId}") and method
	options   *openapi3filter.Options
	validated validated
}

// route is an operation of the document as kin-openapi validates it.
type route struct {
	*routers.Route
	remembered bool // its parameters are all in the path and the query: its verdicts may be remembered
}

func newValidator(spec *openapi3.T) (*validator, error) {
	v := &validator{routes: map[string]map[string]*route{}, options: &openapi3filter.Options{
		ExcludeRequestBody: true, ExcludeResponseBody: true, SkipSettingDefaults: true,
		AuthenticationFunc: openapi3filter.NoopAuthenticationFunc}}
	if spec.Paths == nil {
		return nil, fmt.Errorf("the OpenAPI document has no paths")
	}
	for path, item := range spec.Paths.Map() {
		v.routes[path] = map[string]*route{}
		for method, op := range item.Operations() {
			unsecured := *op
			unsecured.Security = &openapi3.SecurityRequirements{}
			v.routes[path][method] = &route{
				Route:      &routers.Route{Spec: spec, Path: path, PathItem: item, Method: method, Operation: &unsecured},
				remembered: pathAndQueryOnly(item.Parameters) && pathAndQueryOnly(op.Parameters),
			}
		}
	}
	return v, nil
}

// pathAndQueryOnly says whether every parameter is in the path or the query.
func pathAndQueryOnly(params openapi3.Parameters) bool {
	for _, p := range params {
		if p.Value == nil || p.Value.In != openapi3.ParameterInPath && p.Value.In != openapi3.ParameterInQuery {
			return false
		}
	}
	return true
}

// middleware answers 400 with kin-openapi's reason for a request whose parameters the document refuses.
func (v *validator) middleware(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		rctx := chi.RouteContext(r.Context())
		rt := v.routes[rctx.RoutePattern()][r.Method]
		if rt == nil {
			writeProblem(w, r, http.StatusNotFound, fmt.Sprintf("no route for %s %s", r.Method, r.URL.Path), nil)
			return
		}
		key := validKey{rt, r.URL.EscapedPath(), r.URL.RawQuery}
		if !rt.remembered || !v.validated.has(key) {
			if err := v.validate(r, rctx, rt); err != nil {
				writeProblem(w, r, http.StatusBadRequest, validationMessage(err), nil)
				return
			}
			if rt.remembered {
				v.validated.add(key)
			}
		}
		next.ServeHTTP(w, r)
	})
}

func (v *validator) validate(r *http.Request, rctx *chi.Context, rt *route) error {
	var params map[string]string
	if keys := rctx.URLParams.Keys; len(keys) > 0 {
		params = make(map[string]string, len(keys))
		for i, k := range keys {
			params[k] = rctx.URLParams.Values[i]
		}
	}
	return openapi3filter.ValidateRequest(r.Context(), &openapi3filter.RequestValidationInput{
		Request: r, PathParams: params, Route: rt.Route, Options: v.options})
}

// validKey is a request as its parameters' verdict depends on it: the operation, the escaped path (chi routes on
// it) and the query string.
type validKey struct {
	route       *route
	path, query string
}

// maxValidated bounds the requests remembered (a few MB at most): when full, the memory starts again empty, so a
// client sending ever new paths costs validations, never memory.
const maxValidated = 1 << 14

// validated is the set of requests found valid.
type validated struct {
	mu   sync.RWMutex
	keys map[validKey]struct{}
}

func (s *validated) has(k validKey) bool {
	s.mu.RLock()
	defer s.mu.RUnlock()
	_, ok := s.keys[k]
	return ok
}

func (s *validated) add(k validKey) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.keys == nil || len(s.keys) >= maxValidated {
		s.keys = make(map[validKey]struct{}, 256)
	}
	s.keys[k] = struct{}{}
}
