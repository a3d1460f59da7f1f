package inject

import (
	"fmt"
	"strings"

	"github.com/dcm-sp/acm-cluster-sp/internal/capiprivate/migrate/plan"
)

// HostedControlPlaneLabel=true is on every hosted control plane namespace (plan.HostedControlPlaneLabel). The
// components webhook is scoped to these namespaces; RouteOf decides which of them are proxied.
const HostedControlPlaneLabel = plan.HostedControlPlaneLabel

// Route is how the control plane components of one hosted control plane namespace reach kube-apiserver.
type Route string

const (
	// Proxied: the private operator reconciles the namespace's HostedCluster; its components are injected.
	Proxied Route = "proxied"
	// Direct: the legacy operator (or another team's) reconciles it, or a migration has not switched it yet; its
	// components are admitted unchanged.
	Direct Route = "direct"
	// Unknown: not decidable yet (no HostedCluster, or one the classifier has not marked); its components are
	// refused, and the Deployment controller's retry admits them once it is decided. Admitting one unproxied could
	// make it write the standard groups for a private cluster; injecting one could cut a legacy cluster off its
	// objects.
	Unknown Route = "unknown"
)

// Owner is what the injector reads of a HostedCluster: its name and annotations.
type Owner struct {
	Namespace, Name string
	Annotations     map[string]string
}

// RouteDecision is RouteOf's answer, with why.
type RouteDecision struct {
	Route  Route
	Reason string
}

// RouteOf decides the route of the hosted control plane namespace ns (its labels) from the HostedClusters whose
// control plane namespace it is (owners; plan.ControlPlaneNamespace). The rule follows HyperShift's scoping,
// under which each HostedCluster has exactly one operator:
//   - no scope: the private (default) operator's, proxied once the classifier has marked it
//     (plan.PrivateTypesAnnotation, which a migration's commit also sets); before that a HostedCluster that
//     existed before the install may still be a legacy one, so it is Unknown;
//   - the lock (plan.ScopeMigrating): proxied only once the migrator's switch step marked the namespace
//     (MarkerLabel), direct before;
//   - legacy, or any other scope: direct, whatever the namespace's labels say (a rollback restores legacy).
func RouteOf(ns string, nsLabels map[string]string, owners []Owner) RouteDecision {
	if nsLabels[HostedControlPlaneLabel] != "true" {
		return RouteDecision{Direct, "not a hosted control plane namespace (no " + HostedControlPlaneLabel + "=true)"}
	}
	switch len(owners) {
	case 0:
		return RouteDecision{Unknown, "no HostedCluster has " + ns + " as its control plane namespace"}
	case 1:
	default:
		names := make([]string, len(owners))
		for i, o := range owners {
			names[i] = o.Namespace + "/" + o.Name
		}
		return RouteDecision{Unknown, "HostedClusters " + strings.Join(names, ", ") + " all have " + ns + " as their control plane namespace"}
	}
	o := owners[0]
	hc := o.Namespace + "/" + o.Name
	switch scope := o.Annotations[plan.ScopeAnnotation]; scope {
	case "":
		if o.Annotations[plan.PrivateTypesAnnotation] == "true" {
			return RouteDecision{Proxied, "HostedCluster " + hc + " is on the private types"}
		}
		return RouteDecision{Unknown, "HostedCluster " + hc + " is not classified yet (no " + plan.PrivateTypesAnnotation + ")"}
	case plan.ScopeMigrating:
		if nsLabels[MarkerLabel] == MarkerValue {
			return RouteDecision{Proxied, "HostedCluster " + hc + " is migrating and its components were switched to the proxy"}
		}
		return RouteDecision{Direct, "HostedCluster " + hc + " is migrating; its components are not switched yet"}
	default:
		return RouteDecision{Direct, fmt.Sprintf("HostedCluster %s has scope %q", hc, scope)}
	}
}
