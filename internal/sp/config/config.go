// Package config loads the SP's configuration: a YAML file whose keys are the
// design's names, each key also settable as an environment variable SP_<UPPER_SNAKE> and as a --kebab-case flag,
// with precedence flag > env > file > default. Invalid configuration fails at start with one message naming the
// field and where it can be set.
package config

import (
	"errors"
	"fmt"
	"maps"
	"os"
	"reflect"
	"slices"
	"strconv"
	"strings"
	"time"
	"unicode"

	"github.com/spf13/pflag"
	"sigs.k8s.io/yaml"

	"github.com/dcm-sp/acm-cluster-sp/internal/sp/clusters"
	"github.com/dcm-sp/acm-cluster-sp/internal/sp/status"
)

// Config is the whole configuration. Tags: `key` is the YAML key (env and flag names derive from it), `default`
// the default value, `usage` the help text.
type Config struct {
	// Hub (design)
	HubKubeconfig string `key:"hubKubeconfig" usage:"kubeconfig of the ACM hub (empty: in-cluster service account)"`
	Namespace     string `key:"namespace" default:"default" usage:"namespace of every HostedCluster, NodePool and SP Secret (a dedicated one such as 'clusters' is recommended)"`
	// The client-side rate limit of the hub client (informers' watches are not limited by it). A create makes about
	// ten calls (three reads, seven writes), the reconcile that follows it one or two, the start-up reconcile one per
	// cluster: 100 creates/s need about 1,200 calls/s.
	HubQPS   int `key:"hubQPS" default:"1000" usage:"requests per second the SP sends to the hub's API server at most, sustained (0: no client-side limit; the hub's API Priority and Fairness paces the SP)"`
	HubBurst int `key:"hubBurst" default:"2000" usage:"requests the SP may send to the hub in a burst above hubQPS"`

	// Platforms (design)
	DefaultPlatform        string   `key:"defaultPlatform" default:"kubevirt" usage:"platform when a request names none: kubevirt or baremetal"`
	EnabledPlatforms       []string `key:"enabledPlatforms" default:"kubevirt,baremetal" usage:"platforms this SP may provision (each also needs its APIs on the hub)"`
	KubevirtInfraCluster   string   `key:"kubevirtInfraCluster" usage:"kubeconfig file of an external KubeVirt infrastructure cluster (empty: the hub)"`
	KubevirtInfraNamespace string   `key:"kubevirtInfraNamespace" usage:"namespace for worker VMs on the external infrastructure cluster"`
	DefaultInfraEnvName    string   `key:"defaultInfraEnvName" usage:"InfraEnv used when a baremetal request names none"`
	AgentNamespace         string   `key:"agentNamespace" usage:"namespace of the InfraEnvs and Agents (required for baremetal)"`

	// Service
	ListenAddress  string        `key:"listenAddress" default:"127.0.0.1:8080" usage:"HTTP(S) listen address (plain HTTP only on loopback unless allowPlainHTTP)"`
	LogLevel       string        `key:"logLevel" default:"info" usage:"debug, info, warn or error"`
	LogFormat      string        `key:"logFormat" default:"text" usage:"text or json"`
	RequestTimeout time.Duration `key:"requestTimeout" default:"20s" usage:"deadline of one API request, hub calls included (a hanging hub answers 504 within it)"`
	// Keep it below the pod's terminationGracePeriodSeconds (30 s in deploy/).
	ShutdownTimeout time.Duration `key:"shutdownTimeout" default:"20s" usage:"on SIGTERM, the longest the SP takes to stop: requests in flight are answered or cancelled, leader tasks stopped, NATS closed"`

	// Security: who may call the API (delegated to the hub's TokenReview/SubjectAccessReview) and TLS
	Auth                 string `key:"auth" default:"kubernetes" usage:"kubernetes (bearer tokens and client certificates, authorized by the hub's RBAC) or none (dev; loopback only unless allowUnauthenticated)"`
	AllowUnauthenticated bool   `key:"allowUnauthenticated" usage:"permit auth none on a non-loopback listen address (logged as a warning every hour)"`
	AuthAnonymous        bool   `key:"authAnonymous" usage:"with auth kubernetes: requests without credentials are user system:anonymous (authorized by RBAC like any caller)"`
	AuthAPIGroup         string `key:"authAPIGroup" default:"clusters.acm-cluster-sp.dcm.io" usage:"API group of the authorization checks (resource clusters, subresource clusters/kubeconfig)"`
	ClientCAFile         string `key:"clientCAFile" usage:"CA bundle that signs accepted client certificates (reloaded when it changes)"`
	TLSCertFile          string `key:"tlsCertFile" usage:"serving certificate (PEM); with tlsKeyFile the API is served over HTTPS, reloaded when the files change"`
	TLSKeyFile           string `key:"tlsKeyFile" usage:"serving private key (PEM)"`
	AllowPlainHTTP       bool   `key:"allowPlainHTTP" usage:"permit serving the API over plain HTTP (no tlsCertFile) on a non-loopback listen address: callers' tokens, the admin kubeconfigs and cluster data then travel unencrypted"`

	// Tokens bound to this service cannot be replayed against the hub by whoever sees them; credentials the SP sends
	// travel over TLS unless said otherwise (docs/operations.md, "Transport security").
	APIAudiences              []string `key:"apiAudiences" usage:"audiences of bearer tokens bound to this service (kubectl create token --audience …): only such tokens are accepted, unless acceptHubTokens (empty: only tokens for the hub)"`
	AcceptHubTokens           bool     `key:"acceptHubTokens" usage:"with apiAudiences, accept tokens for the hub's own audience too (a client that can present only such a token, e.g. a Prometheus reading a ServiceAccount token Secret); a token sent to the SP then also works against the hub"`
	AllowPlaintextCredentials bool     `key:"allowPlaintextCredentials" usage:"permit sending natsPasswordFile (or a password in natsURL) over nats:// or ws:// without TLS, and registrationTokenFile over http://, to a non-loopback host"`

	// DCM registration
	ProviderName    string `key:"providerName" default:"acm-cluster-sp" usage:"registration name; {providerName} in event templates"`
	DisplayName     string `key:"displayName" default:"ACM Cluster Service Provider (HyperShift)" usage:"registration display name"`
	APIHost         string `key:"apiHost" usage:"externally reachable base URL of this SP (scheme://host:port); registered endpoint = apiHost + /api/v1alpha1/clusters"`
	RegistrationURL string `key:"registrationURL" usage:"DCM registry base URL including /api/v1alpha1 (empty: do not register)"`
	ProviderID      string `key:"providerID" usage:"optional provider id sent as ?id= when registering"`
	// RegistrationTokenFile is re-read when it changes (projected service account tokens rotate).
	RegistrationTokenFile string `key:"registrationTokenFile" usage:"bearer token file sent to the DCM registry (never sent to another host)"`
	RegistrationCAFile    string `key:"registrationCAFile" usage:"CA bundle that verifies the DCM registry's certificate (default: system roots)"`

	// Status events
	NATSURL          string        `key:"natsURL" secret:"true" usage:"NATS server(s) for status events (required by serve); shown redacted everywhere"`
	NATSCredsFile    string        `key:"natsCredsFile" usage:"NATS .creds file (user JWT and NKey seed)"`
	NATSNkeySeedFile string        `key:"natsNkeySeedFile" usage:"NATS NKey seed file"`
	NATSUser         string        `key:"natsUser" usage:"NATS user name (with natsPasswordFile)"`
	NATSPasswordFile string        `key:"natsPasswordFile" usage:"file holding the NATS user's password"`
	NATSCAFile       string        `key:"natsCAFile" usage:"CA bundle that verifies the NATS server (TLS)"`
	NATSCertFile     string        `key:"natsCertFile" usage:"client certificate for NATS mutual TLS (with natsKeyFile)"`
	NATSKeyFile      string        `key:"natsKeyFile" usage:"client private key for NATS mutual TLS"`
	StatusPreset     string        `key:"statusPreset" default:"design" usage:"event naming: design (dcm.providers.{providerName}.cluster.instances.{instanceId}.status) or spm (dcm.cluster, today's DCM)"`
	StatusSubject    string        `key:"statusSubject" usage:"subject template, overrides the preset ({providerName}, {instanceId})"`
	StatusType       string        `key:"statusType" usage:"CloudEvent type template, overrides the preset"`
	StatusSource     string        `key:"statusSource" usage:"CloudEvent source template, overrides the preset"`
	StatusDebounce   time.Duration `key:"statusDebounce" default:"1s" usage:"coalesce a cluster's status changes within this window (latest wins): one event per cluster per window, or two when the second is the settled burst right after a new status"`
	StatusSettle     time.Duration `key:"statusSettle" default:"250ms" usage:"publish a new message of a cluster's status once it has stayed unchanged this long (a burst of them is one event, its last), at the latest statusDebounce after the first; a new status goes out at once, and the burst it begins once settled; 0: no settling"`
	// Without a stream statuses are held, never counted delivered (docs/dcm.md).
	StatusCreateStream bool          `key:"statusCreateStream" default:"false" usage:"create or update the SP's own JetStream stream acm-cluster-sp-<providerName> for its status subjects, unless another stream already captures them"`
	StatusStreamMaxAge time.Duration `key:"statusStreamMaxAge" default:"168h" usage:"retention of the stream statusCreateStream creates (events older than this are discarded)"`
	ResyncPeriod       time.Duration `key:"resyncPeriod" default:"10m" usage:"re-evaluate and re-publish every cluster's status this often"`

	// Leader election (several replicas: only the leader publishes events)
	LeaderElection          bool          `key:"leaderElection" default:"true" usage:"elect a leader through a Lease; only the leader publishes events"`
	LeaderElectionNamespace string        `key:"leaderElectionNamespace" usage:"namespace of the Lease (default: namespace)"`
	LeaseDuration           time.Duration `key:"leaseDuration" default:"15s" usage:"leader lease duration (at least 1s; the Lease records whole seconds)"`

	// Rendering
	VersionMatrixFile              string `key:"versionMatrixFile" usage:"YAML/JSON map of OpenShift to Kubernetes minors overriding the built-in matrix"`
	PullSecretFile                 string `key:"pullSecretFile" usage:"file with the dockerconfigjson pull secret copied into each cluster"`
	PullSecretName                 string `key:"pullSecretName" usage:"existing Secret in namespace whose .dockerconfigjson is copied into each cluster"`
	SSHPublicKeyFile               string `key:"sshPublicKeyFile" usage:"public key(s) installed on the workers (optional)"`
	BaseDomain                     string `key:"baseDomain" usage:"base DNS domain when a request has none (required for baremetal if requests omit it)"`
	ManageACMObjects               bool   `key:"manageACMObjects" default:"true" usage:"create and delete the ManagedCluster and KlusterletAddonConfig"`
	ControlPlaneAvailabilityPolicy string `key:"controlPlaneAvailabilityPolicy" default:"HighlyAvailable" usage:"HostedCluster controllerAvailabilityPolicy when a request has no control_plane.count"`
	DefaultWorkerCount             int    `key:"defaultWorkerCount" default:"2" usage:"NodePool replicas when a request has no worker count"`
	HypershiftNamespace            string `key:"hypershiftNamespace" default:"hypershift" usage:"namespace of the HyperShift operator and its supported-versions ConfigMap"`

	// Status timing (docs/status-mapping.md)
	DegradedGracePeriod            time.Duration `key:"degradedGracePeriod" default:"15m" usage:"Degraded longer than this is FAILED"`
	ProvisioningTimeoutPerPlatform Durations     `key:"provisioningTimeouts" usage:"per platform, a cluster not READY after this is FAILED: platform=duration pairs such as kubevirt=1h,baremetal=3h (a platform left out keeps its own default: kubevirt 45m, baremetal 120m)"`
	ProvisioningTimeoutKubevirt    time.Duration `key:"provisioningTimeoutKubevirt" usage:"older spelling of provisioningTimeouts' kubevirt entry (set one of the two)"`
	ProvisioningTimeoutBaremetal   time.Duration `key:"provisioningTimeoutBaremetal" usage:"older spelling of provisioningTimeouts' baremetal entry (set one of the two)"`

	// Day-2 operations (docs/day2.md)
	OperationTimeoutPerPlatform Durations     `key:"operationTimeouts" usage:"per platform, a scale, upgrade or resize not finished after this is FAILED: platform=duration pairs such as kubevirt=2h (a platform left out keeps its own default: kubevirt 90m, baremetal 180m)"`
	OperationTimeoutKubevirt    time.Duration `key:"operationTimeoutKubevirt" usage:"older spelling of operationTimeouts' kubevirt entry (set one of the two)"`
	OperationTimeoutBaremetal   time.Duration `key:"operationTimeoutBaremetal" usage:"older spelling of operationTimeouts' baremetal entry (set one of the two)"`
	UpdatingStatus              string        `key:"updatingStatus" default:"UPDATING" usage:"status string of a running day-2 operation in status events: UPDATING, or PROGRESSING (DCM's word for it)"`

	// DCM as it runs since its Environment Agent (docs/dcm.md): status words, problem types, keyed deletes
	StatusVocabulary   string        `key:"statusVocabulary" default:"seed" usage:"status words of GET, LIST and the status events: seed (PENDING, PROVISIONING, READY, UPDATING, FAILED, UNAVAILABLE, DELETING, DELETED) or dcm-2026 (PROGRESSING, ACTIVE, DEGRADED, UNAVAILABLE, FAILED, DELETING, DELETED; only a terminal failure is FAILED)"`
	ActiveStatus       string        `key:"activeStatus" default:"ACTIVE" usage:"with statusVocabulary dcm-2026, the status of a ready cluster: ACTIVE, or RUNNING for control planes that advance placement on running"`
	ProblemTypes       string        `key:"problemTypes" default:"codes" usage:"type member of the problem documents: codes (INVALID_ARGUMENT, NOT_FOUND, …) or uris (RFC 9457: https://dcm-project.github.io/problems/invalid-argument, …)"`
	DeleteKeyRetention time.Duration `key:"deleteKeyRetention" default:"24h" usage:"how long a DELETE with an Idempotency-Key is remembered on the hub: its replay answers 204 within this time, also once the cluster is gone"`
}

