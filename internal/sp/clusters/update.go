package clusters

import (
	"encoding/json"
	"errors"
	"fmt"
	"reflect"
	"sort"
	"strings"
	"time"

	"k8s.io/apimachinery/pkg/api/resource"

	"github.com/dcm-sp/acm-cluster-sp/internal/sp/operation"
	"github.com/dcm-sp/acm-cluster-sp/internal/sp/platform"
	"github.com/dcm-sp/acm-cluster-sp/internal/sp/versions"
)

// UpdateState is what an update is decided against: the cluster as the caches show it and the hub's catalog.
type UpdateState struct {
	StoredSpec         string // the dcm-spec annotation
	Deleting           bool
	EverCompleted      bool              // some rollout completed (the cluster was installed)
	Operation          *operation.Record // the latest operation, open or not
	CompletedVersion   string            // the last Completed control-plane version (history), e.g. 4.17.12
	SpecImage          string            // the HostedCluster's spec.release.image
	SpecVersion        string            // the version of the SpecImage's release as last requested (the latest upgrade's target)
	DesiredImage       string            // status.version.desired.image: the release the operator accepted
	NodePoolVersions   []string          // status.version of each NodePool
	Upgradeable        string            // "" or the CVO's reason and message while ClusterVersionUpgradeable=False
	Catalog            versions.Catalog
	DefaultWorkerCount int32
	HCGeneration       int64
	Now                time.Time
	Timeout            time.Duration // the operation's deadline from now (per platform)
	OperationID        string        // the id a new operation gets
}

// UpdateDecision is the outcome of an accepted update. Spec is nil for a patch that changes nothing (200, nothing
// starts); Operation is nil when only the stored spec changes (e.g. "4.17" rewritten as the release it runs).
type UpdateDecision struct {
	Spec      *Spec
	Operation *operation.Record
}

// MaxSkewMinors is how many minors a NodePool may lag the control plane: N-2, what the ACM console and HyperShift's
// older documentation allow (its current documentation allows N-3; the product keeps to the stricter rule).
const MaxSkewMinors = 2

// Patch is an update request as internal/sp/wire decodes it: Changes is the RFC 7396 merge patch of the spec (its
// keys as sent, nil for a removal), Stored the stored spec it applies to, Merged the result.
type Patch struct {
	Changes, Stored, Merged map[string]any
}

// DecideUpdate decides a PATCH (docs/day2.md, section "API"): a merge patch of {"spec": …} applied to the stored
// spec. Immutable fields are 400 when changed and ignored when equal; one kind of change (upgrade, scale or resize)
// per request; a change while another operation runs, on a cluster being deleted or one never installed is 409; a
// target the cluster cannot move to is 422 (for versions with the valid targets). It is pure.
func DecideUpdate(p Patch, sc SpecContext, st UpdateState) (UpdateDecision, error) {
	if _, ok := p.Changes["pull_secret"]; ok {
		return UpdateDecision{}, InvalidFields([]FieldError{{"spec.pull_secret", "immutable: the pull secret is set at create"}})
	}
	old, err := ParseStoredSpec([]byte(st.StoredSpec), sc)
	if err != nil {
		return UpdateDecision{}, internal(err, "reading the stored spec")
	}
	// An immutable change is named as such before the merged spec is validated (which would complain about its
	// consequences instead, e.g. a baremetal platform without an InfraEnv).
	if fields := immutableChanges(p.Stored, p.Merged); len(fields) > 0 {
		return UpdateDecision{}, InvalidFields(fields)
	}
	next, err := NewSpec(p.Merged, "spec", sc)
	if err != nil {
		return UpdateDecision{}, err
	}
	if fields := immutableChanges(old.Canonical, next.Canonical); len(fields) > 0 {
		return UpdateDecision{}, InvalidFields(fields)
	}
	kinds, retry := changeKinds(old, next, p.Changes, st)
	if len(kinds) == 0 {
		if next.JSON == old.JSON {
			return UpdateDecision{}, nil // a replay: nothing changes
		}
		return UpdateDecision{Spec: next}, nil // an equivalent spelling (e.g. 16GB for 16Gi)
	}
	if len(kinds) > 1 {
		return UpdateDecision{}, Unprocessable("one operation per request: this patch would %s at once; send them one after the other", joinKinds(kinds))
	}
	if err := preconditions(st); err != nil {
		return UpdateDecision{}, err
	}
	rec := &operation.Record{ID: st.OperationID, Kind: kinds[0], StartedAt: st.Now.UTC(), Deadline: st.Now.Add(st.Timeout).UTC(),
		HCGeneration: st.HCGeneration, Replicas: next.Replicas(st.DefaultWorkerCount), Phase: operation.PhaseWorkers, Message: "Accepted"}
	switch rec.Kind {
	case operation.Upgrade:
		return decideUpgrade(rec, old, next, st)
	case operation.Scale:
		rec.From, rec.To = scaleOf(old, st.DefaultWorkerCount), scaleOf(next, st.DefaultWorkerCount)
		if a := next.Autoscaling; a != nil {
			rec.AutoscalingMin, rec.AutoscalingMax = a.Min, a.Max
		}
	case operation.Resize:
		rec.From, rec.To = describeSize(old.Workers), describeSize(next.Workers)
		rec.Replicas = old.Replicas(st.DefaultWorkerCount)
	}
	if retry {
		rec.From = st.Operation.From // what the failed attempt started from
	}
	return UpdateDecision{Spec: next, Operation: rec}, nil
}

