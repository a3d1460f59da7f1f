package faultproxy

import (
	"bufio"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"k8s.io/client-go/rest"

	"github.com/dcm-sp/acm-cluster-sp/internal/devtest/testwait"
)

// upstream is a stand-in API server: it counts what reaches it and streams "watches" until the client goes.
func upstream(t *testing.T) (*rest.Config, *atomic.Int64) {
	var reached atomic.Int64
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		reached.Add(1)
		if r.URL.Query().Get("watch") == "true" {
			w.WriteHeader(http.StatusOK)
			w.(http.Flusher).Flush()
			<-r.Context().Done()
			return
		}
		_, _ = io.WriteString(w, `{"kind":"Status","status":"Success"}`)
	}))
	t.Cleanup(srv.Close)
	return &rest.Config{Host: srv.URL}, &reached
}

func start(t *testing.T) (*Proxy, *atomic.Int64) {
	cfg, reached := upstream(t)
	p, err := Start(cfg)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { p.Close() })
	return p, reached
}

func send(t *testing.T, p *Proxy, method, path string) (int, error) {
	req, _ := http.NewRequest(method, p.URL+path, strings.NewReader("{}"))
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return 0, err
	}
	defer resp.Body.Close()
	if resp.StatusCode >= 400 {
		var st struct{ Kind, Reason string }
		if json.NewDecoder(resp.Body).Decode(&st) != nil || st.Kind != "Status" || st.Reason == "" {
			t.Fatalf("%s %s: %d without a Status body", method, path, resp.StatusCode)
		}
	}
	return resp.StatusCode, nil
}

func TestCutAfterWrites(t *testing.T) {
	p, reached := start(t)
	p.SetRule(CutAfterWrites(2, func(r Request) bool { return !strings.Contains(r.Path, "leases") }))
	for i, c := range []struct {
		method, path string
		ok           bool
	}{
		{"POST", "/api/v1/namespaces/x/secrets", true},
		{"PUT", "/apis/coordination.k8s.io/v1/namespaces/x/leases/l", true}, // not counted
		{"GET", "/api/v1/namespaces/x/secrets", true},
		{"PATCH", "/api/v1/namespaces/x/secrets/s", true},
		{"POST", "/api/v1/namespaces/x/configmaps", false}, // the third counted write: cut from here on
		{"GET", "/api/v1/namespaces/x/secrets", false},
	} {
		code, err := send(t, p, c.method, c.path)
		if c.ok != (err == nil && code == http.StatusOK) {
			t.Fatalf("request %d %s %s: code %d err %v, want ok=%v", i, c.method, c.path, code, err, c.ok)
		}
	}
	if reached.Load() != 4 || p.Writes() != 3 || p.Faults() != 2 {
		t.Fatalf("reached %d writes %d faults %d", reached.Load(), p.Writes(), p.Faults())
	}
}

func TestFailuresAndWatches(t *testing.T) {
	p, reached := start(t)
	p.SetRule(func(r Request) Verdict {
		switch r.Method {
		case "POST":
			return Fail500
		case "DELETE":
			return Fail429
		}
		return Pass
	})
	if code, _ := send(t, p, "POST", "/api/v1/x"); code != http.StatusInternalServerError {
		t.Fatalf("POST %d", code)
	}
	if code, _ := send(t, p, "DELETE", "/api/v1/x"); code != http.StatusTooManyRequests {
		t.Fatalf("DELETE %d", code)
	}
	if reached.Load() != 0 {
		t.Fatal("a failed request reached the API server")
	}
	// A dropped watch ends the client's stream.
	resp, err := http.Get(p.URL + "/api/v1/pods?watch=true")
	if err != nil {
		t.Fatal(err)
	}
	ended := make(chan struct{})
	go func() { _, _ = io.Copy(io.Discard, bufio.NewReader(resp.Body)); close(ended) }()
	testwait.For(t, 5*time.Second, "the watch to be dropped", func() bool { return p.DropWatches() > 0 })
	select {
	case <-ended:
	case <-time.After(5 * time.Second):
		t.Fatal("the client's watch stream did not end")
	}
}