// Values of problemTypes (statusVocabulary, activeStatus and updatingStatus take package status's names).
const (
	ProblemTypeCodes = "codes"
	ProblemTypeURIs  = "uris"
)

// field describes one configuration key.
type field struct {
	key, env, flag, def, usage string
	secret, boolean            bool
	index                      int
}

func fields() []field {
	t := reflect.TypeOf(Config{})
	out := make([]field, 0, t.NumField())
	for i := 0; i < t.NumField(); i++ {
		f := t.Field(i)
		key := f.Tag.Get("key")
		out = append(out, field{key: key, env: EnvName(key), flag: FlagName(key), def: f.Tag.Get("default"), usage: f.Tag.Get("usage"), secret: f.Tag.Get("secret") == "true", boolean: f.Type.Kind() == reflect.Bool, index: i})
	}
	return out
}

// EnvName is the environment variable of a key: SP_ + upper snake case (natsURL → SP_NATS_URL).
func EnvName(key string) string { return "SP_" + strings.ToUpper(split(key, "_")) }

// FlagName is the flag of a key: kebab case (hubKubeconfig → hub-kubeconfig).
func FlagName(key string) string { return strings.ToLower(split(key, "-")) }

func split(key, sep string) string {
	var b strings.Builder
	r := []rune(key)
	for i, c := range r {
		// a word starts at an upper-case letter after a lower-case one (natsURL → nats URL) and at the last
		// capital of an acronym followed by a lower-case letter (manageACMObjects → manage ACM Objects)
		lowerBefore := i > 0 && (unicode.IsLower(r[i-1]) || unicode.IsDigit(r[i-1]))
		acronymEnd := i > 0 && unicode.IsUpper(r[i-1]) && i+1 < len(r) && unicode.IsLower(r[i+1])
		if unicode.IsUpper(c) && (lowerBefore || acronymEnd) {
			b.WriteString(sep)
		}
		b.WriteRune(c)
	}
	return b.String()
}

