// Package envagent is a test stand-in for DCM's Environment Agent as it calls an external SP (create, delete,
// retries). Test-only: what the agent would do, from its source, without its NATS side.
package envagent

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"io"
	"net/http"
	"net/url"
	"time"
)

// Agent plays DCM's Environment Agent as it calls an external SP, following environment-agent
// 8e638b2 (internal/routing: forwarder.go, router.go, types.go):
//
//   - create: POST {endpoint} with the bare spec as the body (Content-Type application/json) and
//     Idempotency-Key: <the inbound CloudEvent id>; no instance id;
//   - delete: DELETE {endpoint}/{resourceId} with the same header;
//   - any 2xx is success and the body is ignored;
//   - a transport error, a 5xx or a 429 is retried, Attempts times in all, after Backoff × 2ⁿ (capped at
//     MaxBackoff; Retry-After is ignored); any other 4xx is final at once.
//
// A final failure becomes an error event to DCM (NON_RETRYABLE_SP_ERROR or RETRY_EXHAUSTED), which fails the
// instance. SendID plays the one-line change that closes the agent's upstream gap: the create also carries
// ?id=<DCM's resource id>, so the SP adopts DCM's id and a later DELETE by that id finds the cluster.
type Agent struct {
	Client     *http.Client  // default: http.DefaultClient
	Attempts   int           // default 3
	Backoff    time.Duration // default 2s
	MaxBackoff time.Duration // default 30s
	SendID     bool
}

// The error kinds of the agent's error events.
const (
	ErrorNonRetryable   = "NON_RETRYABLE_SP_ERROR"
	ErrorRetryExhausted = "RETRY_EXHAUSTED"
)

// Outcome is what the agent made of one request.
type Outcome struct {
	Acknowledged bool     // a 2xx: the agent publishes creation-/deletion-acknowledged
	Error        string   // otherwise the error event's kind
	Statuses     []int    // every attempt's HTTP status, 0 for a transport error
	Location     string   // the last answer's Location header (the agent ignores it; tests read it)
	Body         string   // the last answer's body (ignored by the agent)
	Errors       []string // transport errors
}

// Create forwards a creation request.
func (a *Agent) Create(ctx context.Context, endpoint, eventID, resourceID string, spec []byte) Outcome {
	target := endpoint
	if a.SendID {
		target += "?id=" + url.QueryEscape(resourceID)
	}
	return a.forward(ctx, func() (*http.Request, error) {
		req, err := http.NewRequestWithContext(ctx, http.MethodPost, target, bytes.NewReader(spec))
		if err == nil {
			req.Header.Set("Content-Type", "application/json")
			req.Header.Set("Idempotency-Key", eventID)
		}
		return req, err
	})
}

// Delete forwards a deletion request.
func (a *Agent) Delete(ctx context.Context, endpoint, eventID, resourceID string) Outcome {
	target, err := url.JoinPath(endpoint, url.PathEscape(resourceID))
	return a.forward(ctx, func() (*http.Request, error) {
		if err != nil {
			return nil, err
		}
		req, err := http.NewRequestWithContext(ctx, http.MethodDelete, target, nil)
		if err == nil {
			req.Header.Set("Idempotency-Key", eventID)
		}
		return req, err
	})
}

func (a *Agent) forward(ctx context.Context, build func() (*http.Request, error)) Outcome {
	attempts, backoff, maxBackoff, client := a.Attempts, a.Backoff, a.MaxBackoff, a.Client
	if attempts < 1 {
		attempts = 3
	}
	if backoff == 0 {
		backoff = 2 * time.Second
	}
	if maxBackoff == 0 {
		maxBackoff = 30 * time.Second
	}
	if client == nil {
		client = http.DefaultClient
	}
	var o Outcome
	for attempt := 0; attempt < attempts; attempt++ {
		code, retryable := a.attempt(client, build, &o)
		if code >= 200 && code < 300 {
			o.Acknowledged = true
			return o
		}
		if !retryable {
			o.Error = ErrorNonRetryable
			return o
		}
		if attempt < attempts-1 {
			select {
			case <-ctx.Done():
				o.Error = ErrorRetryExhausted
				return o
			case <-time.After(min(backoff<<attempt, maxBackoff)):
			}
		}
	}
	o.Error = ErrorRetryExhausted
	return o
}

// attempt sends one request; retryable is the agent's IsRetryable (transport errors, 5xx, 429).
func (a *Agent) attempt(client *http.Client, build func() (*http.Request, error), o *Outcome) (code int, retryable bool) {
	req, err := build()
	if err != nil {
		o.Errors = append(o.Errors, err.Error())
		o.Statuses = append(o.Statuses, 0)
		return 0, false
	}
	resp, err := client.Do(req)
	if err != nil {
		o.Errors = append(o.Errors, err.Error())
		o.Statuses = append(o.Statuses, 0)
		return 0, !errors.Is(err, context.Canceled)
	}
	defer resp.Body.Close()
	body, _ := io.ReadAll(io.LimitReader(resp.Body, 1<<20))
	o.Body = string(body)
	o.Location = resp.Header.Get("Location")
	o.Statuses = append(o.Statuses, resp.StatusCode)
	return resp.StatusCode, resp.StatusCode >= 500 || resp.StatusCode == http.StatusTooManyRequests
}

// ID reads the id from an SP's answer (tests; the agent never reads it).
func (o Outcome) ID() string {
	var v struct {
		ID string `json:"id"`
	}
	_ = json.Unmarshal([]byte(o.Body), &v)
	return v.ID
}
