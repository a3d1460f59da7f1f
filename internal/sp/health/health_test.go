package health

import (
	"context"
	"strings"
	"testing"
	"time"
)

func TestChecker(t *testing.T) {
	release := make(chan struct{})
	c := New([]Check{
		{Name: "fast", Run: func(context.Context) (bool, string) { return true, "fine" }},
		{Name: "hangs", Run: func(ctx context.Context) (bool, string) {
			select {
			case <-release:
			case <-ctx.Done():
			}
			return true, "late"
		}},
		{Name: "side", Informational: true, Run: func(context.Context) (bool, string) { return false, "down" }},
	}, Options{Timeout: 100 * time.Millisecond})
	defer close(release)

	// Before the first round nothing is known: unhealthy, but the answer is immediate.
	h := c.Report()
	if h.Status != "unhealthy" || h.Checks[0].Message != "not checked yet" {
		t.Fatalf("before checks: %+v", h)
	}
	start := time.Now()
	c.RunOnce(context.Background())
	if took := time.Since(start); took > time.Second {
		t.Fatalf("a round took %v: the hanging check was not bounded", took)
	}
	h = c.Report()
	byName := map[string]string{}
	for _, ch := range h.Checks {
		byName[ch.Name] = string(ch.Status) + ": " + ch.Message
	}
	if byName["fast"] != "healthy: fine" || !strings.HasPrefix(byName["hangs"], "unhealthy: no answer within 100ms") || byName["side"] != "unhealthy: down" {
		t.Fatalf("checks %v", byName)
	}
	if h.Status != "unhealthy" {
		t.Fatalf("a failing check must make the SP unhealthy: %+v", h)
	}
	if !c.Ready() {
		t.Fatal("an unhealthy hub must not take the replica out of the Service: /readyz follows the caches only")
	}
	if h.Version == "" || h.Checks[2].Informational == nil || !*h.Checks[2].Informational {
		t.Fatalf("report %+v", h)
	}
}

// Informational checks never decide the status; the readiness condition alone decides /readyz.
func TestInformationalAndReady(t *testing.T) {
	ready := false
	c := New([]Check{
		{Name: "hub", Run: func(context.Context) (bool, string) { return true, "ok" }},
		{Name: "nats", Informational: true, Run: func(context.Context) (bool, string) { return false, "disconnected" }},
	}, Options{Ready: func() bool { return ready }})
	c.RunOnce(context.Background())
	if c.Report().Status != "healthy" {
		t.Fatal("an informational failure made the SP unhealthy")
	}
	if c.Ready() {
		t.Fatal("ready although the extra condition is false")
	}
	ready = true
	if !c.Ready() {
		t.Fatal("not ready although the condition holds")
	}
}

// Every check's message goes through the redaction, whatever the check wrote: the health endpoints answer
// unauthenticated callers, so no URL, IP address or host:port of the hub (or anything else) may reach them.
func TestMessagesAreRedacted(t *testing.T) {
	c := New([]Check{
		{Name: "url", Run: func(context.Context) (bool, string) {
			return false, `API server unreachable: Get "https://api.hub.example.com:6443/api?timeout=5s": dial tcp 10.1.2.3:6443: connect: connection refused`
		}},
		{Name: "ipv6", Informational: true, Run: func(context.Context) (bool, string) { return false, "cannot reach [fd00::1]:4222 or fd00::2" }},
		{Name: "plain", Run: func(context.Context) (bool, string) {
			return true, "operator Available; supports OpenShift 4.14–4.20"
		}},
	}, Options{})
	c.RunOnce(context.Background())
	msgs := map[string]string{}
	for _, ch := range c.Report().Checks {
		msgs[ch.Name] = ch.Message
	}
	for name, msg := range msgs {
		for _, leak := range []string{"example.com", "10.1.2.3", "6443", "https://", "fd00", "4222"} {
			if strings.Contains(msg, leak) {
				t.Errorf("check %s: message %q leaks %q", name, msg, leak)
			}
		}
	}
	if msgs["plain"] != "operator Available; supports OpenShift 4.14–4.20" {
		t.Errorf("a message without addresses changed: %q", msgs["plain"])
	}
	if !strings.HasPrefix(msgs["url"], "API server unreachable: ") {
		t.Errorf("the redaction lost the message's meaning: %q", msgs["url"])
	}
}
