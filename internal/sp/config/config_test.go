package config

import (
	"fmt"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/dcm-sp/acm-cluster-sp/internal/sp/platform"
	"github.com/spf13/pflag"
)

func load(t *testing.T, args []string, env map[string]string, file string) (*Config, error) {
	t.Helper()
	fs := pflag.NewFlagSet("test", pflag.ContinueOnError)
	l := Bind(fs)
	if file != "" {
		p := filepath.Join(t.TempDir(), "config.yaml")
		if err := os.WriteFile(p, []byte(file), 0o600); err != nil {
			t.Fatal(err)
		}
		args = append(args, "--config", p)
	}
	if err := fs.Parse(args); err != nil {
		t.Fatal(err)
	}
	return l.Load(func(k string) string { return env[k] })
}

func TestNames(t *testing.T) {
	cases := map[string][2]string{
		"hubKubeconfig":                {"SP_HUB_KUBECONFIG", "hub-kubeconfig"},
		"natsURL":                      {"SP_NATS_URL", "nats-url"},
		"registrationURL":              {"SP_REGISTRATION_URL", "registration-url"},
		"apiHost":                      {"SP_API_HOST", "api-host"},
		"providerID":                   {"SP_PROVIDER_ID", "provider-id"},
		"kubevirtInfraNamespace":       {"SP_KUBEVIRT_INFRA_NAMESPACE", "kubevirt-infra-namespace"},
		"provisioningTimeoutBaremetal": {"SP_PROVISIONING_TIMEOUT_BAREMETAL", "provisioning-timeout-baremetal"},
		"listenAddress":                {"SP_LISTEN_ADDRESS", "listen-address"},
	}
	for key, want := range cases {
		if EnvName(key) != want[0] || FlagName(key) != want[1] {
			t.Errorf("%s: env %s flag %s, want %v", key, EnvName(key), FlagName(key), want)
		}
	}
}

func TestDefaults(t *testing.T) {
	c, err := load(t, nil, nil, "")
	if err != nil {
		t.Fatal(err)
	}
	if c.Namespace != "default" || c.DefaultPlatform != "kubevirt" || c.ListenAddress != "127.0.0.1:8080" || c.ProviderName != "acm-cluster-sp" ||
		!c.ManageACMObjects || c.DefaultWorkerCount != 2 || c.DegradedGracePeriod != 15*time.Minute || len(c.ProvisioningTimeouts()) != 0 ||
		c.StatusPreset != "design" || len(c.EnabledPlatforms) != 2 || c.HypershiftNamespace != "hypershift" || !c.LeaderElection {
		t.Fatalf("defaults: %+v", c)
	}
	if d := Defaults(); !reflect.DeepEqual(*c, d) {
		t.Fatalf("Defaults() differs from an empty load:\n%+v\n%+v", d, *c)
	}
}

// flag > env > file > default, per key.
func TestPrecedence(t *testing.T) {
	file := "namespace: from-file\nlistenAddress: ':9000'\nallowPlainHTTP: true\nproviderName: file-name\nenabledPlatforms: [kubevirt]\nmanageACMObjects: false\ndegradedGracePeriod: 5m\n"
	env := map[string]string{"SP_NAMESPACE": "from-env", "SP_PROVIDER_NAME": "env-name"}
	c, err := load(t, []string{"--namespace", "from-flag", "--manage-acm-objects"}, env, file)
	if err != nil {
		t.Fatal(err)
	}
	if c.Namespace != "from-flag" {
		t.Errorf("namespace %q: flag must win", c.Namespace)
	}
	if c.ProviderName != "env-name" {
		t.Errorf("providerName %q: env must beat file", c.ProviderName)
	}
	if c.ListenAddress != ":9000" || c.DegradedGracePeriod != 5*time.Minute || len(c.EnabledPlatforms) != 1 {
		t.Errorf("file values not applied: %+v", c)
	}
	if !c.ManageACMObjects {
		t.Error("--manage-acm-objects without a value must mean true")
	}
	if c.DefaultPlatform != "kubevirt" {
		t.Error("default not applied")
	}
}