// Loader binds the configuration to a flag set and resolves it.
type Loader struct {
	flags    *pflag.FlagSet
	file     string
	defaults map[string]string
}

// SetDefaults replaces built-in defaults by key (dev mode's defaults); file, env and flags still override them.
func (l *Loader) SetDefaults(d map[string]string) { l.defaults = d }

// Bind registers --config and one flag per key on fs.
func Bind(fs *pflag.FlagSet) *Loader {
	l := &Loader{flags: fs}
	fs.StringVar(&l.file, "config", "", "YAML configuration file (env SP_CONFIG)")
	for _, f := range fields() {
		usage := f.usage + " (env " + f.env + ")"
		fs.String(f.flag, "", usage)
		if f.def != "" {
			fs.Lookup(f.flag).DefValue = f.def
		}
		if f.boolean {
			fs.Lookup(f.flag).NoOptDefVal = "true" // --manage-acm-objects alone means true
		}
	}
	return l
}

// Load resolves every key (flag > env > file > default) and validates the result.
func (l *Loader) Load(getenv func(string) string) (*Config, error) {
	if getenv == nil {
		getenv = os.Getenv
	}
	file := l.file
	if file == "" {
		file = getenv("SP_CONFIG")
	}
	fromFile := map[string]any{}
	if file != "" {
		data, err := os.ReadFile(file)
		if err != nil {
			return nil, fmt.Errorf("config: %w", err)
		}
		if err := yaml.Unmarshal(data, &fromFile); err != nil {
			return nil, fmt.Errorf("config file %s: %w", file, err)
		}
		known := map[string]bool{}
		for _, f := range fields() {
			known[f.key] = true
		}
		for k := range fromFile {
			if !known[k] {
				return nil, fmt.Errorf("config file %s: unknown key %q", file, k)
			}
		}
	}
	var c Config
	v := reflect.ValueOf(&c).Elem()
	for _, f := range fields() {
		raw, source := f.def, "default"
		if d, ok := l.defaults[f.key]; ok {
			raw = d
		}
		if x, ok := fromFile[f.key]; ok {
			raw, source = fileValue(x), "file key "+f.key
		}
		if x := getenv(f.env); x != "" {
			raw, source = x, "env "+f.env
		}
		if l.flags != nil {
			if fl := l.flags.Lookup(f.flag); fl != nil && fl.Changed {
				raw, source = fl.Value.String(), "flag --"+f.flag
			}
		}
		if err := set(v.Field(f.index), raw); err != nil {
			shown := raw
			if f.secret {
				shown = "(hidden)"
			}
			return nil, fmt.Errorf("config: %s = %q (from %s): %v", f.key, shown, source, err)
		}
	}
	if err := c.Validate(); err != nil {
		return nil, err
	}
	return &c, nil
}

