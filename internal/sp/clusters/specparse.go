package clusters

import (
	"encoding/base64"
	"encoding/json"
	"fmt"
	"math"
	"slices"
	"sort"
	"strings"

	"k8s.io/apimachinery/pkg/api/resource"
	"k8s.io/apimachinery/pkg/util/validation"

	"github.com/dcm-sp/acm-cluster-sp/internal/sp/platform"
)

// parser checks one spec object; it collects every field error rather than stopping at the first.
type parser struct {
	prefix        string
	lenient       bool // drop unknown keys instead of refusing them (stored specs)
	errs          []FieldError
	unprocessable []string
}

func (p *parser) fail(field, format string, args ...any) {
	p.errs = append(p.errs, FieldError{Field: p.prefix + field, Message: fmt.Sprintf(format, args...)})
}

// child reads parent[key], the object at path: absent is (nil, false), anything but an object an error; an object
// is replaced in parent by its copy with its keys checked (known), which is returned.
func (p *parser) child(parent map[string]any, key, path string) (map[string]any, bool) {
	m, ok := p.object(parent[key], path)
	if !ok {
		return nil, false
	}
	m = p.known(m, path)
	parent[key] = m
	return m, true
}

// known copies obj (the object at path) and checks its keys against the ones the API defines there: an unknown
// key is refused, naming it, or dropped when the parser is lenient.
func (p *parser) known(obj map[string]any, path string) map[string]any {
	out := make(map[string]any, len(obj))
	for k, v := range obj {
		out[k] = v
	}
	known, ok := knownKeys[path]
	if !ok {
		return out
	}
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
	return out
}

// parse checks and normalizes a spec object section by section; the errors come in the order of the sections.
func (p *parser) parse(raw map[string]any, sc SpecContext) *Spec {
	spec := p.known(raw, "")
	for _, k := range readOnly {
		delete(spec, k)
	}
	s := &Spec{Canonical: spec}
	if v, present := spec["service_type"]; present {
		if st, ok := p.str(v, "service_type"); ok && st != "cluster" {
			p.fail("service_type", "must be \"cluster\" (this provider only provisions clusters), got %q", st)
		}
	} else {
		spec["service_type"] = "cluster"
	}
	p.metadata(spec, s, sc)
	p.version(spec, s)
	p.nodes(spec, s)
	acm := p.hints(spec)
	effective := p.acm(acm, s, sc)
	p.autoscaling(acm, s)
	if len(p.unprocessable) == 0 && Platform(effective).Known() {
		fillPlatform(spec, acm, effective)
	}
	p.pullSecret(spec, s)
	p.platformRules(s, sc)
	return s
}

func (p *parser) metadata(spec map[string]any, s *Spec, sc SpecContext) {
	md, ok := p.child(spec, "metadata", "metadata")
	if !ok {
		if spec["metadata"] == nil {
			p.fail("metadata.name", "is required")
		}
		return
	}
	if name, ok := p.str(md["name"], "metadata.name"); ok {
		s.Name = name
		p.checkName(name, sc)
	} else if md["name"] == nil {
		p.fail("metadata.name", "is required")
	}
	if md["labels"] != nil {
		s.Labels, _ = p.stringMap(md["labels"], "metadata.labels", false)
	}
}

// version is only required here; its format is checked against the version matrix later (both a 400 and a 422 can
// come from there).
func (p *parser) version(spec map[string]any, s *Spec) {
	if v, ok := p.str(spec["version"], "version"); ok {
		s.Version = strings.TrimSpace(v)
		if s.Version == "" {
			p.fail("version", "is required")
		}
	} else if spec["version"] == nil {
		p.fail("version", "is required (a Kubernetes version such as 1.30 or an OpenShift version such as 4.17)")
	}
}

func (p *parser) nodes(spec map[string]any, s *Spec) {
	nodes, ok := p.child(spec, "nodes", "nodes")
	if !ok {
		return
	}
	if cp, ok := p.child(nodes, "control_plane", "nodes.control_plane"); ok {
		p.controlPlane(cp, &s.ControlPlane)
	}
	if w, ok := p.child(nodes, "workers", "nodes.workers"); ok {
		p.workers(w, &s.Workers)
	}
}

