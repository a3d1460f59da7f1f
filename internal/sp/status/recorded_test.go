package status

import (
	"bytes"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	hyperv1 "github.com/openshift/hypershift/api/hypershift/v1beta1"
	"sigs.k8s.io/yaml"
)

// loadRecorded decodes one recorded stage strictly into the HyperShift API types: a field the real API does not
// have fails the test, so the fixtures keep the real shape.
func loadRecorded(t *testing.T, file string) (*hyperv1.HostedCluster, []*hyperv1.NodePool) {
	t.Helper()
	data, err := os.ReadFile(filepath.Join("testdata", "recorded", file))
	if err != nil {
		t.Fatal(err)
	}
	docs := bytes.Split(data, []byte("\n---\n"))
	var hc hyperv1.HostedCluster
	if err := yaml.UnmarshalStrict(docs[0], &hc); err != nil {
		t.Fatalf("%s HostedCluster: %v", file, err)
	}
	var nps []*hyperv1.NodePool
	for _, d := range docs[1:] {
		np := &hyperv1.NodePool{}
		if err := yaml.UnmarshalStrict(d, np); err != nil {
			t.Fatalf("%s NodePool: %v", file, err)
		}
		nps = append(nps, np)
	}
	return &hc, nps
}

// The status function on objects as the real operator leaves them, stage by stage — no simulator involved.
func TestRecordedShapes(t *testing.T) {
	created := time.Date(2026, 11, 20, 10, 0, 0, 0, time.UTC)
	for _, c := range []struct {
		file    string
		age     time.Duration
		want    Status
		message string
	}{
		{"1-created.yaml", 10 * time.Second, Pending, "Waiting for the hosted control plane"},
		{"2-control-plane-starting.yaml", 90 * time.Second, Provisioning, "Waiting for etcd to reach quorum"},
		{"3-workers-joining.yaml", 6 * time.Minute, Provisioning, "1/3"},
		{"4-completed.yaml", 14 * time.Minute, Ready, "3/3"},
		// The same completed cluster, long after: still READY (no timeout once completed).
		{"4-completed.yaml", 30 * 24 * time.Hour, Ready, "3/3"},
		// Still rolling out 46 minutes in: FAILED by the KubeVirt provisioning timeout, with the last message.
		{"3-workers-joining.yaml", 46 * time.Minute, Failed, "Not ready after 45m"},
		{"5-deleting.yaml", 25 * time.Hour, Deleting, "Deletion in progress"},
	} {
		t.Run(c.file+" at "+c.age.String(), func(t *testing.T) {
			hc, nps := loadRecorded(t, c.file)
			got := Map(hc, nps, created.Add(c.age), DefaultSettings())
			if got.Status != c.want || !strings.Contains(got.Message, c.message) {
				t.Fatalf("%s after %v: %s %q, want %s containing %q", c.file, c.age, got.Status, got.Message, c.want, c.message)
			}
		})
	}
}