// Defaults returns the configuration with every default applied and nothing else.
func Defaults() Config {
	var c Config
	v := reflect.ValueOf(&c).Elem()
	for _, f := range fields() {
		if err := set(v.Field(f.index), f.def); err != nil {
			panic(err)
		}
	}
	return c
}

func fileValue(x any) string {
	switch t := x.(type) {
	case []any:
		parts := make([]string, len(t))
		for i, p := range t {
			parts[i] = fmt.Sprint(p)
		}
		return strings.Join(parts, ",")
	case map[string]any: // platform: duration
		parts := make([]string, 0, len(t))
		for _, k := range slices.Sorted(maps.Keys(t)) {
			parts = append(parts, k+"="+fmt.Sprint(t[k]))
		}
		return strings.Join(parts, ",")
	case float64:
		return strconv.FormatFloat(t, 'f', -1, 64)
	default:
		return fmt.Sprint(t)
	}
}

func set(v reflect.Value, raw string) error {
	switch v.Interface().(type) {
	case string:
		v.SetString(raw)
	case bool:
		if raw == "" {
			v.SetBool(false)
			return nil
		}
		b, err := strconv.ParseBool(raw)
		if err != nil {
			return errors.New("must be true or false")
		}
		v.SetBool(b)
	case int:
		if raw == "" {
			return nil
		}
		n, err := strconv.Atoi(raw)
		if err != nil {
			return errors.New("must be an integer")
		}
		v.SetInt(int64(n))
	case time.Duration:
		if raw == "" {
			return nil
		}
		d, err := time.ParseDuration(raw)
		if err != nil {
			return errors.New("must be a duration such as 90s, 15m or 2h")
		}
		v.SetInt(int64(d))
	case Durations:
		out := Durations{}
		for _, p := range strings.Split(raw, ",") {
			if p = strings.TrimSpace(p); p == "" {
				continue
			}
			name, value, ok := strings.Cut(p, "=")
			if !ok {
				return fmt.Errorf("%q: must be platform=duration pairs such as kubevirt=1h,baremetal=3h", p)
			}
			d, err := time.ParseDuration(strings.TrimSpace(value))
			if err != nil {
				return fmt.Errorf("%q: must be a duration such as 90s, 15m or 2h", p)
			}
			out[strings.TrimSpace(name)] = d
		}
		v.Set(reflect.ValueOf(out))
	case []string:
		var out []string
		for _, p := range strings.Split(raw, ",") {
			if p = strings.TrimSpace(p); p != "" {
				out = append(out, p)
			}
		}
		v.Set(reflect.ValueOf(out))
	default:
		return fmt.Errorf("unsupported type %s", v.Type())
	}
	return nil
}

