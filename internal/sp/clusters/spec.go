package clusters

import (
	"bytes"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"math"
	"regexp"
	"slices"
	"sort"
	"strconv"
	"strings"

	"k8s.io/apimachinery/pkg/api/resource"
	"k8s.io/apimachinery/pkg/util/validation"
)

// SpecContext is what request validation needs from the configuration.
type SpecContext struct {
	Namespace       string // config namespace: bounds the name length and is reserved
	AgentNamespace  string // reserved as a cluster name
	DefaultPlatform string
	BaseDomain      string // config fallback for base_domain
	DefaultInfraEnv string
}

// Spec is a validated, normalized create request.
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

// aliases maps the design's camelCase spellings to canonical keys, per object path (docs/dcm.md).
var aliases = map[string]map[string]string{
	"":                   {"serviceType": "service_type", "providerHints": "provider_hints"},
	"nodes":              {"controlPlane": "control_plane", "worker": "workers"},
	"provider_hints.acm": {"baseDomain": "base_domain", "infraEnv": "infra_env", "agentLabels": "agent_labels", "provisioningType": "provisioning_type"},
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

var (
	dnsLabelRE = regexp.MustCompile(`^[a-z0-9]([-a-z0-9]*[a-z0-9])?$`)
	dcmSizeRE  = regexp.MustCompile(`^([0-9]+)(MB|GB|TB)$`)
)

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

// ParseSpec reads a create body — the wrapped DCM form {"spec": …} or a flat spec — and validates and normalizes it.
// Invalid input is a KindInvalid error naming every offending field; an unsupported platform or provisioning type
// is KindUnprocessable.
func ParseSpec(body []byte, sc SpecContext) (*Spec, error) { return parseSpec(body, sc, false) }

// ParseStoredSpec reads a spec stored on a HostedCluster (a normalized spec). It is lenient where ParseSpec is
// strict about the API's shape: keys unknown today (older versions kept them) are dropped rather than refused, so a
// cluster created by an older version keeps converging.
func ParseStoredSpec(stored []byte, sc SpecContext) (*Spec, error) {
	return parseSpec(stored, sc, true)
}

func parseSpec(body []byte, sc SpecContext, lenient bool) (*Spec, error) {
	dec := json.NewDecoder(bytes.NewReader(body))
	dec.UseNumber()
	var top any
	if err := dec.Decode(&top); err != nil {
		return nil, Invalid("request body is not valid JSON: %s", jsonErr(err))
	}
	if dec.More() {
		return nil, Invalid("request body has data after the JSON object")
	}
	root, ok := top.(map[string]any)
	if !ok {
		return nil, Invalid("request body must be a JSON object")
	}
	prefix := ""
	if inner, ok := root["spec"].(map[string]any); ok {
		for k := range root {
			if k != "spec" {
				return nil, InvalidFields([]FieldError{{k, "unknown field: the DCM form is {\"spec\": {…}} alone"}})
			}
		}
		root, prefix = inner, "spec."
	} else if _, present := root["spec"]; present {
		return nil, InvalidFields([]FieldError{{"spec", "must be an object"}})
	}
	p := &parser{prefix: prefix, lenient: lenient}
	s := p.parse(root, sc)
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

func jsonErr(err error) string {
	msg := err.Error()
	return strings.TrimPrefix(msg, "json: ")
}

type parser struct {
	prefix        string
	lenient       bool // drop unknown keys instead of refusing them (stored specs)
	errs          []FieldError
	unprocessable []string
}

func (p *parser) fail(field, format string, args ...any) {
	p.errs = append(p.errs, FieldError{Field: p.prefix + field, Message: fmt.Sprintf(format, args...)})
}

// canonical renames alias keys of obj at path; both spellings of one key is an error.
func (p *parser) canonical(obj map[string]any, path string) map[string]any {
	out := make(map[string]any, len(obj))
	for k, v := range obj {
		out[k] = v
	}
	keys := make([]string, 0, len(aliases[path]))
	for alias := range aliases[path] {
		keys = append(keys, alias)
	}
	sort.Strings(keys)
	for _, alias := range keys {
		canon := aliases[path][alias]
		v, ok := out[alias]
		if !ok {
			continue
		}
		if _, both := out[canon]; both {
			p.fail(join(path, canon), "both %q and %q given; use %q", canon, alias, canon)
			continue
		}
		delete(out, alias)
		out[canon] = v
	}
	if known, ok := knownKeys[path]; ok {
		keys := make([]string, 0, len(out))
		for k := range out {
			keys = append(keys, k)
		}
		sort.Strings(keys)
		for _, k := range keys {
			if !slices.Contains(known, k) && !(path == "" && slices.Contains(readOnly, k)) {
				if p.lenient {
					delete(out, k)
					continue
				}
				p.fail(join(path, k), "unknown field (known: %s)", strings.Join(known, ", "))
			}
		}
	}
	return out
}

func join(path, key string) string {
	if path == "" {
		return key
	}
	return path + "." + key
}

func (p *parser) object(v any, field string) (map[string]any, bool) {
	if v == nil {
		return nil, false
	}
	m, ok := v.(map[string]any)
	if !ok {
		p.fail(field, "must be an object")
	}
	return m, ok
}

func (p *parser) str(v any, field string) (string, bool) {
	if v == nil {
		return "", false
	}
	s, ok := v.(string)
	if !ok {
		p.fail(field, "must be a string")
	}
	return s, ok
}

func (p *parser) integer(v any, field string, min, max int64) (int64, bool) {
	if v == nil {
		return 0, false
	}
	n, ok := v.(json.Number)
	if !ok {
		p.fail(field, "must be an integer")
		return 0, false
	}
	i, err := n.Int64()
	if err != nil {
		f, ferr := n.Float64()
		if ferr != nil || f != math.Trunc(f) || math.Abs(f) > 1e15 {
			p.fail(field, "must be an integer")
			return 0, false
		}
		i = int64(f)
	}
	if i < min {
		p.fail(field, "must be at least %d", min)
		return 0, false
	}
	if i > max {
		p.fail(field, "must be at most %d", max)
		return 0, false
	}
	return i, true
}

func (p *parser) stringMap(v any, field string, labelSyntax bool) (map[string]string, bool) {
	m, ok := p.object(v, field)
	if !ok {
		return nil, false
	}
	out := make(map[string]string, len(m))
	good := true
	for k, x := range m {
		s, ok := x.(string)
		if !ok {
			p.fail(field+"."+k, "must be a string")
			good = false
			continue
		}
		if labelSyntax {
			if errs := validation.IsQualifiedName(k); len(errs) > 0 {
				p.fail(field, "%q is not a valid label key: %s", k, errs[0])
				good = false
			}
			if errs := validation.IsValidLabelValue(s); len(errs) > 0 {
				p.fail(field+"."+k, "%q is not a valid label value: %s", s, errs[0])
				good = false
			}
		}
		out[k] = s
	}
	return out, good
}

func (p *parser) size(v any, field string, min, max resource.Quantity) (*resource.Quantity, bool) {
	s, ok := p.str(v, field)
	if !ok {
		return nil, false
	}
	q, err := ParseSize(s)
	if err == nil {
		err = CheckSize(s, q, min, max)
	}
	if err != nil {
		p.fail(field, "%v", err)
		return nil, false
	}
	return &q, true
}

// CheckSize bounds a size (in bytes) to [min, max].
func CheckSize(s string, q, min, max resource.Quantity) error {
	if q.Cmp(min) < 0 {
		return fmt.Errorf("%q is smaller than %s", s, humanBytes(min))
	}
	if q.Cmp(max) > 0 {
		return fmt.Errorf("%q is larger than %s", s, humanBytes(max))
	}
	return nil
}

// humanBytes writes a binary quantity the way the API's sizes are written (1Gi → 1GiB).
func humanBytes(q resource.Quantity) string { return q.String() + "B" }

// ParseSize reads a DCM size (MB, GB, TB are MiB, GiB, TiB) or a Kubernetes quantity; it must be positive.
// The syntax is bounded before anything is parsed: arithmetic on a quantity such as 9e9999999 takes seconds of CPU,
// which no request may cost.
func ParseSize(s string) (resource.Quantity, error) {
	if len(s) > maxSizeLen {
		return resource.Quantity{}, fmt.Errorf("%q is not a size: at most %d characters", truncate(s, maxSizeLen), maxSizeLen)
	}
	if m := exponentRE.FindStringSubmatch(s); m != nil {
		if e, err := strconv.Atoi(m[1]); err != nil || e > 30 || e < -30 {
			return resource.Quantity{}, fmt.Errorf("%q is not a size: exponent out of range", s)
		}
	}
	if m := dcmSizeRE.FindStringSubmatch(s); m != nil {
		unit := map[string]string{"MB": "Mi", "GB": "Gi", "TB": "Ti"}[m[2]]
		q, err := resource.ParseQuantity(strings.TrimLeft(m[1], "0") + unit)
		if err != nil || q.Sign() <= 0 {
			return resource.Quantity{}, fmt.Errorf("%q must be greater than zero", s)
		}
		return q, nil
	}
	q, err := resource.ParseQuantity(s)
	if err != nil {
		return resource.Quantity{}, fmt.Errorf("%q is not a size: use a number with MB, GB or TB (e.g. 32GB) or a Kubernetes quantity (e.g. 32Gi)", s)
	}
	if q.Sign() <= 0 {
		return resource.Quantity{}, fmt.Errorf("%q must be greater than zero", s)
	}
	return q, nil
}

// maxSizeLen bounds a size string; exponentRE finds a decimal exponent (1e12).
const maxSizeLen = 32

var exponentRE = regexp.MustCompile(`[eE]([+-]?[0-9]+)$`)

func truncate(s string, n int) string {
	if len(s) <= n {
		return s
	}
	return s[:n] + "…"
}

func (p *parser) parse(raw map[string]any, sc SpecContext) *Spec {
	spec := p.canonical(raw, "")
	for _, k := range readOnly {
		delete(spec, k)
	}
	s := &Spec{Canonical: spec}

	// service_type
	if v, present := spec["service_type"]; present {
		if st, ok := p.str(v, "service_type"); ok && st != "cluster" {
			p.fail("service_type", "must be \"cluster\" (this provider only provisions clusters), got %q", st)
		}
	} else {
		spec["service_type"] = "cluster"
	}

	// metadata
	if md, ok := p.object(spec["metadata"], "metadata"); ok {
		md = p.canonical(md, "metadata")
		spec["metadata"] = md
		if name, ok := p.str(md["name"], "metadata.name"); ok {
			s.Name = name
			p.checkName(name, sc)
		} else if md["name"] == nil {
			p.fail("metadata.name", "is required")
		}
		if md["labels"] != nil {
			s.Labels, _ = p.stringMap(md["labels"], "metadata.labels", false)
		}
	} else if spec["metadata"] == nil {
		p.fail("metadata.name", "is required")
	}

	// version (format checked against the version matrix later: both a 400 and a 422 can come from there)
	if v, ok := p.str(spec["version"], "version"); ok {
		s.Version = strings.TrimSpace(v)
		if s.Version == "" {
			p.fail("version", "is required")
		}
	} else if spec["version"] == nil {
		p.fail("version", "is required (a Kubernetes version such as 1.30 or an OpenShift version such as 4.17)")
	}

	// nodes
	if nodes, ok := p.object(spec["nodes"], "nodes"); ok {
		nodes = p.canonical(nodes, "nodes")
		spec["nodes"] = nodes
		if cp, ok := p.object(nodes["control_plane"], "nodes.control_plane"); ok {
			cp = p.canonical(cp, "nodes.control_plane")
			nodes["control_plane"] = cp
			if n, ok := p.integer(cp["count"], "nodes.control_plane.count", 1, 5); ok {
				if n != 1 && n != 3 && n != 5 {
					p.fail("nodes.control_plane.count", "must be 1, 3 or 5")
				} else {
					s.ControlPlane.Count = int(n)
				}
			}
			if n, ok := p.integer(cp["cpu"], "nodes.control_plane.cpu", 2, maxCPU); ok {
				s.ControlPlane.CPU = &n
			}
			if cp["memory"] != nil {
				s.ControlPlane.Memory, _ = p.size(cp["memory"], "nodes.control_plane.memory", minMemory, maxMemory)
			}
			if cp["storage"] != nil {
				p.size(cp["storage"], "nodes.control_plane.storage", minStorage, maxStorage) // validated, then ignored (HyperShift manages etcd storage)
			}
		}
		if w, ok := p.object(nodes["workers"], "nodes.workers"); ok {
			w = p.canonical(w, "nodes.workers")
			nodes["workers"] = w
			if n, ok := p.integer(w["count"], "nodes.workers.count", 1, maxWorkers); ok {
				c := int32(n)
				s.Workers.Count = &c
			}
			if n, ok := p.integer(w["cpu"], "nodes.workers.cpu", 1, maxCPU); ok {
				s.Workers.CPU = &n
			}
			if w["memory"] != nil {
				s.Workers.Memory, _ = p.size(w["memory"], "nodes.workers.memory", minMemory, maxMemory)
			}
			if w["storage"] != nil {
				s.Workers.Storage, _ = p.size(w["storage"], "nodes.workers.storage", minStorage, maxStorage)
			}
		}
	}

	// provider_hints.acm
	var acm map[string]any
	if hints, ok := p.object(spec["provider_hints"], "provider_hints"); ok {
		for k := range hints {
			if k != "acm" {
				delete(hints, k) // another provider's hints: not ours to store
			}
		}
		if a, ok := p.object(hints["acm"], "provider_hints.acm"); ok {
			acm = p.canonical(a, "provider_hints.acm")
			hints["acm"] = acm
		}
	}
	platform := sc.DefaultPlatform
	if v, present := acm["platform"]; present {
		if ps, ok := p.str(v, "provider_hints.acm.platform"); ok {
			platform = strings.ToLower(strings.TrimSpace(ps))
			if !Platform(platform).Known() {
				p.unprocessable = append(p.unprocessable, fmt.Sprintf("platform %q is not supported (this provider supports kubevirt and baremetal)", ps))
			}
		}
	}
	s.Platform = Platform(platform)
	if v, present := acm["provisioning_type"]; present {
		if pt, ok := p.str(v, "provider_hints.acm.provisioning_type"); ok && pt != "hypershift" {
			p.unprocessable = append(p.unprocessable, fmt.Sprintf("provisioning type %q is not supported (only hypershift)", pt))
		}
	}
	if v, present := acm["base_domain"]; present {
		if bd, ok := p.str(v, "provider_hints.acm.base_domain"); ok && bd != "" {
			if len(bd) > 253 || !baseDomainRE.MatchString(bd) {
				p.fail("provider_hints.acm.base_domain", "%q is not a valid domain name (e.g. example.com; letters, digits and '-', at most 253 characters)", bd)
			}
			s.BaseDomain = bd
		}
	}
	if s.BaseDomain == "" {
		s.BaseDomain = sc.BaseDomain
	}
	if v, present := acm["infra_env"]; present {
		if ie, ok := p.str(v, "provider_hints.acm.infra_env"); ok && ie != "" {
			if errs := validation.IsDNS1123Subdomain(ie); len(errs) > 0 {
				p.fail("provider_hints.acm.infra_env", "%q is not a valid InfraEnv name: %s", ie, errs[0])
			}
			s.InfraEnv = ie
		}
	}
	if acm["agent_labels"] != nil {
		s.AgentLabels, _ = p.stringMap(acm["agent_labels"], "provider_hints.acm.agent_labels", true)
	}
	if as, ok := p.object(acm["autoscaling"], "provider_hints.acm.autoscaling"); ok {
		as = p.canonical(as, "provider_hints.acm.autoscaling")
		acm["autoscaling"] = as
		lo, okMin := p.integer(as["min"], "provider_hints.acm.autoscaling.min", 1, maxWorkers)
		hi, okMax := p.integer(as["max"], "provider_hints.acm.autoscaling.max", 1, maxWorkers)
		switch {
		case as["min"] == nil || as["max"] == nil:
			p.fail("provider_hints.acm.autoscaling", "needs both min and max")
		case okMin && okMax && hi < lo:
			p.fail("provider_hints.acm.autoscaling.max", "must be at least min (%d)", lo)
		case okMin && okMax:
			s.Autoscaling = &Autoscaling{Min: int32(lo), Max: int32(hi)}
			if s.Workers.Count != nil {
				p.fail("nodes.workers.count", "set either nodes.workers.count or provider_hints.acm.autoscaling, not both")
			}
		}
	}
	// Fill in the effective platform (the echo says which platform was used).
	if len(p.unprocessable) == 0 && Platform(platform).Known() {
		hints, _ := spec["provider_hints"].(map[string]any)
		if hints == nil && spec["provider_hints"] == nil {
			hints = map[string]any{}
			spec["provider_hints"] = hints
		}
		if hints != nil {
			if acm == nil {
				if _, present := hints["acm"]; !present {
					acm = map[string]any{}
					hints["acm"] = acm
				}
			}
			if acm != nil {
				acm["platform"] = platform
			}
		}
	}

	// pull_secret (older DCM catalog field): used for this cluster, never echoed or logged
	if v, present := spec["pull_secret"]; present {
		delete(spec, "pull_secret")
		if ps, ok := p.str(v, "pull_secret"); ok {
			data, err := base64.StdEncoding.DecodeString(strings.TrimSpace(ps))
			if err != nil {
				p.fail("pull_secret", "must be a base64-encoded dockerconfigjson")
			} else if err := CheckPullSecret(data); err != nil {
				p.fail("pull_secret", "%v", err)
			} else {
				s.PullSecret = data
			}
		}
	}

	// Platform rules.
	switch s.Platform {
	case BareMetal:
		if s.BaseDomain == "" {
			p.fail("provider_hints.acm.base_domain", "is required for baremetal (no default baseDomain is configured)")
		}
		if s.InfraEnv == "" {
			s.InfraEnv = sc.DefaultInfraEnv
		}
		if s.InfraEnv == "" {
			p.fail("provider_hints.acm.infra_env", "is required for baremetal (no defaultInfraEnvName is configured)")
		}
	case KubeVirt:
		if s.Workers.Storage != nil && s.Workers.Storage.Cmp(MinKubeVirtRootVolume) < 0 {
			p.fail("nodes.workers.storage", "must be at least 16GB for a KubeVirt root volume")
		}
	}
	return s
}

func (p *parser) checkName(name string, sc SpecContext) {
	const field = "metadata.name"
	switch {
	case name == "":
		p.fail(field, "is required")
		return
	case len(name) > 63 || !dnsLabelRE.MatchString(name):
		p.fail(field, "%q must be a DNS label: lower-case letters, digits and '-', starting and ending with a letter or digit, at most 63 characters", name)
		return
	}
	if max := 63 - len(sc.Namespace) - 1; len(name) > max {
		p.fail(field, "%q is too long for namespace %q: at most %d characters (the hosted control plane namespace %s-<name> must fit in 63)", name, sc.Namespace, max, sc.Namespace)
		return
	}
	reserved := append([]string{sc.Namespace}, reservedNames...)
	if sc.AgentNamespace != "" {
		reserved = append(reserved, sc.AgentNamespace)
	}
	for _, r := range reserved {
		if name == r {
			p.fail(field, "%q is reserved on the hub", name)
			return
		}
	}
	for _, r := range reservedPrefixes {
		if strings.HasPrefix(name, r) {
			p.fail(field, "%q is reserved on the hub (names starting with %q)", name, r)
			return
		}
	}
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
