package clusters

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"strings"
	"syscall"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
)

// Kind classifies a domain error; the HTTP layer maps each kind to one status code and problem type.
type Kind int

// The error kinds (docs/dcm.md, error catalogue).
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

// Internal wraps an unexpected failure of a hub call; a deadline or an unreachable hub becomes a 504 or 503 with
// a message that says so (never the hub's address), everything else a 500 whose details stay in the log.
func Internal(err error, format string, args ...any) *Error {
	msg := fmt.Sprintf(format, args...)
	switch {
	case errors.Is(err, context.DeadlineExceeded) || apierrors.IsTimeout(err) || apierrors.IsServerTimeout(err):
		return &Error{Kind: KindTimeout, Message: msg + ": the hub did not answer in time; retry", Err: err}
	case apierrors.IsTooManyRequests(err) || apierrors.IsServiceUnavailable(err) || isConnectionError(err):
		return &Error{Kind: KindUnavailable, Message: msg + ": the hub is unavailable; retry", Err: err}
	case apierrors.IsInternalError(err):
		return &Error{Kind: KindUnavailable, Message: msg + ": the hub answered an internal error; retry", Err: err}
	case apierrors.IsConflict(err):
		return &Error{Kind: KindUnavailable, Message: msg + ": the object changed meanwhile; retry", Err: err}
	case errors.Is(err, context.Canceled):
		return &Error{Kind: KindUnavailable, Message: msg + ": cancelled, the SP is stopping; retry", Err: err}
	}
	return &Error{Kind: KindInternal, Message: msg, Err: err}
}

// isConnectionError reports a failure to reach the hub at all.
func isConnectionError(err error) bool {
	var op *net.OpError
	return errors.As(err, &op) || errors.Is(err, syscall.ECONNREFUSED) || errors.Is(err, syscall.ECONNRESET) ||
		errors.Is(err, io.EOF) || errors.Is(err, io.ErrUnexpectedEOF)
}

// KindOf returns the kind of err (KindInternal for errors that are not domain errors).
func KindOf(err error) Kind {
	var e *Error
	if errors.As(err, &e) {
		return e.Kind
	}
	return KindInternal
}

// hubFields maps paths of the rendered objects back to the request fields they come from, so that a rejection by
// the hub (CRD schema, CEL rule, admission policy) names what the caller can change.
var hubFields = []struct{ prefix, field string }{
	{"metadata.name", "spec.metadata.name"},
	{"spec.dns.baseDomain", "spec.provider_hints.acm.base_domain"},
	{"spec.replicas", "spec.nodes.workers.count"},
	{"spec.platform.kubevirt.compute.cores", "spec.nodes.workers.cpu"},
	{"spec.platform.kubevirt.compute.memory", "spec.nodes.workers.memory"},
	{"spec.platform.kubevirt.rootVolume", "spec.nodes.workers.storage"},
	{"spec.platform.agent.agentLabelSelector", "spec.provider_hints.acm.agent_labels"},
	{"spec.release", "spec.version"},
}

// HubRejected turns the hub's refusal of a rendered object (422 Invalid, or an admission policy's denial) into a
// 422 whose fields are the request's where the hub's causes can be traced back, and "<Kind>.<path>" otherwise.
func HubRejected(err error, kind, name string) *Error {
	var fields []FieldError
	if se, ok := err.(apierrors.APIStatus); ok || errors.As(err, &se) {
		if d := se.Status().Details; d != nil {
			for _, c := range d.Causes {
				f := c.Field
				if f == "" {
					continue // an admission policy's message: already in the detail
				}
				mapped := ""
				for _, m := range hubFields {
					if f == m.prefix || strings.HasPrefix(f, m.prefix+".") || strings.HasPrefix(f, m.prefix+"[") {
						mapped = m.field
						break
					}
				}
				if mapped == "" {
					mapped = kind + "." + f
				}
				fields = append(fields, FieldError{Field: mapped, Message: c.Message})
			}
		}
	}
	msg := fmt.Sprintf("the hub refused %s %s", kind, name)
	if se, ok := err.(apierrors.APIStatus); ok && se.Status().Message != "" {
		msg += ": " + se.Status().Message
	}
	return &Error{Kind: KindUnprocessable, Message: msg, Fields: fields, Err: err}
}
