package plan

import (
	"slices"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/types"
)

// Identity sorts a hosted cluster's private objects against its standard objects (the originals).
type Identity struct {
	// Twins maps the UID of each old object that has a twin of the current run to that twin.
	Twins UIDMap
	// Leftovers maps old objects' UIDs to their twins of earlier runs; LeftoverObjects are every twin of an
	// earlier run (also those whose original is gone since).
	Leftovers       UIDMap
	LeftoverObjects []unstructured.Unstructured
	// Strays are the private objects that are neither: "Kind/name", sorted. Before a run they block it; while
	// Resuming they are the objects born since the private Cluster was unpaused.
	Strays []string
}

// Identify tells the twins of run id, the twins of earlier runs (leftovers) and strays apart. A private object is
// a twin of the old object of the same group (translated), kind and name only when its MigratedFromUIDAnnotation is
// that old object's UID — or the UID of the old object's controller owner, because once the private Cluster is
// unpaused CAPI's MachineDeployment controller copies its annotations onto its MachineSets. Its IDAnnotation then
// says which run made it. A private object whose run is one of leftoverRuns (a rollback that could not finish) is
// a leftover even when its original is gone. Anything else is a stray: it is never adopted, re-pointed or deleted.
func (c *Copier) Identify(old, private []unstructured.Unstructured, id string, leftoverRuns []string) Identity {
	byKey := map[string]*unstructured.Unstructured{}
	for i := range old {
		byKey[objectKey(old[i].GroupVersionKind().Group, old[i].GetKind(), old[i].GetName())] = &old[i]
	}
	out := Identity{Twins: UIDMap{}, Leftovers: UIDMap{}}
	for i := range private {
		p := &private[i]
		ann := p.GetAnnotations()
		from, run := types.UID(ann[MigratedFromUIDAnnotation]), ann[IDAnnotation]
		std, _ := c.m.ToStandard(p.GroupVersionKind().Group)
		o := byKey[objectKey(std, p.GetKind(), p.GetName())]
		switch {
		case o != nil && from != "" && (from == o.GetUID() || from == controllerUID(o)):
			if run == id && id != "" {
				out.Twins[o.GetUID()] = RefOf(p)
				continue
			}
			out.Leftovers[o.GetUID()] = RefOf(p)
			out.LeftoverObjects = append(out.LeftoverObjects, *p)
		case from != "" && run != "" && slices.Contains(leftoverRuns, run):
			out.LeftoverObjects = append(out.LeftoverObjects, *p)
		default:
			out.Strays = append(out.Strays, p.GetKind()+"/"+p.GetName())
		}
	}
	slices.Sort(out.Strays)
	return out
}

func objectKey(group, kind, name string) string { return group + "|" + kind + "|" + name }

// controllerUID is the UID of o's controller owner ("" when none).
func controllerUID(o *unstructured.Unstructured) types.UID {
	for _, r := range o.GetOwnerReferences() {
		if r.Controller != nil && *r.Controller {
			return r.UID
		}
	}
	return ""
}