// ValidateServe checks what `serve` needs on top of Validate.
func (c *Config) ValidateServe() error {
	if c.NATSURL == "" {
		return fmt.Errorf("config: natsURL: required (flag --%s, env %s, file key natsURL)", FlagName("natsURL"), EnvName("natsURL"))
	}
	if c.PullSecretFile == "" && c.PullSecretName == "" {
		return fmt.Errorf("config: pullSecretFile: one of pullSecretFile or pullSecretName is required (env %s, %s)", EnvName("pullSecretFile"), EnvName("pullSecretName"))
	}
	return nil
}

// Vocabulary is the status vocabulary statusVocabulary names, with activeStatus and updatingStatus.
func (c *Config) Vocabulary() (status.Vocabulary, error) {
	return status.NewVocabulary(c.StatusVocabulary, status.Status(c.ActiveStatus), status.Status(c.UpdatingStatus))
}

// Durations is a duration per platform name, written as platform=duration pairs ("kubevirt=1h,baremetal=3h";
// a map in the YAML file). A platform without an entry keeps its own default (package platform's table).
type Durations map[string]time.Duration

// String writes the pairs in name order.
func (d Durations) String() string {
	parts := make([]string, 0, len(d))
	for _, k := range slices.Sorted(maps.Keys(d)) {
		parts = append(parts, k+"="+d[k].String())
	}
	return strings.Join(parts, ",")
}

