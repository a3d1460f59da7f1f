package devcmd

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"slices"
	"strings"
	"time"

	"github.com/go-logr/logr"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	schedulingv1 "k8s.io/api/scheduling/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/dcm-sp/acm-cluster-sp/internal/capiprivate/inject"
	migratecontroller "github.com/dcm-sp/acm-cluster-sp/internal/capiprivate/migrate/controller"
	"github.com/dcm-sp/acm-cluster-sp/internal/capiprivate/rbacmirror"
	"github.com/dcm-sp/acm-cluster-sp/internal/devtest/capi/capihub"
	"github.com/dcm-sp/acm-cluster-sp/internal/devtest/capi/injecttest"
)

// Names of the injection demo.
const (
	// OperatorNamespace is the private HyperShift operator's namespace (marked for injection).
	OperatorNamespace = "hypershift"
	// WebhookName is the MutatingWebhookConfiguration dev registers.
	WebhookName = "capi-private-inject"
	// recordedSuffix ends the names of the Pods dev creates from HyperShift's recorded Deployments.
	recordedSuffix = "-recorded"
	sidecarImage   = "capi-private:dev"
)

// injection is the sidecar injector and the RBAC mirror running in dev, and the Pods it admitted.
type injection struct {
	URL   string
	Pods  []*corev1.Pod
	Twins int
	stops []func() error
}

// startInjection runs `capi-private inject` and `capi-private rbac-mirror` in-process (the webhook over HTTPS with
// the hub's webhook key pair), registers the injector's webhooks, marks the private operator's namespace, and
// creates one Pod of each HyperShift component from its recorded Deployment, with the component's ServiceAccount,
// Role and binding.
func startInjection(ctx context.Context, env *capihub.Env, controlPlane string, log logr.Logger) (in *injection, err error) {
	in = &injection{}
	defer func() {
		if err != nil {
			_ = in.stop()
		}
	}()
	admin := env.TokenConfig(env.AdminToken)
	injector, err := injecttest.StartInjector(ctx, env.Client, injecttest.InjectorOptions{
		Registration: WebhookName, Kube: admin, Config: inject.DefaultConfig(sidecarImage), Log: log.WithName("inject"),
		CertFile: env.WebhookCertFile, KeyFile: env.WebhookKeyFile, CA: env.WebhookCA,
	})
	if err != nil {
		return nil, err
	}
	in.URL = injector.URL
	in.stops = append(in.stops, injector.Stop)
	mml, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return nil, err
	}
	in.run(func(ctx context.Context) error {
		return rbacmirror.Run(ctx, rbacmirror.RunOptions{Kube: admin, MetricsListener: mml, Log: log.WithName("rbac-mirror"), SkipNameValidation: true})
	})
	if err := prepareNamespaces(ctx, env.Client, controlPlane); err != nil {
		return nil, err
	}
	waitCtx, cancel := context.WithTimeout(ctx, time.Minute)
	defer cancel()
	if err := injecttest.WaitEffective(waitCtx, env.Client, "cluster-api", controlPlane, injector.Exited()); err != nil {
		return nil, err
	}
	if err := in.createPods(ctx, env.Client, controlPlane); err != nil {
		return nil, err
	}
	return in, in.countTwins(ctx, env.Client, controlPlane)
}

// run starts f until stop.
func (in *injection) run(f func(context.Context) error) {
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- f(ctx) }()
	in.stops = append(in.stops, func() error {
		cancel()
		select {
		case err := <-done:
			return err
		case <-time.After(15 * time.Second):
			return errors.New("did not stop within 15 s")
		}
	})
}

func (in *injection) stop() error {
	var errs []error
	for _, s := range slices.Backward(in.stops) {
		errs = append(errs, s())
	}
	return errors.Join(errs...)
}

// prepareNamespaces: HyperShift's PriorityClasses and the private operator's namespace, marked for injection as its
// install marks it. The demo control plane namespace is left as HyperShift made it: the injector decides it from
// its HostedCluster.
func prepareNamespaces(ctx context.Context, c client.Client, controlPlane string) error {
	for _, pc := range []string{"hypershift-control-plane", "hypershift-operator"} {
		if err := c.Create(ctx, &schedulingv1.PriorityClass{ObjectMeta: metav1.ObjectMeta{Name: pc}, Value: 100000000}); client.IgnoreAlreadyExists(err) != nil {
			return err
		}
	}
	op := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: OperatorNamespace, Labels: map[string]string{inject.MarkerLabel: inject.MarkerValue}}}
	if err := c.Create(ctx, op); client.IgnoreAlreadyExists(err) != nil {
		return err
	}
	// capi-private's own namespace: the migrator keeps its records there.
	own := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: migratecontroller.DefaultStateNamespace}}
	if err := c.Create(ctx, own); client.IgnoreAlreadyExists(err) != nil {
		return err
	}
	f, err := injecttest.Load("cluster-api", controlPlane)
	if err != nil {
		return err
	}
	return client.IgnoreAlreadyExists(c.Create(ctx, f.ServiceAccount))
}

