package controller

import (
	hyperv1 "github.com/openshift/hypershift/api/hypershift/v1beta1"
	"k8s.io/apimachinery/pkg/runtime"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"
)

// Scheme is client-go's scheme plus HostedCluster and HostedControlPlane. Cluster API objects of either group set
// are handled as unstructured, so no CAPI type is registered (nothing here converts them).
func Scheme() *runtime.Scheme {
	s := runtime.NewScheme()
	if err := clientgoscheme.AddToScheme(s); err != nil {
		panic(err)
	}
	if err := hyperv1.AddToScheme(s); err != nil {
		panic(err)
	}
	return s
}
