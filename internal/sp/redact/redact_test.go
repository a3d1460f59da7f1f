package redact

import (
	"context"
	"crypto/x509"
	"errors"
	"fmt"
	"net"
	"net/url"
	"strings"
	"syscall"
	"testing"
)

func TestURL(t *testing.T) {
	for _, c := range []struct{ in, want string }{
		{"nats://user:s3cret@nats.example.com:4222", "nats://redacted@nats.example.com:4222"},
		{"nats://token@127.0.0.1:4222", "nats://redacted@127.0.0.1:4222"},
		{"https://spm:8080/api/v1alpha1?token=abc#frag", "https://spm:8080/api/v1alpha1"},
		{"nats://a:b@h1:4222, nats://c:d@h2:4222", "nats://redacted@h1:4222,nats://redacted@h2:4222"},
		{"not a url with password p4ss", "(redacted)"},
		{"nats://nats:4222", "nats://nats:4222"},
	} {
		if got := URL(c.in); got != c.want {
			t.Errorf("URL(%q) = %q, want %q", c.in, got, c.want)
		}
		for _, secret := range []string{"s3cret", "token@", "abc", "p4ss", ":b@", ":d@"} {
			if strings.Contains(URL(c.in), secret) {
				t.Errorf("URL(%q) leaks %q", c.in, secret)
			}
		}
	}
}

func TestCause(t *testing.T) {
	op := func(err error) error {
		return &url.Error{Op: "Get", URL: "https://api.hub.example.com:6443/apis?token=t0k3n", Err: &net.OpError{Op: "dial", Net: "tcp", Addr: &net.TCPAddr{IP: net.IPv4(10, 1, 2, 3), Port: 6443}, Err: err}}
	}
	for _, c := range []struct {
		err  error
		want string
	}{
		{op(syscall.ECONNREFUSED), "connection refused"},
		{op(syscall.EHOSTUNREACH), "host unreachable"},
		{fmt.Errorf("wrapped: %w", context.DeadlineExceeded), "timed out"},
		{&url.Error{Op: "Get", URL: "https://10.1.2.3", Err: x509.UnknownAuthorityError{}}, "TLS certificate not trusted"},
		{&net.DNSError{Name: "api.hub.example.com", Err: "no such host"}, "name resolution failed"},
		{errors.New(`Unauthorized: token "abc" rejected by https://10.1.2.3`), "unauthorized (credentials rejected)"},
		{errors.New("something odd at https://10.1.2.3:6443"), "unexpected error"},
	} {
		got := Cause(c.err)
		if got != c.want {
			t.Errorf("Cause(%v) = %q, want %q", c.err, got, c.want)
		}
		for _, leak := range []string{"10.1.2.3", "example.com", "6443", "t0k3n", "abc"} {
			if strings.Contains(got, leak) {
				t.Errorf("Cause(%v) leaks %q", c.err, leak)
			}
		}
	}
	if Cause(nil) != "" {
		t.Error("Cause(nil)")
	}
}

func TestText(t *testing.T) {
	for _, c := range []struct{ in, want string }{
		{`API server unreachable: Get "https://api.hub.example.com:6443/api?timeout=5s": dial tcp 10.1.2.3:6443: connect: connection refused`,
			`API server unreachable: Get "(address redacted)": dial tcp (address redacted): connect: connection refused`},
		{"NATS at nats.dcm.svc:4222 and [fd00::1]:4222, fd00::2 or 10.0.0.1", "NATS at (address redacted) and (address redacted), (address redacted) or (address redacted)"},
		{"operator Available; supports OpenShift 4.14–4.20", "operator Available; supports OpenShift 4.14–4.20"},
		{"no JetStream stream captures dcm.providers.sp.cluster.instances.*.status: 3 status(es) held", "no JetStream stream captures dcm.providers.sp.cluster.instances.*.status: 3 status(es) held"},
		{"no answer within 2s; 1 InfraEnvs, 10 Agents in hardware-inventory", "no answer within 2s; 1 InfraEnvs, 10 Agents in hardware-inventory"},
	} {
		if got := Text(c.in); got != c.want {
			t.Errorf("Text(%q)\n = %q\nwant %q", c.in, got, c.want)
		}
	}
}
