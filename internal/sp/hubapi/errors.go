// Package hubapi holds what the SP knows of the hub's API apart from any connection to it: the kinds it handles as
// unstructured objects, and the classification of the API server's failures and refusals as domain errors. The hub
// adapter and the services that write through a client share it.
package hubapi

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"syscall"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/runtime/schema"

	"github.com/dcm-sp/acm-cluster-sp/internal/sp/clusters"
)

// GroupVersionKinds of the kinds handled as unstructured objects.
var (
	ClusterImageSetGVK       = schema.GroupVersionKind{Group: "hive.openshift.io", Version: "v1", Kind: "ClusterImageSet"}
	AgentGVK                 = schema.GroupVersionKind{Group: "agent-install.openshift.io", Version: "v1beta1", Kind: "Agent"}
	InfraEnvGVK              = schema.GroupVersionKind{Group: "agent-install.openshift.io", Version: "v1beta1", Kind: "InfraEnv"}
	KlusterletAddonConfigGVK = schema.GroupVersionKind{Group: "agent.open-cluster-management.io", Version: "v1", Kind: "KlusterletAddonConfig"}
	VirtualMachineGVK        = schema.GroupVersionKind{Group: "kubevirt.io", Version: "v1", Kind: "VirtualMachine"}
)

// Failure classifies an unexpected failure of a hub call as a domain error: a deadline or an unreachable hub
// becomes a 504 or 503 with a message that says so (never the hub's address), everything else a 500 whose details
// stay in the log.
func Failure(err error, format string, args ...any) *clusters.Error {
	msg := fmt.Sprintf(format, args...)
	switch {
	case errors.Is(err, context.DeadlineExceeded) || apierrors.IsTimeout(err) || apierrors.IsServerTimeout(err):
		return &clusters.Error{Kind: clusters.KindTimeout, Message: msg + ": the hub did not answer in time; retry", Err: err}
	case apierrors.IsTooManyRequests(err) || apierrors.IsServiceUnavailable(err) || isConnectionError(err):
		return &clusters.Error{Kind: clusters.KindUnavailable, Message: msg + ": the hub is unavailable; retry", Err: err}
	case apierrors.IsInternalError(err):
		return &clusters.Error{Kind: clusters.KindUnavailable, Message: msg + ": the hub answered an internal error; retry", Err: err}
	case apierrors.IsConflict(err):
		return &clusters.Error{Kind: clusters.KindUnavailable, Message: msg + ": the object changed meanwhile; retry", Err: err}
	case errors.Is(err, context.Canceled):
		return &clusters.Error{Kind: clusters.KindUnavailable, Message: msg + ": cancelled, the SP is stopping; retry", Err: err}
	}
	return &clusters.Error{Kind: clusters.KindInternal, Message: msg, Err: err}
}

// isConnectionError reports a failure to reach the hub at all.
func isConnectionError(err error) bool {
	var op *net.OpError
	return errors.As(err, &op) || errors.Is(err, syscall.ECONNREFUSED) || errors.Is(err, syscall.ECONNRESET) ||
		errors.Is(err, io.EOF) || errors.Is(err, io.ErrUnexpectedEOF)
}

// Rejected turns the hub's refusal of a rendered object (422 Invalid, or an admission policy's denial) into a 422
// whose fields are the request's where the hub's causes can be traced back (clusters.RequestField).
func Rejected(err error, kind, name string) *clusters.Error {
	var fields []clusters.FieldError
	if se, ok := err.(apierrors.APIStatus); ok || errors.As(err, &se) {
		if d := se.Status().Details; d != nil {
			for _, c := range d.Causes {
				if c.Field == "" {
					continue // an admission policy's message: already in the detail
				}
				fields = append(fields, clusters.FieldError{Field: clusters.RequestField(kind, c.Field), Message: c.Message})
			}
		}
	}
	msg := fmt.Sprintf("the hub refused %s %s", kind, name)
	if se, ok := err.(apierrors.APIStatus); ok && se.Status().Message != "" {
		msg += ": " + se.Status().Message
	}
	return &clusters.Error{Kind: clusters.KindUnprocessable, Message: msg, Fields: fields, Err: err}
}