func TestInvalid(t *testing.T) {
	cases := []struct {
		args   []string
		env    map[string]string
		file   string
		errHas []string
	}{
		{args: []string{"--namespace", "Bad_NS"}, errHas: []string{"namespace", "--namespace", "SP_NAMESPACE"}},
		{env: map[string]string{"SP_DEFAULT_PLATFORM": "aws"}, errHas: []string{"defaultPlatform", "aws"}},
		{env: map[string]string{"SP_ENABLED_PLATFORMS": "kubevirt,openstack"}, errHas: []string{"enabledPlatforms", "openstack"}},
		{env: map[string]string{"SP_DEGRADED_GRACE_PERIOD": "soon"}, errHas: []string{"degradedGracePeriod", "from env SP_DEGRADED_GRACE_PERIOD", "duration"}},
		{env: map[string]string{"SP_DEFAULT_WORKER_COUNT": "0"}, errHas: []string{"defaultWorkerCount"}},
		{env: map[string]string{"SP_LEASE_DURATION": "500ms"}, errHas: []string{"leaseDuration", "at least 1s"}},
		{env: map[string]string{"SP_REGISTRATION_URL": "http://spm:8080", "SP_API_HOST": "http://sp:8080"}, errHas: []string{"registrationURL", "/api/v1alpha1"}},
		{env: map[string]string{"SP_REGISTRATION_URL": "http://spm:8080/api/v1alpha1"}, errHas: []string{"apiHost", "required"}},
		{env: map[string]string{"SP_API_HOST": "sp.example.com"}, errHas: []string{"apiHost"}},
		{env: map[string]string{"SP_KUBEVIRT_INFRA_CLUSTER": "/x"}, errHas: []string{"kubevirtInfraNamespace"}},
		{env: map[string]string{"SP_STATUS_PRESET": "other"}, errHas: []string{"statusPreset"}},
		{env: map[string]string{"SP_PULL_SECRET_NAME": "ps", "SP_PULL_SECRET_FILE": "/x"}, errHas: []string{"only one"}},
		{env: map[string]string{"SP_PULL_SECRET_FILE": "/does/not/exist"}, errHas: []string{"pullSecretFile", "cannot read"}},
		// The inline pull secret is gone: it would sit in /proc/*/cmdline, the environment and pod specs.
		{file: "pullSecret: abc\n", errHas: []string{"unknown key", "pullSecret"}},
		// Security.
		{env: map[string]string{"SP_AUTH": "basic"}, errHas: []string{"auth", "kubernetes or none"}},
		{env: map[string]string{"SP_AUTH": "none", "SP_LISTEN_ADDRESS": ":8080"}, errHas: []string{"auth", "non-loopback", "allowUnauthenticated"}},
		// Plain HTTP beyond loopback only when said (callers' tokens and admin kubeconfigs would travel in clear).
		{env: map[string]string{"SP_LISTEN_ADDRESS": ":8080"}, errHas: []string{"listenAddress", "plain HTTP", "allowPlainHTTP"}},
		{env: map[string]string{"SP_LISTEN_ADDRESS": "10.0.0.7:8080"}, errHas: []string{"listenAddress", "allowPlainHTTP"}},
		{env: map[string]string{"SP_AUTH": "none", "SP_LISTEN_ADDRESS": "0.0.0.0:8080", "SP_ALLOW_PLAIN_HTTP": "true"}, errHas: []string{"non-loopback"}},
		{env: map[string]string{"SP_AUTH": "none", "SP_LISTEN_ADDRESS": "127.0.0.1:8080", "SP_AUTH_ANONYMOUS": "true"}, errHas: []string{"authAnonymous"}},
		{env: map[string]string{"SP_TLS_CERT_FILE": "/x"}, errHas: []string{"tlsCertFile", "go together"}},
		{env: map[string]string{"SP_NATS_CERT_FILE": "/x"}, errHas: []string{"natsCertFile", "go together"}},
		{env: map[string]string{"SP_NATS_USER": "sp"}, errHas: []string{"natsUser", "natsPasswordFile"}},
		{env: map[string]string{"SP_NATS_CREDS_FILE": "/a", "SP_NATS_NKEY_SEED_FILE": "/b"}, errHas: []string{"only one"}},
		{env: map[string]string{"SP_CLIENT_CA_FILE": "/does/not/exist"}, errHas: []string{"clientCAFile", "cannot read"}},
		{env: map[string]string{"SP_AUTH_API_GROUP": "Not A Group"}, errHas: []string{"authAPIGroup"}},
		{env: map[string]string{"SP_REQUEST_TIMEOUT": "0s"}, errHas: []string{"requestTimeout", "positive"}},
		// Day-2.
		{env: map[string]string{"SP_UPDATING_STATUS": "ACTIVE"}, errHas: []string{"updatingStatus", "UPDATING or PROGRESSING"}},
		{env: map[string]string{"SP_OPERATION_TIMEOUT_KUBEVIRT": "-1s"}, errHas: []string{"operationTimeoutKubevirt", "positive"}},
		{env: map[string]string{"SP_OPERATION_TIMEOUTS": "kubevirt=0s"}, errHas: []string{"operationTimeouts", "kubevirt: must be positive"}},
		{env: map[string]string{"SP_PROVISIONING_TIMEOUTS": "aws=1h"}, errHas: []string{"provisioningTimeouts", `"aws" is not a platform`}},
		{env: map[string]string{"SP_PROVISIONING_TIMEOUTS": "kubevirt"}, errHas: []string{"provisioningTimeouts", "platform=duration pairs"}},
		{env: map[string]string{"SP_PROVISIONING_TIMEOUTS": "kubevirt=1h", "SP_PROVISIONING_TIMEOUT_KUBEVIRT": "2h"}, errHas: []string{"provisioningTimeoutKubevirt", "set only one"}},
		{file: "namespce: typo\n", errHas: []string{"unknown key", "namespce"}},
	}
	for _, c := range cases {
		_, err := load(t, c.args, c.env, c.file)
		if err == nil {
			t.Errorf("%v %v %q: accepted", c.args, c.env, c.file)
			continue
		}
		for _, h := range c.errHas {
			if !strings.Contains(err.Error(), h) {
				t.Errorf("%v %v: error %q does not mention %q", c.args, c.env, err, h)
			}
		}
	}
}

