package inject

import (
	"bytes"
	"net/http"
	"net/http/httptest"
	"testing"
)

// The webhook reads at most podReviewLimits.MaxRequestBytes of a review: a larger body is answered 413 without
// reaching the handler; one within the limit reaches it whole.
func TestWebhookBodyLimit(t *testing.T) {
	var got int
	mux := webhookMux(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		var b bytes.Buffer
		_, _ = b.ReadFrom(r.Body)
		got = b.Len()
	}))
	for _, c := range []struct {
		size int64
		want int
	}{{podReviewLimits.MaxRequestBytes + 1, http.StatusRequestEntityTooLarge}, {podReviewLimits.MaxRequestBytes, http.StatusOK}} {
		got = -1
		rec := httptest.NewRecorder()
		mux.ServeHTTP(rec, httptest.NewRequest(http.MethodPost, Path, bytes.NewReader(make([]byte, c.size))))
		if rec.Code != c.want {
			t.Errorf("%d bytes: %d, want %d", c.size, rec.Code, c.want)
		}
		if wantGot := map[bool]int{true: int(c.size), false: -1}[c.want == http.StatusOK]; got != wantGot {
			t.Errorf("%d bytes: the handler read %d, want %d", c.size, got, wantGot)
		}
	}
}
