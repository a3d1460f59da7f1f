package capipods

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/http"
	"time"

	"k8s.io/client-go/rest"

	"github.com/dcm-sp/acm-cluster-sp/internal/capiprivate/proxy"
)

// ProxyOptions configure StartProxy.
type ProxyOptions struct {
	// Upstream reaches kube-apiserver (its CA; passthrough ignores its credentials).
	Upstream *rest.Config
	// CertFile and KeyFile, when set, serve the proxy over HTTPS (kubectl and kubeconfig-based clients send their
	// token only to https servers); CA is then the PEM of the CA that signed them.
	CertFile, KeyFile string
	CA                []byte
}

// RunningProxy is a capi-private proxy (proxy.Run, passthrough auth) serving in this process on loopback
// listeners it keeps until Stop.
type RunningProxy struct {
	// URL of the proxy (http:// or https://127.0.0.1:<port>), MetricsURL of its /metrics.
	URL, MetricsURL string
	ca              []byte
	cancel          context.CancelFunc
	done            chan error
}

// StartProxy serves the proxy and waits until it answers /readyz.
func StartProxy(ctx context.Context, o ProxyOptions) (*RunningProxy, error) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return nil, err
	}
	ml, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		_ = l.Close()
		return nil, err
	}
	scheme := "http"
	if o.CertFile != "" {
		scheme = "https"
	}
	runCtx, cancel := context.WithCancel(context.Background())
	p := &RunningProxy{
		URL: scheme + "://" + l.Addr().String(), MetricsURL: "http://" + ml.Addr().String() + "/metrics",
		ca: o.CA, cancel: cancel, done: make(chan error, 1),
	}
	go func() {
		p.done <- proxy.Run(runCtx, proxy.RunOptions{
			Options:  proxy.Options{Upstream: o.Upstream, Auth: proxy.AuthPassthrough},
			Listener: l, MetricsListener: ml, TLSCertFile: o.CertFile, TLSKeyFile: o.KeyFile,
			ShutdownTimeout: 5 * time.Second,
		})
	}()
	ready := "http://" + ml.Addr().String() + "/readyz"
	for {
		req, _ := http.NewRequestWithContext(ctx, http.MethodGet, ready, nil)
		resp, err := http.DefaultClient.Do(req)
		if err == nil {
			_ = resp.Body.Close()
			if resp.StatusCode == http.StatusOK {
				return p, nil
			}
		}
		select {
		case err := <-p.done:
			cancel()
			return nil, fmt.Errorf("capi-private proxy exited: %w", err)
		case <-ctx.Done():
			_ = p.Stop()
			return nil, fmt.Errorf("capi-private proxy not ready: %w", ctx.Err())
		case <-time.After(50 * time.Millisecond):
		}
	}
}

// Config is a client config through the proxy that authenticates with a bearer token.
func (p *RunningProxy) Config(token string) *rest.Config {
	return &rest.Config{Host: p.URL, BearerToken: token, QPS: -1, TLSClientConfig: rest.TLSClientConfig{CAData: p.ca}}
}

// Stop stops the proxy (watches end at once) and waits until it has.
func (p *RunningProxy) Stop() error {
	p.cancel()
	err := <-p.done
	if errors.Is(err, http.ErrServerClosed) {
		err = nil
	}
	return err
}