// changeKinds lists the kinds of change from old to next. A patch that changes nothing but names the field of a
// failed operation is a retry of it (a new operation), not a replay.
func changeKinds(old, next *Spec, changes map[string]any, st UpdateState) (kinds []operation.Kind, retry bool) {
	if next.Version != old.Version {
		kinds = append(kinds, operation.Upgrade)
	}
	if scaleOf(old, st.DefaultWorkerCount) != scaleOf(next, st.DefaultWorkerCount) {
		kinds = append(kinds, operation.Scale)
	}
	if !sameSize(old.Workers, next.Workers) {
		kinds = append(kinds, operation.Resize)
	}
	if len(kinds) == 0 && st.Operation != nil && st.Operation.Phase == operation.PhaseFailed && touches(changes, st.Operation.Kind) {
		return []operation.Kind{st.Operation.Kind}, true
	}
	return kinds, false
}

// decideUpgrade completes the record of an upgrade to next.Version (rec carries what every kind shares).
func decideUpgrade(rec *operation.Record, old, next *Spec, st UpdateState) (UpdateDecision, error) {
	to, image, err := upgradeTarget(next.Version, st)
	if err != nil {
		return UpdateDecision{}, err
	}
	rec.Replicas = old.Replicas(st.DefaultWorkerCount)
	if to != "" {
		rec.From, rec.To, rec.ReleaseImage, rec.Phase = st.CompletedVersion, to, image, operation.PhaseControlPlane
		return UpdateDecision{Spec: next, Operation: rec}, nil
	}
	// The version the cluster runs. After a refused upgrade that never started (the operator never took its
	// release: desired ≠ spec), going back restores the running release; one that started cannot go back.
	switch {
	case st.SpecImage != "" && st.DesiredImage != "" && st.SpecImage != st.DesiredImage:
		rec.From, rec.To, rec.ReleaseImage, rec.Phase = st.SpecVersion, st.CompletedVersion, st.DesiredImage, operation.PhaseControlPlane
		return UpdateDecision{Spec: next, Operation: rec}, nil
	case st.Operation != nil && st.Operation.Kind == operation.Upgrade && st.Operation.To != st.CompletedVersion && !st.Operation.Open():
		return UpdateDecision{}, &Error{Kind: KindUnprocessable, Message: fmt.Sprintf("version %s: the upgrade to %s has started and cannot be reverted (OpenShift cannot go back); retry %s", next.Version, st.Operation.To, st.Operation.To),
			Fields: []FieldError{{Field: "spec.version", Message: "an upgrade that started cannot be reverted"}}}
	}
	return UpdateDecision{Spec: next}, nil // the requested version names the release the cluster runs
}

