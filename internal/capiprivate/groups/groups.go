// Package groups is capi-private's closed table of renamed API groups: which standard Cluster API group is stored
// under which private group, how a standard group that names a platform object is escaped, and how CRD names are
// built. It is pure data and string functions; nothing here knows about HTTP or JSON.
package groups

import (
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"slices"
	"strings"
)

// EscapeSuffix turns a standard group into its escape group: `cluster.x-k8s.io` → `cluster.x-k8s.io.platform.invalid`.
// A response shows a standard-group reference (one that points at a platform object) under the escape group, and a
// request maps it back, so the client's view stays a bijection of what is stored. `.invalid` is a reserved TLD
// (RFC 2606), so no real group can ever collide with an escape group.
const EscapeSuffix = ".platform.invalid"

// Row is one line of the table: the group clients use and the group the objects are stored in.
type Row struct {
	Standard string // e.g. cluster.x-k8s.io
	Private  string // e.g. cluster.hypershift.openshift.io
}

// Rows of the default table. The table is closed: every other group passes through untouched, in particular runtime.,
// bootstrap. and controlplane.cluster.x-k8s.io.
var defaultRows = []Row{
	{Standard: "cluster.x-k8s.io", Private: "cluster.hypershift.openshift.io"},
	{Standard: "addons.cluster.x-k8s.io", Private: "addons.cluster.hypershift.openshift.io"},
	{Standard: "ipam.cluster.x-k8s.io", Private: "ipam.cluster.hypershift.openshift.io"},
	{Standard: "infrastructure.cluster.x-k8s.io", Private: "infrastructure.cluster.hypershift.openshift.io"},
}

// Default is the mapping capi-private ships with.
var Default = MustNew(defaultRows...)

// Mapping is an immutable, validated set of rows. Its zero value maps nothing; build one with New.
type Mapping struct {
	rows      []Row
	toPrivate map[string]string
	toStd     map[string]string
	hash      string
}

// New validates rows and builds a Mapping. Every group must be a non-empty lower-case DNS name, no group may
// appear twice on either side or on both sides, and no group may end in EscapeSuffix.
func New(rows ...Row) (*Mapping, error) {
	m := &Mapping{
		rows:      slices.Clone(rows),
		toPrivate: make(map[string]string, len(rows)),
		toStd:     make(map[string]string, len(rows)),
	}
	seen := map[string]bool{}
	for _, r := range rows {
		for _, g := range []string{r.Standard, r.Private} {
			if err := validGroup(g); err != nil {
				return nil, err
			}
			if seen[g] {
				return nil, fmt.Errorf("group %q appears twice in the mapping", g)
			}
			seen[g] = true
		}
		m.toPrivate[r.Standard] = r.Private
		m.toStd[r.Private] = r.Standard
	}
	m.hash = hashRows(m.rows)
	return m, nil
}

// MustNew is New that panics on an invalid table (for package-level tables).
func MustNew(rows ...Row) *Mapping {
	m, err := New(rows...)
	if err != nil {
		panic(err)
	}
	return m
}

func validGroup(g string) error {
	if g == "" || len(g) > 253 {
		return fmt.Errorf("invalid group %q: empty or longer than 253 characters", g)
	}
	if strings.HasSuffix(g, EscapeSuffix) {
		return fmt.Errorf("invalid group %q: ends in the escape suffix %s", g, EscapeSuffix)
	}
	for _, label := range strings.Split(g, ".") {
		if label == "" || label[0] == '-' || label[len(label)-1] == '-' {
			return fmt.Errorf("invalid group %q: not a DNS subdomain", g)
		}
		for i := 0; i < len(label); i++ {
			c := label[i]
			if !(c >= 'a' && c <= 'z' || c >= '0' && c <= '9' || c == '-') {
				return fmt.Errorf("invalid group %q: not a lower-case DNS subdomain", g)
			}
		}
	}
	if !strings.Contains(g, ".") {
		return fmt.Errorf("invalid group %q: a renamed group must contain a dot", g)
	}
	return nil
}

// hashRows is a short, order-independent digest of the table.
func hashRows(rows []Row) string {
	lines := make([]string, 0, len(rows))
	for _, r := range rows {
		lines = append(lines, r.Standard+"="+r.Private)
	}
	slices.Sort(lines)
	sum := sha256.Sum256([]byte(strings.Join(lines, "\n")))
	return hex.EncodeToString(sum[:])[:12]
}

// Rows returns a copy of the table in its declared order.
func (m *Mapping) Rows() []Row { return slices.Clone(m.rows) }

// Hash is a short hex digest of the table (12 characters, independent of row order). It changes whenever a row
// changes, so it suffixes the ETags of translated discovery documents.
func (m *Mapping) Hash() string { return m.hash }

// ToPrivate returns the private group of a mapped standard group.
func (m *Mapping) ToPrivate(standard string) (string, bool) {
	p, ok := m.toPrivate[standard]
	return p, ok
}

// MustPrivate is ToPrivate for a group the caller knows is in the table (a fixed row such as cluster.x-k8s.io);
// it panics otherwise.
func (m *Mapping) MustPrivate(standard string) string {
	p, ok := m.toPrivate[standard]
	if !ok {
		panic("groups: " + standard + " is not a standard group of the table")
	}
	return p
}

