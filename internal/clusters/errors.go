package clusters

import (
	"errors"
	"fmt"
	"strings"
)

// Kind classifies a domain error; the HTTP layer maps each kind to one status code and problem type.
type Kind int

// The error kinds (dcm-contract.md §6, error catalogue).
const (
	KindInternal      Kind = iota // 500: details only in logs
	KindInvalid                   // 400
	KindNotFound                  // 404
	KindConflict                  // 409
	KindUnprocessable             // 422
	KindUnavailable               // 503
)

// FieldError names one offending input field.
type FieldError struct {
	Field   string // e.g. spec.nodes.workers.count
	Message string // e.g. must be at least 1
}

// Error is a domain error with a kind, a user-facing message and, for invalid input, the fields at fault.
type Error struct {
	Kind    Kind
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

func invalid(format string, args ...any) *Error {
	return &Error{Kind: KindInvalid, Message: fmt.Sprintf(format, args...)}
}

func invalidFields(fields []FieldError) *Error {
	msgs := make([]string, len(fields))
	for i, f := range fields {
		msgs[i] = f.Field + ": " + f.Message
	}
	return &Error{Kind: KindInvalid, Message: strings.Join(msgs, "; "), Fields: fields}
}

func notFound(format string, args ...any) *Error {
	return &Error{Kind: KindNotFound, Message: fmt.Sprintf(format, args...)}
}

func conflict(format string, args ...any) *Error {
	return &Error{Kind: KindConflict, Message: fmt.Sprintf(format, args...)}
}

func unprocessable(format string, args ...any) *Error {
	return &Error{Kind: KindUnprocessable, Message: fmt.Sprintf(format, args...)}
}

func unavailable(format string, args ...any) *Error {
	return &Error{Kind: KindUnavailable, Message: fmt.Sprintf(format, args...)}
}

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
