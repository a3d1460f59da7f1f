package proxy

import (
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/dcm-sp/acm-cluster-sp/internal/capiprivate/groups"
	"github.com/dcm-sp/acm-cluster-sp/internal/capiprivate/translate"
)

var tr = translate.New(groups.Default)

func hdr(kv ...string) http.Header {
	h := http.Header{}
	for i := 0; i < len(kv); i += 2 {
		h.Add(kv[i], kv[i+1])
	}
	return h
}

func TestAuthorize(t *testing.T) {
	for _, c := range []struct {
		name   string
		mode   AuthMode
		h      http.Header
		remote string
		code   int
		reason string
	}{
		{"passthrough bearer", AuthPassthrough, hdr("Authorization", "Bearer abc"), "10.0.0.1:1", 0, ""},
		{"passthrough bearer any case, impersonation passes", AuthPassthrough, hdr("Authorization", "bearer abc", "Impersonate-User", "u"), "127.0.0.1:1", 0, ""},
		{"passthrough nothing", AuthPassthrough, hdr(), "127.0.0.1:1", 401, RejectNoBearerToken},
		{"passthrough basic", AuthPassthrough, hdr("Authorization", "Basic dTpw"), "127.0.0.1:1", 401, RejectNoBearerToken},
		{"passthrough empty bearer", AuthPassthrough, hdr("Authorization", "Bearer  "), "127.0.0.1:1", 401, RejectNoBearerToken},
		{"passthrough two tokens", AuthPassthrough, hdr("Authorization", "Bearer a", "Authorization", "Bearer b"), "127.0.0.1:1", 401, RejectNoBearerToken},
		{"own identity clean", AuthOwnIdentity, hdr("Accept", "application/json"), "127.0.0.1:5", 0, ""},
		{"own identity ipv6 loopback", AuthOwnIdentity, hdr(), "[::1]:5", 0, ""},
		{"own identity with a token", AuthOwnIdentity, hdr("Authorization", "Bearer abc"), "127.0.0.1:5", 400, RejectOwnIdentityCredentials},
		{"own identity with impersonation", AuthOwnIdentity, hdr("Impersonate-Group", "system:masters"), "127.0.0.1:5", 400, RejectOwnIdentityCredentials},
		{"own identity from afar", AuthOwnIdentity, hdr(), "10.1.2.3:5", 403, RejectNotLoopback},
		{"in-process", authInProcess, hdr(), "", 0, ""},
	} {
		rej := authorize(c.mode, c.h, c.remote)
		switch {
		case c.code == 0 && rej != nil:
			t.Errorf("%s: rejected %+v", c.name, rej)
		case c.code != 0 && (rej == nil || rej.code != c.code || rej.reason != c.reason):
			t.Errorf("%s: %+v, want %d %s", c.name, rej, c.code, c.reason)
		}
	}
}

func TestUpstreamHeaders(t *testing.T) {
	in := hdr("Authorization", "Bearer t", "Impersonate-User", "bob", "Impersonate-Extra-Scope", "x",
		"X-Remote-User", "admin", "X-Remote-Group", "system:masters", "X-Remote-Extra-Foo", "bar",
		"Accept", "application/vnd.kubernetes.protobuf;as=Table;g=meta.k8s.io;v=v1, application/json",
		"Accept-Encoding", "gzip", "Connection", "keep-alive, X-Custom", "X-Custom", "hop", "Keep-Alive", "300",
		"If-None-Match", `"abc-`+groups.Default.Hash()+`"`, "User-Agent", "kubectl/v1.34")
	h, forced := upstreamHeaders(tr, in, translate.PathResource)
	if forced != translate.ForcedProtobuf {
		t.Errorf("forced %q", forced)
	}
	for _, gone := range []string{"X-Remote-User", "X-Remote-Group", "X-Remote-Extra-Foo", "Accept-Encoding", "Connection", "X-Custom", "Keep-Alive"} {
		if v := h.Values(gone); len(v) > 0 {
			t.Errorf("%s forwarded: %q", gone, v)
		}
	}
	for k, want := range map[string]string{"Authorization": "Bearer t", "Impersonate-User": "bob", "Impersonate-Extra-Scope": "x",
		"Accept": "application/json;as=Table;g=meta.k8s.io;v=v1,application/json", "User-Agent": "kubectl/v1.34",
		"If-None-Match": `"abc-` + groups.Default.Hash() + `"`} {
		if got := h.Get(k); got != want {
			t.Errorf("%s = %q, want %q", k, got, want)
		}
	}
	if in.Get("X-Remote-User") != "admin" {
		t.Error("the client's header map was modified")
	}
	// Documents: If-None-Match loses the mapping-hash suffix; tags of other tables are dropped.
	h, _ = upstreamHeaders(tr, hdr("If-None-Match", `"abc-`+groups.Default.Hash()+`"`), translate.PathDiscoveryRoot)
	if got := h.Get("If-None-Match"); got != `"abc"` {
		t.Errorf("document If-None-Match %q", got)
	}
	h, _ = upstreamHeaders(tr, hdr("If-None-Match", `"abc"`), translate.PathOpenAPIIndex)
	if v := h.Values("If-None-Match"); len(v) != 0 {
		t.Errorf("foreign If-None-Match kept: %q", v)
	}
	// Streams and non-API paths keep Accept.
	h, forced = upstreamHeaders(tr, hdr("Accept", "application/vnd.kubernetes.protobuf"), translate.PathStream)
	if h.Get("Accept") != "application/vnd.kubernetes.protobuf" || forced != translate.ForcedNone {
		t.Errorf("stream Accept %q forced %q", h.Get("Accept"), forced)
	}
	_, forced = upstreamHeaders(tr, hdr("Accept", "application/cbor"), translate.PathResource)
	if forced != translate.ForcedCBOR {
		t.Errorf("cbor forced %q", forced)
	}
}

