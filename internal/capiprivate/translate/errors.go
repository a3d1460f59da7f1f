package translate

import (
	"errors"
	"fmt"
	"net/http"
)

// Reasons of translation failures: stable, low-cardinality values for the `reason` label of
// capi_private_proxy_translation_errors_total. Translation fails closed: the caller answers with an error
// (request: 400, 413 or 415; response: 502; watch: an ERROR event) and never forwards untranslated bytes.
const (
	ReasonInvalidJSON            = "invalid_json"             // not one well-formed JSON value
	ReasonTooDeep                = "too_deep"                 // nesting deeper than 10000
	ReasonTooLarge               = "too_large"                // a unit above the per-object cap
	ReasonInvalidJSONPatch       = "invalid_json_patch"       // a JSON patch that is not an array of operations
	ReasonInvalidYAML            = "invalid_yaml"             // an apply body that is neither YAML nor JSON
	ReasonInvalidProtobuf        = "invalid_protobuf"         // a protobuf body that does not decode
	ReasonUnsupportedMediaType   = "unsupported_media_type"   // CBOR, or protobuf of a type the client-go scheme lacks
	ReasonInvalidPath            = "invalid_path"             // a request path with empty, "." or ".." segments
	ReasonInvalidQuery           = "invalid_query"            // an unparsable query string or field selector
	ReasonInvalidDiscovery       = "invalid_discovery"        // a discovery document of unexpected shape
	ReasonInvalidOpenAPI         = "invalid_openapi"          // an OpenAPI document of unexpected shape
	ReasonInvalidWatchEvent      = "invalid_watch_event"      // a watch frame that is not a {type, object} event
	ReasonInvalidAdmissionReview = "invalid_admission_review" // an AdmissionReview that is not an object, or a patch that is not base64
)

// Error is a translation failure.
type Error struct {
	// Reason is one of the Reason constants.
	Reason string
	// Offset is the byte offset in the unit where the problem was found, or -1.
	Offset int
	// Err is the detail.
	Err error
}

func (e *Error) Error() string {
	if e.Offset >= 0 {
		return fmt.Sprintf("capi-private translation: %s at byte %d: %v", e.Reason, e.Offset, e.Err)
	}
	return fmt.Sprintf("capi-private translation: %s: %v", e.Reason, e.Err)
}

func (e *Error) Unwrap() error { return e.Err }

// RequestStatus is the HTTP status the proxy answers a request whose body failed with e: 415 for unsupported media
// types, 413 for oversized bodies, 400 otherwise. (Response failures are always 502.)
func (e *Error) RequestStatus() int {
	switch e.Reason {
	case ReasonUnsupportedMediaType:
		return http.StatusUnsupportedMediaType
	case ReasonTooLarge:
		return http.StatusRequestEntityTooLarge
	default:
		return http.StatusBadRequest
	}
}

// ReasonOf returns the Reason of err if it is (or wraps) an *Error, "" for nil and "internal" otherwise.
func ReasonOf(err error) string {
	if err == nil {
		return ""
	}
	var e *Error
	if errors.As(err, &e) {
		return e.Reason
	}
	return "internal"
}

func newError(reason string, offset int, format string, args ...any) *Error {
	return &Error{Reason: reason, Offset: offset, Err: fmt.Errorf(format, args...)}
}

func errSyntax(msg string, offset int) *Error {
	return &Error{Reason: ReasonInvalidJSON, Offset: offset, Err: errors.New(msg)}
}

func errDepth(offset int) *Error {
	return &Error{Reason: ReasonTooDeep, Offset: offset, Err: fmt.Errorf("nesting deeper than %d", maxDepth)}
}
