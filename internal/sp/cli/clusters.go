package cli

import (
	"bytes"
	"context"
	"crypto/x509"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"os"
	"strings"
	"time"

	"github.com/spf13/cobra"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"
	"sigs.k8s.io/yaml"

	"github.com/dcm-sp/acm-cluster-sp/internal/loopback"
	"github.com/dcm-sp/acm-cluster-sp/pkg/api"
	"github.com/dcm-sp/acm-cluster-sp/pkg/client"
)

// DefaultServer is the API the client commands talk to when neither --server nor SP_SERVER says otherwise: the
// dev-mode address.
const DefaultServer = "http://127.0.0.1:8080"

// clientOptions are the flags every client command shares.
type clientOptions struct {
	server     string
	token      string
	tokenFile  string
	kubeconfig string
	caFile     string
	insecure   bool
	output     string
	now        func() time.Time // injectable for golden tests
}

// restConfig is how the CLI reaches the service: the server URL, and the credentials of --token, --token-file or
// the current user of --kubeconfig (a bearer token, token file, exec plugin or client certificate — client-go
// handles them all), verified with --certificate-authority. The kubeconfig's own server and CA belong to the hub,
// not to this service, and are not used.
func (o *clientOptions) restConfig() (*rest.Config, error) {
	cfg := &rest.Config{}
	if o.kubeconfig != "" {
		kc, err := clientcmd.BuildConfigFromFlags("", o.kubeconfig)
		if err != nil {
			return nil, fmt.Errorf("--kubeconfig %s: not a usable kubeconfig", o.kubeconfig)
		}
		cfg = rest.AnonymousClientConfig(kc) // drops the credentials; put the user's back below
		cfg.BearerToken, cfg.BearerTokenFile, cfg.ExecProvider, cfg.AuthProvider = kc.BearerToken, kc.BearerTokenFile, kc.ExecProvider, kc.AuthProvider
		cfg.CertFile, cfg.KeyFile, cfg.CertData, cfg.KeyData = kc.CertFile, kc.KeyFile, kc.CertData, kc.KeyData
		cfg.Username, cfg.Password = kc.Username, kc.Password
		cfg.TLSClientConfig.CAFile, cfg.TLSClientConfig.CAData, cfg.TLSClientConfig.ServerName, cfg.Insecure = "", nil, "", false
	}
	cfg.Host = strings.TrimSuffix(o.server, "/")
	if o.token != "" {
		cfg.BearerToken, cfg.BearerTokenFile = o.token, ""
	}
	if o.tokenFile != "" {
		cfg.BearerToken, cfg.BearerTokenFile = "", o.tokenFile
	}
	cfg.TLSClientConfig.CAFile, cfg.Insecure = o.caFile, o.insecure
	cfg.Timeout = time.Minute
	u, err := url.Parse(cfg.Host)
	if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
		return nil, fmt.Errorf("--server %q: want http(s)://host:port", o.server)
	}
	hasCreds := cfg.BearerToken != "" || cfg.BearerTokenFile != "" || cfg.ExecProvider != nil || cfg.Password != ""
	if hasCreds && u.Scheme == "http" && !loopback.Is(u.Host) {
		return nil, fmt.Errorf("refusing to send credentials over plain HTTP to %s: use an https:// --server", u.Host)
	}
	return cfg, nil
}

func (o *clientOptions) client() (*client.ClientWithResponses, error) {
	cfg, err := o.restConfig()
	if err != nil {
		return nil, err
	}
	hc, err := rest.HTTPClientFor(cfg)
	if err != nil {
		return nil, fmt.Errorf("client credentials: %w", err)
	}
	return client.NewClientWithResponses(cfg.Host, client.WithHTTPClient(hc))
}

