package health

import (
	"context"
	"fmt"
	"time"

	"github.com/dcm-sp/acm-cluster-sp/internal/sp/hub"
	"github.com/dcm-sp/acm-cluster-sp/internal/sp/redact"
)

// HubCheck passes when the last background discovery reached the hub's API server recently and every cache the
// API needs has synced.
func HubCheck(h *hub.Hub, staleAfter time.Duration) Check {
	return Check{Name: "hub", Run: func(context.Context) (bool, string) {
		d := h.LastDiscovery()
		switch {
		case d.At.IsZero():
			return false, "API server not contacted yet"
		case d.Err != nil:
			return false, "API server unreachable: " + redact.Cause(d.Err)
		case time.Since(d.At) > staleAfter:
			return false, fmt.Sprintf("no answer from the API server for %s", time.Since(d.At).Round(time.Second))
		case !h.Synced():
			return false, "API server reachable, caches not synced yet"
		}
		return true, fmt.Sprintf("API server reachable, caches synced (%d clusters)", h.Index().Len())
	}}
}

// HyperShiftCheck passes when the HostedCluster and NodePool APIs are served and the operator Deployment is
// Available.
func HyperShiftCheck(h *hub.Hub, namespace string) Check {
	return Check{Name: "hypershift", Run: func(ctx context.Context) (bool, string) {
		if !h.Serves(hub.APIHyperShift) {
			return false, "HostedCluster/NodePool APIs (hypershift.openshift.io/v1beta1) not served"
		}
		available, found := h.OperatorAvailable(ctx)
		switch {
		case !found:
			return false, fmt.Sprintf("operator Deployment %s/operator not found", namespace)
		case !available:
			return false, fmt.Sprintf("operator Deployment %s/operator not Available", namespace)
		}
		msg := "operator Available"
		if v, ok := h.SupportedVersions(ctx); ok && len(v) > 0 {
			msg += fmt.Sprintf("; supports OpenShift %s–%s", v[len(v)-1], v[0])
		}
		return true, msg
	}}
}

// PlatformCheck reports one platform: healthy while it is not enabled (with the reason), and, once enabled,
// healthy only while its APIs are served and cached.
func PlatformCheck(name string, state func(context.Context) (enabled, ok bool, message string)) Check {
	return Check{Name: name, Run: func(ctx context.Context) (bool, string) {
		enabled, ok, msg := state(ctx)
		if !enabled {
			return true, "not enabled: " + msg
		}
		return ok, msg
	}}
}

// InformationalCheck wraps a status function (NATS connection, registration) as a check that never decides the
// overall status.
func InformationalCheck(name string, f func() (bool, string)) Check {
	return Check{Name: name, Informational: true, Run: func(context.Context) (bool, string) { return f() }}
}
