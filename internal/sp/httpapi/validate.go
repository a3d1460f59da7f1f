package httpapi

import (
	"fmt"
	"net/http"

	"github.com/getkin/kin-openapi/openapi3"
	"github.com/getkin/kin-openapi/openapi3filter"
	"github.com/getkin/kin-openapi/routers"
	"github.com/go-chi/chi/v5"
)

// validator checks an API request's parameters against the OpenAPI document with kin-openapi, after chi has routed
// it. A route of the document is found by chi's pattern, which is the document's path (both name parameters
// {likeThis}), so the request is not routed a second time. Bodies are decoded and checked by the strict handlers
// and the domain, and the operations' security requirements are not evaluated here: authentication and
// authorization are the SP's own and have already run.
type validator struct {
	routes  map[string]map[string]*routers.Route // by pattern ("/api/v1alpha1/clusters/{clusterId}") and method
	options *openapi3filter.Options
}

func newValidator(spec *openapi3.T) (*validator, error) {
	v := &validator{routes: map[string]map[string]*routers.Route{}, options: &openapi3filter.Options{
		ExcludeRequestBody: true, ExcludeResponseBody: true, AuthenticationFunc: openapi3filter.NoopAuthenticationFunc}}
	if spec.Paths == nil {
		return nil, fmt.Errorf("the OpenAPI document has no paths")
	}
	for path, item := range spec.Paths.Map() {
		v.routes[path] = map[string]*routers.Route{}
		for method, op := range item.Operations() {
			unsecured := *op
			unsecured.Security = &openapi3.SecurityRequirements{}
			v.routes[path][method] = &routers.Route{Spec: spec, Path: path, PathItem: item, Method: method, Operation: &unsecured}
		}
	}
	return v, nil
}

// middleware answers 400 with kin-openapi's reason for a request whose parameters the document refuses.
func (v *validator) middleware(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		rctx := chi.RouteContext(r.Context())
		route := v.routes[rctx.RoutePattern()][r.Method]
		if route == nil {
			writeProblem(w, r, http.StatusNotFound, fmt.Sprintf("no route for %s %s", r.Method, r.URL.Path), nil)
			return
		}
		var params map[string]string
		if keys := rctx.URLParams.Keys; len(keys) > 0 {
			params = make(map[string]string, len(keys))
			for i, k := range keys {
				params[k] = rctx.URLParams.Values[i]
			}
		}
		err := openapi3filter.ValidateRequest(r.Context(), &openapi3filter.RequestValidationInput{
			Request: r, PathParams: params, Route: route, Options: v.options})
		if err != nil {
			writeProblem(w, r, http.StatusBadRequest, validationMessage(err), nil)
			return
		}
		next.ServeHTTP(w, r)
	})
}
