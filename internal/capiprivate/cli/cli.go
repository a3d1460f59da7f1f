// Package cli is capi-private's command line: `crds generate|install`, `webhook`, `proxy`, `migrate [status]`,
// `inject` and `rbac-mirror`; `dev` is in package devcmd, linked only into cmd/capi-private-dev. Commands parse flags and call into the other capiprivate packages; they hold no
// product logic.
package cli

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/url"
	"os"
	"path/filepath"
	"strconv"
	"time"

	"github.com/spf13/cobra"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"
	"sigs.k8s.io/yaml"

	"github.com/dcm-sp/acm-cluster-sp/internal/buildinfo"
	"github.com/dcm-sp/acm-cluster-sp/internal/capiprivate/crds"
	"github.com/dcm-sp/acm-cluster-sp/internal/capiprivate/proxy"
	"github.com/dcm-sp/acm-cluster-sp/internal/capiprivate/webhook"
)

// Main runs the command line and returns the process exit code. Extra commands replace the commands of the same
// name: cmd/capi-private-dev adds the real `dev` (package devcmd), which the production binary does not link.
func Main(ctx context.Context, args []string, stdout, stderr io.Writer, extra ...*cobra.Command) int {
	root := newRoot(stdout, stderr)
	for _, c := range extra {
		for _, old := range root.Commands() {
			if old.Name() == c.Name() {
				root.RemoveCommand(old)
			}
		}
		root.AddCommand(c)
	}
	root.SetArgs(args)
	if err := root.ExecuteContext(ctx); err != nil {
		fmt.Fprintln(stderr, "error:", err)
		return 1
	}
	return 0
}

func newRoot(stdout, stderr io.Writer) *cobra.Command {
	root := &cobra.Command{
		Use:           "capi-private",
		Short:         "HyperShift's Cluster API objects in private API groups: CRDs, conversion webhook, group-renaming proxy, migration",
		Version:       buildinfo.Version(),
		SilenceUsage:  true,
		SilenceErrors: true,
	}
	root.SetOut(stdout)
	root.SetErr(stderr)
	root.AddCommand(newCRDsCommand(), newWebhookCommand(), newProxyCommand(), newMigrateCommand(), newInjectCommand(),
		newRBACMirrorCommand(), devNotInThisBuild())
	return root
}

// devNotInThisBuild stands for `dev`, which needs the test machinery (a local hub, upstream CAPI in-process) and
// therefore lives in a separate binary.
func devNotInThisBuild() *cobra.Command {
	return &cobra.Command{
		Use:   "dev",
		Short: "Everything on an embedded local hub (in bin/capi-private-dev: make run-capi)",
		RunE: func(*cobra.Command, []string) error {
			return errors.New("capi-private dev is not in this build: run `make run-capi` (bin/capi-private-dev, built from ./cmd/capi-private-dev with the dev machinery)")
		},
	}
}

// restConfig loads --kubeconfig, else $KUBECONFIG or ~/.kube/config, else the in-cluster config.
func restConfig(kubeconfig string) (*rest.Config, error) {
	rules := clientcmd.NewDefaultClientConfigLoadingRules()
	rules.ExplicitPath = kubeconfig
	return clientcmd.NewNonInteractiveDeferredLoadingClientConfig(rules, &clientcmd.ConfigOverrides{}).ClientConfig()
}

// upstream is kube-apiserver for the proxy: --upstream-kubeconfig, $KUBECONFIG, ~/.kube/config, then in-cluster. In
// passthrough mode inside a Pod (no kubeconfig named) that is proxy.InClusterCA: the address and the CA, no token,
// which the sidecar is not given.
func (p *proxyFlags) upstream() (*rest.Config, error) {
	if p.opts.Auth == proxy.AuthPassthrough && p.kubeconfig == "" && os.Getenv(clientcmd.RecommendedConfigPathEnvVar) == "" {
		if cfg, err := proxy.InClusterCA(os.Getenv, func(path string) string { return path }); err == nil {
			return cfg, nil
		}
	}
	return restConfig(p.kubeconfig)
}

// clientConfigFlags choose the conversion webhook client config of the private CRDs.
type clientConfigFlags struct {
	url, serviceNamespace, serviceName, caBundleFile string
	servicePort                                      int32
}

func (f *clientConfigFlags) register(cmd *cobra.Command) {
	cmd.Flags().StringVar(&f.url, "webhook-url", "", "reach the conversion webhook at this https URL instead of a Service")
	cmd.Flags().StringVar(&f.serviceNamespace, "webhook-service-namespace", crds.DefaultServiceNamespace, "namespace of the conversion webhook's Service")
	cmd.Flags().StringVar(&f.serviceName, "webhook-service-name", crds.DefaultServiceName, "name of the conversion webhook's Service")
	cmd.Flags().Int32Var(&f.servicePort, "webhook-service-port", 443, "port of the conversion webhook's Service")
	cmd.Flags().StringVar(&f.caBundleFile, "ca-bundle-file", "", "PEM file of the CA that signed the webhook's serving certificate (the caBundle)")
}

