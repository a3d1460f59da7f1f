package plan

import (
	"bytes"
	"cmp"
	"encoding/json"
	"fmt"
	"maps"
	"slices"
	"strings"

	"k8s.io/apimachinery/pkg/api/equality"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"

	"github.com/dcm-sp/acm-cluster-sp/internal/capiprivate/groups"
	"github.com/dcm-sp/acm-cluster-sp/internal/capiprivate/translate"
)

// Ref names one object precisely enough for an ownerReference.
type Ref struct {
	APIVersion, Kind, Name string
	UID                    types.UID
}

// RefOf is o's Ref.
func RefOf(o *unstructured.Unstructured) Ref {
	return Ref{APIVersion: o.GetAPIVersion(), Kind: o.GetKind(), Name: o.GetName(), UID: o.GetUID()}
}

// UIDMap maps the UID of each standard object to its private twin (or, inverted, each twin to its old object).
type UIDMap map[types.UID]Ref

// Invert maps the other way round (twin UID → old object), for a rollback.
func (m UIDMap) Invert(old []unstructured.Unstructured) UIDMap {
	byUID := map[types.UID]*unstructured.Unstructured{}
	for i := range old {
		byUID[old[i].GetUID()] = &old[i]
	}
	out := UIDMap{}
	for from, twin := range m {
		if o, ok := byUID[from]; ok {
			out[twin.UID] = RefOf(o)
		}
	}
	return out
}

// Twinned returns the old objects with a twin in m (this run's): the only standard objects the clean-up deletes.
// One without (written since the copy, or never part of the cluster the run copied) is left alone.
func Twinned(old []unstructured.Unstructured, m UIDMap) []unstructured.Unstructured {
	var out []unstructured.Unstructured
	for i := range old {
		if _, ok := m[old[i].GetUID()]; ok {
			out = append(out, old[i])
		}
	}
	return out
}

// Missing returns the old objects without a twin in m, in Order.
func Missing(old []unstructured.Unstructured, m UIDMap) []unstructured.Unstructured {
	var out []unstructured.Unstructured
	for _, o := range Order(old) {
		if _, ok := m[o.GetUID()]; !ok {
			out = append(out, o)
		}
	}
	return out
}

// Order sorts a graph owners first: an object comes after every owner it has in the graph; ties are broken by
// creationTimestamp, then kind and name, so the order is deterministic. Owner cycles (which the API server
// forbids only for blockOwnerDeletion) are broken by the same tie order. The input is not modified.
func Order(objs []unstructured.Unstructured) []unstructured.Unstructured {
	in := slices.Clone(objs)
	slices.SortStableFunc(in, func(a, b unstructured.Unstructured) int {
		ta, tb := a.GetCreationTimestamp(), b.GetCreationTimestamp()
		if c := ta.Time.Compare(tb.Time); c != 0 {
			return c
		}
		return cmp.Or(strings.Compare(a.GetKind(), b.GetKind()), strings.Compare(a.GetName(), b.GetName()))
	})
	present := map[types.UID]bool{}
	for _, o := range in {
		present[o.GetUID()] = true
	}
	done := map[types.UID]bool{}
	out := make([]unstructured.Unstructured, 0, len(in))
	for len(out) < len(in) {
		next := -1
		for i, o := range in { // the earliest object whose owners are all placed
			if !done[o.GetUID()] && ownersDone(o, present, done) {
				next = i
				break
			}
		}
		if next < 0 { // a cycle: take the earliest remaining object
			for i, o := range in {
				if !done[o.GetUID()] {
					next = i
					break
				}
			}
		}
		done[in[next].GetUID()] = true
		out = append(out, in[next])
	}
	return out
}

func ownersDone(o unstructured.Unstructured, present, done map[types.UID]bool) bool {
	for _, r := range o.GetOwnerReferences() {
		if present[r.UID] && !done[r.UID] && r.UID != o.GetUID() {
			return false
		}
	}
	return true
}

// Copier builds private twins of standard objects. It renames groups with the translate library (the proxy's own
// object rule), so the twin holds exactly what the proxy would have stored.
type Copier struct {
	m *groups.Mapping
	t *translate.Translator
}

// NewCopier returns a Copier for mapping m.
func NewCopier(m *groups.Mapping) *Copier { return &Copier{m: m, t: translate.New(m)} }

// Mapping is the table the Copier renames with.
func (c *Copier) Mapping() *groups.Mapping { return c.m }