// A held request reaches the API server only after Release; the others pass meanwhile.
func TestHold(t *testing.T) {
	p, reached := start(t)
	p.SetRule(func(r Request) Verdict {
		if r.Method == "POST" {
			return Hold
		}
		return Pass
	})
	answered := make(chan int, 1)
	go func() {
		code, err := send(t, p, "POST", "/api/v1/namespaces/x/secrets")
		if err != nil {
			t.Error(err)
		}
		answered <- code
	}()
	testwait.For(t, 5*time.Second, "the POST to be held", func() bool { return p.Held() == 1 })
	if code, err := send(t, p, "GET", "/api/v1/namespaces/x/secrets"); err != nil || code != http.StatusOK {
		t.Fatalf("GET while a POST is held: %d %v", code, err)
	}
	if n := reached.Load(); n != 1 {
		t.Fatalf("%d requests reached the API server while the POST was held, want the GET only", n)
	}
	p.Release()
	if code := <-answered; code != http.StatusOK || reached.Load() != 2 || p.Held() != 0 || p.Writes() != 1 {
		t.Fatalf("after Release: %d, reached %d, held %d, writes %d", code, reached.Load(), p.Held(), p.Writes())
	}
}

// FreezeCaches refuses what an informer sends — a watch of any form, a list from a resourceVersion, of any kind and
// scope — and passes the client's own reads and writes.
func TestFreezeCaches(t *testing.T) {
	const hcs = "/apis/hypershift.openshift.io/v1beta1/namespaces/shared/hostedclusters"
	for _, c := range []struct {
		method, url string
		want        Verdict
	}{
		{"GET", hcs + "?labelSelector=managed-by%3Ddcm&resourceVersion=316", Abort},                                     // relist
		{"GET", "/apis/hypershift.openshift.io/v1beta1/namespaces/shared/nodepools?resourceVersion=0&limit=500", Abort}, // first list
		{"GET", "/apis/hypershift.openshift.io/v1beta1/hostedclusters?resourceVersion=5", Abort},                        // cluster-wide
		{"GET", "/api/v1/namespaces/shared/secrets?resourceVersion=266", Abort},                                         // any kind
		{"GET", hcs + "?allowWatchBookmarks=true&resourceVersion=331&timeoutSeconds=369&watch=true", Abort},
		{"GET", hcs + "?watch=1", Abort},
		{"GET", hcs + "?watch=true&sendInitialEvents=true&resourceVersionMatch=NotOlderThan&allowWatchBookmarks=true", Abort}, // watch-list
		{"GET", "/apis/hypershift.openshift.io/v1beta1/watch/namespaces/shared/hostedclusters", Abort},
		{"GET", hcs + "?labelSelector=dcm-instance-id%3Dinst-a&timeout=20s", Pass}, // the client's own list
		{"GET", hcs + "/a?timeout=20s", Pass},
		{"GET", hcs + "?limit=500&continue=abc", Pass}, // follows a first page that was refused
		{"GET", "/apis/hypershift.openshift.io/v1beta1?timeout=5s", Pass},
		{"POST", hcs + "?timeout=20s", Pass},
		{"PATCH", hcs + "/a?timeout=20s", Pass},
		{"DELETE", hcs + "/a?timeout=20s", Pass},
	} {
		if got := FreezeCaches(describe(httptest.NewRequest(c.method, c.url, nil), 0)); got != c.want {
			t.Errorf("%s %s: verdict %d, want %d", c.method, c.url, got, c.want)
		}
	}
}

// The TCP forwarder passes bytes both ways, cuts live connections and refuses new ones while down, and forwards to
// a new upstream on the same address afterwards.
func TestTCPForwarder(t *testing.T) {
	echo := func() string {
		l, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { l.Close() })
		go func() {
			for {
				c, err := l.Accept()
				if err != nil {
					return
				}
				go func() { _, _ = io.Copy(c, c); c.Close() }()
			}
		}()
		return l.Addr().String()
	}
	roundTrip := func(c net.Conn) error {
		if _, err := c.Write([]byte("ping")); err != nil {
			return err
		}
		buf := make([]byte, 4)
		_ = c.SetReadDeadline(time.Now().Add(5 * time.Second))
		_, err := io.ReadFull(c, buf)
		if err == nil && string(buf) != "ping" {
			err = fmt.Errorf("echoed %q", buf)
		}
		return err
	}
	f, err := NewTCP(echo())
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	c, err := net.Dial("tcp", f.Addr)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	if err := roundTrip(c); err != nil {
		t.Fatalf("through the forwarder: %v", err)
	}
	f.SetUpstream("")
	if err := roundTrip(c); err == nil {
		t.Fatal("a live connection survived the outage")
	}
	down, err := net.Dial("tcp", f.Addr) // the port is still ours: the dial succeeds, the connection is closed
	if err != nil {
		t.Fatal(err)
	}
	defer down.Close()
	if err := roundTrip(down); err == nil {
		t.Fatal("a new connection was served while down")
	}
	f.SetUpstream(echo())
	again, err := net.Dial("tcp", f.Addr)
	if err != nil {
		t.Fatal(err)
	}
	defer again.Close()
	if err := roundTrip(again); err != nil {
		t.Fatalf("after the restart: %v", err)
	}
}
