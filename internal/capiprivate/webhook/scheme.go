//lint:file-ignore SA1019 the deprecated v1beta1 (and ipam v1alpha1) API packages are what this webhook serves.

// Package webhook is capi-private's CRD conversion webhook (docs/capi-private.md): controller-runtime's
// conversion handler over a scheme that knows the upstream Cluster API types only under the private groups, so
// kube-apiserver converts the private CRDs with upstream's own converters. Nothing is renamed and nothing is
// converted by hand.
package webhook

import (
	"fmt"
	"sort"
	"strings"

	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	ibmv1beta1 "sigs.k8s.io/cluster-api-provider-ibmcloud/api/v1beta1"
	ibmv1beta2 "sigs.k8s.io/cluster-api-provider-ibmcloud/api/v1beta2"
	addonsv1beta1 "sigs.k8s.io/cluster-api/api/addons/v1beta1"
	addonsv1beta2 "sigs.k8s.io/cluster-api/api/addons/v1beta2"
	clusterv1beta1 "sigs.k8s.io/cluster-api/api/core/v1beta1"
	clusterv1 "sigs.k8s.io/cluster-api/api/core/v1beta2"
	ipamv1alpha1 "sigs.k8s.io/cluster-api/api/ipam/v1alpha1"
	ipamv1beta1 "sigs.k8s.io/cluster-api/api/ipam/v1beta1"
	ipamv1beta2 "sigs.k8s.io/cluster-api/api/ipam/v1beta2"
	"sigs.k8s.io/controller-runtime/pkg/conversion"

	"github.com/dcm-sp/acm-cluster-sp/internal/capiprivate/groups"
)

// Private groups of the converted kinds, from the one group table (groups.Default).
var (
	InfrastructureGroup = groups.Default.MustPrivate(ibmv1beta2.GroupVersion.Group)
	CoreGroup           = groups.Default.MustPrivate(clusterv1.GroupVersion.Group)
	AddonsGroup         = groups.Default.MustPrivate(addonsv1beta2.GroupVersion.Group)
	IPAMGroup           = groups.Default.MustPrivate(ipamv1beta2.GroupVersion.Group)
)

// upstreamAddToScheme registers every served version of the converted kinds: core Cluster API (v1.13.4 serves
// ipam v1alpha1 too) and the one infrastructure provider whose private CRDs serve several versions, CAPIBM
// v0.13.1 (v1beta1 and v1beta2; its converters are built on Cluster API v1.12 and link here against v1.13). The other providers
// serve a single version at the versions HyperShift pins, so their private CRDs need no conversion.
var upstreamAddToScheme = []func(*runtime.Scheme) error{
	clusterv1beta1.AddToScheme, clusterv1.AddToScheme,
	addonsv1beta1.AddToScheme, addonsv1beta2.AddToScheme,
	ipamv1alpha1.AddToScheme, ipamv1beta1.AddToScheme, ipamv1beta2.AddToScheme,
	ibmv1beta1.AddToScheme, ibmv1beta2.AddToScheme,
}

// NewScheme returns the private scheme: the upstream api/core, api/addons and api/ipam kinds and CAPIBM's, in every served
// version, registered only under their private GVKs (Scheme.AddKnownTypeWithName), each Go type exactly once
// (controller-runtime's conversion finds a kind's versions through the type's one GVK). Only the kinds that
// convert (a conversion.Hub or conversion.Convertible) are registered: no lists, no option types, and no kind
// served in a single version (CAPIBM's IBMVPCClusterTemplate is neither a hub nor convertible).
func NewScheme() (*runtime.Scheme, error) {
	upstream := runtime.NewScheme()
	for _, add := range upstreamAddToScheme {
		if err := add(upstream); err != nil {
			return nil, err
		}
	}
	known := upstream.AllKnownTypes()
	gvks := make([]schema.GroupVersionKind, 0, len(known))
	for gvk := range known {
		gvks = append(gvks, gvk)
	}
	sort.Slice(gvks, func(i, j int) bool { return gvks[i].String() < gvks[j].String() })

	s := runtime.NewScheme()
	for _, gvk := range gvks {
		group, ok := groups.Default.ToPrivate(gvk.Group)
		if !ok {
			continue
		}
		obj, err := upstream.New(gvk)
		if err != nil {
			return nil, err
		}
		_, hub := obj.(conversion.Hub)
		_, spoke := obj.(conversion.Convertible)
		if !hub && !spoke || strings.HasSuffix(gvk.Kind, "List") { // CAPIBM's lists convert too; CRDs never ask
			continue
		}
		private := schema.GroupVersionKind{Group: group, Version: gvk.Version, Kind: gvk.Kind}
		if kinds, _, err := s.ObjectKinds(obj); err == nil {
			return nil, fmt.Errorf("%T is registered twice: as %v and %v", obj, kinds, private)
		}
		s.AddKnownTypeWithName(private, obj)
	}
	return s, nil
}
