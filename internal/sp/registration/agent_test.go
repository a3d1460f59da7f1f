package registration

import (
	"log/slog"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus/testutil"

	"github.com/dcm-sp/acm-cluster-sp/internal/devtest/sp/sphub"
	"github.com/dcm-sp/acm-cluster-sp/internal/devtest/testlog"
)

// An Environment Agent takes the body SPM takes: the first registration is a 201, the periodic re-registration a
// 200 with the same provider id.
func TestRegistersWithAnEnvironmentAgent(t *testing.T) {
	agent, err := sphub.StartAgentRegistry("127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer agent.Close()
	src := &caps{c: Capabilities{Platforms: []string{"kubevirt"}, KubernetesVersions: []string{"1.34"}}}
	r, _ := start(t, agent.URL, src, func(o *Options) { o.Refresh = 100 * time.Millisecond })
	waitFor(t, "registered, then re-registered", func() bool { return registered(r) && len(agent.Registrations()) >= 2 })
	regs := agent.Registrations()
	first, again := regs[0], regs[1]
	if first.Code != http.StatusCreated || first.Provider.Status != "registered" || again.Code != http.StatusOK || again.Provider.Status != "updated" ||
		again.Provider.ID != first.Provider.ID || again.Provider.ServiceType != "cluster" || again.Provider.SchemaVersion != "v1alpha1" ||
		!equalList(again.Provider.Metadata["kubernetesSupportedVersions"], "1.34") {
		t.Fatalf("first %+v, then %+v", first, again)
	}
}

// An agent serves one provider per service type: while another provider holds "cluster", the registration is
// refused with 409, which health and the log name as such (not as a name conflict), and the slow retry goes on —
// once the other provider is gone the SP registers without a restart.
func TestServiceTypeTakenByAnotherProvider(t *testing.T) {
	agent, err := sphub.StartAgentRegistry("127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer agent.Close()
	agent.Put(sphub.Provider{ID: "other", Name: "other-cluster-sp", ServiceType: "cluster", SchemaVersion: "v1alpha1", Endpoint: "http://other"})
	var logs testlog.Buffer
	r, _ := start(t, agent.URL, &caps{}, func(o *Options) { o.Log = slog.New(slog.NewTextHandler(&logs, nil)) })
	waitFor(t, "several rejected attempts", func() bool { return testutil.ToFloat64(r.m.attempts.WithLabelValues("rejected")) >= 3 })
	ok, msg := r.Status()
	if ok || msg != "not registered: registry answered 409 Conflict: service type cluster is taken by another provider" {
		t.Fatalf("health: %v %q", ok, msg)
	}
	if out := logs.String(); !strings.Contains(out, "service type cluster is taken by another provider") || !strings.Contains(out, "already served by provider 'other-cluster-sp'") {
		t.Fatalf("log does not say so: %s", out)
	}
	agent.Remove("other-cluster-sp")
	waitFor(t, "registered once the service type is free", func() bool { return registered(r) })
}

// Only the agent's service-type answer is read as one; SPM's name and id conflicts are not.
func TestServiceTypeTaken(t *testing.T) {
	cases := []struct {
		code   int
		detail string
		want   bool
	}{
		{409, "Conflict: service type 'cluster' is already served by provider 'other-sp'", true},
		{409, "Already exists: Service type 'cluster' already served by 'other-sp'", true},
		{409, `Resource conflict: provider "acm-cluster-sp" exists with id x`, false},
		{409, "Conflict: provider ID 'a' is already used by provider 'b'", false},
		{422, "service type 'cluster' is already served by provider 'x'", false},
	}
	for _, c := range cases {
		if got := serviceTypeTaken(c.code, c.detail); got != c.want {
			t.Errorf("%d %q: %v, want %v", c.code, c.detail, got, c.want)
		}
	}
}