// createPods writes each component's RBAC and creates its Pod from the recorded Deployment.
func (in *injection) createPods(ctx context.Context, c client.Client, controlPlane string) error {
	for _, comp := range append(slices.Clone(injecttest.ControlPlaneComponents), injecttest.Operator) {
		ns := controlPlane
		if comp == injecttest.Operator {
			ns = OperatorNamespace
		}
		f, err := injecttest.Load(comp, ns)
		if err != nil {
			return err
		}
		if err := f.CreateRBAC(ctx, c); err != nil {
			return err
		}
		pod := f.Pod(comp + recordedSuffix)
		if err := c.Create(ctx, pod); err != nil {
			return fmt.Errorf("creating the %s Pod: %w", comp, err)
		}
		if !inject.PodInjected(pod) {
			return fmt.Errorf("the %s Pod was admitted without the sidecar", comp)
		}
		in.Pods = append(in.Pods, pod)
	}
	return nil
}

// countTwins waits until the RBAC mirror has written the twins of every recorded Role and of the operator's
// ClusterRole, and counts the twins.
func (in *injection) countTwins(ctx context.Context, c client.Client, controlPlane string) error {
	want := len(injecttest.ControlPlaneComponents) + 1
	deadline := time.Now().Add(time.Minute)
	for {
		roles, croles := &rbacv1.RoleList{}, &rbacv1.ClusterRoleList{}
		sel := client.MatchingLabels{rbacmirror.TwinLabel: "true"}
		if err := c.List(ctx, roles, client.InNamespace(controlPlane), sel); err != nil {
			return err
		}
		if err := c.List(ctx, croles, sel); err != nil {
			return err
		}
		if in.Twins = len(roles.Items) + len(croles.Items); in.Twins >= want {
			return nil
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("the RBAC mirror wrote %d twins, want %d", in.Twins, want)
		}
		time.Sleep(100 * time.Millisecond)
	}
}

// print summarizes the injected Pods: which containers go through the sidecar.
func (in *injection) print(w io.Writer, kubectl string) {
	fmt.Fprintf(w, "\nSidecar injection (capi-private inject at %s; the components of private clusters' control planes, the operator in namespaces labelled %s=%s):\n", in.URL, inject.MarkerLabel, inject.MarkerValue)
	fmt.Fprintf(w, "  %-56s %-31s %-31s %s\n", "POD", "COMPONENT", "REROUTED TO THE SIDECAR", "LEFT ALONE")
	for _, p := range in.Pods {
		comp := p.Labels[inject.DefaultComponentLabel]
		if comp == "" {
			comp = inject.OperatorComponent
		}
		rerouted := strings.Split(p.Annotations[inject.ReroutedAnnotation], ",")
		var other []string
		for _, c := range append(slices.Clone(p.Spec.InitContainers), p.Spec.Containers...) {
			if c.Name != inject.SidecarName && !slices.Contains(rerouted, c.Name) {
				other = append(other, c.Name)
			}
		}
		fmt.Fprintf(w, "  %-56s %-31s %-31s %s\n", p.Namespace+"/"+p.Name, comp, strings.Join(rerouted, ","), orNone(other))
	}
	fmt.Fprintf(w, "  every one: init container %s (restartPolicy Always) serving 127.0.0.1:%d; rerouted containers get KUBERNETES_SERVICE_HOST/PORT and the volume %s (ca.crt from Secret %s)\n",
		inject.SidecarName, inject.DefaultPort, inject.APIAccessVolume, inject.LoopbackSecret)
	fmt.Fprintf(w, "  RBAC mirror: %d twins (%s<name>) of HyperShift's Roles and the operator's ClusterRole\n", in.Twins, rbacmirror.TwinPrefix)
	if len(in.Pods) > 0 {
		fmt.Fprintf(w, "  %s get pod -n %s %s -o yaml\n", kubectl, in.Pods[0].Namespace, in.Pods[0].Name)
	}
}

func orNone(s []string) string {
	if len(s) == 0 {
		return "-"
	}
	return strings.Join(s, ",")
}
