package clusters

import (
	"bytes"
	"encoding/json"
	"fmt"
	"regexp"
	"strings"

	"k8s.io/apimachinery/pkg/api/resource"
)

// SpecContext is what request validation needs from the configuration.
type SpecContext struct {
	Namespace       string // config namespace: bounds the name length and is reserved
	AgentNamespace  string // reserved as a cluster name
	DefaultPlatform string
	BaseDomain      string // config fallback for base_domain
	DefaultInfraEnv string
}

// Spec is a validated, normalized create request (NewSpec).
type Spec struct {
	// Canonical is the normalized echo: canonical snake_case keys, `workers`, the effective platform filled in,
	// unknown keys kept, pull_secret and read-only fields removed. JSON is its serialization (sorted keys), stored on
	// the HostedCluster and compared for idempotency.
	Canonical map[string]any
	JSON      string

	Name         string
	Labels       map[string]string
	Version      string
	Platform     Platform
	BaseDomain   string // effective: request, else configuration ("" = KubeVirt passthrough)
	InfraEnv     string // effective (baremetal)
	AgentLabels  map[string]string
	ControlPlane ControlPlaneSpec
	Workers      WorkerSpec
	// Autoscaling is provider_hints.acm.autoscaling: the NodePool scales itself within [Min, Max] (exclusive with
	// nodes.workers.count).
	Autoscaling *Autoscaling
	PullSecret  []byte // from the spec's pull_secret; nil → the configured one
}

// Autoscaling bounds an autoscaled NodePool.
type Autoscaling struct{ Min, Max int32 }

// Replicas is how many workers the spec asks for: the count (or def), or the minimum under autoscaling.
func (s *Spec) Replicas(def int32) int32 {
	switch {
	case s.Autoscaling != nil:
		return s.Autoscaling.Min
	case s.Workers.Count != nil:
		return *s.Workers.Count
	}
	return def
}

// MaxReplicas is the most workers the spec can have (bare metal reserves that many Agents).
func (s *Spec) MaxReplicas(def int32) int32 {
	if s.Autoscaling != nil {
		return s.Autoscaling.Max
	}
	return s.Replicas(def)
}

// ControlPlaneSpec is nodes.control_plane.
type ControlPlaneSpec struct {
	Count  int // 0 when absent
	CPU    *int64
	Memory *resource.Quantity
}

// WorkerSpec is nodes.workers.
type WorkerSpec struct {
	Count   *int32
	CPU     *int64
	Memory  *resource.Quantity
	Storage *resource.Quantity
}

// readOnly are resource fields a client may send back in a spec; they are ignored (dropped), not rejected.
var readOnly = []string{"id", "path", "status", "status_message", "create_time", "update_time", "api_endpoint", "console_url", "kubeconfig", "kubeconfig_omitted"}

// knownKeys are the keys the API defines, per object path (canonical spellings). Anything else is refused with a
// 400 naming it: the stored spec keeps only what the API defines, so a client that puts a pull secret or a token
// under an invented key never sees it stored in plain text on the hub, cached by every replica, or echoed by GET
// and LIST. provider_hints is the exception: hints for other providers are dropped (DCM forwards the user's spec
// verbatim, and hints addressed to another provider are none of this one's business).
var knownKeys = map[string][]string{
	"":                               {"service_type", "metadata", "version", "nodes", "provider_hints", "pull_secret"},
	"metadata":                       {"name", "labels"},
	"nodes":                          {"control_plane", "workers"},
	"nodes.control_plane":            {"count", "cpu", "memory", "storage"},
	"nodes.workers":                  {"count", "cpu", "memory", "storage"},
	"provider_hints.acm":             {"platform", "base_domain", "infra_env", "agent_labels", "provisioning_type", "autoscaling"},
	"provider_hints.acm.autoscaling": {"min", "max"},
}

// MaxSpecBytes caps the normalized spec, which is stored in an annotation of the HostedCluster (the API server
// allows 256 KiB for all annotations together) and held in every replica's cache.
const MaxSpecBytes = 32 << 10

var dnsLabelRE = regexp.MustCompile(`^[a-z0-9]([-a-z0-9]*[a-z0-9])?$`)