// touches reports whether the patch names the field an operation kind changes.
func touches(patch map[string]any, kind operation.Kind) bool {
	if kind == operation.Upgrade {
		_, ok := patch["version"]
		return ok
	}
	nodes, _ := patch["nodes"].(map[string]any)
	workers, _ := nodes["workers"].(map[string]any)
	if hints, _ := patch["provider_hints"].(map[string]any); kind == operation.Scale && hints != nil {
		if acm, _ := hints["acm"].(map[string]any); acm != nil {
			if _, ok := acm["autoscaling"]; ok {
				return true
			}
		}
	}
	for _, k := range map[operation.Kind][]string{operation.Scale: {"count"}, operation.Resize: {"cpu", "memory", "storage"}}[kind] {
		if _, ok := workers[k]; ok {
			return true
		}
	}
	return false
}

// mutablePaths are the spec fields an update may change (the table of docs/day2.md, section "API"); every other
// field is immutable.
var mutablePaths = map[string]bool{
	"version": true, "nodes.workers.count": true, "nodes.workers.cpu": true, "nodes.workers.memory": true, "nodes.workers.storage": true,
	"provider_hints.acm.autoscaling": true, "provider_hints.acm.autoscaling.min": true, "provider_hints.acm.autoscaling.max": true,
}

// immutableChanges lists every immutable leaf whose value differs between the stored and the patched spec.
func immutableChanges(old, next map[string]any) []FieldError {
	a, b := map[string]any{}, map[string]any{}
	flatten("", old, a)
	flatten("", next, b)
	paths := map[string]bool{}
	for p := range a {
		paths[p] = true
	}
	for p := range b {
		paths[p] = true
	}
	var out []FieldError
	for p := range paths {
		if mutablePaths[p] || reflect.DeepEqual(a[p], b[p]) {
			continue
		}
		was := "absent"
		if v, ok := a[p]; ok {
			j, _ := json.Marshal(v)
			was = string(j)
		}
		out = append(out, FieldError{Field: "spec." + p, Message: "immutable (currently " + was + "); only version, nodes.workers.count, cpu, memory, storage and provider_hints.acm.autoscaling can change"})
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Field < out[j].Field })
	return out
}

func flatten(prefix string, v any, out map[string]any) {
	m, ok := v.(map[string]any)
	if !ok || len(m) == 0 {
		if prefix != "" {
			out[prefix] = normalizeNumber(v)
		}
		return
	}
	for k, x := range m {
		flatten(join(prefix, k), x, out)
	}
}

// normalizeNumber makes a stored number (float64) and a patched one (json.Number) compare equal.
func normalizeNumber(v any) any {
	switch n := v.(type) {
	case json.Number:
		f, _ := n.Float64()
		return f
	}
	return v
}

// scaleOf describes a spec's scaling for comparison and for the record: "3", or "autoscaling 2-5".
func scaleOf(s *Spec, def int32) string {
	if a := s.Autoscaling; a != nil {
		return fmt.Sprintf("autoscaling %d-%d", a.Min, a.Max)
	}
	return fmt.Sprint(s.Replicas(def))
}

func sameSize(a, b WorkerSpec) bool {
	eqInt := func(x, y *int64) bool { return (x == nil) == (y == nil) && (x == nil || *x == *y) }
	eqQ := func(x, y *resource.Quantity) bool { return (x == nil) == (y == nil) && (x == nil || x.Cmp(*y) == 0) }
	return eqInt(a.CPU, b.CPU) && eqQ(a.Memory, b.Memory) && eqQ(a.Storage, b.Storage)
}

// describeSize renders worker sizes for an operation record: "cpu=8,memory=32Gi,storage=120Gi".
func describeSize(w WorkerSpec) string {
	var parts []string
	if w.CPU != nil {
		parts = append(parts, fmt.Sprintf("cpu=%d", *w.CPU))
	}
	if w.Memory != nil {
		parts = append(parts, "memory="+w.Memory.String())
	}
	if w.Storage != nil {
		parts = append(parts, "storage="+w.Storage.String())
	}
	if len(parts) == 0 {
		return "default"
	}
	return strings.Join(parts, ",")
}

func joinKinds(ks []operation.Kind) string {
	s := make([]string, len(ks))
	for i, k := range ks {
		s[i] = string(k)
	}
	return strings.Join(s, " and ")
}

