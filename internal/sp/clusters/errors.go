package clusters

import (
	"errors"
	"fmt"
	"strings"
)

// Kind classifies a domain error; the HTTP layer maps each kind to one status code and problem type.
type Kind int

// The error kinds, each with the HTTP status it is answered with (as an RFC 7807 problem document).
const (
	KindInternal      Kind = iota // 500: details only in logs
	KindInvalid                   // 400
	KindNotFound                  // 404
	KindConflict                  // 409
	KindUnprocessable             // 422
	KindUnavailable               // 503
	KindTimeout                   // 504: the hub did not answer within the request's deadline
	KindPrecondition              // 412: If-Match does not match the current ETag
)

// Reasons refine a kind's problem type where one HTTP status covers several causes (409 of an update).
const (
	ReasonAborted            = "ABORTED"             // another operation is in progress
	ReasonFailedPrecondition = "FAILED_PRECONDITION" // the cluster's state does not allow the change
)

// String names a kind (for logs and audit lines).
func (k Kind) String() string {
	switch k {
	case KindInvalid:
		return "invalid"
	case KindNotFound:
		return "not-found"
	case KindConflict:
		return "conflict"
	case KindUnprocessable:
		return "unprocessable"
	case KindUnavailable:
		return "unavailable"
	case KindTimeout:
		return "timeout"
	case KindPrecondition:
		return "precondition"
	default:
		return "internal"
	}
}

// FieldError names one offending input field.
type FieldError struct {
	Field   string // e.g. spec.nodes.workers.count
	Message string // e.g. must be at least 1
}

// Error is a domain error with a kind, a user-facing message and, for invalid input, the fields at fault.
type Error struct {
	Kind    Kind
	Reason  string // the problem type when it is not the kind's default (Reason* constants)
	Message string
	Fields  []FieldError
	Err     error // the cause, for logs only; never shown to clients
}

func (e *Error) Error() string {
	if e.Err != nil {
		return e.Message + ": " + e.Err.Error()
	}
	return e.Message
}

func (e *Error) Unwrap() error { return e.Err }

// Invalid is a 400 with a message.
func Invalid(format string, args ...any) *Error {
	return &Error{Kind: KindInvalid, Message: fmt.Sprintf(format, args...)}
}

// InvalidFields is a 400 naming each offending field.
func InvalidFields(fields []FieldError) *Error {
	msgs := make([]string, len(fields))
	for i, f := range fields {
		msgs[i] = f.Field + ": " + f.Message
	}
	return &Error{Kind: KindInvalid, Message: strings.Join(msgs, "; "), Fields: fields}
}

// NotFound is a 404.
func NotFound(format string, args ...any) *Error {
	return &Error{Kind: KindNotFound, Message: fmt.Sprintf(format, args...)}
}

// Conflict is a 409.
func Conflict(format string, args ...any) *Error {
	return &Error{Kind: KindConflict, Message: fmt.Sprintf(format, args...)}
}

// PreconditionFailed is a 412.
func PreconditionFailed(format string, args ...any) *Error {
	return &Error{Kind: KindPrecondition, Reason: ReasonFailedPrecondition, Message: fmt.Sprintf(format, args...)}
}

// Unprocessable is a 422: well-formed, but not provisionable here.
func Unprocessable(format string, args ...any) *Error {
	return &Error{Kind: KindUnprocessable, Message: fmt.Sprintf(format, args...)}
}

// Unavailable is a 503: retry shortly.
func Unavailable(format string, args ...any) *Error {
	return &Error{Kind: KindUnavailable, Message: fmt.Sprintf(format, args...)}
}

// internal is an unexpected failure inside the domain (a 500 whose details stay in the log).
func internal(err error, format string, args ...any) *Error {
	return &Error{Kind: KindInternal, Message: fmt.Sprintf(format, args...), Err: err}
}

// KindOf returns the kind of err (KindInternal for errors that are not domain errors).
func KindOf(err error) Kind {
	var e *Error
	if errors.As(err, &e) {
		return e.Kind
	}
	return KindInternal
}

// requestFields maps paths of the rendered objects back to the request fields they come from, so that a rejection
// by the hub (CRD schema, CEL rule, admission policy) names what the caller can change.
var requestFields = []struct{ prefix, field string }{
	{"metadata.name", "spec.metadata.name"},
	{"spec.dns.baseDomain", "spec.provider_hints.acm.base_domain"},
	{"spec.replicas", "spec.nodes.workers.count"},
	{"spec.platform.kubevirt.compute.cores", "spec.nodes.workers.cpu"},
	{"spec.platform.kubevirt.compute.memory", "spec.nodes.workers.memory"},
	{"spec.platform.kubevirt.rootVolume", "spec.nodes.workers.storage"},
	{"spec.platform.agent.agentLabelSelector", "spec.provider_hints.acm.agent_labels"},
	{"spec.release", "spec.version"},
}

// RequestField names the request field a path of a rendered object of kind comes from, and "<kind>.<path>" where
// it cannot be traced back.
func RequestField(kind, path string) string {
	for _, m := range requestFields {
		if path == m.prefix || strings.HasPrefix(path, m.prefix+".") || strings.HasPrefix(path, m.prefix+"[") {
			return m.field
		}
	}
	return kind + "." + path
}