// PrivateGVK is the GVK of gvk's twin (gvk itself when its group is not mapped).
func (c *Copier) PrivateGVK(gvk schema.GroupVersionKind) schema.GroupVersionKind {
	if p, ok := c.m.ToPrivate(gvk.Group); ok {
		gvk.Group = p
	}
	return gvk
}

// Twin is what a Copier makes of one standard object: the create body and the status written after it.
type Twin struct {
	Object *unstructured.Unstructured
	// Status is written through the status subresource after create (create ignores status); nil when the old
	// object had none.
	Status map[string]any
	// OldGeneration is the old object's metadata.generation: status observedGenerations equal to it are set to
	// the twin's generation (TwinStatus).
	OldGeneration int64
}

// metadata members a twin never keeps: the server assigns them again.
var droppedMetadata = []string{"uid", "resourceVersion", "creationTimestamp", "generation", "deletionTimestamp",
	"deletionGracePeriodSeconds", "selfLink"}

// Twin makes the private twin of old for run id: the same name, namespace, labels, annotations (plus
// MigratedFromUIDAnnotation and IDAnnotation), finalizers, managedFields and spec, with every group renamed by the
// object rule, and every ownerReference — and every object reference that carries a uid — pointing at the twin of
// what it named, by the twin's UID. It fails when a reference into a mapped group names an object without a twin
// in twins: keeping the old UID would make the garbage collector delete the copy, so the owner must be copied
// first (Order).
func (c *Copier) Twin(old *unstructured.Unstructured, twins UIDMap, id string) (Twin, error) {
	raw, err := json.Marshal(old.Object)
	if err != nil {
		return Twin{}, err
	}
	res, err := c.t.RequestObject(raw, translate.Context{})
	if err != nil {
		return Twin{}, fmt.Errorf("translating %s %s: %w", old.GetKind(), old.GetName(), err)
	}
	obj := map[string]any{}
	if err := json.Unmarshal(res.Body, &obj); err != nil {
		return Twin{}, err
	}
	u := &unstructured.Unstructured{Object: obj}
	if !c.m.IsPrivate(u.GroupVersionKind().Group) {
		return Twin{}, fmt.Errorf("%s %s is not in a mapped group", old.GetAPIVersion(), old.GetKind())
	}
	meta, _ := obj["metadata"].(map[string]any)
	for _, k := range droppedMetadata {
		delete(meta, k)
	}
	ann := u.GetAnnotations()
	if ann == nil {
		ann = map[string]string{}
	}
	ann[MigratedFromUIDAnnotation] = string(old.GetUID())
	ann[IDAnnotation] = id
	u.SetAnnotations(ann)

	refs := u.GetOwnerReferences()
	remapped := map[types.UID]types.UID{}
	for i := range refs {
		gv, err := schema.ParseGroupVersion(refs[i].APIVersion)
		if err != nil || !c.m.IsPrivate(gv.Group) {
			continue
		}
		twin, ok := twins[refs[i].UID]
		if !ok {
			return Twin{}, fmt.Errorf("%s %s: owner %s %s (uid %s) has no twin yet", old.GetKind(), old.GetName(), refs[i].Kind, refs[i].Name, refs[i].UID)
		}
		remapped[refs[i].UID] = twin.UID
		refs[i].APIVersion, refs[i].Kind, refs[i].Name, refs[i].UID = twin.APIVersion, twin.Kind, twin.Name, twin.UID
	}
	if len(refs) > 0 {
		u.SetOwnerReferences(refs)
	}
	if mf := u.GetManagedFields(); len(mf) > 0 {
		u.SetManagedFields(remapOwnerKeys(mf, remapped))
	}
	status, _ := obj["status"].(map[string]any)
	delete(obj, "status")
	if err := c.remapUIDs(obj["spec"], twins); err != nil {
		return Twin{}, fmt.Errorf("%s %s: %w", old.GetKind(), old.GetName(), err)
	}
	if err := c.remapUIDs(status, twins); err != nil {
		return Twin{}, fmt.Errorf("%s %s status: %w", old.GetKind(), old.GetName(), err)
	}
	return Twin{Object: u, Status: status, OldGeneration: old.GetGeneration()}, nil
}