// preconditions refuse a change the cluster cannot take now (409): being deleted, never installed, or busy.
func preconditions(st UpdateState) error {
	switch {
	case st.Deleting:
		return &Error{Kind: KindConflict, Reason: ReasonFailedPrecondition, Message: "the cluster is being deleted"}
	case !st.EverCompleted:
		return &Error{Kind: KindConflict, Reason: ReasonFailedPrecondition, Message: "the cluster has not completed its installation yet; update it once it is READY"}
	case st.Operation.Open():
		return &Error{Kind: KindConflict, Reason: ReasonAborted, Message: "another operation is in progress: " + st.Operation.Describe() + "; retry when it has ended"}
	}
	return nil
}

// upgradeTarget resolves a requested version once, against the catalog, and checks it is a valid move from the
// last Completed version: newer (a downgrade is 400), at most one minor ahead, leaving no NodePool more than N-2
// behind, and not a y-stream while the CVO says Upgradeable=False. to is "" when the request names the release the
// cluster already runs.
func upgradeTarget(requested string, st UpdateState) (to, image string, err error) {
	res, rerr := st.Catalog.Resolve(requested)
	cur, curOK := versions.ParseVersion(st.CompletedVersion)
	targets := "none"
	if curOK {
		if t := st.Catalog.UpgradeTargets(cur); len(t) > 0 {
			targets = strings.Join(t, ", ")
		}
	}
	switch {
	case errors.Is(rerr, versions.ErrInvalid):
		return "", "", &Error{Kind: KindInvalid, Message: "version: " + strings.TrimPrefix(rerr.Error(), versions.ErrInvalid.Error()+": "),
			Fields: []FieldError{{Field: "spec.version", Message: "not a Kubernetes or OpenShift version"}}}
	case rerr != nil:
		return "", "", &Error{Kind: KindUnprocessable, Message: fmt.Sprintf("version %s: %s; valid targets from %s: %s", requested, strings.TrimPrefix(rerr.Error(), versions.ErrUnsupported.Error()+": "), st.CompletedVersion, targets),
			Fields: []FieldError{{Field: "spec.version", Message: "valid targets: " + targets}}}
	case !curOK:
		return "", "", Unprocessable("the cluster's current version %q is unknown; it cannot be upgraded", st.CompletedVersion)
	}
	target, _ := versions.ParseVersion(res.OpenShiftVersion)
	field := func(kind Kind, format string, args ...any) error {
		msg := fmt.Sprintf(format, args...)
		return &Error{Kind: kind, Message: "version " + requested + ": " + msg, Fields: []FieldError{{Field: "spec.version", Message: msg}}}
	}
	switch {
	case target.Version() == cur.Version():
		return "", "", nil
	case target.Less(cur):
		return "", "", field(KindInvalid, "%s is older than the running %s; downgrades are not supported", target.Version(), cur.Version())
	case target.Major != cur.Major || target.Minor > cur.Minor+1:
		return "", "", field(KindUnprocessable, "%s is more than one minor ahead of %s; valid targets: %s", target.Version(), cur.Version(), targets)
	}
	for _, v := range st.NodePoolVersions {
		if np, ok := versions.ParseVersion(v); ok && target.Minor-np.Minor > MaxSkewMinors {
			return "", "", field(KindUnprocessable, "a NodePool at %s would be more than %d minors behind %s", v, MaxSkewMinors, target.Version())
		}
	}
	if target.Minor != cur.Minor && st.Upgradeable != "" {
		return "", "", field(KindUnprocessable, "the cluster version operator blocks minor upgrades: %s", st.Upgradeable)
	}
	return res.OpenShiftVersion, res.ReleaseImage, nil
}

// OperationTimeout is the deadline of an operation on platform p: its configured timeout, else the platform's
// default (bare metal's InPlace rollouts drain and reboot one node at a time, so it waits longer). false: the SP
// does not serve p.
func OperationTimeout(p Platform, configured map[Platform]time.Duration) (time.Duration, bool) {
	return platform.Timeout(p, configured, func(e platform.Platform) time.Duration { return e.OperationTimeout })
}
