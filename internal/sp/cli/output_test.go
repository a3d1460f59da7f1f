package cli

import (
	"bytes"
	"context"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"k8s.io/utils/ptr"

	"github.com/dcm-sp/acm-cluster-sp/internal/devtest/golden"
	"github.com/dcm-sp/acm-cluster-sp/pkg/api"
)

var fixedNow = time.Date(2026, 11, 22, 12, 0, 0, 0, time.UTC)

func fixtures() []api.Cluster {
	ready := api.Cluster{
		Id: "inst-0001", Path: "clusters/inst-0001",
		Spec:   json.RawMessage(`{"metadata":{"name":"dev-cluster-01"},"nodes":{"workers":{"count":3}},"provider_hints":{"acm":{"platform":"kubevirt"}},"service_type":"cluster","version":"1.30"}`),
		Status: api.READY, StatusMessage: "Cluster is ready; workers 3/3 ready", Platform: "kubevirt", ProvisioningType: api.Hypershift,
		Version: "1.30", OpenshiftVersion: "4.17.29", ApiEndpoint: "https://127.1.2.3:6443",
		ConsoleUrl: "https://console-openshift-console.apps.dev-cluster-01.apps.local-hub.test", Kubeconfig: ptr.To("YXBpVmVyc2lvbjogdjEK"),
		Nodes:     api.NodeCounts{ControlPlane: api.NodeCount{Ready: 3, Total: 3}, Workers: api.NodeCount{Ready: 3, Total: 3}},
		Namespace: "clusters", CreateTime: fixedNow.Add(-26 * time.Hour), UpdateTime: fixedNow.Add(-25 * time.Hour),
	}
	pending := api.Cluster{
		Id: "5b0c9a53-7d1c-4a0e-9b7e-2f0f6a3f6c11", Path: "clusters/5b0c9a53-7d1c-4a0e-9b7e-2f0f6a3f6c11",
		Spec:   json.RawMessage(`{"metadata":{"name":"prod-cluster-01"},"provider_hints":{"acm":{"base_domain":"example.com","infra_env":"production-infraenv","platform":"baremetal"}},"service_type":"cluster","version":"4.15"}`),
		Status: api.PENDING, StatusMessage: "Waiting for the hosted control plane to be created", Platform: "baremetal", ProvisioningType: api.Hypershift,
		Version: "4.15", OpenshiftVersion: "4.15.45",
		Nodes:     api.NodeCounts{ControlPlane: api.NodeCount{Ready: 0, Total: 1}, Workers: api.NodeCount{Ready: 0, Total: 2}},
		Namespace: "clusters", CreateTime: fixedNow.Add(-42 * time.Second), UpdateTime: fixedNow.Add(-42 * time.Second),
	}
	return []api.Cluster{ready, pending}
}

func TestOutputFormats(t *testing.T) {
	list := fixtures()
	for _, format := range []string{"table", "json", "yaml"} {
		var buf bytes.Buffer
		o := &clientOptions{output: format, now: func() time.Time { return fixedNow }}
		if err := printList(&buf, o, list); err != nil {
			t.Fatal(err)
		}
		golden.Assert(t, "list."+format, buf.Bytes())
	}
	for _, format := range []string{"", "json", "yaml"} {
		var buf bytes.Buffer
		o := &clientOptions{output: format, now: func() time.Time { return fixedNow }}
		if err := printCluster(&buf, o, &list[0]); err != nil {
			t.Fatal(err)
		}
		name := format
		if name == "" {
			name = "text"
		}
		golden.Assert(t, "get."+name, buf.Bytes())
	}
	var buf bytes.Buffer
	if err := printList(&buf, &clientOptions{now: time.Now}, nil); err != nil || buf.String() != "No clusters.\n" {
		t.Fatalf("empty list: %q %v", buf.String(), err)
	}
	if err := printCluster(&buf, &clientOptions{output: "xml", now: time.Now}, &list[0]); err == nil {
		t.Fatal("unknown format accepted")
	}
}

// wait prints one line per transition when not on a terminal, and fails on FAILED with the message.
func TestWaitOutput(t *testing.T) {
	steps := []api.Cluster{fixtures()[1], fixtures()[1], fixtures()[0]}
	steps[1].Status, steps[1].StatusMessage = api.PROVISIONING, "Control plane starting: Waiting for etcd"
	var n atomic.Int32
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		i := int(n.Add(1)) - 1
		if i >= len(steps) {
			i = len(steps) - 1
		}
		w.Header().Set("Content-Type", "application/json")
		_ = json.NewEncoder(w).Encode(steps[i])
	}))
	defer srv.Close()
	clock := fixedNow
	o := &clientOptions{server: srv.URL, now: func() time.Time { clock = clock.Add(time.Second); return clock }}
	var buf bytes.Buffer
	if err := waitFor(context.Background(), o, &buf, "x", "READY", time.Minute, 10*time.Millisecond); err != nil {
		t.Fatal(err)
	}
	golden.Assert(t, "wait.txt", buf.Bytes())

	failed := fixtures()[1]
	failed.Status, failed.StatusMessage = api.FAILED, "ValidReleaseImage: failed to pull release image"
	steps = []api.Cluster{failed}
	n.Store(0)
	buf.Reset()
	err := waitFor(context.Background(), o, &buf, "x", "READY", time.Minute, 10*time.Millisecond)
	var ee exitError
	if !asExit(err, &ee) || ee.code != 1 || !strings.Contains(ee.msg, "FAILED: ValidReleaseImage") {
		t.Fatalf("want exit 1 with the failure, got %v", err)
	}
	buf.Reset()
	steps = []api.Cluster{fixtures()[1]}
	err = waitFor(context.Background(), o, &buf, "x", "READY", 50*time.Millisecond, 10*time.Millisecond)
	if !asExit(err, &ee) || !strings.Contains(ee.msg, "timed out") {
		t.Fatalf("want a timeout, got %v", err)
	}
}

func asExit(err error, target *exitError) bool {
	e, ok := err.(exitError)
	if ok {
		*target = e
	}
	return ok
}

// A problem+json answer is shown as title and detail, not as a Go struct.
func TestAPIErrorMessage(t *testing.T) {
	err := apiError(409, []byte(`{"type":"ALREADY_EXISTS","title":"Conflict","status":409,"detail":"cluster name \"demo\" is used by instance demo-1"}`))
	if err.Error() != `Conflict: cluster name "demo" is used by instance demo-1` {
		t.Fatalf("%q", err)
	}
	if err := apiError(502, []byte("bad gateway\n")); err.Error() != "502 bad gateway" {
		t.Fatalf("%q", err)
	}
}
