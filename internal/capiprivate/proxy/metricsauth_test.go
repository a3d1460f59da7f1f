package proxy

import (
	"strings"
	"testing"
)

// --metrics-auth takes none or self-review, and self-review only in passthrough mode: the review must carry the
// scraper's token alone, not the proxy's own credentials.
func TestMetricsAuthOptions(t *testing.T) {
	for _, c := range []struct {
		auth    AuthMode
		metrics MetricsAuth
		err     string
	}{
		{AuthPassthrough, "", ""},
		{AuthPassthrough, MetricsSelfReview, ""},
		{"", MetricsSelfReview, ""},
		{AuthOwnIdentity, MetricsOpen, ""},
		{AuthOwnIdentity, MetricsSelfReview, "needs --auth passthrough"},
		{AuthPassthrough, "token", `"token": none or self-review`},
	} {
		o := RunOptions{Options: Options{Auth: c.auth}, MetricsAuth: c.metrics}
		_, err := o.complete()
		if c.err == "" && err != nil || c.err != "" && (err == nil || !strings.Contains(err.Error(), c.err)) {
			t.Errorf("auth %q metrics-auth %q: %v, want %q", c.auth, c.metrics, err, c.err)
		}
		if c.err == "" && c.metrics == "" && o.MetricsAuth != MetricsOpen {
			t.Errorf("default metrics-auth %q, want %q", o.MetricsAuth, MetricsOpen)
		}
	}
}
