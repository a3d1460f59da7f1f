package config

import (
	"net/url"
	"strings"

	"github.com/dcm-sp/acm-cluster-sp/internal/loopback"
)

// validateTransport refuses credentials that would cross the network in clear: a NATS password (natsPasswordFile,
// or user information in natsURL) to a server reached over nats:// or ws:// without TLS, and the registry's bearer
// token over http:// — each unless the host is loopback or allowPlaintextCredentials says so. NATS .creds and NKey
// seeds are not refused: the server's nonce is signed, the seed never leaves. With natsCAFile or natsCertFile the
// NATS client requires TLS whatever the scheme.
func (c *Config) validateTransport(bad func(key, format string, args ...any) error) error {
	if c.AllowPlaintextCredentials {
		return nil
	}
	const how = "use TLS, or set allowPlaintextCredentials: true if the network between them is trusted"
	natsTLS := c.NATSCAFile != "" || c.NATSCertFile != ""
	for _, raw := range strings.Split(c.NATSURL, ",") {
		u, err := url.Parse(strings.TrimSpace(raw))
		if err != nil || natsTLS || u.Scheme == "tls" || u.Scheme == "wss" || loopback.Is(u.Hostname()) {
			continue
		}
		if _, hasPassword := u.User.Password(); hasPassword || u.User != nil && u.User.Username() != "" {
			return bad("natsURL", "carries credentials, which would be sent in clear over %s:// to a non-loopback host (value hidden); %s", u.Scheme, how)
		}
		if c.NATSPasswordFile != "" {
			return bad("natsPasswordFile", "the NATS password would be sent in clear over %s:// to %s; %s", u.Scheme, u.Hostname(), how)
		}
	}
	if c.RegistrationTokenFile != "" && c.RegistrationURL != "" {
		if u, err := url.Parse(c.RegistrationURL); err == nil && u.Scheme == "http" && !loopback.Is(u.Hostname()) {
			return bad("registrationTokenFile", "the registry's bearer token would be sent in clear over http:// to %s; %s", u.Hostname(), how)
		}
	}
	return nil
}
