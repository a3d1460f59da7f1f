package security_test

import (
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"slices"
	"sync"
	"testing"

	authenticationv1 "k8s.io/api/authentication/v1"
	authorizationv1 "k8s.io/api/authorization/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/rest"
)

// hubAudience is the audience of tokens for the hub itself (a TokenReview without audiences asks for it).
const hubAudience = "https://kubernetes.default.svc"

// reviewHub plays the two review APIs of a hub's API server on a loopback listener, as the Kubernetes API
// reference describes them: a TokenReview is authenticated when the token is known and one of its audiences is
// among those asked for (the hub's own when none are), answering that intersection; a SubjectAccessReview is
// allowed when the test's rules say so. It records every review, and can answer every request with an HTTP error
// instead (the hub down, or refusing the SP's own identity).
type reviewHub struct {
	srv *httptest.Server

	mu       sync.Mutex
	tokens   map[string]token
	allow    func(authorizationv1.SubjectAccessReviewSpec) authorizationv1.SubjectAccessReviewStatus
	fail     int    // non-zero: every review is answered with this HTTP status
	failSAR  int    // non-zero: every SubjectAccessReview is answered with this HTTP status
	checkErr string // non-empty: TokenReviews answer "could not be checked" with this error
	trs      []authenticationv1.TokenReviewSpec
	sars     []authorizationv1.SubjectAccessReviewSpec
}

// token is what the hub knows about a bearer token.
type token struct {
	user      authenticationv1.UserInfo
	audiences []string // nil: the hub's own
}

func newReviewHub(t *testing.T) *reviewHub {
	t.Helper()
	h := &reviewHub{tokens: map[string]token{},
		allow: func(authorizationv1.SubjectAccessReviewSpec) authorizationv1.SubjectAccessReviewStatus {
			return authorizationv1.SubjectAccessReviewStatus{}
		}}
	mux := http.NewServeMux()
	mux.HandleFunc("POST /apis/authentication.k8s.io/v1/tokenreviews", h.tokenReview)
	mux.HandleFunc("POST /apis/authorization.k8s.io/v1/subjectaccessreviews", h.accessReview)
	h.srv = httptest.NewServer(mux)
	t.Cleanup(h.srv.Close)
	return h
}

// config is the hub's connection, as the SP gets it.
func (h *reviewHub) config() *rest.Config { return &rest.Config{Host: h.srv.URL} }

func (h *reviewHub) addToken(value, username string, groups []string, audiences ...string) {
	h.mu.Lock()
	defer h.mu.Unlock()
	if len(audiences) == 0 {
		audiences = []string{hubAudience}
	}
	h.tokens[value] = token{user: authenticationv1.UserInfo{Username: username, UID: "uid-" + username, Groups: groups}, audiences: audiences}
}

func (h *reviewHub) setAllow(f func(authorizationv1.SubjectAccessReviewSpec) authorizationv1.SubjectAccessReviewStatus) {
	h.mu.Lock()
	defer h.mu.Unlock()
	h.allow = f
}

func (h *reviewHub) failWith(status int) {
	h.mu.Lock()
	defer h.mu.Unlock()
	h.fail = status
}

func (h *reviewHub) failAccessWith(status int) {
	h.mu.Lock()
	defer h.mu.Unlock()
	h.failSAR = status
}

func (h *reviewHub) cannotCheck(msg string) {
	h.mu.Lock()
	defer h.mu.Unlock()
	h.checkErr = msg
}

func (h *reviewHub) tokenReviews() []authenticationv1.TokenReviewSpec {
	h.mu.Lock()
	defer h.mu.Unlock()
	return slices.Clone(h.trs)
}

func (h *reviewHub) accessReviews() []authorizationv1.SubjectAccessReviewSpec {
	h.mu.Lock()
	defer h.mu.Unlock()
	return slices.Clone(h.sars)
}

// refused answers a review with the HTTP error status (0: answer it).
func refused(w http.ResponseWriter, status int) bool {
	if status == 0 {
		return false
	}
	reason := map[int]metav1.StatusReason{http.StatusForbidden: metav1.StatusReasonForbidden,
		http.StatusInternalServerError: metav1.StatusReasonInternalError}[status]
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	_ = json.NewEncoder(w).Encode(metav1.Status{TypeMeta: metav1.TypeMeta{Kind: "Status", APIVersion: "v1"},
		Status: metav1.StatusFailure, Code: int32(status), Reason: reason, Message: "reviews refused"})
	return true
}

func (h *reviewHub) tokenReview(w http.ResponseWriter, r *http.Request) {
	var tr authenticationv1.TokenReview
	if err := json.NewDecoder(r.Body).Decode(&tr); err != nil {
		http.Error(w, err.Error(), http.StatusBadRequest)
		return
	}
	h.mu.Lock()
	defer h.mu.Unlock()
	h.trs = append(h.trs, tr.Spec)
	if refused(w, h.fail) {
		return
	}
	want := tr.Spec.Audiences
	if len(want) == 0 {
		want = []string{hubAudience}
	}
	tok, known := h.tokens[tr.Spec.Token]
	var both []string
	for _, a := range tok.audiences {
		if slices.Contains(want, a) {
			both = append(both, a)
		}
	}
	switch {
	case h.checkErr != "":
		tr.Status = authenticationv1.TokenReviewStatus{Error: h.checkErr}
	case known && len(both) > 0:
		tr.Status = authenticationv1.TokenReviewStatus{Authenticated: true, User: tok.user, Audiences: both}
	default:
		tr.Status = authenticationv1.TokenReviewStatus{}
	}
	writeJSON(w, &tr, "TokenReview", "authentication.k8s.io/v1")
}

func (h *reviewHub) accessReview(w http.ResponseWriter, r *http.Request) {
	var sar authorizationv1.SubjectAccessReview
	if err := json.NewDecoder(r.Body).Decode(&sar); err != nil {
		http.Error(w, err.Error(), http.StatusBadRequest)
		return
	}
	h.mu.Lock()
	defer h.mu.Unlock()
	h.sars = append(h.sars, sar.Spec)
	if refused(w, max(h.fail, h.failSAR)) {
		return
	}
	sar.Status = h.allow(sar.Spec)
	writeJSON(w, &sar, "SubjectAccessReview", "authorization.k8s.io/v1")
}

func writeJSON(w http.ResponseWriter, obj runtime.Object, kind, apiVersion string) {
	obj.GetObjectKind().SetGroupVersionKind(schema.FromAPIVersionAndKind(apiVersion, kind))
	w.Header().Set("Content-Type", "application/json")
	_ = json.NewEncoder(w).Encode(obj)
}
