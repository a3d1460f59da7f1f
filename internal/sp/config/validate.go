package config

import (
	"errors"
	"fmt"
	"net/url"
	"os"
	"regexp"
	"slices"
	"strings"
	"time"

	"k8s.io/apimachinery/pkg/util/validation"

	"github.com/dcm-sp/acm-cluster-sp/internal/loopback"
	"github.com/dcm-sp/acm-cluster-sp/internal/sp/clusters"
	"github.com/dcm-sp/acm-cluster-sp/internal/sp/platform"
	"github.com/dcm-sp/acm-cluster-sp/internal/sp/status"
)

var dnsLabel = regexp.MustCompile(`^[a-z0-9]([-a-z0-9]*[a-z0-9])?$`)

// badValue is the error of one configuration key, naming where the key can be set.
type badValue func(key, format string, args ...any) error

// Validate checks the values that can be checked without the hub, group by group; the first bad value is the error.
func (c *Config) Validate() error {
	bad := func(key, format string, args ...any) error {
		return fmt.Errorf("config: %s: %s (flag --%s, env %s, file key %s)", key, fmt.Sprintf(format, args...), FlagName(key), EnvName(key), key)
	}
	for _, check := range []func(badValue) error{c.validatePlacement, c.validateEndpoints, c.validateBehaviour,
		c.validateSecurity, c.validateDCM, c.validateTimings, c.validateLogging} {
		if err := check(bad); err != nil {
			return err
		}
	}
	return nil
}

// validatePlacement checks where clusters go: namespaces and platforms.
func (c *Config) validatePlacement(bad badValue) error {
	if !dnsLabel.MatchString(c.Namespace) || len(c.Namespace) > 63 {
		return bad("namespace", "%q is not a valid namespace name", c.Namespace)
	}
	if len(c.EnabledPlatforms) == 0 {
		return bad("enabledPlatforms", "at least one of %s", platform.Names())
	}
	for _, p := range c.EnabledPlatforms {
		if !clusters.Platform(p).Known() {
			return bad("enabledPlatforms", "%q is not a platform (%s)", p, platform.Names())
		}
	}
	if !clusters.Platform(c.DefaultPlatform).Known() {
		return bad("defaultPlatform", "%q is not a platform (%s)", c.DefaultPlatform, platform.Names())
	}
	if c.KubevirtInfraCluster != "" && c.KubevirtInfraNamespace == "" {
		return bad("kubevirtInfraNamespace", "required when kubevirtInfraCluster is set")
	}
	if c.AgentNamespace != "" && (!dnsLabel.MatchString(c.AgentNamespace) || len(c.AgentNamespace) > 63) {
		return bad("agentNamespace", "%q is not a valid namespace name", c.AgentNamespace)
	}
	return nil
}

// validateEndpoints checks the SP's own base URL and the registry's.
func (c *Config) validateEndpoints(bad badValue) error {
	if c.APIHost != "" {
		u, err := url.Parse(c.APIHost)
		if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" || (u.Path != "" && u.Path != "/") {
			return bad("apiHost", "%q must be a base URL such as https://acm-sp.example.com:8443", c.APIHost)
		}
	}
	if c.RegistrationURL != "" {
		u, err := url.Parse(c.RegistrationURL)
		if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
			return bad("registrationURL", "%q is not an http(s) URL", c.RegistrationURL)
		}
		if !strings.HasSuffix(strings.TrimSuffix(u.Path, "/"), "/api/v1alpha1") {
			return bad("registrationURL", "%q must end in /api/v1alpha1 (the client appends /providers)", c.RegistrationURL)
		}
		if c.APIHost == "" {
			return bad("apiHost", "required when registrationURL is set (it is the endpoint registered with DCM)")
		}
	}
	return nil
}

