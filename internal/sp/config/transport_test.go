package config

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// A password or bearer token is never sent in clear to another host: natsPasswordFile (or a password in natsURL)
// needs TLS to NATS, registrationTokenFile needs https — unless the host is this one, or allowPlaintextCredentials
// says the network is trusted.
func TestCredentialsNeedTLS(t *testing.T) {
	dir := t.TempDir()
	file := filepath.Join(dir, "secret")
	if err := os.WriteFile(file, []byte("x"), 0o600); err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct {
		name    string
		set     func(*Config)
		refused string // the key the error names; "" when accepted
	}{
		{"NATS password over nats://", func(c *Config) {
			c.NATSURL, c.NATSUser, c.NATSPasswordFile = "nats://nats.dcm.svc:4222", "sp", file
		}, "natsPasswordFile"},
		{"NATS password over ws://", func(c *Config) {
			c.NATSURL, c.NATSUser, c.NATSPasswordFile = "ws://nats.dcm.svc:8080", "sp", file
		}, "natsPasswordFile"},
		{"a password inside natsURL", func(c *Config) { c.NATSURL = "nats://sp:hunter2@nats.dcm.svc:4222" }, "natsURL"},
		{"one plaintext server among several", func(c *Config) {
			c.NATSURL, c.NATSUser, c.NATSPasswordFile = "tls://a.dcm.svc:4222,nats://b.dcm.svc:4222", "sp", file
		}, "natsPasswordFile"},
		{"NATS password over tls://", func(c *Config) {
			c.NATSURL, c.NATSUser, c.NATSPasswordFile = "tls://nats.dcm.svc:4222", "sp", file
		}, ""},
		{"NATS password over nats:// with natsCAFile (TLS required)", func(c *Config) {
			c.NATSURL, c.NATSUser, c.NATSPasswordFile, c.NATSCAFile = "nats://nats.dcm.svc:4222", "sp", file, file
		}, ""},
		{"NATS password on loopback", func(c *Config) {
			c.NATSURL, c.NATSUser, c.NATSPasswordFile = "nats://127.0.0.1:4222", "sp", file
		}, ""},
		{"NATS without credentials over nats://", func(c *Config) { c.NATSURL = "nats://nats.dcm.svc:4222" }, ""},
		{"NATS .creds over nats:// (the seed never leaves: the server's nonce is signed)", func(c *Config) {
			c.NATSURL, c.NATSCredsFile = "nats://nats.dcm.svc:4222", file
		}, ""},
		{"registry token over http://", func(c *Config) {
			c.RegistrationURL, c.APIHost, c.RegistrationTokenFile = "http://spm.dcm.svc:8080/api/v1alpha1", "https://sp:8443", file
		}, "registrationTokenFile"},
		{"registry token over https://", func(c *Config) {
			c.RegistrationURL, c.APIHost, c.RegistrationTokenFile = "https://spm.dcm.svc:8443/api/v1alpha1", "https://sp:8443", file
		}, ""},
		{"registry token on loopback", func(c *Config) {
			c.RegistrationURL, c.APIHost, c.RegistrationTokenFile = "http://localhost:8080/api/v1alpha1", "https://sp:8443", file
		}, ""},
		{"registry without token over http://", func(c *Config) {
			c.RegistrationURL, c.APIHost = "http://spm.dcm.svc:8080/api/v1alpha1", "https://sp:8443"
		}, ""},
		{"allowed explicitly", func(c *Config) {
			c.NATSURL, c.NATSUser, c.NATSPasswordFile = "nats://nats.dcm.svc:4222", "sp", file
			c.RegistrationURL, c.APIHost, c.RegistrationTokenFile = "http://spm.dcm.svc:8080/api/v1alpha1", "https://sp:8443", file
			c.AllowPlaintextCredentials = true
		}, ""},
	} {
		t.Run(c.name, func(t *testing.T) {
			cfg := Defaults()
			c.set(&cfg)
			err := cfg.Validate()
			switch {
			case c.refused == "" && err != nil:
				t.Fatalf("refused: %v", err)
			case c.refused != "" && (err == nil || !strings.HasPrefix(err.Error(), "config: "+c.refused+":") || !strings.Contains(err.Error(), "allowPlaintextCredentials")):
				t.Fatalf("got %v, want a refusal naming %s and how to allow it", err, c.refused)
			case err != nil && strings.Contains(err.Error(), "hunter2"):
				t.Fatalf("the error shows the password: %v", err)
			}
		})
	}
}
