package injecttest

import (
	"context"
	"net"
	"time"

	"github.com/go-logr/logr"
	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
	corev1 "k8s.io/api/core/v1"
	schedulingv1 "k8s.io/api/scheduling/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/rest"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/dcm-sp/acm-cluster-sp/internal/capiprivate/inject"
)

// InjectorOptions configure StartInjector.
type InjectorOptions struct {
	// Registration names the MutatingWebhookConfiguration.
	Registration string
	// Kube is the injector's identity; CertFile and KeyFile its serving key pair for 127.0.0.1, CA the caBundle.
	Kube              *rest.Config
	CertFile, KeyFile string
	CA                []byte
	Config            inject.Config
	// NamespaceLabels are added to both webhooks' namespaceSelector (tests keep registrations apart with them).
	NamespaceLabels map[string]string
	// Now is the certificate controller's clock (default time.Now).
	Now func() time.Time
	// LeaderElectionNamespace, when set, elects the certificate controller on a Lease there, as deployed.
	LeaderElectionNamespace string
	// KeyNamespace keeps the loopback CAs' keys (inject.DefaultKeyNamespace, created when missing as the install
	// creates it).
	KeyNamespace string
	Log          logr.Logger
}

// Injector is `capi-private inject` running in this process (inject.Run) on loopback listeners it holds, with its
// MutatingWebhookConfiguration registered on the hub.
type Injector struct {
	Config          inject.Config
	URL, MetricsURL string
	cancel          context.CancelFunc
	exited          chan struct{}
	err             error
}

// StartInjector runs the injector and registers it with c. It does not wait for kube-apiserver to use the
// registration: see WaitEffective.
func StartInjector(ctx context.Context, c client.Client, o InjectorOptions) (*Injector, error) {
	if o.KeyNamespace == "" {
		o.KeyNamespace = inject.DefaultKeyNamespace
	}
	if err := c.Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: o.KeyNamespace}}); client.IgnoreAlreadyExists(err) != nil {
		return nil, err
	}
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return nil, err
	}
	ml, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		_ = l.Close()
		return nil, err
	}
	runCtx, cancel := context.WithCancel(context.Background())
	in := &Injector{Config: o.Config, URL: "https://" + l.Addr().String() + inject.Path, MetricsURL: "http://" + ml.Addr().String(),
		cancel: cancel, exited: make(chan struct{})}
	go func() {
		defer close(in.exited)
		in.err = inject.Run(runCtx, inject.RunOptions{
			Config: in.Config, Policy: inject.DefaultCertPolicy, Kube: o.Kube,
			CertFile: o.CertFile, KeyFile: o.KeyFile, Listener: l, MetricsListener: ml,
			Now: o.Now, Log: o.Log, SkipNameValidation: true,
			LeaderElection: o.LeaderElectionNamespace != "", LeaderElectionNamespace: o.LeaderElectionNamespace,
			KeyNamespace: o.KeyNamespace,
		})
	}()
	wh := inject.WebhookConfiguration(o.Registration, &in.Config, admissionregistrationv1.WebhookClientConfig{URL: &in.URL, CABundle: o.CA})
	for i := range wh.Webhooks {
		for k, v := range o.NamespaceLabels {
			wh.Webhooks[i].NamespaceSelector.MatchLabels[k] = v
		}
	}
	if err := c.Create(ctx, wh); err != nil {
		_ = in.Stop()
		return nil, err
	}
	return in, nil
}

// Exited is closed once the injector has returned.
func (in *Injector) Exited() <-chan struct{} { return in.exited }

// Stop stops the injector (its registration stays) and returns what Run returned.
func (in *Injector) Stop() error {
	in.cancel()
	<-in.exited
	return in.err
}

// StartInstalled runs the injector as installed: registered (as "capi-private-inject"), and waits until
// kube-apiserver sends it Pods, proved by injecting HyperShift's operator Pod in a probe namespace marked as the
// private operator's install marks its own. The hub needs ServiceAccount admission (the Pod's projected kube-api-access volume).
// A switch's rollout goes through it.
func StartInstalled(ctx context.Context, c client.Client, o InjectorOptions) (*Injector, error) {
	o.Registration = "capi-private-inject"
	in, err := StartInjector(ctx, c, o)
	if err != nil {
		return nil, err
	}
	// The probe Pod is HyperShift's operator Pod; the control plane components' Pods name the other PriorityClass.
	for _, name := range []string{"hypershift-control-plane", "hypershift-operator"} {
		pc := &schedulingv1.PriorityClass{ObjectMeta: metav1.ObjectMeta{Name: name}, Value: 100000000}
		if err := c.Create(ctx, pc); err != nil && !apierrors.IsAlreadyExists(err) {
			_ = in.Stop()
			return nil, err
		}
	}
	probe := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: "inject-probe", Labels: map[string]string{inject.MarkerLabel: inject.MarkerValue}}}
	f, err := Load(Operator, probe.Name)
	if err == nil {
		err = c.Create(ctx, probe)
	}
	if err == nil {
		err = c.Create(ctx, f.ServiceAccount)
	}
	if err == nil {
		wctx, cancel := context.WithTimeout(ctx, time.Minute)
		defer cancel()
		err = WaitEffective(wctx, c, Operator, probe.Name, in.Exited())
	}
	if err != nil {
		_ = in.Stop()
		return nil, err
	}
	return in, nil
}