func newClustersCommand(stdout, stderr io.Writer) *cobra.Command {
	o := &clientOptions{now: time.Now}
	cmd := &cobra.Command{
		Use:   "clusters",
		Short: "Create, inspect, update (scale, upgrade, resize) and delete clusters on a running acm-cluster-sp",
	}
	server := os.Getenv("SP_SERVER")
	if server == "" {
		server = DefaultServer
	}
	cmd.PersistentFlags().StringVar(&o.server, "server", server, "base URL of the service (env SP_SERVER)")
	pf := cmd.PersistentFlags()
	pf.StringVar(&o.token, "token", os.Getenv("SP_TOKEN"), "bearer token (env SP_TOKEN), e.g. $(kubectl create token NAME -n NS) for a ServiceAccount of the hub")
	pf.StringVar(&o.tokenFile, "token-file", os.Getenv("SP_TOKEN_FILE"), "file holding the bearer token, re-read when it changes (env SP_TOKEN_FILE)")
	pf.StringVar(&o.kubeconfig, "kubeconfig", "", "use the current user of this kubeconfig (token, exec plugin or client certificate); its server is not used")
	pf.StringVar(&o.caFile, "certificate-authority", os.Getenv("SP_CA_FILE"), "CA bundle that verifies the service's certificate (env SP_CA_FILE)")
	pf.BoolVar(&o.insecure, "insecure-skip-tls-verify", false, "do not verify the service's certificate (insecure)")
	cmd.AddCommand(
		newCreateCommand(o, stdout),
		newListCommand(o, stdout),
		newGetCommand(o, stdout),
		newDeleteCommand(o, stdout, stderr),
		newKubeconfigCommand(o, stdout),
		newWaitCommand(o, stdout),
	)
	cmd.AddCommand(dayTwoCommands(o, stdout)...)
	return cmd
}

func addOutputFlag(cmd *cobra.Command, o *clientOptions, formats string) {
	cmd.Flags().StringVarP(&o.output, "output", "o", "", "output format: "+formats)
}

// apiError turns an error answer into a readable error: the problem's title and detail (and each field), never a
// Go struct.
func apiError(code int, body []byte) error {
	var p api.Problem
	if err := json.Unmarshal(body, &p); err == nil && p.Title != "" {
		msg := p.Title
		if p.Detail != nil && *p.Detail != "" {
			msg += ": " + *p.Detail
		}
		return errors.New(msg)
	}
	text := strings.TrimSpace(string(body))
	if text == "" {
		text = http.StatusText(code)
	}
	return fmt.Errorf("%d %s", code, text)
}

func transportError(server string, err error) error {
	var unknown x509.UnknownAuthorityError
	var hostname x509.HostnameError
	if errors.As(err, &unknown) || errors.As(err, &hostname) {
		return fmt.Errorf("%s: the service's certificate is not trusted: pass the CA that signed it with --certificate-authority (env SP_CA_FILE): %v", server, err)
	}
	return fmt.Errorf("cannot reach %s (is the service running? set --server or SP_SERVER): %v", server, err)
}

// createOptions are the flags of `clusters create`.
type createOptions struct {
	id, name, version, platform, file string
	workers, cpu                      int
	memory, storage, baseDomain       string
	infraEnv                          string
	agentLabels                       []string
}

func newCreateCommand(o *clientOptions, stdout io.Writer) *cobra.Command {
	var c createOptions
	cmd := &cobra.Command{
		Use:   "create",
		Short: "Create a cluster",
		Example: `  acm-cluster-sp clusters create --name demo --version 1.30
  acm-cluster-sp clusters create --name big --version 4.17 --workers 3 --cpu 8 --memory 32GB --storage 250GB
  acm-cluster-sp clusters create --name metal --version 1.30 --platform baremetal --base-domain example.com \
      --infra-env production-infraenv --agent-label location=datacenter-1
  acm-cluster-sp clusters create -f spec.yaml --id inst-0001`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			body, err := c.body(cmd)
			if err != nil {
				return err
			}
			cl, err := o.client()
			if err != nil {
				return err
			}
			params := &api.CreateClusterParams{}
			if c.id != "" {
				params.Id = &c.id
			}
			resp, err := cl.CreateClusterWithBodyWithResponse(cmd.Context(), params, "application/json", bytes.NewReader(body))
			if err != nil {
				return transportError(o.server, err)
			}
			var got *api.Cluster
			switch {
			case resp.JSON201 != nil:
				got = resp.JSON201
			case resp.JSON200 != nil:
				got = resp.JSON200
			default:
				return apiError(resp.StatusCode(), resp.Body)
			}
			if o.output == "" {
				verb := "created"
				if resp.JSON200 != nil {
					verb = "already exists"
				}
				fmt.Fprintf(stdout, "cluster %s (%s) %s: %s\n", got.Id, specName(got.Spec), verb, got.Status)
				return nil
			}
			return printCluster(stdout, o, got)
		},
	}
	f := cmd.Flags()
	f.StringVar(&c.id, "id", "", "instance id (default: generated by the service)")
	f.StringVar(&c.name, "name", "", "cluster name (metadata.name)")
	f.StringVar(&c.version, "version", "", "Kubernetes (1.30, 1.30.4) or OpenShift (4.17, 4.17.3) version")
	f.StringVar(&c.platform, "platform", "", "kubevirt or baremetal (default: the service's default platform)")
	f.IntVar(&c.workers, "workers", 0, "number of workers")
	f.IntVar(&c.cpu, "cpu", 0, "cores per worker (baremetal: minimum per Agent)")
	f.StringVar(&c.memory, "memory", "", "memory per worker, e.g. 32GB (baremetal: minimum)")
	f.StringVar(&c.storage, "storage", "", "root disk per worker, e.g. 250GB (baremetal: minimum)")
	f.StringVar(&c.baseDomain, "base-domain", "", "base DNS domain")
	f.StringVar(&c.infraEnv, "infra-env", "", "baremetal: InfraEnv of the Agents")
	f.StringArrayVar(&c.agentLabels, "agent-label", nil, "baremetal: label k=v an Agent must carry (repeatable)")
	f.StringVarP(&c.file, "file", "f", "", "a spec file (YAML or JSON; the {\"spec\": …} form or a bare spec); flags override its fields")
	addOutputFlag(cmd, o, "json, yaml (default: one line)")
	return cmd
}

