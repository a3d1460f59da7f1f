package plan

import (
	"cmp"
	"fmt"
	"slices"
	"strings"

	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/version"

	"github.com/dcm-sp/acm-cluster-sp/internal/capiprivate/groups"
)

// CRD is what the catalog needs of one installed CustomResourceDefinition.
type CRD struct {
	Name, Group, Kind, Plural string
	Namespaced                bool
	// Served are the versions served.
	Served []string
	// Private: labelled as a capi-private CRD (hypershift.openshift.io/private-capi: "true").
	Private bool
	// Established: the CRD's Established condition is true.
	Established bool
}

// MovedKind is a standard kind the migrator moves, and the kind its twins are written as. Both carry the version
// the migrator reads and writes.
type MovedKind struct {
	Standard, Private schema.GroupVersionKind
}

// Unmovable is a standard kind of a renamed group that has no usable private CRD: a hosted cluster holding an
// object of it is refused.
type Unmovable struct {
	Standard schema.GroupVersionKind
	Why      string
}

// Catalog is the set of kinds a migration deals with, discovered from the CRDs installed: every namespaced CRD of
// a renamed standard group is either moved (its private twin <plural>.<private group> exists, is a capi-private
// CRD, is Established, and serves a version the standard CRD serves) or unmovable.
type Catalog struct {
	Moved     []MovedKind
	Unmovable []Unmovable
}

// NewCatalog builds the catalog from the installed CRDs. The version of a moved kind is the highest (Kubernetes
// version priority) served by both CRDs, so core kinds are read as v1beta2 and the copy needs no conversion.
// The result is sorted by standard group and kind.
func NewCatalog(crds []CRD, m *groups.Mapping) Catalog {
	byName := map[string]CRD{}
	for _, c := range crds {
		byName[c.Name] = c
	}
	var cat Catalog
	for _, std := range crds {
		priv, mapped := m.ToPrivate(std.Group)
		if !mapped || !std.Namespaced {
			continue
		}
		gvk := schema.GroupVersionKind{Group: std.Group, Version: highest(std.Served), Kind: std.Kind}
		name := groups.CRDName(std.Plural, priv)
		twin, ok := byName[name]
		v := highest(common(std.Served, twin.Served))
		switch {
		case !ok:
			cat.Unmovable = append(cat.Unmovable, Unmovable{gvk, "no private CRD " + name})
		case !twin.Private:
			cat.Unmovable = append(cat.Unmovable, Unmovable{gvk, "CRD " + name + " is not labelled as a capi-private CRD"})
		case twin.Kind != std.Kind || !twin.Namespaced:
			cat.Unmovable = append(cat.Unmovable, Unmovable{gvk, fmt.Sprintf("CRD %s serves %s, not a namespaced %s", name, twin.Kind, std.Kind)})
		case !twin.Established:
			cat.Unmovable = append(cat.Unmovable, Unmovable{gvk, "private CRD " + name + " is not Established"})
		case v == "":
			cat.Unmovable = append(cat.Unmovable, Unmovable{gvk, fmt.Sprintf("private CRD %s serves none of %s", name, strings.Join(std.Served, ", "))})
		default:
			cat.Moved = append(cat.Moved, MovedKind{
				Standard: schema.GroupVersionKind{Group: std.Group, Version: v, Kind: std.Kind},
				Private:  schema.GroupVersionKind{Group: priv, Version: v, Kind: std.Kind},
			})
		}
	}
	slices.SortFunc(cat.Moved, func(a, b MovedKind) int { return compareGVK(a.Standard, b.Standard) })
	slices.SortFunc(cat.Unmovable, func(a, b Unmovable) int { return compareGVK(a.Standard, b.Standard) })
	return cat
}

func compareGVK(a, b schema.GroupVersionKind) int {
	return cmp.Or(strings.Compare(a.Group, b.Group), strings.Compare(a.Kind, b.Kind))
}

func common(a, b []string) []string {
	var out []string
	for _, v := range a {
		if slices.Contains(b, v) {
			out = append(out, v)
		}
	}
	return out
}

// highest is the highest version by Kubernetes version priority ("" for none).
func highest(vs []string) string {
	best := ""
	for _, v := range vs {
		if best == "" || version.CompareKubeAwareVersionStrings(v, best) > 0 {
			best = v
		}
	}
	return best
}

// UnmovableBlocks are the blocks of a hosted cluster holding objects of unmovable kinds: counts maps a standard
// kind ("group/Kind") to how many objects of it the hosted control plane namespace holds.
func (c Catalog) UnmovableBlocks(counts map[string]int) []Block {
	var out []Block
	for _, u := range c.Unmovable {
		if n := counts[u.Standard.Group+"/"+u.Standard.Kind]; n > 0 {
			out = append(out, Block{Class: ClassMissingPrivateCRD, Object: u.Standard.Kind + "." + u.Standard.Group,
				Detail: fmt.Sprintf("%d objects; %s", n, u.Why)})
		}
	}
	return out
}