func (f *clientConfigFlags) clientConfig() (apiextensionsv1.WebhookClientConfig, error) {
	var cc apiextensionsv1.WebhookClientConfig
	if f.url != "" {
		cc.URL = &f.url
	} else {
		cc = crds.DefaultClientConfig()
		cc.Service.Namespace, cc.Service.Name, cc.Service.Port = f.serviceNamespace, f.serviceName, &f.servicePort
	}
	if f.caBundleFile != "" {
		ca, err := os.ReadFile(f.caBundleFile)
		if err != nil {
			return cc, err
		}
		cc.CABundle = ca
	}
	return cc, nil
}

func newCRDsCommand() *cobra.Command {
	cmd := &cobra.Command{Use: "crds", Short: "The private CustomResourceDefinitions"}
	cmd.AddCommand(newCRDsGenerateCommand(), newCRDsInstallCommand())
	return cmd
}

func newCRDsGenerateCommand() *cobra.Command {
	var gen clientConfigFlags
	var outDir string
	generate := &cobra.Command{
		Use:   "generate",
		Short: "Write the private CRDs (generated from the pinned upstream CRDs) as YAML, with the webhook client config",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			cc, err := gen.clientConfig()
			if err != nil {
				return err
			}
			if outDir == "" {
				out, err := crds.Manifests(cc)
				if err != nil {
					return err
				}
				_, err = cmd.OutOrStdout().Write(out)
				return err
			}
			n, err := writeCRDs(cc, outDir)
			if err != nil {
				return err
			}
			fmt.Fprintf(cmd.OutOrStdout(), "wrote %d CRDs to %s\n", n, outDir)
			return nil
		},
	}
	gen.register(generate)
	generate.Flags().StringVar(&outDir, "output-dir", "", "write one file per CRD into this directory instead of one YAML stream to stdout")
	return generate
}

// writeCRDs writes one YAML file per private CRD into dir and returns how many it wrote.
func writeCRDs(cc apiextensionsv1.WebhookClientConfig, dir string) (int, error) {
	all, err := crds.Private(cc)
	if err != nil {
		return 0, err
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return 0, err
	}
	for _, crd := range all {
		body, err := yaml.Marshal(crd.Object)
		if err != nil {
			return 0, err
		}
		if err := os.WriteFile(filepath.Join(dir, crds.FileName(crd.GetName())), body, 0o644); err != nil {
			return 0, err
		}
	}
	return len(all), nil
}

func newCRDsInstallCommand() *cobra.Command {
	var inst clientConfigFlags
	var kubeconfig, probeNamespace string
	var timeout time.Duration
	install := &cobra.Command{
		Use:   "install",
		Short: "Server-side apply the private CRDs, wait until they are Established and probe the conversion webhook",
		Long: "Server-side applies the private CRDs (field manager capi-private), waits until they are Established, then " +
			"creates a v1beta1 Machine with dryRun=All to prove the conversion webhook works. Only CRDs named " +
			"*" + crds.PrivateSuffix + " are written; CRDs are never deleted. A CRD annotated for a CA-bundle injector (" +
			crds.AnnotationInjectCABundle + ", " + crds.AnnotationInjectCAFrom + "...) keeps the injector's caBundle.",
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			cc, err := inst.clientConfig()
			if err != nil {
				return err
			}
			cfg, err := restConfig(kubeconfig)
			if err != nil {
				return err
			}
			c, err := crds.NewClient(cfg)
			if err != nil {
				return err
			}
			if err := crds.Install(cmd.Context(), c, crds.InstallOptions{ClientConfig: cc, ProbeNamespace: probeNamespace, Timeout: timeout}); err != nil {
				return err
			}
			fmt.Fprintln(cmd.OutOrStdout(), "private CRDs installed, Established, and converted by the webhook")
			return nil
		},
	}
	inst.register(install)
	install.Flags().StringVar(&kubeconfig, "kubeconfig", "", "kubeconfig file (default: $KUBECONFIG, ~/.kube/config, then in-cluster)")
	install.Flags().StringVar(&probeNamespace, "probe-namespace", "default", "existing namespace of the dry-run probe Machine")
	install.Flags().DurationVar(&timeout, "timeout", 2*time.Minute, "how long to wait for Established and for the probe")
	return install
}