// body builds the DCM-form request from -f and the flags.
func (c *createOptions) body(cmd *cobra.Command) ([]byte, error) {
	spec := map[string]any{}
	if c.file != "" {
		data, err := os.ReadFile(c.file)
		if err != nil {
			return nil, err
		}
		var doc map[string]any
		if err := yaml.Unmarshal(data, &doc); err != nil {
			return nil, fmt.Errorf("%s: %w", c.file, err)
		}
		if inner, ok := doc["spec"].(map[string]any); ok {
			doc = inner
		}
		spec = doc
	}
	flags := cmd.Flags()
	set := func(value any, path ...string) {
		m := spec
		for _, k := range path[:len(path)-1] {
			next, ok := m[k].(map[string]any)
			if !ok {
				next = map[string]any{}
				m[k] = next
			}
			m = next
		}
		m[path[len(path)-1]] = value
	}
	if flags.Changed("name") {
		set(c.name, "metadata", "name")
	}
	if flags.Changed("version") {
		set(c.version, "version")
	}
	if flags.Changed("platform") {
		set(c.platform, "provider_hints", "acm", "platform")
	}
	if flags.Changed("workers") {
		set(c.workers, "nodes", "workers", "count")
	}
	if flags.Changed("cpu") {
		set(c.cpu, "nodes", "workers", "cpu")
	}
	if flags.Changed("memory") {
		set(c.memory, "nodes", "workers", "memory")
	}
	if flags.Changed("storage") {
		set(c.storage, "nodes", "workers", "storage")
	}
	if flags.Changed("base-domain") {
		set(c.baseDomain, "provider_hints", "acm", "base_domain")
	}
	if flags.Changed("infra-env") {
		set(c.infraEnv, "provider_hints", "acm", "infra_env")
	}
	if len(c.agentLabels) > 0 {
		labels := map[string]any{}
		for _, kv := range c.agentLabels {
			k, v, ok := strings.Cut(kv, "=")
			if !ok || k == "" {
				return nil, fmt.Errorf("--agent-label %q: want key=value", kv)
			}
			labels[k] = v
		}
		set(labels, "provider_hints", "acm", "agent_labels")
	}
	if _, ok := spec["service_type"]; !ok {
		if _, camel := spec["serviceType"]; !camel {
			spec["service_type"] = "cluster"
		}
	}
	if md, _ := spec["metadata"].(map[string]any); md == nil || md["name"] == nil {
		return nil, errors.New("a cluster name is required: --name or metadata.name in -f")
	}
	if spec["version"] == nil {
		return nil, errors.New("a version is required: --version (e.g. 1.30 or 4.17) or version in -f")
	}
	return json.Marshal(map[string]any{"spec": spec})
}

func newListCommand(o *clientOptions, stdout io.Writer) *cobra.Command {
	var pageSize int
	cmd := &cobra.Command{
		Use:   "list",
		Short: "List clusters (all pages)",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			cl, err := o.client()
			if err != nil {
				return err
			}
			var all []api.Cluster
			size := int32(pageSize)
			params := &api.ListClustersParams{MaxPageSize: &size}
			for {
				resp, err := cl.ListClustersWithResponse(cmd.Context(), params)
				if err != nil {
					return transportError(o.server, err)
				}
				if resp.JSON200 == nil {
					return apiError(resp.StatusCode(), resp.Body)
				}
				all = append(all, resp.JSON200.Results...)
				if resp.JSON200.NextPageToken == nil || *resp.JSON200.NextPageToken == "" {
					break
				}
				params.PageToken = resp.JSON200.NextPageToken
			}
			return printList(stdout, o, all)
		},
	}
	cmd.Flags().IntVar(&pageSize, "page-size", 100, "clusters per request (the list follows every page)")
	addOutputFlag(cmd, o, "table (default), json, yaml")
	return cmd
}