// remapOwnerKeys rewrites the ownerReferences list keys (k:{"uid":"…"}) of each managedFields entry from the old
// owners' UIDs to their twins', so each manager keeps owning the ownerReference it set.
func remapOwnerKeys(mf []metav1.ManagedFieldsEntry, remapped map[types.UID]types.UID) []metav1.ManagedFieldsEntry {
	for i := range mf {
		if mf[i].FieldsV1 == nil {
			continue
		}
		raw := mf[i].FieldsV1.Raw
		for from, to := range remapped {
			raw = bytes.ReplaceAll(raw, []byte(`\"uid\":\"`+string(from)+`\"`), []byte(`\"uid\":\"`+string(to)+`\"`))
		}
		mf[i].FieldsV1 = &metav1.FieldsV1{Raw: raw}
	}
	return mf
}

// ManagedFieldsPending reports whether twin's managedFields differ from want (the copy's, Twin): the create and
// the status write made the migrator a manager of the twin's fields until CopyTwins sets them back. Entries are
// compared by manager, operation, subresource, apiVersion and field set; times and order do not matter.
func ManagedFieldsPending(twin *unstructured.Unstructured, want []metav1.ManagedFieldsEntry) bool {
	return !equality.Semantic.DeepEqual(managedKeys(twin.GetManagedFields()), managedKeys(want))
}

func managedKeys(mf []metav1.ManagedFieldsEntry) map[string]any {
	out := map[string]any{}
	for _, e := range mf {
		var fields any
		if e.FieldsV1 != nil {
			_ = json.Unmarshal(e.FieldsV1.Raw, &fields)
		}
		out[e.Manager+"|"+string(e.Operation)+"|"+e.Subresource+"|"+e.APIVersion] = fields
	}
	return out
}

// remapUIDs walks v for object references (a map with kind, uid and an apiVersion or apiGroup) into a mapped group
// and sets their uid to the twin's. v1beta2 references carry no uid; v1beta1 ObjectReferences and provider fields
// may.
func (c *Copier) remapUIDs(v any, twins UIDMap) error {
	switch x := v.(type) {
	case map[string]any:
		if uid, ok := x["uid"].(string); ok && uid != "" {
			if _, hasKind := x["kind"]; hasKind && c.privateRef(x) {
				twin, ok := twins[types.UID(uid)]
				if !ok {
					return fmt.Errorf("reference to %v %v (uid %s) has no twin", x["kind"], x["name"], uid)
				}
				x["uid"] = string(twin.UID)
			}
		}
		for _, k := range slices.Sorted(maps.Keys(x)) {
			if err := c.remapUIDs(x[k], twins); err != nil {
				return err
			}
		}
	case []any:
		for _, e := range x {
			if err := c.remapUIDs(e, twins); err != nil {
				return err
			}
		}
	}
	return nil
}

func (c *Copier) privateRef(ref map[string]any) bool {
	if g, ok := ref["apiGroup"].(string); ok {
		return c.m.IsPrivate(g)
	}
	if av, ok := ref["apiVersion"].(string); ok {
		gv, err := schema.ParseGroupVersion(av)
		return err == nil && c.m.IsPrivate(gv.Group)
	}
	return false
}

// TwinStatus is the status to write on a created twin: observedGeneration members (top level and in conditions)
// that matched the old object's generation are set to the twin's, so controllers do not see the copy as a spec
// change they have not observed. Others are kept.
func TwinStatus(t Twin, newGeneration int64) map[string]any {
	if t.Status == nil {
		return nil
	}
	st := deepCopyMap(t.Status)
	fixGen := func(m map[string]any) {
		if g, ok := m["observedGeneration"].(float64); ok && int64(g) == t.OldGeneration {
			m["observedGeneration"] = newGeneration
		} else if g, ok := m["observedGeneration"].(int64); ok && g == t.OldGeneration {
			m["observedGeneration"] = newGeneration
		}
	}
	fixGen(st)
	if conds, ok := st["conditions"].([]any); ok {
		for _, c := range conds {
			if m, ok := c.(map[string]any); ok {
				fixGen(m)
			}
		}
	}
	return st
}

func deepCopyMap(m map[string]any) map[string]any {
	return (&unstructured.Unstructured{Object: m}).DeepCopy().Object
}

// Repoint re-points ownerReferences by m: a reference whose UID is a key of m names m's object instead (group,
// kind, name and UID); controller and blockOwnerDeletion are kept. It reports whether anything changed; refs is
// not modified.
func Repoint(refs []metav1.OwnerReference, m UIDMap) ([]metav1.OwnerReference, bool) {
	out := slices.Clone(refs)
	changed := false
	for i := range out {
		if to, ok := m[out[i].UID]; ok {
			out[i].APIVersion, out[i].Kind, out[i].Name, out[i].UID = to.APIVersion, to.Kind, to.Name, to.UID
			changed = true
		}
	}
	return out, changed
}

