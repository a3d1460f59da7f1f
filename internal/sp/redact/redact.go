// Package redact keeps credentials and addresses out of what the SP shows: URLs in logs lose their user
// information and query, errors shown in health messages are reduced to their kind (no URL, host name, IP
// address or token), and every health message loses whatever address is left in it, because the health endpoints
// answer unauthenticated callers.
package redact

import (
	"context"
	"crypto/x509"
	"errors"
	"net"
	"net/url"
	"os"
	"regexp"
	"strings"
	"syscall"
)

// URL returns u without user information (user name, password), query and fragment; a value that is not a URL is
// replaced entirely. Comma-separated URL lists (NATS accepts them) are redacted element by element.
func URL(u string) string {
	if strings.Contains(u, ",") {
		parts := strings.Split(u, ",")
		for i, p := range parts {
			parts[i] = URL(strings.TrimSpace(p))
		}
		return strings.Join(parts, ",")
	}
	p, err := url.Parse(u)
	if err != nil || p.Host == "" {
		return "(redacted)"
	}
	if p.User != nil {
		p.User = url.User("redacted")
	}
	p.RawQuery, p.Fragment, p.RawFragment = "", "", ""
	return p.String()
}

// Cause describes an error by its kind only — what an unauthenticated caller may read: never a URL, host, address
// or credential. Unknown errors become "unexpected error" (the full error belongs in the log).
func Cause(err error) string {
	if err == nil {
		return ""
	}
	var (
		dnsErr  *net.DNSError
		opErr   *net.OpError
		unknown x509.UnknownAuthorityError
		hostErr x509.HostnameError
		invalid x509.CertificateInvalidError
		urlErr  *url.Error
	)
	switch {
	case errors.Is(err, context.DeadlineExceeded) || errors.Is(err, os.ErrDeadlineExceeded):
		return "timed out"
	case errors.Is(err, context.Canceled):
		return "canceled"
	case errors.Is(err, syscall.ECONNREFUSED):
		return "connection refused"
	case errors.Is(err, syscall.ECONNRESET) || errors.Is(err, syscall.EPIPE):
		return "connection reset"
	case errors.Is(err, syscall.EHOSTUNREACH) || errors.Is(err, syscall.ENETUNREACH):
		return "host unreachable"
	case errors.As(err, &dnsErr):
		return "name resolution failed"
	case errors.As(err, &unknown), errors.As(err, &hostErr), errors.As(err, &invalid):
		return "TLS certificate not trusted"
	case errors.As(err, &urlErr) && urlErr.Timeout():
		return "timed out"
	case errors.As(err, &opErr):
		if opErr.Timeout() {
			return "timed out"
		}
		return "network error"
	}
	msg := strings.ToLower(err.Error())
	for _, k := range []struct{ needle, kind string }{
		{"unauthorized", "unauthorized (credentials rejected)"},
		{"authorization violation", "authorization violation (credentials rejected)"},
		{"authentication", "authentication failed (credentials rejected)"},
		{"forbidden", "forbidden (missing permissions)"},
		{"timeout", "timed out"},
		{"tls", "TLS error"},
		{"x509", "TLS certificate not trusted"},
		{"eof", "connection closed"},
		{"no such host", "name resolution failed"},
	} {
		if strings.Contains(msg, k.needle) {
			return k.kind
		}
	}
	return "unexpected error"
}

// addresses are what Text removes: URLs (any scheme), IPv6 addresses (bracketed, with an optional port, or bare
// with at least two colons), IPv4 addresses with an optional port, and host:port pairs.
var addresses = regexp.MustCompile(`[a-zA-Z][a-zA-Z0-9+.-]*://[^\s"']+` +
	`|\[[0-9a-fA-F:.]+\](:[0-9]+)?` +
	`|\b[0-9a-fA-F]{0,4}(:[0-9a-fA-F]{0,4}){2,7}\b` +
	`|\b[0-9]{1,3}(\.[0-9]{1,3}){3}(:[0-9]+)?\b` +
	`|\b[a-zA-Z0-9]([a-zA-Z0-9.-]*[a-zA-Z0-9])?:[0-9]{1,5}\b`)

// Text removes every URL, IP address and host:port from a message meant for unauthenticated readers (health
// messages), keeping the rest of it; a message without addresses is returned unchanged.
func Text(msg string) string {
	return addresses.ReplaceAllString(msg, "(address redacted)")
}