// ProvisioningTimeouts are the configured provisioning timeouts by platform (status.Settings): provisioningTimeouts,
// with the older per-platform keys' values.
func (c *Config) ProvisioningTimeouts() map[clusters.Platform]time.Duration {
	return byPlatform(c.ProvisioningTimeoutPerPlatform, c.olderTimeouts(keyProvisioningTimeouts))
}

// OperationTimeouts are the configured day-2 operation timeouts by platform (provision.Config): operationTimeouts,
// with the older per-platform keys' values.
func (c *Config) OperationTimeouts() map[clusters.Platform]time.Duration {
	return byPlatform(c.OperationTimeoutPerPlatform, c.olderTimeouts(keyOperationTimeouts))
}

const (
	keyProvisioningTimeouts = "provisioningTimeouts"
	keyOperationTimeouts    = "operationTimeouts"
)

// olderTimeout is an older per-platform timeout key: its name and its value (zero: not set).
type olderTimeout struct {
	key string
	d   time.Duration
}

// olderTimeouts is the one place that says which older key spells which platform's entry of a per-platform timeout
// key.
func (c *Config) olderTimeouts(key string) map[clusters.Platform]olderTimeout {
	switch key {
	case keyProvisioningTimeouts:
		return map[clusters.Platform]olderTimeout{
			clusters.KubeVirt:  {"provisioningTimeoutKubevirt", c.ProvisioningTimeoutKubevirt},
			clusters.BareMetal: {"provisioningTimeoutBaremetal", c.ProvisioningTimeoutBaremetal}}
	case keyOperationTimeouts:
		return map[clusters.Platform]olderTimeout{
			clusters.KubeVirt:  {"operationTimeoutKubevirt", c.OperationTimeoutKubevirt},
			clusters.BareMetal: {"operationTimeoutBaremetal", c.OperationTimeoutBaremetal}}
	}
	return nil
}