func path(t *testing.T, p string) translate.Path {
	t.Helper()
	pp, err := tr.RequestPath(p)
	if err != nil {
		t.Fatal(err)
	}
	return pp
}

func TestVerbAndWatch(t *testing.T) {
	for _, c := range []struct {
		method, path, query string
		verb                string
	}{
		{"GET", "/apis/cluster.x-k8s.io/v1beta2/namespaces/ns/machines/m", "", "get"},
		{"GET", "/apis/cluster.x-k8s.io/v1beta2/namespaces/ns/machines", "limit=50", "list"},
		{"GET", "/apis/cluster.x-k8s.io/v1beta2/machines", "resourceVersion=1&watch=true", "watch"},
		{"GET", "/apis/cluster.x-k8s.io/v1beta2/machines", "watch=1", "watch"},
		{"GET", "/apis/cluster.x-k8s.io/v1beta2/machines", "watch=false", "list"},
		{"GET", "/apis/cluster.x-k8s.io/v1beta2/watch/namespaces/ns/machines", "", "watch"},
		{"POST", "/apis/cluster.x-k8s.io/v1beta2/namespaces/ns/machines", "", "create"},
		{"PUT", "/apis/cluster.x-k8s.io/v1beta2/namespaces/ns/machines/m/status", "", "update"},
		{"PATCH", "/apis/cluster.x-k8s.io/v1beta2/namespaces/ns/machinedeployments/m/scale", "", "patch"},
		{"DELETE", "/apis/cluster.x-k8s.io/v1beta2/namespaces/ns/machines/m", "", "delete"},
		{"DELETE", "/apis/cluster.x-k8s.io/v1beta2/namespaces/ns/machines", "", "deletecollection"},
		{"GET", "/api/v1/namespaces/ns/pods/p/log", "follow=true", "connect"},
		{"GET", "/apis", "", "get"},
		{"GET", "/version", "", "get"},
		{"BREW", "/version", "", "other"},
	} {
		p := path(t, c.path)
		w := isWatch(p, c.method, c.query)
		if got := verb(p, c.method, w); got != c.verb {
			t.Errorf("%s %s?%s: verb %q, want %q", c.method, c.path, c.query, got, c.verb)
		}
	}
}