// validateBehaviour checks the provider's name, the status naming, the hub client's limits, the defaults of a
// create, NATS and the pull secret.
func (c *Config) validateBehaviour(bad badValue) error {
	if c.ProviderName == "" || !dnsLabel.MatchString(c.ProviderName) {
		return bad("providerName", "%q must be a lower-case DNS label", c.ProviderName)
	}
	switch c.StatusPreset {
	case "design", "spm":
	default:
		return bad("statusPreset", "%q must be design or spm", c.StatusPreset)
	}
	switch c.ControlPlaneAvailabilityPolicy {
	case "HighlyAvailable", "SingleReplica":
	default:
		return bad("controlPlaneAvailabilityPolicy", "%q must be HighlyAvailable or SingleReplica", c.ControlPlaneAvailabilityPolicy)
	}
	if c.HubQPS < 0 {
		return bad("hubQPS", "must not be negative")
	}
	if c.HubQPS > 0 && c.HubBurst < c.HubQPS {
		return bad("hubBurst", "must be at least hubQPS (%d)", c.HubQPS)
	}
	if c.DefaultWorkerCount < 1 {
		return bad("defaultWorkerCount", "must be at least 1")
	}
	if c.NATSURL != "" {
		for _, u := range strings.Split(c.NATSURL, ",") {
			p, err := url.Parse(strings.TrimSpace(u))
			if err != nil || p.Host == "" || !slices.Contains([]string{"nats", "tls", "ws", "wss"}, p.Scheme) {
				return bad("natsURL", "must be nats://host:port (or tls://, ws://, wss://), comma-separated for several servers (value hidden: it may carry a password)")
			}
		}
	}
	if !slices.Contains(status.UpdatingWords, status.Status(c.UpdatingStatus)) {
		return bad("updatingStatus", "must be %s", orList(status.UpdatingWords))
	}
	if c.PullSecretFile != "" && c.PullSecretName != "" {
		return bad("pullSecretFile", "set only one of pullSecretFile, pullSecretName")
	}
	return nil
}

// validateTimings checks the durations.
func (c *Config) validateTimings(bad badValue) error {
	for key, d := range map[string]time.Duration{"degradedGracePeriod": c.DegradedGracePeriod, "resyncPeriod": c.ResyncPeriod, "leaseDuration": c.LeaseDuration,
		"requestTimeout": c.RequestTimeout, "shutdownTimeout": c.ShutdownTimeout, "statusStreamMaxAge": c.StatusStreamMaxAge} {
		if d <= 0 {
			return bad(key, "must be positive")
		}
	}
	if err := validatePlatformTimeouts(bad, keyProvisioningTimeouts, c.ProvisioningTimeoutPerPlatform, c.olderTimeouts(keyProvisioningTimeouts)); err != nil {
		return err
	}
	if err := validatePlatformTimeouts(bad, keyOperationTimeouts, c.OperationTimeoutPerPlatform, c.olderTimeouts(keyOperationTimeouts)); err != nil {
		return err
	}
	if c.LeaseDuration < time.Second {
		return bad("leaseDuration", "must be at least 1s (a Lease holds whole seconds)")
	}
	if c.StatusDebounce < 0 {
		return bad("statusDebounce", "must not be negative")
	}
	if c.StatusSettle < 0 {
		return bad("statusSettle", "must not be negative")
	}
	return nil
}

// validateLogging checks the log level and format.
func (c *Config) validateLogging(bad badValue) error {
	switch c.LogLevel {
	case "debug", "info", "warn", "error":
	default:
		return bad("logLevel", "%q must be debug, info, warn or error", c.LogLevel)
	}
	if c.LogFormat != "text" && c.LogFormat != "json" {
		return bad("logFormat", "%q must be text or json", c.LogFormat)
	}
	return nil
}

// validateDCM checks the keys of DCM's newer contract.
func (c *Config) validateDCM(bad badValue) error {
	if !slices.Contains(status.VocabularyNames, c.StatusVocabulary) {
		return bad("statusVocabulary", "%q must be %s", c.StatusVocabulary, orList(status.VocabularyNames))
	}
	if !slices.Contains(status.ActiveWords, status.Status(c.ActiveStatus)) {
		return bad("activeStatus", "%q must be %s", c.ActiveStatus, orList(status.ActiveWords))
	}
	if c.ProblemTypes != ProblemTypeCodes && c.ProblemTypes != ProblemTypeURIs {
		return bad("problemTypes", "%q must be codes or uris", c.ProblemTypes)
	}
	if c.DeleteKeyRetention <= 0 {
		return bad("deleteKeyRetention", "must be positive")
	}
	return nil
}