// NamesAny reports whether any ownerReference names a key of m.
func NamesAny(refs []metav1.OwnerReference, m UIDMap) bool {
	for _, r := range refs {
		if _, ok := m[r.UID]; ok {
			return true
		}
	}
	return false
}

// Verify compares the standard objects with their twins m (Identify's Twins): one twin per old object, the same
// name, labels, finalizers and annotations (plus the two the copy adds), spec and status equal to the old ones
// translated (observedGeneration aside), managedFields as the copy sets them, and owners pointing at twins. It
// returns the problems found, sorted.
func (c *Copier) Verify(old, private []unstructured.Unstructured, m UIDMap, id string) []string {
	var problems []string
	byUID := map[types.UID]*unstructured.Unstructured{}
	for i := range private {
		byUID[private[i].GetUID()] = &private[i]
	}
	for i := range old {
		o := &old[i]
		what := o.GetKind() + "/" + o.GetName()
		tw := byUID[m[o.GetUID()].UID]
		if tw == nil {
			problems = append(problems, what+": no twin")
			continue
		}
		want, err := c.Twin(o, m, id)
		if err != nil {
			problems = append(problems, what+": "+err.Error())
			continue
		}
		if tw.GetName() != o.GetName() || tw.GetKind() != o.GetKind() {
			problems = append(problems, fmt.Sprintf("%s: twin is %s/%s", what, tw.GetKind(), tw.GetName()))
		}
		if !equality.Semantic.DeepEqual(tw.GetLabels(), o.GetLabels()) && len(tw.GetLabels())+len(o.GetLabels()) > 0 {
			problems = append(problems, what+": labels differ")
		}
		if tw.GetAnnotations()[IDAnnotation] != id {
			problems = append(problems, what+": twin is not of run "+id)
		}
		if !equality.Semantic.DeepEqual(tw.GetAnnotations(), want.Object.GetAnnotations()) {
			problems = append(problems, what+": annotations differ")
		}
		if !slices.Equal(tw.GetFinalizers(), o.GetFinalizers()) {
			problems = append(problems, what+": finalizers differ")
		}
		if !equality.Semantic.DeepEqual(normalize(tw.Object["spec"]), normalize(want.Object.Object["spec"])) {
			problems = append(problems, what+": spec differs")
		}
		if !equality.Semantic.DeepEqual(withoutObservedGeneration(tw.Object["status"]), withoutObservedGeneration(want.Status)) {
			problems = append(problems, what+": status differs")
		}
		if ManagedFieldsPending(tw, want.Object.GetManagedFields()) {
			problems = append(problems, what+": managedFields differ")
		}
		if !equality.Semantic.DeepEqual(ownerKeys(tw.GetOwnerReferences()), ownerKeys(want.Object.GetOwnerReferences())) {
			problems = append(problems, what+": ownerReferences differ")
		}
		for _, r := range tw.GetOwnerReferences() {
			gv, _ := schema.ParseGroupVersion(r.APIVersion)
			if c.m.IsPrivate(gv.Group) && byUID[r.UID] == nil {
				problems = append(problems, fmt.Sprintf("%s: owner %s/%s uid %s is not a twin", what, r.Kind, r.Name, r.UID))
			}
		}
	}
	slices.Sort(problems)
	return problems
}

func ownerKeys(refs []metav1.OwnerReference) []string {
	var out []string
	for _, r := range refs {
		out = append(out, fmt.Sprintf("%s|%s|%s|%s|%v|%v", r.APIVersion, r.Kind, r.Name, r.UID,
			r.Controller != nil && *r.Controller, r.BlockOwnerDeletion != nil && *r.BlockOwnerDeletion))
	}
	return out
}

// normalize round-trips v through JSON so int64 and float64 numbers compare equal.
func normalize(v any) any {
	if v == nil {
		return nil
	}
	b, err := json.Marshal(v)
	if err != nil {
		return v
	}
	var out any
	_ = json.Unmarshal(b, &out)
	return out
}

func withoutObservedGeneration(v any) any {
	n := normalize(v)
	var strip func(any)
	strip = func(x any) {
		switch y := x.(type) {
		case map[string]any:
			delete(y, "observedGeneration")
			for _, e := range y {
				strip(e)
			}
		case []any:
			for _, e := range y {
				strip(e)
			}
		}
	}
	strip(n)
	if m, ok := n.(map[string]any); ok && len(m) == 0 {
		return nil
	}
	return n
}