// Bounds that keep counts and sizes inside the API types, and far beyond any real machine, so that no size can
// overflow an int64 byte count (the Agent minimums) or a VM definition.
const (
	maxWorkers = 1000
	maxCPU     = 1024
)

var (
	minMemory  = resource.MustParse("1Gi")
	maxMemory  = resource.MustParse("64Ti")
	minStorage = resource.MustParse("1Gi")
	maxStorage = resource.MustParse("1Pi")
)

// baseDomainRE is the HostedCluster CRD's own rule for spec.dns.baseDomain (x-kubernetes-validations, with
// maxLength 253); TestBaseDomainRuleMatchesTheCRD keeps the two in step.
var baseDomainRE = regexp.MustCompile(`^(?:(?:[a-zA-Z0-9-]+\.)+[a-zA-Z]{2,}|[a-zA-Z0-9-]+)$`)

// reservedNames may not be used as cluster names (docs/hypershift-objects.md): they collide with hub namespaces.
var reservedNames = []string{"default", "local-cluster", "hypershift", "multicluster-engine"}
var reservedPrefixes = []string{"kube-", "openshift-", "open-cluster-management"}

// NewSpec validates and normalizes a create request's spec: raw is the spec object as decoded (internal/sp/wire:
// JSON numbers as json.Number, the canonical snake_case keys), at the field path it sits at in the request ("spec"
// in the DCM form, "" for a bare spec), which prefixes every field an error names. Invalid input is a KindInvalid
// error naming every offending field; an unsupported platform or provisioning type is KindUnprocessable. raw is
// not changed.
func NewSpec(raw map[string]any, at string, sc SpecContext) (*Spec, error) {
	return newSpec(raw, at, sc, false)
}

// ParseStoredSpec reads a spec stored on a HostedCluster: the canonical JSON of a Spec (Spec.JSON), the domain's
// own form. It is lenient where NewSpec is strict about the API's shape: keys unknown today (older versions kept
// them) are dropped rather than refused, so a cluster created by an older version keeps converging.
func ParseStoredSpec(stored []byte, sc SpecContext) (*Spec, error) {
	dec := json.NewDecoder(bytes.NewReader(stored))
	dec.UseNumber()
	var raw map[string]any
	if err := dec.Decode(&raw); err != nil {
		return nil, Invalid("the stored spec is not a JSON object: %v", err)
	}
	return newSpec(raw, "", sc, true)
}

func newSpec(raw map[string]any, at string, sc SpecContext, lenient bool) (*Spec, error) {
	prefix := ""
	if at != "" {
		prefix = at + "."
	}
	p := &parser{prefix: prefix, lenient: lenient}
	s := p.parse(raw, sc)
	if len(p.unprocessable) > 0 {
		return nil, Unprocessable("%s", strings.Join(p.unprocessable, "; "))
	}
	if len(p.errs) > 0 {
		return nil, InvalidFields(p.errs)
	}
	data, err := json.Marshal(s.Canonical)
	if err != nil {
		return nil, internal(err, "normalizing the spec")
	}
	if len(data) > MaxSpecBytes {
		return nil, InvalidFields([]FieldError{{"spec", fmt.Sprintf("the spec is %d bytes once normalized; at most %d", len(data), MaxSpecBytes)}})
	}
	s.JSON = string(data)
	return s, nil
}

var idRE = regexp.MustCompile(`^[a-z0-9]([a-z0-9-]{0,61}[a-z0-9])?$`)

// CheckID validates a client-chosen instance id (AEP-133 pattern; "health" would shadow the health route).
func CheckID(id string) error {
	if !idRE.MatchString(id) {
		return &Error{Kind: KindInvalid, Message: fmt.Sprintf("id %q must match ^[a-z0-9]([a-z0-9-]{0,61}[a-z0-9])?$", id), Fields: []FieldError{{"id", "invalid format"}}}
	}
	if id == "health" {
		return &Error{Kind: KindInvalid, Message: `id "health" is reserved (it is the health endpoint's path)`, Fields: []FieldError{{"id", "reserved"}}}
	}
	return nil
}