// validateSecurity checks the authentication, TLS and credential keys. Unauthenticated serving is refused on a
// non-loopback address unless allowUnauthenticated says it is intended.
func (c *Config) validateSecurity(bad badValue) error {
	switch c.Auth {
	case AuthKubernetes:
	case AuthNone:
		if c.AuthAnonymous {
			return bad("authAnonymous", "applies only to auth kubernetes")
		}
		if !loopback.Is(c.ListenAddress) && !c.AllowUnauthenticated {
			return bad("auth", "none on the non-loopback address %q lets anyone create and delete clusters and read their admin kubeconfigs; use auth kubernetes, listen on 127.0.0.1, or set allowUnauthenticated: true", c.ListenAddress)
		}
	default:
		return bad("auth", "%q must be kubernetes or none", c.Auth)
	}
	if errs := validation.IsDNS1123Subdomain(c.AuthAPIGroup); len(errs) > 0 {
		return bad("authAPIGroup", "%q is not an API group name: %s", c.AuthAPIGroup, errs[0])
	}
	if (c.TLSCertFile == "") != (c.TLSKeyFile == "") {
		return bad("tlsCertFile", "tlsCertFile and tlsKeyFile go together")
	}
	if !c.TLS() && !loopback.Is(c.ListenAddress) && !c.AllowPlainHTTP {
		return bad("listenAddress", "plain HTTP on the non-loopback address %q sends callers' tokens, admin kubeconfigs and cluster data unencrypted; set tlsCertFile and tlsKeyFile, listen on 127.0.0.1, or set allowPlainHTTP: true", c.ListenAddress)
	}
	if err := c.validateTransport(bad); err != nil {
		return err
	}
	if (c.NATSCertFile == "") != (c.NATSKeyFile == "") {
		return bad("natsCertFile", "natsCertFile and natsKeyFile go together")
	}
	if c.NATSCredsFile != "" && c.NATSNkeySeedFile != "" {
		return bad("natsCredsFile", "set only one of natsCredsFile, natsNkeySeedFile")
	}
	if (c.NATSUser == "") != (c.NATSPasswordFile == "") {
		return bad("natsUser", "natsUser and natsPasswordFile go together")
	}
	for key, path := range map[string]string{"clientCAFile": c.ClientCAFile, "tlsCertFile": c.TLSCertFile, "tlsKeyFile": c.TLSKeyFile,
		"natsCredsFile": c.NATSCredsFile, "natsNkeySeedFile": c.NATSNkeySeedFile, "natsPasswordFile": c.NATSPasswordFile,
		"natsCAFile": c.NATSCAFile, "natsCertFile": c.NATSCertFile, "natsKeyFile": c.NATSKeyFile,
		"registrationTokenFile": c.RegistrationTokenFile, "registrationCAFile": c.RegistrationCAFile, "pullSecretFile": c.PullSecretFile} {
		if path == "" {
			continue
		}
		if _, err := os.Stat(path); err != nil {
			return bad(key, "cannot read %s: %v", path, errors.Unwrap(err))
		}
	}
	return nil
}

// orList spells a list of allowed values for a message: "a or b", "a, b or c".
func orList[T ~string](values []T) string {
	s := make([]string, len(values))
	for i, v := range values {
		s[i] = string(v)
	}
	if len(s) < 2 {
		return strings.Join(s, "")
	}
	return strings.Join(s[:len(s)-1], ", ") + " or " + s[len(s)-1]
}

// validatePlatformTimeouts checks a per-platform timeout key (platforms of the table, positive durations) and its
// older per-platform keys (not negative, and not set beside the new key's entry for the same platform).
func validatePlatformTimeouts(bad badValue, key string, d Durations, older map[clusters.Platform]olderTimeout) error {
	for name, v := range d {
		if !platform.Name(name).Known() {
			return bad(key, "%q is not a platform: the platforms are %s", name, platform.Names())
		}
		if v <= 0 {
			return bad(key, "%s: must be positive", name)
		}
	}
	for name, o := range older {
		if o.d < 0 {
			return bad(o.key, "must be positive")
		}
		if _, both := d[string(name)]; both && o.d != 0 {
			return bad(o.key, "set only one of %s and %s's %s entry", o.key, key, name)
		}
	}
	return nil
}
