package cli

import (
	"errors"
	"fmt"
	"log/slog"
	"net"
	"os"

	"github.com/go-logr/logr"
	"github.com/spf13/cobra"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/client-go/rest"
	ctrl "sigs.k8s.io/controller-runtime"

	"github.com/dcm-sp/acm-cluster-sp/internal/capiprivate/inject"
	"github.com/dcm-sp/acm-cluster-sp/internal/capiprivate/rbacmirror"
)

func newInjectCommand() *cobra.Command {
	var o inject.RunOptions
	var kubeconfig, operatorSelector, cpuRequest, memRequest, memLimit string
	var reroutes []string
	o.Config = inject.DefaultConfig("")
	o.Policy = inject.DefaultCertPolicy
	cmd := &cobra.Command{
		Use:   "inject",
		Short: "Serve the Pod admission webhook that adds the proxy sidecar to HyperShift's CAPI components of private clusters, and keep their namespaces' loopback certificates",
		Long: "Serves the mutating webhook (" + inject.Path + " over HTTPS) that injects the capi-private proxy as a native sidecar " +
			"into the Pods of the configured components in the hosted control plane namespaces of private HostedClusters (decided " +
			"from each namespace's HostedCluster) and of the operator in namespaces labelled " + inject.MarkerLabel + "=" + inject.MarkerValue +
			", and runs the controller that keeps the Secret " + inject.LoopbackSecret + " (loopback CA and the sidecar's serving " +
			"certificate) current in each of those namespaces. See docs/capi-private.md, \"Sidecar injection\".",
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if err := injectConfig(&o.Config, operatorSelector, reroutes, cpuRequest, memRequest, memLimit); err != nil {
				return err
			}
			var err error
			if o.Kube, o.Log, err = controllerSetup(cmd, kubeconfig); err != nil {
				return err
			}
			o.Ready = func(w, m net.Addr) {
				fmt.Fprintf(cmd.OutOrStdout(), "capi-private inject serving %s on %s, metrics on %s\n", inject.Path, w, m)
			}
			return inject.Run(cmd.Context(), o)
		},
	}
	f := cmd.Flags()
	f.StringVar(&kubeconfig, "kubeconfig", "", "kubeconfig file (default: $KUBECONFIG, ~/.kube/config, then in-cluster)")
	f.StringVar(&o.Listen, "listen", podListen(os.Getenv(PodIPEnv), 9443), "HTTPS address of the webhook ("+inject.Path+", /healthz) (default: $"+PodIPEnv+":9443, else loopback)")
	f.StringVar(&o.CertFile, "tls-cert-file", "", "serving certificate (PEM) of the webhook, reloaded when it changes (required)")
	f.StringVar(&o.KeyFile, "tls-private-key-file", "", "serving key (PEM) of the webhook, reloaded when it changes (required)")
	f.StringVar(&o.MetricsListen, "metrics-listen", inject.DefaultMetricsListen, "HTTP address of /metrics, /healthz and /readyz")
	f.BoolVar(&o.LeaderElection, "leader-elect", true, "elect one certificate controller (Lease "+inject.LeaderElectionID+"); every replica serves the webhook")
	f.StringVar(&o.LeaderElectionNamespace, "leader-election-namespace", "", "namespace of the leader election Lease")
	f.StringVar(&o.KeyNamespace, "key-namespace", inject.DefaultKeyNamespace, "existing namespace where the loopback CAs' private keys are kept (the injector's own: never a tenant's)")
	f.StringVar(&o.Config.Image, "proxy-image", "", "image of the sidecar, running capi-private (required)")
	f.StringSliceVar(&o.Config.Command, "proxy-command", inject.DefaultCommand, "command that runs capi-private in --proxy-image")
	f.StringVar((*string)(&o.Config.ImagePullPolicy), "proxy-image-pull-policy", string(corev1.PullIfNotPresent), "the sidecar's imagePullPolicy")
	f.Int32Var(&o.Config.Port, "proxy-port", inject.DefaultPort, "the sidecar's HTTPS port on 127.0.0.1 (what rerouted containers connect to)")
	f.Int32Var(&o.Config.HealthPort, "proxy-health-port", inject.DefaultHealthPort, "the sidecar's /metrics, /healthz and /readyz port (probed by the kubelet)")
	f.StringVar(&cpuRequest, "proxy-cpu-request", "10m", "the sidecar's CPU request")
	f.StringVar(&memRequest, "proxy-memory-request", "32Mi", "the sidecar's memory request")
	f.StringVar(&memLimit, "proxy-memory-limit", "256Mi", "the sidecar's memory limit (empty: none)")
	f.StringVar(&o.Config.ComponentLabel, "component-label", inject.DefaultComponentLabel, "Pod label whose value names a control plane component")
	f.StringArrayVar(&reroutes, "reroute", nil, "COMPONENT=CONTAINER[,CONTAINER...]: containers rerouted in that component's Pods; repeat for each component (replaces the built-in table of HyperShift's components)")
	f.StringVar(&operatorSelector, "operator-selector", inject.DefaultOperatorSelector, "label selector of the HyperShift operator's Pods (empty: none)")
	f.StringSliceVar(&o.Config.OperatorContainers, "operator-containers", o.Config.OperatorContainers, "containers rerouted in the operator's Pods")
	f.DurationVar(&o.Policy.CAValidity, "loopback-ca-validity", o.Policy.CAValidity, "lifetime of each namespace's loopback CA (rotated with a third left)")
	f.DurationVar(&o.Policy.CertValidity, "loopback-cert-validity", o.Policy.CertValidity, "lifetime of the sidecar's serving certificate (renewed with a third left)")
	return cmd
}