func getCluster(ctx context.Context, o *clientOptions, id string) (*api.Cluster, error) {
	cl, err := o.client()
	if err != nil {
		return nil, err
	}
	resp, err := cl.GetClusterWithResponse(ctx, id)
	if err != nil {
		return nil, transportError(o.server, err)
	}
	if resp.JSON200 == nil {
		return nil, apiError(resp.StatusCode(), resp.Body)
	}
	return resp.JSON200, nil
}

func newGetCommand(o *clientOptions, stdout io.Writer) *cobra.Command {
	cmd := &cobra.Command{
		Use:   "get ID",
		Short: "Show one cluster",
		Args:  cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			c, err := getCluster(cmd.Context(), o, args[0])
			if err != nil {
				return err
			}
			return printCluster(stdout, o, c)
		},
	}
	addOutputFlag(cmd, o, "json, yaml (default: a description)")
	return cmd
}

func newDeleteCommand(o *clientOptions, stdout, stderr io.Writer) *cobra.Command {
	var wait bool
	var timeout time.Duration
	cmd := &cobra.Command{
		Use:   "delete ID",
		Short: "Delete a cluster",
		Args:  cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			cl, err := o.client()
			if err != nil {
				return err
			}
			resp, err := cl.DeleteClusterWithResponse(cmd.Context(), args[0], nil)
			if err != nil {
				return transportError(o.server, err)
			}
			if resp.StatusCode() != http.StatusNoContent {
				return apiError(resp.StatusCode(), resp.Body)
			}
			fmt.Fprintf(stdout, "cluster %s: deletion started\n", args[0])
			if !wait {
				return nil
			}
			return waitFor(cmd.Context(), o, stdout, args[0], "DELETED", timeout, 2*time.Second)
		},
	}
	cmd.Flags().BoolVar(&wait, "wait", false, "wait until the cluster is gone (DELETED)")
	cmd.Flags().DurationVar(&timeout, "timeout", 30*time.Minute, "how long --wait waits")
	return cmd
}

func newKubeconfigCommand(o *clientOptions, stdout io.Writer) *cobra.Command {
	return &cobra.Command{
		Use:   "kubeconfig ID",
		Short: "Print a READY cluster's admin kubeconfig (decoded): acm-cluster-sp clusters kubeconfig ID > kubeconfig",
		Args:  cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			c, err := getCluster(cmd.Context(), o, args[0])
			if err != nil {
				return err
			}
			if c.KubeconfigOmitted != nil {
				if *c.KubeconfigOmitted == api.ClusterKubeconfigOmittedForbidden {
					return fmt.Errorf("cluster %s: the service withholds its kubeconfig from you: you need get on clusters/kubeconfig for %s in the hub's RBAC", c.Id, c.Id)
				}
				return fmt.Errorf("cluster %s: the service withholds its kubeconfig (%s); retry", c.Id, *c.KubeconfigOmitted)
			}
			if c.Kubeconfig == nil || *c.Kubeconfig == "" {
				return fmt.Errorf("cluster %s is %s (%s); its kubeconfig is available once it is READY", c.Id, c.Status, c.StatusMessage)
			}
			data, err := base64.StdEncoding.DecodeString(*c.Kubeconfig)
			if err != nil {
				return fmt.Errorf("the service returned a kubeconfig that is not base64: %v", err)
			}
			_, err = stdout.Write(data)
			return err
		},
	}
}

func newWaitCommand(o *clientOptions, stdout io.Writer) *cobra.Command {
	var want string
	var timeout, interval time.Duration
	cmd := &cobra.Command{
		Use:   "wait ID",
		Short: "Wait until a cluster reaches a status, showing its transitions (exit code 1 on FAILED or timeout)",
		Args:  cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			return waitFor(cmd.Context(), o, stdout, args[0], strings.ToUpper(want), timeout, interval)
		},
	}
	cmd.Flags().StringVar(&want, "for", "READY", "status to wait for (READY, DELETED, UNAVAILABLE, …)")
	cmd.Flags().DurationVar(&timeout, "timeout", 30*time.Minute, "give up after this long")
	cmd.Flags().DurationVar(&interval, "interval", 2*time.Second, "how often to poll")
	return cmd
}

func specName(raw json.RawMessage) string {
	var s struct {
		Metadata struct {
			Name string `json:"name"`
		} `json:"metadata"`
	}
	_ = json.Unmarshal(raw, &s)
	return s.Metadata.Name
}
