package proxy

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"strings"
	"sync"
	"time"

	authorizationv1 "k8s.io/api/authorization/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// MetricsAuth says who may read /metrics on the metrics listener (/healthz and /readyz stay open: the kubelet
// probes them without credentials).
type MetricsAuth string

const (
	// MetricsOpen serves /metrics to whoever reaches the listener (loopback by default; a NetworkPolicy's job
	// elsewhere).
	MetricsOpen MetricsAuth = "none"
	// MetricsSelfReview serves /metrics to a bearer token kube-apiserver says may get the non-resource URL
	// /metrics. The proxy asks with the scraper's own token (a SelfSubjectAccessReview, which every authenticated
	// user may create), so it needs no identity or permission of its own: what a sidecar in a tenant's namespace,
	// given no token, can do. Passthrough mode only.
	MetricsSelfReview MetricsAuth = "self-review"
)

// selfReviewTTL is how long an answer is reused for the same token.
const selfReviewTTL = time.Minute

// selfReviewer authorizes scrapes with SelfSubjectAccessReviews, caching each token's answer (by its SHA-256) for
// selfReviewTTL.
type selfReviewer struct {
	e     *engine
	now   func() time.Time
	mu    sync.Mutex
	cache map[[sha256.Size]byte]review
}

type review struct {
	allowed bool
	at      time.Time
}

// maxCachedReviews bounds the cache: past it, the cache starts over.
const maxCachedReviews = 1024

func (s *selfReviewer) wrap(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		token, ok := strings.CutPrefix(r.Header.Get("Authorization"), "Bearer ")
		if !ok || token == "" {
			w.Header().Set("WWW-Authenticate", `Bearer realm="capi-private proxy metrics"`)
			http.Error(w, "Unauthorized: a bearer token allowed to get /metrics is required", http.StatusUnauthorized)
			return
		}
		allowed, code, err := s.allowed(r.Context(), token)
		switch {
		case err != nil:
			http.Error(w, "cannot review the token with kube-apiserver", code)
		case !allowed:
			http.Error(w, "Forbidden: the token may not get /metrics", http.StatusForbidden)
		default:
			next.ServeHTTP(w, r)
		}
	})
}

// allowed asks kube-apiserver (or the cache) whether token may get /metrics. A token kube-apiserver does not
// accept is answered 401; kube-apiserver unreachable, 503 (neither is cached).
func (s *selfReviewer) allowed(ctx context.Context, token string) (bool, int, error) {
	key := sha256.Sum256([]byte(token))
	now := s.now()
	s.mu.Lock()
	if c, ok := s.cache[key]; ok && now.Sub(c.at) < selfReviewTTL {
		s.mu.Unlock()
		return c.allowed, http.StatusOK, nil
	}
	s.mu.Unlock()

	body, _ := json.Marshal(authorizationv1.SelfSubjectAccessReview{
		TypeMeta: metav1.TypeMeta{APIVersion: "authorization.k8s.io/v1", Kind: "SelfSubjectAccessReview"},
		Spec: authorizationv1.SelfSubjectAccessReviewSpec{
			NonResourceAttributes: &authorizationv1.NonResourceAttributes{Path: "/metrics", Verb: "get"},
		},
	})
	ctx, cancel := context.WithTimeout(ctx, 5*time.Second)
	defer cancel()
	u := *s.e.base
	u.Path += "/apis/authorization.k8s.io/v1/selfsubjectaccessreviews"
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, u.String(), bytes.NewReader(body))
	if err != nil {
		return false, http.StatusInternalServerError, err
	}
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Authorization", "Bearer "+token)
	resp, err := s.e.rt.RoundTrip(req)
	if err != nil {
		return false, http.StatusServiceUnavailable, err
	}
	defer resp.Body.Close()
	raw, err := io.ReadAll(io.LimitReader(resp.Body, 64<<10))
	switch {
	case err != nil:
		return false, http.StatusServiceUnavailable, err
	case resp.StatusCode == http.StatusUnauthorized:
		return false, http.StatusUnauthorized, fmt.Errorf("kube-apiserver does not accept the token")
	case resp.StatusCode != http.StatusCreated && resp.StatusCode != http.StatusOK:
		return false, http.StatusServiceUnavailable, fmt.Errorf("SelfSubjectAccessReview answered %d", resp.StatusCode)
	}
	var out authorizationv1.SelfSubjectAccessReview
	if err := json.Unmarshal(raw, &out); err != nil {
		return false, http.StatusServiceUnavailable, err
	}
	s.mu.Lock()
	if len(s.cache) >= maxCachedReviews {
		s.cache = map[[sha256.Size]byte]review{}
	}
	s.cache[key] = review{allowed: out.Status.Allowed, at: now}
	s.mu.Unlock()
	return out.Status.Allowed, http.StatusOK, nil
}