// controllerSetup loads the kubeconfig and sets controller-runtime's logger to one writing to the command's stderr.
func controllerSetup(cmd *cobra.Command, kubeconfig string) (*rest.Config, logr.Logger, error) {
	cfg, err := restConfig(kubeconfig)
	if err != nil {
		return nil, logr.Logger{}, err
	}
	log := logr.FromSlogHandler(slog.NewTextHandler(cmd.ErrOrStderr(), nil))
	ctrl.SetLogger(log)
	return cfg, log, nil
}

// applyReroutes replaces c's component table with the --reroute flags (if any).
func applyReroutes(c *inject.Config, reroutes []string) error {
	if len(reroutes) == 0 {
		return nil
	}
	c.Reroutes = map[string][]string{}
	for _, r := range reroutes {
		comp, containers, err := inject.ParseReroute(r)
		if err != nil {
			return fmt.Errorf("--reroute %w", err)
		}
		c.Reroutes[comp] = containers
	}
	return nil
}

// injectConfig applies the flags that need parsing to c.
func injectConfig(c *inject.Config, operatorSelector string, reroutes []string, cpuRequest, memRequest, memLimit string) error {
	if err := applyReroutes(c, reroutes); err != nil {
		return err
	}
	sel, err := labels.Parse(operatorSelector)
	if err != nil {
		return fmt.Errorf("--operator-selector: %w", err)
	}
	c.OperatorSelector = sel
	res := corev1.ResourceRequirements{Requests: corev1.ResourceList{}, Limits: corev1.ResourceList{}}
	for _, q := range []struct {
		list corev1.ResourceList
		name corev1.ResourceName
		v    string
	}{{res.Requests, corev1.ResourceCPU, cpuRequest}, {res.Requests, corev1.ResourceMemory, memRequest}, {res.Limits, corev1.ResourceMemory, memLimit}} {
		if q.v == "" {
			continue
		}
		v, err := resource.ParseQuantity(q.v)
		if err != nil {
			return fmt.Errorf("sidecar %s %q: %w", q.name, q.v, err)
		}
		q.list[q.name] = v
	}
	c.Resources = res
	if c.Image == "" {
		return errors.New("--proxy-image is required")
	}
	return c.Validate()
}

func newRBACMirrorCommand() *cobra.Command {
	var o rbacmirror.RunOptions
	var kubeconfig, nsSelector string
	cmd := &cobra.Command{
		Use:   "rbac-mirror",
		Short: "Give HyperShift's Roles and ClusterRoles that grant standard CAPI groups a twin on the private groups",
		Long: "For every Role (in namespaces --namespace-selector selects) and every ClusterRole named by --cluster-roles that grants a " +
			"standard Cluster API group, writes a twin named " + rbacmirror.TwinPrefix + "<name> granting the same on the private groups, and " +
			"a twin of each binding of it; twins are owned by their originals and kept in step. Needs every verb on the private groups " +
			"(never escalate or bind: kube-apiserver lets it write only twins it could grant itself). See docs/capi-private.md, \"RBAC for the private groups\".",
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			sel, err := labels.Parse(nsSelector)
			if err != nil {
				return fmt.Errorf("--namespace-selector: %w", err)
			}
			o.NamespaceSelector = sel
			if o.Kube, o.Log, err = controllerSetup(cmd, kubeconfig); err != nil {
				return err
			}
			o.Ready = func(m net.Addr) {
				fmt.Fprintf(cmd.OutOrStdout(), "capi-private rbac-mirror running, metrics on %s\n", m)
			}
			return rbacmirror.Run(cmd.Context(), o)
		},
	}
	f := cmd.Flags()
	f.StringVar(&kubeconfig, "kubeconfig", "", "kubeconfig file (default: $KUBECONFIG, ~/.kube/config, then in-cluster)")
	f.StringVar(&nsSelector, "namespace-selector", rbacmirror.DefaultNamespaceSelector, "label selector of the namespaces whose Roles and RoleBindings are mirrored")
	f.StringSliceVar(&o.ClusterRoles, "cluster-roles", rbacmirror.DefaultClusterRoles, "ClusterRoles mirrored, with their ClusterRoleBindings")
	f.StringVar(&o.MetricsListen, "metrics-listen", rbacmirror.DefaultMetricsListen, "HTTP address of /metrics, /healthz and /readyz")
	f.BoolVar(&o.LeaderElection, "leader-elect", true, "elect one mirror (Lease "+rbacmirror.LeaderElectionID+")")
	f.StringVar(&o.LeaderElectionNamespace, "leader-election-namespace", "", "namespace of the leader election Lease")
	return cmd
}