func newWebhookCommand() *cobra.Command {
	var opts webhook.Options
	var kubeconfig string
	cmd := &cobra.Command{
		Use:   "webhook",
		Short: "Serve the conversion webhook of the private CRDs (" + webhook.ConvertPath + " over HTTPS)",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if opts.CertFile == "" || opts.KeyFile == "" {
				return errors.New("--tls-cert-file and --tls-private-key-file are required")
			}
			cfg, err := restConfig(kubeconfig)
			if err != nil {
				return err
			}
			opts.Config = cfg
			return webhook.Run(cmd.Context(), opts)
		},
	}
	cmd.Flags().StringVar(&opts.Listen, "listen", podListen(os.Getenv(PodIPEnv), 9443), "HTTPS address of "+webhook.ConvertPath+", /healthz and /readyz (default: $"+PodIPEnv+":9443, else loopback)")
	cmd.Flags().StringVar(&opts.CertFile, "tls-cert-file", "", "serving certificate (PEM), reloaded when it changes")
	cmd.Flags().StringVar(&opts.KeyFile, "tls-private-key-file", "", "serving key (PEM), reloaded when it changes")
	cmd.Flags().StringVar(&opts.MetricsListen, "metrics-listen", "127.0.0.1:9440", "plain HTTP address of /metrics, /healthz and /readyz (loopback unless set)")
	cmd.Flags().StringVar(&kubeconfig, "kubeconfig", "", "kubeconfig file (default: $KUBECONFIG, ~/.kube/config, then in-cluster); needs get, list, watch on CRDs")
	return cmd
}

// proxyFlags are the proxy command's flags.
type proxyFlags struct {
	opts                proxy.RunOptions
	kubeconfig, auth    string
	adm                 proxy.AdmissionRunOptions
	admUpstream         string
	listenFD, metricsFD int
	selfSignedDir       string
}

func newProxyCommand() *cobra.Command {
	var p proxyFlags
	cmd := &cobra.Command{
		Use:   "proxy",
		Short: "Loopback sidecar in front of kube-apiserver that renames API groups (standard for clients, private in storage)",
		Long: "Serves kube-apiserver's API with the Cluster API groups renamed: clients use the standard groups " +
			"(cluster.x-k8s.io, ...), kube-apiserver stores the private ones (cluster.hypershift.openshift.io, ...). " +
			"--auth passthrough (default) forwards each caller's bearer token, so RBAC and audit see the caller; " +
			"--auth own-identity (loopback only) uses the upstream kubeconfig's credentials. With --webhook-upstream, " +
			"it also serves CAPI's admission webhooks for the private groups over HTTPS on --webhook-listen.",
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error { return p.run(cmd) },
	}
	f := cmd.Flags()
	f.StringVar(&p.opts.Listen, "listen", proxy.DefaultListen, "address of the proxy (plain HTTP unless --tls-cert-file; a non-loopback address needs TLS)")
	f.StringVar(&p.opts.MetricsListen, "metrics-listen", proxy.DefaultMetricsListen, "HTTP address of /metrics, /healthz and /readyz")
	f.StringVar(&p.kubeconfig, "upstream-kubeconfig", "", "kubeconfig of kube-apiserver (default: $KUBECONFIG, ~/.kube/config, then in-cluster); its credentials are used only with --auth own-identity")
	f.StringVar(&p.auth, "auth", string(proxy.AuthPassthrough), "passthrough (forward each caller's bearer token) or own-identity (loopback only: the upstream kubeconfig's credentials)")
	f.StringVar(&p.opts.TLSCertFile, "tls-cert-file", "", "serving certificate (PEM) of the proxy, reloaded when it changes")
	f.StringVar(&p.opts.TLSKeyFile, "tls-private-key-file", "", "serving key (PEM) of the proxy, reloaded when it changes")
	f.StringVar(&p.selfSignedDir, "tls-self-signed-dir", "", "serve HTTPS on loopback with a throw-away CA written to DIR/ca.crt (for sidecar kubeconfigs: client-go sends no token to an http:// server)")
	f.IntVar(&p.listenFD, "listen-fd", -1, "serve the proxy on this inherited listening socket instead of --listen (socket activation: the socket outlives restarts)")
	f.StringVar((*string)(&p.opts.MetricsAuth), "metrics-auth", string(proxy.MetricsOpen), "who may read /metrics: none (whoever reaches --metrics-listen) or self-review (a bearer token kube-apiserver says may get /metrics; passthrough only)")
	f.IntVar(&p.metricsFD, "metrics-listen-fd", -1, "serve metrics on this inherited listening socket instead of --metrics-listen")
	f.DurationVar(&p.opts.ShutdownTimeout, "shutdown-timeout", 15*time.Second, "how long open requests may finish at shutdown (watches end at once)")
	f.StringVar(&p.admUpstream, "webhook-upstream", "", "https URL of CAPI's webhook server: serve the admission side for the private groups")
	f.StringVar(&p.adm.UpstreamCAFile, "webhook-upstream-ca-file", "", "CA (PEM) of CAPI's webhook server certificate")
	f.StringVar(&p.adm.Listen, "webhook-listen", podListen(os.Getenv(PodIPEnv), 9444), "HTTPS address of the admission side (default: $"+PodIPEnv+":9444, else loopback)")
	f.StringSliceVar(&p.adm.Paths, "webhook-paths", proxy.DefaultAdmissionPaths, "webhook paths the admission side forwards to --webhook-upstream (others are 404)")
	f.StringVar(&p.adm.CertFile, "webhook-tls-cert-file", "", "serving certificate (PEM) of the admission side")
	f.StringVar(&p.adm.KeyFile, "webhook-tls-private-key-file", "", "serving key (PEM) of the admission side")
	return cmd
}

