package proxy

import (
	"net"

	"k8s.io/client-go/rest"
)

// InClusterDir is where a Pod's service-account volume is mounted (client-go's in-cluster config reads it).
const InClusterDir = "/var/run/secrets/kubernetes.io/serviceaccount"

// InClusterCA is kube-apiserver as a Pod sees it, with no credentials: the kubelet's KUBERNETES_SERVICE_HOST and
// KUBERNETES_SERVICE_PORT (from getenv) and the cluster's CA at InClusterDir/ca.crt (file maps a path in the
// container to where it can be read; the identity in a container). client-go's in-cluster config needs the Pod's
// token too; in passthrough mode the proxy forwards its callers' tokens and has no use for one, so a sidecar
// mounts only the CA.
func InClusterCA(getenv func(string) string, file func(string) string) (*rest.Config, error) {
	host, port := getenv("KUBERNETES_SERVICE_HOST"), getenv("KUBERNETES_SERVICE_PORT")
	if host == "" || port == "" {
		return nil, rest.ErrNotInCluster
	}
	return &rest.Config{
		Host:            "https://" + net.JoinHostPort(host, port),
		TLSClientConfig: rest.TLSClientConfig{CAFile: file(InClusterDir + "/ca.crt")},
	}, nil
}
