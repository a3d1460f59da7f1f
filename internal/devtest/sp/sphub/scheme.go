package sphub

import (
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	"k8s.io/apimachinery/pkg/runtime"
	utilruntime "k8s.io/apimachinery/pkg/util/runtime"

	sphub "github.com/dcm-sp/acm-cluster-sp/internal/sp/hub"
)

// Scheme is the product's scheme plus the CustomResourceDefinition kind sphub installs. The other kinds
// (ClusterImageSet, Agent, InfraEnv, KlusterletAddonConfig, KubeVirt) are handled as unstructured objects.
func Scheme() *runtime.Scheme {
	s := sphub.Scheme()
	utilruntime.Must(apiextensionsv1.AddToScheme(s))
	return s
}