func (p *parser) controlPlane(cp map[string]any, out *ControlPlaneSpec) {
	if n, ok := p.integer(cp["count"], "nodes.control_plane.count", 1, 5); ok {
		if n != 1 && n != 3 && n != 5 {
			p.fail("nodes.control_plane.count", "must be 1, 3 or 5")
		} else {
			out.Count = int(n)
		}
	}
	if n, ok := p.integer(cp["cpu"], "nodes.control_plane.cpu", 2, maxCPU); ok {
		out.CPU = &n
	}
	if cp["memory"] != nil {
		out.Memory, _ = p.size(cp["memory"], "nodes.control_plane.memory", minMemory, maxMemory)
	}
	if cp["storage"] != nil {
		p.size(cp["storage"], "nodes.control_plane.storage", minStorage, maxStorage) // validated, then ignored (HyperShift manages etcd storage)
	}
}

func (p *parser) workers(w map[string]any, out *WorkerSpec) {
	if n, ok := p.integer(w["count"], "nodes.workers.count", 1, maxWorkers); ok {
		c := int32(n)
		out.Count = &c
	}
	if n, ok := p.integer(w["cpu"], "nodes.workers.cpu", 1, maxCPU); ok {
		out.CPU = &n
	}
	if w["memory"] != nil {
		out.Memory, _ = p.size(w["memory"], "nodes.workers.memory", minMemory, maxMemory)
	}
	if w["storage"] != nil {
		out.Storage, _ = p.size(w["storage"], "nodes.workers.storage", minStorage, maxStorage)
	}
}

// hints keeps provider_hints.acm (a copy, its keys checked) and drops other providers' hints: not ours to store. It
// returns the acm object, nil when there is none.
func (p *parser) hints(spec map[string]any) map[string]any {
	hints, ok := p.object(spec["provider_hints"], "provider_hints")
	if !ok {
		return nil
	}
	kept := map[string]any{}
	if a, present := hints["acm"]; present {
		kept["acm"] = a
	}
	hints = kept
	spec["provider_hints"] = hints
	acm, _ := p.child(hints, "acm", "provider_hints.acm")
	return acm
}

// acm reads provider_hints.acm's platform, provisioning type, base domain, InfraEnv and Agent labels; it returns the
// effective platform (the configured default when the request names none).
func (p *parser) acm(acm map[string]any, s *Spec, sc SpecContext) string {
	name := sc.DefaultPlatform
	if v, present := acm["platform"]; present {
		if ps, ok := p.str(v, "provider_hints.acm.platform"); ok {
			name = strings.ToLower(strings.TrimSpace(ps))
			if !Platform(name).Known() {
				p.unprocessable = append(p.unprocessable, fmt.Sprintf("platform %q is not supported (this provider supports %s)", ps, platform.Names()))
			}
		}
	}
	s.Platform = Platform(name)
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
	return name
}

func (p *parser) autoscaling(acm map[string]any, s *Spec) {
	as, ok := p.child(acm, "autoscaling", "provider_hints.acm.autoscaling")
	if !ok {
		return
	}
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

// fillPlatform writes the effective platform into the normalized spec (the echo says which platform was used),
// creating provider_hints.acm where the request has none.
func fillPlatform(spec, acm map[string]any, platform string) {
	hints, _ := spec["provider_hints"].(map[string]any)
	if hints == nil && spec["provider_hints"] == nil {
		hints = map[string]any{}
		spec["provider_hints"] = hints
	}
	if hints == nil {
		return
	}
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

// pullSecret reads pull_secret (the older DCM catalog field): used for this cluster, never echoed or logged.
func (p *parser) pullSecret(spec map[string]any, s *Spec) {
	v, present := spec["pull_secret"]
	if !present {
		return
	}
	delete(spec, "pull_secret")
	ps, ok := p.str(v, "pull_secret")
	if !ok {
		return
	}
	data, err := base64.StdEncoding.DecodeString(strings.TrimSpace(ps))
	if err != nil {
		p.fail("pull_secret", "must be a base64-encoded dockerconfigjson")
	} else if err := CheckPullSecret(data); err != nil {
		p.fail("pull_secret", "%v", err)
	} else {
		s.PullSecret = data
	}
}

// platformRules applies the rules of the request's platform (its entry in package platform's table).
func (p *parser) platformRules(s *Spec, sc SpecContext) {
	if e, ok := platform.Lookup(s.Platform); ok && e.Rules != nil {
		e.Rules(platform.Request{BaseDomain: s.BaseDomain, InfraEnv: &s.InfraEnv, DefaultInfraEnv: sc.DefaultInfraEnv,
			WorkerStorage: s.Workers.Storage, Fail: p.fail})
	}
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