// A secret value (natsURL may carry a password) never appears in an error message.
func TestSecretNotEchoed(t *testing.T) {
	_, err := load(t, nil, map[string]string{"SP_NATS_URL": "nats//sp:top-secret@nats:4222"}, "")
	if err == nil || !strings.Contains(err.Error(), "natsURL") || strings.Contains(err.Error(), "top-secret") {
		t.Fatalf("error %v", err)
	}
}

// Unauthenticated serving is allowed on loopback (dev), and elsewhere only when explicitly accepted.
func TestLoopbackRule(t *testing.T) {
	if _, err := load(t, nil, map[string]string{"SP_AUTH": "none", "SP_LISTEN_ADDRESS": "127.0.0.1:8080"}, ""); err != nil {
		t.Fatal(err)
	}
	if _, err := load(t, nil, map[string]string{"SP_AUTH": "none", "SP_LISTEN_ADDRESS": ":8080", "SP_ALLOW_UNAUTHENTICATED": "true", "SP_ALLOW_PLAIN_HTTP": "true"}, ""); err != nil {
		t.Fatal(err)
	}
}

// Plain HTTP is served on loopback (the default address), beyond it only when said, and HTTPS anywhere.
func TestPlainHTTPRule(t *testing.T) {
	dir := t.TempDir()
	cert, key := filepath.Join(dir, "tls.crt"), filepath.Join(dir, "tls.key")
	for _, f := range []string{cert, key} {
		if err := os.WriteFile(f, []byte("x"), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	for _, env := range []map[string]string{
		{},
		{"SP_LISTEN_ADDRESS": "[::1]:8080"},
		{"SP_LISTEN_ADDRESS": ":8080", "SP_ALLOW_PLAIN_HTTP": "true"},
		{"SP_LISTEN_ADDRESS": ":8443", "SP_TLS_CERT_FILE": cert, "SP_TLS_KEY_FILE": key},
	} {
		if _, err := load(t, nil, env, ""); err != nil {
			t.Errorf("%v: %v", env, err)
		}
	}
}

func TestServeRequirements(t *testing.T) {
	c := Defaults()
	if err := c.ValidateServe(); err == nil || !strings.Contains(err.Error(), "natsURL") {
		t.Fatalf("want natsURL required, got %v", err)
	}
	c.NATSURL = "nats://127.0.0.1:4222"
	if err := c.ValidateServe(); err == nil || !strings.Contains(err.Error(), "pullSecretFile or pullSecretName") {
		t.Fatalf("want a pull secret required, got %v", err)
	}
	c.PullSecretName = "ps"
	if err := c.ValidateServe(); err != nil {
		t.Fatal(err)
	}
}

// The per-platform timeout keys' help names each platform's default as the platform table has it.
func TestPlatformTimeoutDefaultsDocumented(t *testing.T) {
	usage := map[string]string{}
	for _, k := range Describe() {
		usage[k.Name] = k.Usage
	}
	for _, p := range platform.All() {
		for key, d := range map[string]time.Duration{"provisioningTimeouts": p.ProvisioningTimeout, "operationTimeouts": p.OperationTimeout} {
			if want := fmt.Sprintf("%s %dm", p.Name, int(d.Minutes())); !strings.Contains(usage[key], want) {
				t.Errorf("%s's help %q does not name %q, the platform table's default", key, usage[key], want)
			}
		}
	}
}

// The per-platform timeouts, as a YAML map, an env list and a flag, merged with the older per-platform keys.
func TestPlatformTimeouts(t *testing.T) {
	c, err := load(t, nil, map[string]string{"SP_PROVISIONING_TIMEOUT_BAREMETAL": "3h"}, "provisioningTimeouts:\n  kubevirt: 1h\noperationTimeouts: {baremetal: 4h}\n")
	if err != nil {
		t.Fatal(err)
	}
	if got := c.ProvisioningTimeouts(); len(got) != 2 || got["kubevirt"] != time.Hour || got["baremetal"] != 3*time.Hour {
		t.Errorf("provisioning timeouts %v", got)
	}
	if got := c.OperationTimeouts(); len(got) != 1 || got["baremetal"] != 4*time.Hour {
		t.Errorf("operation timeouts %v", got)
	}
	c, err = load(t, []string{"--operation-timeouts", "kubevirt=2h, baremetal=5h"}, map[string]string{"SP_OPERATION_TIMEOUTS": "kubevirt=9h"}, "")
	if err != nil {
		t.Fatal(err)
	}
	if got := c.OperationTimeoutPerPlatform.String(); got != "baremetal=5h0m0s,kubevirt=2h0m0s" {
		t.Errorf("the flag's operation timeouts: %s", got)
	}
}
