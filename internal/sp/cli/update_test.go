package cli

import (
	"bytes"
	"strings"
	"testing"
	"time"

	"github.com/dcm-sp/acm-cluster-sp/pkg/api"
)

// The day-2 commands send a merge patch of exactly the flags given, and refuse to send an empty one.
func TestUpdatePatchBody(t *testing.T) {
	o := &clientOptions{now: time.Now}
	cases := []struct {
		cmd  string
		args []string
		want string
	}{
		{"scale", []string{"--workers", "5"}, `{"spec":{"nodes":{"workers":{"count":5}}}}`},
		{"upgrade", []string{"--version", "4.18"}, `{"spec":{"version":"4.18"}}`},
		{"resize", []string{"--memory", "32GB", "--cpu", "8"}, `{"spec":{"nodes":{"workers":{"cpu":8,"memory":"32GB"}}}}`},
		{"update", []string{"--version", "4.18", "--storage", "200GB"}, `{"spec":{"nodes":{"workers":{"storage":"200GB"}},"version":"4.18"}}`},
		{"update", nil, "nothing to change"},
	}
	for _, c := range cases {
		cmd := newUpdateCommand(o, &bytes.Buffer{}, c.cmd, "", "", "version", "workers", "cpu", "memory", "storage")
		if err := cmd.ParseFlags(c.args); err != nil {
			t.Fatal(err)
		}
		body, err := updatePatch(cmd)
		got := string(body)
		if err != nil {
			got = err.Error()
		}
		if !strings.Contains(got, c.want) {
			t.Errorf("%s %v: %s, want %s", c.cmd, c.args, got, c.want)
		}
	}
}

func TestUpdateLine(t *testing.T) {
	op := &api.Operation{Kind: api.Upgrade, From: "4.17.29", To: "4.18.22", Phase: api.ControlPlane}
	if got := updateLine(&api.Cluster{Id: "c1", Status: "UPDATING", CurrentOperation: op}); got != "cluster c1: upgrade 4.17.29 → 4.18.22 started (UPDATING)" {
		t.Errorf("started: %q", got)
	}
	done := &api.Operation{Kind: api.Scale, From: "2", To: "3", Phase: api.Done}
	if got := updateLine(&api.Cluster{Id: "c1", Status: "READY", CurrentOperation: done}); got != "cluster c1: nothing to change (READY)" {
		t.Errorf("replay: %q", got)
	}
}
