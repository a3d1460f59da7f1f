package hubtest

import (
	"context"
	"net"
	"os"
	"path/filepath"
	"testing"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/tools/clientcmd"
	clientcmdapi "k8s.io/client-go/tools/clientcmd/api"

	"github.com/dcm-sp/acm-cluster-sp/internal/capiprivate/proxy"
)

// runProxy serves a proxy on loopback listeners it keeps until the test ends, over HTTPS with the key pair given
// (none: plain HTTP), and returns its address.
func runProxy(t *testing.T, certFile, keyFile string) string {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	ml, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() {
		done <- proxy.Run(ctx, proxy.RunOptions{Options: proxy.Options{Upstream: env.Config, Auth: proxy.AuthPassthrough},
			Listener: l, MetricsListener: ml, TLSCertFile: certFile, TLSKeyFile: keyFile})
	}()
	t.Cleanup(func() { cancel(); <-done })
	return l.Addr().String()
}

// kubeconfigClient loads a kubeconfig the way kubectl and controller-runtime's GetConfig do.
func kubeconfigClient(t *testing.T, server, caFile, token string) dynamic.Interface {
	t.Helper()
	kc := clientcmdapi.NewConfig()
	kc.Clusters["proxy"] = &clientcmdapi.Cluster{Server: server, CertificateAuthority: caFile}
	kc.AuthInfos["sa"] = &clientcmdapi.AuthInfo{Token: token}
	kc.Contexts["proxy"] = &clientcmdapi.Context{Cluster: "proxy", AuthInfo: "sa"}
	kc.CurrentContext = "proxy"
	path := filepath.Join(t.TempDir(), "kubeconfig")
	if err := clientcmd.WriteToFile(*kc, path); err != nil {
		t.Fatal(err)
	}
	cfg, err := clientcmd.BuildConfigFromFlags("", path)
	if err != nil {
		t.Fatal(err)
	}
	cfg.Timeout = 30 * time.Second
	dc, err := dynamic.NewForConfig(cfg)
	if err != nil {
		t.Fatal(err)
	}
	return dc
}

// The sidecar contract: a component that loads its kubeconfig reaches the proxy with its token only over TLS
// (client-go drops a kubeconfig's credentials for an http:// server). --tls-self-signed-dir gives it that on
// loopback.
func TestSidecarKubeconfigOverSelfSignedTLS(t *testing.T) {
	dir := t.TempDir()
	caFile, certFile, keyFile, err := proxy.SelfSignedLoopback(dir)
	if err != nil {
		t.Fatal(err)
	}
	if st, err := os.Stat(keyFile); err != nil || st.Mode().Perm() != 0o600 {
		t.Fatalf("key file %v %v", st, err)
	}
	machines := schema.GroupVersionResource{Group: "cluster.x-k8s.io", Version: "v1beta2", Resource: "machines"}
	ns := env.NewNamespace(t, "sidecar")

	secure := kubeconfigClient(t, "https://"+runProxy(t, certFile, keyFile), caFile, env.AdminToken)
	if _, err := secure.Resource(machines).Namespace(ns).List(context.Background(), metav1.ListOptions{}); err != nil {
		t.Fatalf("through the self-signed loopback TLS: %v", err)
	}

	plain := kubeconfigClient(t, "http://"+runProxy(t, "", ""), "", env.AdminToken)
	_, err = plain.Resource(machines).Namespace(ns).List(context.Background(), metav1.ListOptions{})
	if !apierrors.IsUnauthorized(err) {
		t.Fatalf("a kubeconfig client over http:// sends no token, so the proxy must answer 401; got %v", err)
	}
}