// run checks the flags, resolves the listeners and the TLS material, and runs the proxy.
func (p *proxyFlags) run(cmd *cobra.Command) error {
	p.opts.Auth = proxy.AuthMode(p.auth)
	if p.opts.Auth != proxy.AuthPassthrough && p.opts.Auth != proxy.AuthOwnIdentity {
		return fmt.Errorf("--auth %q: passthrough or own-identity", p.auth)
	}
	var err error
	if p.opts.Listener, err = inheritedListener(p.listenFD); err != nil {
		return err
	}
	if p.opts.MetricsListener, err = inheritedListener(p.metricsFD); err != nil {
		return err
	}
	addr := p.opts.Listen
	if p.opts.Listener != nil {
		addr = p.opts.Listener.Addr().String()
	}
	if p.selfSignedDir != "" {
		if p.opts.TLSCertFile != "" || p.opts.TLSKeyFile != "" {
			return errors.New("--tls-self-signed-dir replaces --tls-cert-file/--tls-private-key-file: give one or the other")
		}
		if err := proxy.CheckListen(addr, proxy.AuthOwnIdentity, false); err != nil {
			return errors.New("--tls-self-signed-dir is for a loopback listen address only")
		}
		if _, p.opts.TLSCertFile, p.opts.TLSKeyFile, err = proxy.SelfSignedLoopback(p.selfSignedDir); err != nil {
			return err
		}
	}
	if err := proxy.CheckListen(addr, p.opts.Auth, p.opts.TLSCertFile != "" && p.opts.TLSKeyFile != ""); err != nil {
		return err
	}
	if p.admUpstream != "" {
		u, err := url.Parse(p.admUpstream)
		if err != nil || u.Scheme != "https" || u.Host == "" {
			return fmt.Errorf("--webhook-upstream %q: an https URL", p.admUpstream)
		}
		p.adm.Upstream = u
		p.opts.Admission = &p.adm
	}
	cfg, err := p.upstream()
	if err != nil {
		return err
	}
	p.opts.Upstream = cfg
	p.opts.Logger = slog.New(slog.NewTextHandler(cmd.ErrOrStderr(), nil))
	p.opts.Ready = func(served, m, a net.Addr) {
		msg := fmt.Sprintf("capi-private proxy serving on %s (auth %s), metrics on %s", served, p.opts.Auth, m)
		if a != nil {
			msg += fmt.Sprintf(", admission on %s", a)
		}
		fmt.Fprintln(cmd.OutOrStdout(), msg)
	}
	return proxy.Run(cmd.Context(), p.opts)
}

// inheritedListener is the listening socket at file descriptor fd (none for fd < 0).
func inheritedListener(fd int) (net.Listener, error) {
	if fd < 0 {
		return nil, nil
	}
	f := os.NewFile(uintptr(fd), fmt.Sprintf("listener-%d", fd))
	if f == nil {
		return nil, fmt.Errorf("file descriptor %d is not open", fd)
	}
	defer f.Close()
	l, err := net.FileListener(f)
	if err != nil {
		return nil, fmt.Errorf("file descriptor %d: %w", fd, err)
	}
	return l, nil
}

// PodIPEnv names the environment variable holding the pod's IP (the downward API's status.podIP).
const PodIPEnv = "POD_IP"

// podListen is the default address of a listener other pods must reach (the conversion webhook, the proxy's
// admission side): the pod's IP and port, so it never listens on every interface. Without a usable pod IP it is
// loopback, which fails closed: nothing outside the pod reaches it until POD_IP or the flag is set.
func podListen(podIP string, port int) string {
	ip := net.ParseIP(podIP)
	if ip == nil || ip.IsUnspecified() {
		ip = net.IPv4(127, 0, 0, 1)
	}
	return net.JoinHostPort(ip.String(), strconv.Itoa(port))
}
