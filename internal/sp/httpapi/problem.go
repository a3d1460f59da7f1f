package httpapi

import (
	"context"
	"encoding/json"
	"errors"
	"net/http"
	"strings"

	"github.com/dcm-sp/acm-cluster-sp/internal/sp/clusters"
	"github.com/dcm-sp/acm-cluster-sp/pkg/api"
)

// problemKinds is the error catalogue (docs/dcm.md): one type and title per HTTP status.
var problemKinds = map[int][2]string{
	http.StatusBadRequest:            {"INVALID_ARGUMENT", "Bad Request"},
	http.StatusUnauthorized:          {"UNAUTHENTICATED", "Unauthorized"},
	http.StatusForbidden:             {"PERMISSION_DENIED", "Forbidden"},
	http.StatusNotFound:              {"NOT_FOUND", "Not Found"},
	http.StatusMethodNotAllowed:      {"METHOD_NOT_ALLOWED", "Method Not Allowed"},
	http.StatusConflict:              {"ALREADY_EXISTS", "Conflict"},
	http.StatusPreconditionFailed:    {"FAILED_PRECONDITION", "Precondition Failed"},
	http.StatusRequestEntityTooLarge: {"PAYLOAD_TOO_LARGE", "Payload Too Large"},
	http.StatusUnsupportedMediaType:  {"UNSUPPORTED_MEDIA_TYPE", "Unsupported Media Type"},
	http.StatusUnprocessableEntity:   {"UNPROCESSABLE_ENTITY", "Unprocessable Entity"},
	http.StatusInternalServerError:   {"INTERNAL", "Internal Server Error"},
	http.StatusServiceUnavailable:    {"UNAVAILABLE", "Service Unavailable"},
	http.StatusGatewayTimeout:        {"DEADLINE_EXCEEDED", "Gateway Timeout"},
}

// statusOf maps a domain error kind to its HTTP status.
func statusOf(k clusters.Kind) int {
	switch k {
	case clusters.KindInvalid:
		return http.StatusBadRequest
	case clusters.KindNotFound:
		return http.StatusNotFound
	case clusters.KindConflict:
		return http.StatusConflict
	case clusters.KindUnprocessable:
		return http.StatusUnprocessableEntity
	case clusters.KindUnavailable:
		return http.StatusServiceUnavailable
	case clusters.KindTimeout:
		return http.StatusGatewayTimeout
	case clusters.KindPrecondition:
		return http.StatusPreconditionFailed
	default:
		return http.StatusInternalServerError
	}
}

// writeProblem writes an RFC 7807 problem document.
func writeProblem(w http.ResponseWriter, r *http.Request, status int, detail string, fields []clusters.FieldError) {
	writeProblemType(w, r, status, "", detail, fields)
}

// writeProblemType writes a problem whose type refines the status's default (a domain error's Reason).
func writeProblemType(w http.ResponseWriter, r *http.Request, status int, typ, detail string, fields []clusters.FieldError) {
	kind := problemKinds[status]
	if kind[0] == "" {
		kind = [2]string{"INTERNAL", http.StatusText(status)}
	}
	if typ != "" {
		kind[0] = typ
	}
	if uris, _ := r.Context().Value(problemURIsKey{}).(bool); uris {
		kind[0] = ProblemTypeURI(kind[0])
	}
	code := int32(status)
	p := api.Problem{Type: kind[0], Title: kind[1], Status: &code, Instance: &r.URL.Path}
	if detail != "" {
		p.Detail = &detail
	}
	if len(fields) > 0 {
		v := make([]api.FieldViolation, len(fields))
		for i, f := range fields {
			v[i] = api.FieldViolation{Field: f.Field, Message: f.Message}
		}
		p.Errors = &v
	}
	w.Header().Set("Content-Type", "application/problem+json")
	w.Header().Set("X-Content-Type-Options", "nosniff")
	w.WriteHeader(status)
	_ = json.NewEncoder(w).Encode(p)
}

// writeError writes a domain error as a problem; internal errors are logged and never shown.
func (s *Server) writeError(w http.ResponseWriter, r *http.Request, err error) {
	var fb *forbidden
	if errors.As(err, &fb) {
		writeProblem(w, r, http.StatusForbidden, fb.detail, nil)
		return
	}
	var de *clusters.Error
	if !errors.As(err, &de) {
		de = s.unclassified(err) // e.g. a hub failure that was not classified where it happened
	}
	status := statusOf(de.Kind)
	if errors.Is(err, context.DeadlineExceeded) && status == http.StatusInternalServerError {
		status = http.StatusGatewayTimeout
		de = &clusters.Error{Kind: clusters.KindTimeout, Message: "the request did not finish within its deadline; retry", Err: err}
	}
	if errors.Is(err, context.Canceled) && status == http.StatusInternalServerError {
		status = http.StatusServiceUnavailable
		de = &clusters.Error{Kind: clusters.KindUnavailable, Message: "the request was cancelled: the SP is stopping; retry", Err: err}
	}
	if status == http.StatusServiceUnavailable || status == http.StatusGatewayTimeout {
		w.Header().Set("Retry-After", "1")
		if de.Err != nil {
			s.log.Warn("request failed", "method", r.Method, "path", r.URL.Path, "error", de.Err)
		}
	}
	if status == http.StatusInternalServerError {
		s.log.Error("request failed", "method", r.Method, "path", r.URL.Path, "error", err)
		writeProblem(w, r, status, "internal error", nil)
		return
	}
	writeProblemType(w, r, status, de.Reason, de.Message, de.Fields)
}

func jsonEncode(w http.ResponseWriter, v any) error { return json.NewEncoder(w).Encode(v) }

// ProblemTypeBase is where DCM's RFC 9457 problem types live.
const ProblemTypeBase = "https://dcm-project.github.io/problems/"

// ProblemTypeURI is the RFC 9457 type URI of a problem code, as DCM's APIs write it: the code in lower case with
// hyphens (INVALID_ARGUMENT → https://dcm-project.github.io/problems/invalid-argument).
func ProblemTypeURI(code string) string {
	return ProblemTypeBase + strings.ReplaceAll(strings.ToLower(code), "_", "-")
}

type problemURIsKey struct{}

// problemTypes makes every problem document of the request carry type URIs instead of codes (Options.ProblemTypeURIs).
// It runs first, so the problems of every later middleware and handler follow it.
func (s *Server) problemTypes(next http.Handler) http.Handler {
	if !s.problemURIs {
		return next
	}
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		next.ServeHTTP(w, r.WithContext(context.WithValue(r.Context(), problemURIsKey{}, true)))
	})
}
