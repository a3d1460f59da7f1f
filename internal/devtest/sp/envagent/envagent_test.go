package envagent

import (
	"context"
	"io"
	"net/http"
	"net/http/httptest"
	"sync"
	"testing"
	"time"
)

// The agent stand-in behaves as the agent's router does: the bare body and the Idempotency-Key on every attempt,
// retries on a transport error, a 5xx or a 429 (three attempts), and a final answer on any other 4xx.
func TestAgentStandIn(t *testing.T) {
	var mu sync.Mutex
	var answers []int
	var seen []string
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body, _ := io.ReadAll(r.Body)
		mu.Lock()
		seen = append(seen, r.Method+" "+r.URL.RequestURI()+" "+r.Header.Get("Idempotency-Key")+" "+string(body))
		code := answers[0]
		answers = answers[1:]
		mu.Unlock()
		w.WriteHeader(code)
	}))
	defer srv.Close()
	a := &Agent{Backoff: time.Millisecond, MaxBackoff: 5 * time.Millisecond}
	endpoint := srv.URL + "/api/v1alpha1/clusters"
	cases := []struct {
		name    string
		answers []int
		ack     bool
		errKind string
		tries   int
	}{
		{"2xx", []int{201}, true, "", 1},
		{"5xx then 2xx", []int{503, 500, 200}, true, "", 3},
		{"429 then 2xx", []int{429, 204}, true, "", 2},
		{"409 final", []int{409, 201}, false, ErrorNonRetryable, 1},
		{"422 final", []int{422}, false, ErrorNonRetryable, 1},
		{"404 final", []int{404}, false, ErrorNonRetryable, 1},
		{"408 final", []int{408}, false, ErrorNonRetryable, 1},
		{"exhausted", []int{503, 503, 503, 201}, false, ErrorRetryExhausted, 3},
	}
	for _, c := range cases {
		mu.Lock()
		answers, seen = append([]int(nil), c.answers...), nil
		mu.Unlock()
		o := a.Create(context.Background(), endpoint, "ce-1", "res-1", []byte(`{"version":"1.30"}`))
		if o.Acknowledged != c.ack || o.Error != c.errKind || len(o.Statuses) != c.tries {
			t.Errorf("%s: %+v", c.name, o)
		}
		for _, s := range seen {
			if s != "POST /api/v1alpha1/clusters ce-1 {\"version\":\"1.30\"}" {
				t.Errorf("%s: request %q", c.name, s)
			}
		}
	}
	mu.Lock()
	answers, seen = []int{204}, nil
	mu.Unlock()
	if o := a.Delete(context.Background(), endpoint, "ce-2", "res-1"); !o.Acknowledged || len(seen) != 1 || seen[0] != "DELETE /api/v1alpha1/clusters/res-1 ce-2 " {
		t.Errorf("delete: %+v %q", o, seen)
	}
	mu.Lock()
	answers, seen = []int{201}, nil
	mu.Unlock()
	a.SendID = true
	if o := a.Create(context.Background(), endpoint, "ce-3", "res-3", []byte(`{}`)); !o.Acknowledged || seen[0] != "POST /api/v1alpha1/clusters?id=res-3 ce-3 {}" {
		t.Errorf("create with the agent's id: %+v %q", o, seen)
	}
	srv.Close()
	if o := a.Create(context.Background(), endpoint, "ce-4", "res-4", []byte(`{}`)); o.Acknowledged || o.Error != ErrorRetryExhausted || len(o.Statuses) != 3 || o.Statuses[0] != 0 {
		t.Errorf("transport errors: %+v", o)
	}
}