// ToStandard returns the standard group of a private group.
func (m *Mapping) ToStandard(private string) (string, bool) {
	s, ok := m.toStd[private]
	return s, ok
}

// IsStandard reports whether g is the standard side of a row.
func (m *Mapping) IsStandard(g string) bool { _, ok := m.toPrivate[g]; return ok }

// IsPrivate reports whether g is the private side of a row.
func (m *Mapping) IsPrivate(g string) bool { _, ok := m.toStd[g]; return ok }

// Escape returns the escape group of a mapped standard group; ok is false for any other group.
func (m *Mapping) Escape(standard string) (string, bool) {
	if !m.IsStandard(standard) {
		return "", false
	}
	return standard + EscapeSuffix, true
}

// Unescape returns the standard group an escape group stands for; ok is false unless g is the escape group of a
// mapped standard group.
func (m *Mapping) Unescape(g string) (string, bool) {
	std, found := strings.CutSuffix(g, EscapeSuffix)
	if !found || !m.IsStandard(std) {
		return "", false
	}
	return std, true
}

// IsEscaped reports whether g is the escape group of a mapped standard group.
func (m *Mapping) IsEscaped(g string) bool { _, ok := m.Unescape(g); return ok }

// Request maps a group as a client wrote it to the group sent upstream: standard → private, escaped → standard.
// Any other group (private ones included) is returned unchanged with ok false.
func (m *Mapping) Request(g string) (string, bool) {
	if p, ok := m.toPrivate[g]; ok {
		return p, true
	}
	if s, ok := m.Unescape(g); ok {
		return s, true
	}
	return g, false
}

// Response is the exact inverse of Request: private → standard, standard → escaped. Any other group is returned
// unchanged with ok false.
func (m *Mapping) Response(g string) (string, bool) {
	if s, ok := m.toStd[g]; ok {
		return s, true
	}
	if m.IsStandard(g) {
		return g + EscapeSuffix, true
	}
	return g, false
}

// CRDName is the name of the CustomResourceDefinition serving plural in group: `<plural>.<group>`
// (util/contract.CalculateCRDName without the kind→plural step).
func CRDName(plural, group string) string { return plural + "." + group }

// SplitCRDName splits a CRD name at its first dot into plural and group. ok is false when name has no dot or an
// empty side.
func SplitCRDName(name string) (plural, group string, ok bool) {
	plural, group, ok = strings.Cut(name, ".")
	if !ok || plural == "" || group == "" {
		return "", "", false
	}
	return plural, group, true
}

// Needles are the byte strings whose absence proves a unit needs no translation (the proxy's fast path: such a unit
// goes out as its original bytes, neither decoded nor encoded).
type Needles struct {
	// Response: a response unit containing none of these is passed through untouched.
	Response [][]byte
	// Request: a request body containing none of these is passed through untouched.
	Request [][]byte
}

// Needles derives the fast-path needles from the table.
//
// A response must be translated when it holds a private group (any occurrence) or a standard group as an
// apiVersion value (`<std>/v…`) or as a whole string (`"<std>"`: apiGroup, group, CRD names end in the group). A
// request must be translated when it holds a standard group anywhere (escape groups contain their standard group).
//
// When every group on a side shares a common suffix that starts at a label boundary (for Default:
// `cluster.hypershift.openshift.io` and `cluster.x-k8s.io`), the suffix stands for the whole side, so Default needs
// three response needles and one request needle. `cluster.x-k8s.io/v` and `cluster.x-k8s.io"` are tighter than
// the reference's `x-k8s.io/v` and `x-k8s.io"` (which also fire on other x-k8s.io groups) and still catch every
// unit that needs translation. Versions are assumed to start with "v", as every Kubernetes-style version does.
func (m *Mapping) Needles() Needles {
	var std, priv []string
	for _, r := range m.rows {
		std = append(std, r.Standard)
		priv = append(priv, r.Private)
	}
	stdN := suffixNeedles(std)
	privN := suffixNeedles(priv)
	var n Needles
	for _, p := range privN {
		n.Response = append(n.Response, []byte(p))
	}
	for _, s := range stdN {
		n.Response = append(n.Response, []byte(s+"/v"), []byte(s+`"`))
		n.Request = append(n.Request, []byte(s))
	}
	return n
}

// suffixNeedles returns the groups' common label-aligned suffix if it is at least one full group long enough to be
// selective (it contains a dot), else the groups themselves.
func suffixNeedles(gs []string) []string {
	if len(gs) == 0 {
		return nil
	}
	suffix := gs[0]
	for _, g := range gs[1:] {
		for !strings.HasSuffix(g, suffix) || !(len(g) == len(suffix) || g[len(g)-len(suffix)-1] == '.') {
			_, rest, ok := strings.Cut(suffix, ".")
			if !ok {
				suffix = ""
				break
			}
			suffix = rest
		}
		if suffix == "" {
			break
		}
	}
	if strings.Contains(suffix, ".") {
		return []string{suffix}
	}
	out := slices.Clone(gs)
	slices.Sort(out)
	return slices.Compact(out)
}
