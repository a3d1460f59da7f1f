package app

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"slices"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	configv1 "github.com/openshift/api/config/v1"
	hyperv1 "github.com/openshift/hypershift/api/hypershift/v1beta1"
	"k8s.io/utils/ptr"
	clusterv1 "open-cluster-management.io/api/cluster/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/dcm-sp/acm-cluster-sp/internal/devtest/sp/faultproxy"
	"github.com/dcm-sp/acm-cluster-sp/internal/devtest/sp/simulator"
	"github.com/dcm-sp/acm-cluster-sp/internal/devtest/testwait"
	"github.com/dcm-sp/acm-cluster-sp/internal/sp/meta"
	"github.com/dcm-sp/acm-cluster-sp/internal/sp/operation"
	"github.com/dcm-sp/acm-cluster-sp/pkg/api"
)

// patch sends PATCH /clusters/{id} with a merge patch and optional If-Match.
func (sp *testSP) patch(t testing.TB, id, body, ifMatch string) (int, http.Header, api.Cluster, []byte) {
	t.Helper()
	req, err := http.NewRequest(http.MethodPatch, sp.URL+"/api/v1alpha1/clusters/"+id, strings.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Content-Type", "application/merge-patch+json")
	if ifMatch != "" {
		req.Header.Set("If-Match", ifMatch)
	}
	code, header, data := send(t, req)
	var c api.Cluster
	if code == http.StatusOK {
		if err := json.Unmarshal(data, &c); err != nil {
			t.Fatalf("PATCH response %s: %v", data, err)
		}
	}
	return code, header, c, data
}

// day2Platforms are the platforms every day-2 operation is tested on, with the 4.17 create body of each.
var day2Platforms = []struct{ name, body string }{{"kubevirt", kubevirt417}, {"baremetal", baremetal417}}

// readyCluster creates a cluster from body, a format of its name (%[1]q) and, bare metal, of its Agents' location
// label (%[2]q), and waits until it is READY. A bare-metal cluster gets a pool of four Agents of its own (what a
// scale to four workers needs).
func readyCluster(t *testing.T, sp *testSP, prefix, body string) (id, name string) {
	t.Helper()
	name = uniqueName(prefix)
	id = "inst-" + name
	pool := ""
	if strings.Contains(body, "agent_labels") {
		pool = agentPool(t, 4)
	}
	if code, _, raw := sp.create(t, id, fmt.Sprintf(body, name, pool)); code != http.StatusCreated {
		t.Fatalf("create: %d %s", code, raw)
	}
	sp.waitStatus(t, id, "READY", 60*time.Second)
	return id, name
}

const (
	kubevirt417  = `{"spec":{"version":"4.17","metadata":{"name":%[1]q},"nodes":{"workers":{"count":2,"cpu":4,"memory":"16GB","storage":"120GB"}},"provider_hints":{"acm":{"platform":"kubevirt"}}}}`
	baremetal417 = `{"spec":{"version":"4.17","metadata":{"name":%[1]q},"nodes":{"workers":{"count":2,"cpu":8}},"provider_hints":{"acm":{"platform":"baremetal","base_domain":"example.com","infra_env":"production-infraenv","agent_labels":{"location":%[2]q}}}}}`
)

// follow samples the cluster's status on every poll until it is READY or FAILED again after the operation began,
// checking invariants on the hub objects at every sample; it returns the sequence of statuses (repeats folded).
func follow(t *testing.T, sp *testSP, ns, id, name string, within time.Duration, check func(hc *hyperv1.HostedCluster, np *hyperv1.NodePool)) ([]string, api.Cluster) {
	t.Helper()
	var seq []string
	var last api.Cluster
	ok := testwait.Poll(within, func() bool {
		code, c := sp.get(t, id)
		if code != http.StatusOK {
			t.Fatalf("GET %s: %d", id, code)
		}
		st := string(c.Status)
		if len(seq) == 0 || seq[len(seq)-1] != st {
			seq = append(seq, st)
		}
		last = c
		if check != nil {
			var hc hyperv1.HostedCluster
			var np hyperv1.NodePool
			if testHub.Client.Get(context.Background(), client.ObjectKey{Namespace: ns, Name: name}, &hc) == nil &&
				testHub.Client.Get(context.Background(), client.ObjectKey{Namespace: ns, Name: name}, &np) == nil {
				check(&hc, &np)
			}
		}
		return len(seq) > 1 && (st == "READY" || st == "FAILED")
	})
	if !ok {
		t.Fatalf("cluster %s did not end its operation within %v: %v, last %s %q", id, within, seq, last.Status, last.StatusMessage)
	}
	return seq, last
}

// propertyReadyUpdatingReady asserts the sampled statuses read READY UPDATING+ READY (the first sample may already
// be UPDATING: the PATCH's answer was).
func propertyReadyUpdatingReady(t *testing.T, seq []string) {
	t.Helper()
	got := strings.Join(seq, " ")
	if got != "READY UPDATING READY" && got != "UPDATING READY" {
		t.Fatalf("statuses %v, want READY UPDATING+ READY", seq)
	}
}

// Upgrade 4.17 → 4.18 on both platforms: 200 UPDATING with the operation, the control plane first (the NodePool's
// release is never patched before the control plane completed at the target), READY UPDATING+ READY, the new
// openshift_version, kubeconfig kept during UPDATING.
func TestDay2Upgrade(t *testing.T) {
	t.Parallel()
	sp := shared(t)
	for _, platform := range day2Platforms {
		t.Run(platform.name, func(t *testing.T) {
			id, name := readyCluster(t, sp, "up-"+platform.name[:2], platform.body)
			code, hdr, c, raw := sp.patch(t, id, `{"spec":{"version":"4.18"}}`, "")
			if code != http.StatusOK || c.Status != "UPDATING" || c.CurrentOperation == nil || c.CurrentOperation.Kind != api.Upgrade ||
				c.CurrentOperation.To != "4.18.22" || c.CurrentOperation.From != "4.17.29" || hdr.Get("ETag") == "" {
				t.Fatalf("PATCH: %d %s", code, raw)
			}
			if c.ApiEndpoint == "" {
				t.Fatalf("endpoints withheld during UPDATING: %s", raw)
			}
			seq, last := follow(t, sp, "clusters", id, name, 90*time.Second, func(hc *hyperv1.HostedCluster, np *hyperv1.NodePool) {
				cpDone := hc.Status.Version != nil && len(hc.Status.Version.History) > 0 && hc.Status.Version.History[0].Version == "4.18.22" &&
					hc.Status.Version.History[0].State == configv1.CompletedUpdate
				if strings.HasSuffix(np.Spec.Release.Image, ":4.18.22-multi") && !cpDone {
					t.Fatalf("NodePool patched to 4.18.22 before the control plane completed: history %+v", hc.Status.Version.History)
				}
			})
			propertyReadyUpdatingReady(t, seq)
			if last.OpenshiftVersion != "4.18.22" || last.Version != "4.18" || last.CurrentOperation == nil || last.CurrentOperation.Phase != api.Done {
				t.Fatalf("after the upgrade: %+v", last)
			}
			var np hyperv1.NodePool
			if err := testHub.Client.Get(context.Background(), client.ObjectKey{Namespace: "clusters", Name: name}, &np); err != nil || np.Status.Version != "4.18.22" {
				t.Fatalf("NodePool version %q (%v)", np.Status.Version, err)
			}
			// ACM's view follows: the klusterlet reports the new Kubernetes version.
			testwait.For(t, 10*time.Second, "the ManagedCluster at Kubernetes 1.31", func() bool {
				var mc clusterv1.ManagedCluster
				return testHub.Client.Get(context.Background(), client.ObjectKey{Name: name}, &mc) == nil && mc.Status.Version.Kubernetes == "v1.31.7"
			})
		})
	}
}

// Progress messages name the phase: the control plane, then the workers.
func TestDay2UpgradeMessages(t *testing.T) {
	t.Parallel()
	sp := shared(t)
	id, name := readyCluster(t, sp, "upmsg", kubevirt417)
	// The release the cluster runs, spelled out: stored, nothing starts.
	if code, _, c, raw := sp.patch(t, id, `{"spec":{"version":"4.17.29"}}`, ""); code != http.StatusOK || c.CurrentOperation != nil || c.Status != "READY" {
		t.Fatalf("PATCH: %d %s", code, raw)
	}
	if code, _, _, raw := sp.patch(t, id, `{"spec":{"version":"4.18.14"}}`, ""); code != http.StatusOK {
		t.Fatalf("PATCH: %d %s", code, raw)
	}
	var msgs []string
	follow(t, sp, "clusters", id, name, 90*time.Second, func(*hyperv1.HostedCluster, *hyperv1.NodePool) {
		_, c := sp.get(t, id)
		if c.Status == "UPDATING" && (len(msgs) == 0 || msgs[len(msgs)-1] != c.StatusMessage) {
			msgs = append(msgs, c.StatusMessage)
		}
	})
	joined := strings.Join(msgs, "\n")
	if !strings.Contains(joined, "Upgrading control plane to 4.18.14") || !strings.Contains(joined, "% complete") || !strings.Contains(joined, "Upgrading workers to 4.18.14") {
		t.Fatalf("progress messages:\n%s", joined)
	}
}

// Scale 2 → 4 → 1 on KubeVirt and BareMetal: UPDATING with "Scaling workers" then READY with the new count; on
// BareMetal the extra Agents are reserved before the answer and the surplus released after the scale-down.
func TestDay2Scale(t *testing.T) {
	t.Parallel()
	sp := shared(t)
	for _, platform := range day2Platforms {
		t.Run(platform.name, func(t *testing.T) {
			id, name := readyCluster(t, sp, "sc-"+platform.name[:2], platform.body)
			if platform.name == "baremetal" {
				// Too few Agents: 422 with the shortfall, and the Agents this attempt reserved are released again.
				code, h, _, raw := sp.patch(t, id, `{"spec":{"nodes":{"workers":{"count":30}}}}`, "")
				assertProblem(t, code, h, raw, 422, "need 30 eligible Agents")
				if n := reserved(t, id); n != 2 {
					t.Fatalf("%d Agents reserved after a refused scale, want 2", n)
				}
				var hc hyperv1.HostedCluster
				if err := testHub.Client.Get(context.Background(), client.ObjectKey{Namespace: "clusters", Name: name}, &hc); err != nil || operation.Decode(&hc) != nil {
					t.Fatalf("the refused scale recorded an operation (%v)", err)
				}
			}
			for _, n := range []int{4, 1} {
				code, _, c, raw := sp.patch(t, id, fmt.Sprintf(`{"spec":{"nodes":{"workers":{"count":%d}}}}`, n), "")
				if code != http.StatusOK || c.Status != "UPDATING" || c.CurrentOperation.Kind != api.Scale || c.CurrentOperation.To != fmt.Sprint(n) {
					t.Fatalf("scale to %d: %d %s", n, code, raw)
				}
				if platform.name == "baremetal" && n == 4 && reserved(t, id) < 4 {
					t.Fatalf("only %d Agents reserved when the scale was accepted", reserved(t, id))
				}
				seq, last := follow(t, sp, "clusters", id, name, 60*time.Second, nil)
				propertyReadyUpdatingReady(t, seq)
				if last.Nodes.Workers.Total != int32(n) || last.Nodes.Workers.Ready != int32(n) {
					t.Fatalf("after scaling to %d: workers %+v", n, last.Nodes.Workers)
				}
			}
			if platform.name == "baremetal" {
				testwait.For(t, 20*time.Second, "the surplus Agents released", func() bool { return reserved(t, id) == 1 })
			}
		})
	}
}

func reserved(t *testing.T, id string) int { return len(reservedAgents(t, id)) }

// Resize on KubeVirt: the NodePool's template changes and every worker is replaced; READY at the end.
func TestDay2Resize(t *testing.T) {
	t.Parallel()
	sp := shared(t)
	id, name := readyCluster(t, sp, "rs", kubevirt417)
	code, _, c, raw := sp.patch(t, id, `{"spec":{"nodes":{"workers":{"memory":"32GB"}}}}`, "")
	if code != http.StatusOK || c.CurrentOperation == nil || c.CurrentOperation.Kind != api.Resize {
		t.Fatalf("resize: %d %s", code, raw)
	}
	seq, _ := follow(t, sp, "clusters", id, name, 60*time.Second, nil)
	propertyReadyUpdatingReady(t, seq)
	var np hyperv1.NodePool
	if err := testHub.Client.Get(context.Background(), client.ObjectKey{Namespace: "clusters", Name: name}, &np); err != nil {
		t.Fatal(err)
	}
	if m := np.Spec.Platform.Kubevirt.Compute.Memory.String(); m != "32Gi" || !strings.Contains(np.Annotations[simulator.AnnotationTemplate], "memory=32Gi") {
		t.Fatalf("NodePool memory %s, template rolled out %q", m, np.Annotations[simulator.AnnotationTemplate])
	}
}

// The refusals: each rule with its status code, problem type and field; a replay is a no-op.
func TestDay2Refusals(t *testing.T) {
	t.Parallel()
	sp := shared(t)
	id, name := readyCluster(t, sp, "ref", kubevirt417)
	// An empty patch changes nothing: 200 with the cluster and its ETag.
	_, hdr, before, _ := sp.patch(t, id, `{"spec":{}}`, "")
	etag := hdr.Get("ETag")
	var hc hyperv1.HostedCluster
	if err := testHub.Client.Get(context.Background(), client.ObjectKey{Namespace: "clusters", Name: name}, &hc); err != nil {
		t.Fatal(err)
	}
	// What an update writes: the spec and the operation record (annotations) and the spec (generation). The operator
	// writes the status all the time, so the resourceVersion proves nothing.
	written := func(hc *hyperv1.HostedCluster) string {
		return fmt.Sprint(hc.Generation, hc.Annotations[meta.AnnotationSpec], hc.Annotations[operation.Annotation])
	}
	rv := written(&hc)

	// A replay of the stored values is 200, starts nothing and writes nothing.
	c2, h2, replay, raw := sp.patch(t, id, `{"spec":{"version":"4.17","nodes":{"workers":{"count":2}}}}`, etag)
	if c2 != http.StatusOK || replay.CurrentOperation != nil || h2.Get("ETag") != etag || before.CurrentOperation != nil {
		t.Fatalf("replay: %d %s", c2, raw)
	}
	if err := testHub.Client.Get(context.Background(), client.ObjectKey{Namespace: "clusters", Name: name}, &hc); err != nil || written(&hc) != rv {
		t.Fatalf("a replay wrote the HostedCluster (%s → %s, %v)", rv, written(&hc), err)
	}

	refusals := []struct {
		name, body, ifMatch, ctype string
		code                       int
		typ, detail, field         string
	}{
		{"stale If-Match", `{"spec":{"nodes":{"workers":{"count":3}}}}`, `"0000"`, "", 412, "FAILED_PRECONDITION", "does not match", ""},
		// If-Match is checked before the body is decoded; the body's own errors come next, from the wire decoder.
		{"stale If-Match, body no patch", `{"version":"4.18"}`, `"0000"`, "", 412, "FAILED_PRECONDITION", "does not match", ""},
		{"body not an object", `[1]`, "", "", 400, "INVALID_ARGUMENT", "request body is not a JSON object: cannot unmarshal array", ""},
		{"not a spec patch", `{"version":"4.18"}`, "", "", 400, "INVALID_ARGUMENT", "unknown field: an update is a merge patch", "version"},
		{"a camelCase key is no alias in a patch", `{"spec":{"serviceType":"cluster"}}`, "", "", 400, "INVALID_ARGUMENT", "immutable (currently absent)", "spec.serviceType"},
		{"immutable name", `{"spec":{"metadata":{"name":"other"}}}`, "", "", 400, "INVALID_ARGUMENT", "immutable", "spec.metadata.name"},
		{"immutable platform", `{"spec":{"provider_hints":{"acm":{"platform":"baremetal"}}}}`, "", "", 400, "INVALID_ARGUMENT", "immutable", "spec.provider_hints.acm.platform"},
		{"two minors ahead", `{"spec":{"version":"4.19"}}`, "", "", 422, "UNPROCESSABLE_ENTITY", "valid targets: 4.18.1, 4.18.14, 4.18.22", "spec.version"},
		{"not offered", `{"spec":{"version":"4.18.7"}}`, "", "", 422, "UNPROCESSABLE_ENTITY", "valid targets from 4.17.29", "spec.version"},
		{"downgrade", `{"spec":{"version":"4.16"}}`, "", "", 400, "INVALID_ARGUMENT", "downgrades are not supported", "spec.version"},
		{"two operations", `{"spec":{"version":"4.18","nodes":{"workers":{"count":3}}}}`, "", "", 422, "UNPROCESSABLE_ENTITY", "one operation per request", ""},
		{"bad count", `{"spec":{"nodes":{"workers":{"count":0}}}}`, "", "", 400, "INVALID_ARGUMENT", "at least 1", "spec.nodes.workers.count"},
		{"not a merge patch", `{"spec":{"nodes":{"workers":{"count":3}}}}`, "", "application/json", 415, "UNSUPPORTED_MEDIA_TYPE", "merge-patch", ""},
	}
	for _, r := range refusals {
		t.Run(r.name, func(t *testing.T) {
			var code int
			var header http.Header
			var body []byte
			if r.ctype != "" {
				code, header, body = do(t, http.MethodPatch, sp.URL+"/api/v1alpha1/clusters/"+id, r.ctype, []byte(r.body))
			} else {
				code, header, _, body = sp.patch(t, id, r.body, r.ifMatch)
			}
			p := assertProblem(t, code, header, body, r.code, r.detail)
			if p.Type != r.typ {
				t.Fatalf("type %s, want %s", p.Type, r.typ)
			}
			if r.field != "" && (p.Errors == nil || !slices.ContainsFunc(*p.Errors, func(f api.FieldViolation) bool { return f.Field == r.field })) {
				t.Fatalf("fields %s, want %s", body, r.field)
			}
		})
	}
	// None of them changed anything.
	if err := testHub.Client.Get(context.Background(), client.ObjectKey{Namespace: "clusters", Name: name}, &hc); err != nil || written(&hc) != rv {
		t.Fatalf("a refused update wrote the HostedCluster (%s → %s, %v)", rv, written(&hc), err)
	}

	// 409 ABORTED while an operation runs, naming it; the same target again is a replay.
	if code, _, _, raw := sp.patch(t, id, `{"spec":{"version":"4.18"}}`, etag); code != http.StatusOK {
		t.Fatalf("upgrade: %d %s", code, raw)
	}
	code3, h3, _, raw3 := sp.patch(t, id, `{"spec":{"nodes":{"workers":{"count":3}}}}`, "")
	if p := assertProblem(t, code3, h3, raw3, 409, "upgrade to 4.18.22 (phase"); p.Type != "ABORTED" {
		t.Fatalf("type %s", p.Type)
	}
	if code, _, c, raw := sp.patch(t, id, `{"spec":{"version":"4.18"}}`, ""); code != http.StatusOK || c.CurrentOperation == nil || c.CurrentOperation.To != "4.18.22" {
		t.Fatalf("replay during the upgrade: %d %s", code, raw)
	}
	// The old ETag no longer matches.
	code4, h4, _, raw4 := sp.patch(t, id, `{"spec":{"version":"4.18"}}`, etag)
	assertProblem(t, code4, h4, raw4, 412, "does not match")
	sp.waitStatus(t, id, "READY", 90*time.Second)
}

// 409 FAILED_PRECONDITION: never completed, being deleted.
func TestDay2Preconditions(t *testing.T) {
	t.Parallel()
	sp := shared(t)
	name := uniqueName("pre")
	id := "inst-" + name
	if code, _, raw := sp.create(t, id, fmt.Sprintf(kubevirt417, name)); code != http.StatusCreated {
		t.Fatalf("create: %d %s", code, raw)
	}
	code, h, _, raw := sp.patch(t, id, `{"spec":{"nodes":{"workers":{"count":3}}}}`, "")
	if p := assertProblem(t, code, h, raw, 409, "not completed its installation"); p.Type != "FAILED_PRECONDITION" {
		t.Fatalf("type %s", p.Type)
	}
	sp.waitStatus(t, id, "READY", 60*time.Second)
	failMode(t, "clusters", name, simulator.FailStuckDeletion)
	if code, _, _ := do(t, http.MethodDelete, sp.URL+"/api/v1alpha1/clusters/"+id, "", nil); code != http.StatusNoContent {
		t.Fatalf("delete: %d", code)
	}
	code, h, _, raw = sp.patch(t, id, `{"spec":{"nodes":{"workers":{"count":3}}}}`, "")
	if p := assertProblem(t, code, h, raw, 409, "being deleted"); p.Type != "FAILED_PRECONDITION" {
		t.Fatalf("type %s", p.Type)
	}
	// let it go
	failMode(t, "clusters", name, "")
}

// An upgrade blocked by ClusterVersionUpgradeable=False ends FAILED with the CVO's reason; a stuck NodePool ends
// FAILED at the deadline with the operator's last message.
func TestDay2Failures(t *testing.T) {
	t.Parallel()
	cfg := testConfig("faults")
	cfg.ProviderName = "sp-day2-faults"
	// The deadline must outlast the control plane's upgrade on a loaded machine (the stuck NodePool must fail
	// while upgrading the workers, the blocked upgrade on the CVO's reason), and is what the stuck case waits out:
	// 20 s once ended the stuck case while the simulated operator had not yet taken the control plane's upgrade.
	cfg.OperationTimeoutKubevirt = time.Minute
	sp := startSP(t, cfg, Options{})
	t.Run("upgrade blocked", func(t *testing.T) {
		id, name := readyCluster(t, sp, "blk", kubevirt417)
		failMode(t, "faults", name, simulator.FailUpgradeBlocked)
		if code, _, _, raw := sp.patch(t, id, `{"spec":{"version":"4.18"}}`, ""); code != http.StatusOK {
			t.Fatalf("PATCH: %d %s", code, raw)
		}
		c, _ := sp.waitStatus(t, id, "FAILED", 90*time.Second)
		if !strings.Contains(c.StatusMessage, "AdminAckRequired") || c.CurrentOperation == nil {
			t.Fatalf("FAILED %q", c.StatusMessage)
		}
		testwait.For(t, 10*time.Second, "the record to say failed", func() bool {
			_, c := sp.get(t, id)
			return c.CurrentOperation != nil && c.CurrentOperation.Phase == api.Failed
		})
		// It never started (the operator did not take the release): going back restores the running release.
		code, _, c2, raw := sp.patch(t, id, `{"spec":{"version":"4.17"}}`, "")
		if code != http.StatusOK || c2.CurrentOperation == nil || c2.CurrentOperation.To != "4.17.29" || c2.Status != "UPDATING" {
			t.Fatalf("revert: %d %s", code, raw)
		}
		back, _ := sp.waitStatus(t, id, "READY", 90*time.Second)
		var hc hyperv1.HostedCluster
		if err := testHub.Client.Get(context.Background(), client.ObjectKey{Namespace: "faults", Name: name}, &hc); err != nil ||
			!strings.HasSuffix(hc.Spec.Release.Image, ":4.17.29-multi") || back.OpenshiftVersion != "4.17.29" {
			t.Fatalf("after the revert: image %s, openshift_version %s (%v)", hc.Spec.Release.Image, back.OpenshiftVersion, err)
		}
	})
	t.Run("stuck NodePool", func(t *testing.T) {
		id, name := readyCluster(t, sp, "stk", kubevirt417)
		failMode(t, "faults", name, simulator.FailNPUpgradeStuck)
		if code, _, _, raw := sp.patch(t, id, `{"spec":{"version":"4.18.22"}}`, ""); code != http.StatusOK {
			t.Fatalf("PATCH: %d %s", code, raw)
		}
		c, _ := sp.waitStatus(t, id, "FAILED", 90*time.Second)
		if !strings.Contains(c.StatusMessage, "did not finish within") || !strings.Contains(c.StatusMessage, "Upgrading workers to 4.18.22") {
			t.Fatalf("FAILED %q", c.StatusMessage)
		}
		// A retry of the same target is allowed after a failure (it is a new operation).
		failMode(t, "faults", name, "")
	})
}

// The SP killed in the middle of an upgrade: the next one resumes from the record on the HostedCluster. While no
// SP runs, the control plane completes and the NodePool is not touched; the new SP patches it and finishes.
func TestDay2ResumeAfterRestart(t *testing.T) {
	t.Parallel()
	cfg := testConfig("leader")
	cfg.ProviderName = "sp-day2-resume"
	sp := launchSP(t, cfg, Options{})
	id, name := readyCluster(t, sp, "res", kubevirt417)
	if code, _, _, raw := sp.patch(t, id, `{"spec":{"version":"4.18"}}`, ""); code != http.StatusOK {
		sp.stop()
		t.Fatalf("PATCH: %d %s", code, raw)
	}
	key := client.ObjectKey{Namespace: "leader", Name: name}
	testwait.For(t, 20*time.Second, "the control-plane release set", func() bool {
		var hc hyperv1.HostedCluster
		return testHub.Client.Get(context.Background(), key, &hc) == nil && strings.HasSuffix(hc.Spec.Release.Image, ":4.18.22-multi")
	})
	sp.stop()
	// With no SP, the control plane completes (the simulator is the operator) and the NodePool stays at 4.17.
	testwait.For(t, 30*time.Second, "the control plane completed at 4.18.22", func() bool {
		var hc hyperv1.HostedCluster
		return testHub.Client.Get(context.Background(), key, &hc) == nil && hc.Status.Version != nil &&
			hc.Status.Version.History[0].Version == "4.18.22" && hc.Status.Version.History[0].State == configv1.CompletedUpdate
	})
	var np hyperv1.NodePool
	if err := testHub.Client.Get(context.Background(), key, &np); err != nil || strings.HasSuffix(np.Spec.Release.Image, ":4.18.22-multi") {
		t.Fatalf("the NodePool was patched with no SP running (%v)", err)
	}
	var hc hyperv1.HostedCluster
	if err := testHub.Client.Get(context.Background(), key, &hc); err != nil {
		t.Fatal(err)
	}
	if rec := operation.Decode(&hc); rec == nil || rec.Phase != operation.PhaseControlPlane {
		t.Fatalf("record %+v", rec)
	}
	sp2 := startSP(t, cfg, Options{})
	c, _ := sp2.waitStatus(t, id, "READY", 60*time.Second)
	if c.OpenshiftVersion != "4.18.22" || c.CurrentOperation == nil || c.CurrentOperation.Phase != api.Done {
		t.Fatalf("after resuming: %+v", c)
	}
	if err := testHub.Client.Get(context.Background(), key, &np); err != nil || np.Status.Version != "4.18.22" || ptr.Deref(np.Spec.Replicas, 0) != 2 {
		t.Fatalf("NodePool after resuming: %q (%v)", np.Status.Version, err)
	}
	if code, _, _ := do(t, http.MethodDelete, sp2.URL+"/api/v1alpha1/clusters/"+id, "", nil); code != http.StatusNoContent {
		t.Fatalf("delete: %d", code)
	}
}

// Status events follow an operation: READY, then UPDATING (published as DCM's PROGRESSING when so configured) with
// its progress, then READY with the new worker count.
func TestDay2Events(t *testing.T) {
	t.Parallel()
	cfg := eventsConfig("events", "sp-day2-events", testHub.NATSURL)
	cfg.UpdatingStatus = "PROGRESSING"
	sp := startSP(t, cfg, Options{})
	name := uniqueName("ev2")
	id := "inst-" + name
	stream := watchEvents(t, testHub.NATSURL, "sp-day2-events", id)
	if code, _, raw := sp.create(t, id, fmt.Sprintf(kubevirt417, name)); code != http.StatusCreated {
		t.Fatalf("create: %d %s", code, raw)
	}
	stream.until("READY", 60*time.Second)
	if code, _, c, raw := sp.patch(t, id, `{"spec":{"nodes":{"workers":{"count":3}}}}`, ""); code != http.StatusOK || c.Status != "UPDATING" {
		t.Fatalf("scale: %d %s", code, raw)
	}
	stream.until("PROGRESSING", 90*time.Second)
	seq, d := stream.until("READY", 60*time.Second)
	if got := strings.Join(seq, ","); !strings.HasSuffix(got, "READY,PROGRESSING,READY") || !strings.Contains(d.Message, "workers 3/3 ready") {
		t.Fatalf("events %s, last %+v", got, d)
	}
	for _, ev := range stream.events {
		if d := eventData(t, ev); d.Status == "PROGRESSING" && !strings.HasPrefix(d.Message, "Scaling workers 2→3") && d.Message != "Accepted" {
			t.Fatalf("PROGRESSING event %q", d.Message)
		}
	}
}

// Autoscaling on and off: the NodePool gets autoScaling{min,max} without replicas (one merge patch), the cluster is
// READY within the bounds; bare metal reserves max Agents before answering; off again sets a count.
func TestDay2Autoscaling(t *testing.T) {
	t.Parallel()
	sp := shared(t)
	for _, platform := range day2Platforms {
		t.Run(platform.name, func(t *testing.T) {
			id, name := readyCluster(t, sp, "as-"+platform.name[:2], platform.body)
			on := `{"spec":{"nodes":{"workers":{"count":null}},"provider_hints":{"acm":{"autoscaling":{"min":3,"max":4}}}}}`
			code, _, c, raw := sp.patch(t, id, on, "")
			if code != http.StatusOK || c.CurrentOperation == nil || c.CurrentOperation.To != "autoscaling 3-4" {
				t.Fatalf("autoscaling on: %d %s", code, raw)
			}
			if platform.name == "baremetal" && reserved(t, id) < 4 {
				t.Fatalf("%d Agents reserved, want the maximum 4", reserved(t, id))
			}
			seq, last := follow(t, sp, "clusters", id, name, 60*time.Second, nil)
			propertyReadyUpdatingReady(t, seq)
			var np hyperv1.NodePool
			if err := testHub.Client.Get(context.Background(), client.ObjectKey{Namespace: "clusters", Name: name}, &np); err != nil {
				t.Fatal(err)
			}
			if np.Spec.Replicas != nil || np.Spec.AutoScaling == nil || np.Spec.AutoScaling.Min != 3 || np.Spec.AutoScaling.Max != 4 || last.Nodes.Workers.Ready != 3 {
				t.Fatalf("NodePool replicas %v autoScaling %+v, workers %+v", np.Spec.Replicas, np.Spec.AutoScaling, last.Nodes.Workers)
			}
			off := `{"spec":{"nodes":{"workers":{"count":2}},"provider_hints":{"acm":{"autoscaling":null}}}}`
			if code, _, c, raw := sp.patch(t, id, off, ""); code != http.StatusOK || c.CurrentOperation == nil || c.CurrentOperation.To != "2" {
				t.Fatalf("autoscaling off: %d %s", code, raw)
			}
			seq, last = follow(t, sp, "clusters", id, name, 60*time.Second, nil)
			propertyReadyUpdatingReady(t, seq)
			if last.Nodes.Workers.Total != 2 || last.Nodes.Workers.Ready != 2 {
				t.Fatalf("after autoscaling off: %+v", last.Nodes.Workers)
			}
		})
	}
}

// Bare-metal day-2 against the Agents on the hub, through an SP whose hub writes a fault can refuse:
//   - a scale-up whose record the hub refuses (an admission webhook's 403) reserves the extra Agent first and
//     releases it again: the cluster keeps its two, and no operation is recorded;
//   - a resize beyond what the bound Agents have (32 cores; they have 16) is a 422 before anything is recorded,
//     one within it (12 cores) is accepted.
func TestDay2BareMetalAgents(t *testing.T) {
	t.Parallel()
	px, err := faultproxy.Start(testHub.Config)
	if err != nil {
		t.Fatal(err)
	}
	defer px.Close()
	cfg := testConfig("shared")
	cfg.ProviderName = "sp-bm-day2"
	sp := startSP(t, cfg, Options{RestConfig: px.Config()})
	name := uniqueName("bm-day2")
	id := "inst-" + name
	if code, _, raw := sp.create(t, id, fmt.Sprintf(baremetal417, name, agentPool(t, 4))); code != http.StatusCreated {
		t.Fatalf("create: %d %s", code, raw)
	}
	sp.waitStatus(t, id, "READY", 60*time.Second)
	recorded := func() *operation.Record {
		var hc hyperv1.HostedCluster
		if err := testHub.Client.Get(context.Background(), client.ObjectKey{Namespace: "shared", Name: name}, &hc); err != nil {
			t.Fatal(err)
		}
		return operation.Decode(&hc)
	}

	var refuse atomic.Bool
	px.SetRule(func(r faultproxy.Request) faultproxy.Verdict {
		if refuse.Load() && r.Method == http.MethodPatch && strings.HasSuffix(r.Path, "/hostedclusters/"+name) {
			return faultproxy.Refuse403
		}
		return faultproxy.Pass
	})
	refuse.Store(true)
	code, _, _, raw := sp.patch(t, id, `{"spec":{"nodes":{"workers":{"count":3}}}}`, "")
	refuse.Store(false)
	if code < 400 {
		t.Fatalf("a scale whose record the hub refused was answered %d %s", code, raw)
	}
	if n := reserved(t, id); n != 2 {
		t.Fatalf("%d Agents reserved after the refused scale, want the cluster's 2", n)
	}
	if op := recorded(); op != nil {
		t.Fatalf("the refused scale recorded %+v", op)
	}

	code, h, _, raw := sp.patch(t, id, `{"spec":{"nodes":{"workers":{"cpu":32}}}}`, "")
	assertProblem(t, code, h, raw, http.StatusUnprocessableEntity, "do not meet the new minimums")
	if op := recorded(); op != nil {
		t.Fatalf("the refused resize recorded %+v", op)
	}
	code, _, c, raw := sp.patch(t, id, `{"spec":{"nodes":{"workers":{"cpu":12}}}}`, "")
	if code != http.StatusOK || c.CurrentOperation == nil || c.CurrentOperation.Kind != api.Resize {
		t.Fatalf("resize within the Agents' hardware: %d %s", code, raw)
	}
}