func TestRequestLabels(t *testing.T) {
	m := path(t, "/apis/cluster.x-k8s.io/v1beta2/namespaces/ns/machines/m/status")
	for _, c := range []struct {
		p        translate.Path
		code     int
		rejected bool
		body     string
		g, r     string
	}{
		{m, 200, false, "", "cluster.x-k8s.io", "machines/status"},
		{m, 404, false, `{"kind":"Status","reason":"NotFound","details":{"name":"m","group":"cluster.x-k8s.io","kind":"machines"},"code":404}`, "cluster.x-k8s.io", "machines/status"},
		{path(t, "/apis/made.up/v1/things123"), 404, false, `{"kind":"Status","reason":"NotFound","details":{},"code":404}`, unknownLabel, unknownLabel},
		{path(t, "/apis/made.up/v1/things123"), 403, false, `{"details":{"group":"made.up","kind":"things123"}}`, unknownLabel, unknownLabel},
		{m, 401, true, "", unknownLabel, unknownLabel},
		{path(t, "/api/v1/namespaces/ns/secrets"), 201, false, "", "", "secrets"},
		{path(t, "/api/v1/namespaces/ns/pods/p/log"), 200, false, "", "", "pods"},
	} {
		g, r := requestLabels(c.p, c.code, c.rejected, []byte(c.body))
		if g != c.g || r != c.r {
			t.Errorf("%s %d: (%q, %q), want (%q, %q)", c.p.Upstream, c.code, g, r, c.g, c.r)
		}
	}
}

func TestEventType(t *testing.T) {
	for frame, want := range map[string]string{
		`{"type":"ADDED","object":{}}`:                    "ADDED",
		`{"type":"MODIFIED","object":{"type":"DELETED"}}`: "MODIFIED",
		`{"type": "BOOKMARK", "object":{}}`:               "BOOKMARK",
		`{"type":"ERROR","object":{"kind":"Status"}}`:     "ERROR",
		`{"type":"DELETEDX","object":{}}`:                 "other",
		`{"object":{"type":"ADDED"},"type":"DELETED"}`:    "ADDED", // encoders other than kube-apiserver's are rare
		`{"object":{"spec":{"a":"bbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbb"},"type":"ADDED"}}`: "other",
	} {
		if got := eventType([]byte(frame)); got != want {
			t.Errorf("%s: %q, want %q", frame, got, want)
		}
	}
}

func TestCheckListen(t *testing.T) {
	for _, c := range []struct {
		addr string
		auth AuthMode
		tls  bool
		ok   bool
	}{
		{"127.0.0.1:8080", AuthPassthrough, false, true},
		{"[::1]:8080", AuthOwnIdentity, false, true},
		{"localhost:8080", AuthOwnIdentity, false, true},
		{":8080", AuthPassthrough, false, false},
		{":8080", AuthPassthrough, true, true},
		{"0.0.0.0:8080", AuthOwnIdentity, true, false},
		{"nonsense", AuthPassthrough, true, false},
	} {
		if err := CheckListen(c.addr, c.auth, c.tls); (err == nil) != c.ok {
			t.Errorf("%s %s tls=%v: %v", c.addr, c.auth, c.tls, err)
		}
	}
}

func TestStatusJSON(t *testing.T) {
	got := string(statusJSON(503, "ServiceUnavailable", `kube-apiserver "x" down`, 1))
	want := `{"kind":"Status","apiVersion":"v1","metadata":{},"status":"Failure","message":"kube-apiserver \"x\" down","reason":"ServiceUnavailable","details":{"retryAfterSeconds":1},"code":503}` + "\n"
	if got != want {
		t.Errorf("\n got %s\nwant %s", got, want)
	}
}

// The admission side's default allow-list is exactly the webhook paths of CAPI's own webhook server
// (config/webhook/manifests.yaml of the pinned module) for the renamed groups: runtime.cluster.x-k8s.io keeps its
// name, so its ExtensionConfig webhook is not served through the proxy.
func TestDefaultAdmissionPathsAreCAPIs(t *testing.T) {
	out, err := exec.Command("go", "list", "-m", "-f", "{{.Dir}}", "sigs.k8s.io/cluster-api").Output()
	if err != nil {
		t.Fatalf("go list -m sigs.k8s.io/cluster-api: %v", err)
	}
	data, err := os.ReadFile(filepath.Join(strings.TrimSpace(string(out)), "config", "webhook", "manifests.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	var want []string
	for _, line := range strings.Split(string(data), "\n") {
		p, ok := strings.CutPrefix(strings.TrimSpace(line), "path: ")
		if ok && !strings.Contains(p, "-runtime-cluster-x-k8s-io-") && !slices.Contains(want, p) {
			want = append(want, p)
		}
	}
	slices.Sort(want)
	got := slices.Sorted(slices.Values(DefaultAdmissionPaths))
	if !slices.Equal(got, want) {
		t.Errorf("DefaultAdmissionPaths\n%v\nwant CAPI's\n%v", got, want)
	}
}