// byPlatform merges a Durations key with the older keys' values that are set (validation refuses both for one
// platform).
func byPlatform(d Durations, older map[clusters.Platform]olderTimeout) map[clusters.Platform]time.Duration {
	out := map[clusters.Platform]time.Duration{}
	for k, v := range d {
		out[clusters.Platform(k)] = v
	}
	for k, o := range older {
		if o.d != 0 {
			out[k] = o.d
		}
	}
	return out
}

// LeaseNamespace is where the leader-election Lease lives.
func (c *Config) LeaseNamespace() string {
	if c.LeaderElectionNamespace != "" {
		return c.LeaderElectionNamespace
	}
	return c.Namespace
}

// Key describes one configuration key (docs/configuration.md is generated from these).
type Key struct {
	Name, Env, Flag, Default, Usage, Type string
	Secret                                bool
}

// Describe lists every key, in the order of the Config struct.
func Describe() []Key {
	t := reflect.TypeOf(Config{})
	var out []Key
	for _, f := range fields() {
		typ := t.Field(f.index).Type.String()
		switch typ {
		case "time.Duration":
			typ = "duration"
		case "[]string":
			typ = "list"
		case "config.Durations":
			typ = "platform=duration list"
		}
		out = append(out, Key{Name: f.key, Env: f.env, Flag: "--" + f.flag, Default: f.def, Usage: f.usage, Type: typ, Secret: f.secret})
	}
	return out
}

// Keys lists every key with its env var, flag and default (for docs and tests).
func Keys() [][4]string {
	var out [][4]string
	for _, f := range fields() {
		out = append(out, [4]string{f.key, f.env, "--" + f.flag, f.def})
	}
	return out
}

// Authentication modes.
const (
	AuthKubernetes = "kubernetes"
	AuthNone       = "none"
)

// TLS reports whether the API is served over HTTPS.
func (c *Config) TLS() bool { return c.TLSCertFile != "" }
