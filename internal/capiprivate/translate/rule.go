package translate

import (
	"strings"
)

// This file is the object rule (the package doc states it): a single forward pass over a JSON unit that tracks, per
// member, a small semantic state derived from member names, renames the string literals the rule names and copies every
// other byte verbatim (copy-on-write: an unchanged unit is returned as the input slice).

// state is where the scanner is, semantically.
type state uint8

const (
	sAny                 state = iota // an ordinary position
	sOpaque                           // never entered: labels, annotations, finalizers, fieldsV1, selectors, data
	sTop                              // an object root: a body, list item, watch object or Table row object
	sEvent                            // a watch event {type, object}
	sItems                            // items[] of a list: each element is a root
	sRows                             // rows[] of a Table
	sRow                              // one Table row
	sCells                            // a row's cells
	sRootMeta                         // metadata of a root
	sMeta                             // metadata elsewhere (templates)
	sAPIGroups                        // apiGroups: every element is a group
	sCRDNames                         // resourceNames of an RBAC rule on customresourcedefinitions
	sGroupHolder                      // responseKind: member group is a group
	sResourceAttrs                    // SAR resourceAttributes: group, and name when it names a CRD
	sGVK                              // x-kubernetes-group-version-kind: object or array of objects with a group
	sDetails                          // Status.details
	sCauses                           // Status.details.causes[]
	sCRDSpec                          // spec of a CRD root
	sBookmarkAnnotations              // annotations of a BOOKMARK event's object

	// discovery
	sDiscGroup     // APIGroup (alone or in an APIGroupList): name is a group
	sDiscNested    // below it: groupVersion is "<group>/<version>"
	sDiscAgg       // an APIGroupDiscovery of aggregated discovery
	sDiscAggMeta   // its metadata: name is a group
	sDiscResources // APIResourceList: groupVersion, resources[].group
	sDiscResource  // one APIResource

	// OpenAPI v3 documents
	sOARoot       // the document
	sOAComponents // components
	sOAPaths      // paths: keys are API paths
	sOASchemas    // components.schemas: keys are schema names
	sOA           // anywhere else: $ref, operationId, tags, x-kubernetes-group-version-kind
	sOATags       // tags

	// admission.k8s.io AdmissionReview (the proxy's webhook side)
	sAdmission         // the review
	sAdmissionRequest  // request: kind, resource, requestKind, requestResource hold groups; object, oldObject are roots
	sAdmissionResponse // response: patch is a base64 JSON patch; status is a Status without a kind
	sAdmissionStatus   // response.status: details.group
)

// action is what happens to a string value.
type action uint8

const (
	aNone        action = iota
	aAPIVersion         // "<group>/v<…>": the group is renamed (see isVersion)
	aGroup              // a whole group
	aCRDName            // "<plural>.<group>"
	aRootName           // metadata.name of a CRD root, cells[0] of a CRD row: a platform CRD drops its root
	aRootGroup          // spec.group of a CRD root: a platform group drops its root
	aMessage            // free text: private tokens renamed (responses only)
	aDelete             // the member is removed
	aRef                // an OpenAPI $ref: "#/components/schemas/<name>"
	aOperationID        // an OpenAPI operationId: the group token
	aTag                // an OpenAPI tag: "<group token>_<version>"
	aPatch              // an AdmissionReview response's patch: a base64 JSON patch
)

// BlueprintAnnotation is dropped from BOOKMARK events: it encodes an empty list in the server's own serialization,
// private groups included, which cannot be translated. kube-apiserver 1.34 no longer sends it (#132326).
const BlueprintAnnotation = "kubernetes.io/initial-events-list-blueprint"

type rewriter struct {
	t    *Translator
	dir  Direction
	crd  bool
	in   []byte
	out  []byte // nil until the first edit; the result is out + in[last:]
	last int
	// scratch, if set, is reused for out (the streamer's per-item buffer).
	scratch []byte

	dropRoot bool // the current root is a platform CRD
	dropped  int  // list items or Table rows dropped
	bookmark bool // inside a BOOKMARK event

	kindRoot int    // root whose kind is cached
	kind     string // its kind

	// One-entry caches of sibling lookups, so duplicate members cannot make a unit quadratic.
	sibObj  int
	sibKey  string
	sibVal  string
	ruleObj int
	ruleVal bool
	sarObj  int
	sarVal  bool
}

func (t *Translator) rewrite(dir Direction, in []byte, top state, ctx Context) (Result, error) {
	w := rewriter{t: t, dir: dir, crd: ctx.CRD, in: in}
	return w.run(top)
}

func (w *rewriter) run(top state) (Result, error) {
	w.kindRoot, w.sibObj, w.ruleObj, w.sarObj = -1, -1, -1, -1
	p := skipWS(w.in, 0)
	end, err := w.value(p, top, -1, 0)
	if err != nil {
		return Result{}, err
	}
	if q := skipWS(w.in, end); q != len(w.in) {
		return Result{}, errSyntax("data after the top-level value", q)
	}
	if w.dropRoot {
		return Result{Translated: true, Drop: true}, nil
	}
	res := Result{Body: w.in, Translated: true, Dropped: w.dropped}
	if w.out != nil {
		res.Body = append(w.out, w.in[w.last:]...)
		res.Changed = true
	}
	return res, nil
}

// emit copies the input up to start and skips to end; the caller then appends the replacement to w.out.
func (w *rewriter) emit(start, end int) {
	if w.out == nil {
		if want := len(w.in) + len(w.in)/8 + 64; cap(w.scratch) >= want {
			w.out = w.scratch[:0]
		} else {
			w.out = make([]byte, 0, want)
		}
	}
	w.out = append(w.out, w.in[w.last:start]...)
	w.last = end
}

// mark and rollback undo the edits of an element that is dropped after all.
type mark struct{ out, last int }

func (w *rewriter) mark() mark { return mark{len(w.out), w.last} }

func (w *rewriter) rollback(m mark) {
	if w.out != nil {
		w.out = w.out[:m.out]
	}
	w.last = m.last
}

func (w *rewriter) value(p int, st state, root, depth int) (int, error) {
	if p >= len(w.in) {
		return 0, errSyntax("unexpected end of input", p)
	}
	switch w.in[p] {
	case '{':
		return w.object(p, st, root, depth)
	case '[':
		return w.array(p, st, root, depth)
	default:
		return skipValue(w.in, p, depth)
	}
}

// member processes one value whose state and action are known.
func (w *rewriter) member(vs int, st state, act action, root, depth int) (int, error) {
	if vs >= len(w.in) {
		return 0, errSyntax("unexpected end of input", vs)
	}
	if act != aNone && act != aDelete && w.in[vs] == '"' {
		return w.leaf(vs, act)
	}
	if st == sOpaque || act == aDelete {
		return skipValue(w.in, vs, depth)
	}
	return w.value(vs, st, root, depth)
}

// deletion tracks the removal of members or elements from a sequence so that separators stay valid.
type deletion struct {
	prevEnd int  // end of the previous member's value, -1 before the first
	kept    bool // an earlier member was kept
}

// remove removes the member or element [start, end). next is the start of the following member (after the
// comma and whitespace), or -1 if it is the last one.
func (w *rewriter) remove(d *deletion, start, end, next int) {
	switch {
	case d.kept:
		w.emit(d.prevEnd, end) // drop ",<member>"
	case next >= 0:
		w.emit(start, next) // drop "<member>," (nothing kept before it)
	default:
		w.emit(start, end) // the only remaining member
	}
}

func (w *rewriter) object(p int, st state, root, depth int) (int, error) {
	if depth >= maxDepth {
		return 0, errDepth(p)
	}
	in := w.in
	obj := p
	if st == sTop {
		root = p
	}
	p = skipWS(in, p+1)
	if p < len(in) && in[p] == '}' {
		return p + 1, nil
	}
	d := deletion{prevEnd: -1}
	for {
		if p >= len(in) || in[p] != '"' {
			return 0, errSyntax("expected member name", p)
		}
		ks := p
		ke, esc, err := scanString(in, p)
		if err != nil {
			return 0, err
		}
		p = skipWS(in, ke)
		if p >= len(in) || in[p] != ':' {
			return 0, errSyntax("expected ':'", p)
		}
		vs := skipWS(in, p+1)
		var cst state
		var act action
		if (st == sOAPaths || st == sOASchemas) && w.dir == DirectionResponse && w.t.platformKey(st, key(in, ks, ke, esc)) {
			cst, act = sOpaque, aDelete // the platform's own schema or path
			w.dropped++
		} else {
			if st == sOAPaths || st == sOASchemas {
				w.renameKey(st, ks, ke, esc)
			}
			cst, act = w.child(st, key(in, ks, ke, esc), obj, root)
		}
		ve, err := w.member(vs, cst, act, root, depth+1)
		if err != nil {
			return 0, err
		}
		p = skipWS(in, ve)
		if p >= len(in) {
			return 0, errSyntax("expected ',' or '}'", p)
		}
		switch in[p] {
		case ',':
			next := skipWS(in, p+1)
			if act == aDelete {
				w.remove(&d, ks, ve, next)
			} else {
				d.kept = true
			}
			d.prevEnd = ve
			p = next
		case '}':
			if act == aDelete {
				w.remove(&d, ks, ve, -1)
			}
			return p + 1, nil
		default:
			return 0, errSyntax("expected ',' or '}'", p)
		}
	}
}

// key is the member name at in[ks:ke] (esc: it holds escapes).
func key(in []byte, ks, ke int, esc bool) string {
	if esc {
		return unquote(in[ks:ke])
	}
	return string(in[ks+1 : ke-1])
}

func (w *rewriter) array(p int, st state, root, depth int) (int, error) {
	if depth >= maxDepth {
		return 0, errDepth(p)
	}
	in := w.in
	p = skipWS(in, p+1)
	if p < len(in) && in[p] == ']' {
		return p + 1, nil
	}
	droppable := st == sItems || st == sRows
	d := deletion{prevEnd: -1}
	for i := 0; ; i++ {
		es := p
		cst, act := w.elem(st, i)
		var m mark
		if droppable {
			m = w.mark()
			w.dropRoot = false
		}
		ve, err := w.member(es, cst, act, root, depth+1)
		if err != nil {
			return 0, err
		}
		drop := droppable && w.dropRoot
		if drop {
			w.rollback(m)
			w.dropRoot = false
			w.dropped++
		}
		p = skipWS(in, ve)
		if p >= len(in) {
			return 0, errSyntax("expected ',' or ']'", p)
		}
		switch in[p] {
		case ',':
			next := skipWS(in, p+1)
			if drop {
				w.remove(&d, es, ve, next)
			} else {
				d.kept = true
			}
			d.prevEnd = ve
			p = next
		case ']':
			if drop {
				w.remove(&d, es, ve, -1)
			}
			return p + 1, nil
		default:
			return 0, errSyntax("expected ',' or ']'", p)
		}
	}
}

// rootKind returns the kind of the root object at offset root ("" if unknown).
func (w *rewriter) rootKind(root int) string {
	if root < 0 {
		return ""
	}
	if w.kindRoot != root {
		w.kindRoot, w.kind = root, stringMember(w.in, root, "kind")
	}
	return w.kind
}

// sibling is stringMember(in, obj, key), cached for the last (obj, key).
func (w *rewriter) sibling(obj int, key string) string {
	if obj < 0 {
		return ""
	}
	if w.sibObj != obj || w.sibKey != key {
		w.sibObj, w.sibKey, w.sibVal = obj, key, stringMember(w.in, obj, key)
	}
	return w.sibVal
}

// leaf applies act to the string literal at in[vs].
func (w *rewriter) leaf(vs int, act action) (int, error) {
	ve, esc, err := scanString(w.in, vs)
	if err != nil {
		return 0, err
	}
	raw := w.in[vs+1 : ve-1]
	if act == aPatch {
		return ve, w.patch(vs, ve)
	}
	if esc || act >= aRef {
		// Rare: decode, translate, re-encode.
		s := unquote(w.in[vs:ve])
		if out, ok := w.translateString(s, act); ok {
			w.emit(vs, ve)
			w.out = appendQuoted(w.out, out)
		}
		return ve, nil
	}
	table := w.t.groupTo[w.dir]
	switch act {
	case aAPIVersion:
		i := indexByte(raw, '/')
		if i < 0 || i+1 >= len(raw) || raw[i+1] != 'v' {
			return ve, nil
		}
		if g, ok := table[string(raw[:i])]; ok {
			w.emit(vs+1, vs+1+i)
			w.out = append(w.out, g...)
		}
	case aGroup:
		if g, ok := table[string(raw)]; ok {
			w.emit(vs+1, ve-1)
			w.out = append(w.out, g...)
		}
	case aRootGroup:
		if w.dir == DirectionResponse && w.t.std[string(raw)] {
			w.dropRoot = true
			return ve, nil
		}
		if g, ok := table[string(raw)]; ok {
			w.emit(vs+1, ve-1)
			w.out = append(w.out, g...)
		}
	case aCRDName, aRootName:
		i := indexByte(raw, '.')
		if i <= 0 || i == len(raw)-1 {
			return ve, nil
		}
		grp := raw[i+1:]
		if act == aRootName && w.dir == DirectionResponse && w.t.std[string(grp)] {
			w.dropRoot = true
			return ve, nil
		}
		if g, ok := table[string(grp)]; ok {
			w.emit(vs+1+i+1, ve-1)
			w.out = append(w.out, g...)
		}
	case aMessage:
		s := string(raw)
		if out := w.t.ResponseMessage(s); out != s {
			w.emit(vs+1, ve-1)
			w.out = append(w.out, out...) // group names need no escaping
		}
	}
	return ve, nil
}

// translateString is leaf for decoded strings (the value held escapes).
func (w *rewriter) translateString(s string, act action) (string, bool) {
	table := w.t.groupTo[w.dir]
	switch act {
	case aAPIVersion:
		g, v, ok := strings.Cut(s, "/")
		if !ok || !isVersion(v) {
			return "", false
		}
		if ng, ok := table[g]; ok {
			return ng + "/" + v, true
		}
	case aGroup, aRootGroup:
		if act == aRootGroup && w.dir == DirectionResponse && w.t.std[s] {
			w.dropRoot = true
			return "", false
		}
		if ng, ok := table[s]; ok {
			return ng, true
		}
	case aCRDName, aRootName:
		plural, g, ok := strings.Cut(s, ".")
		if !ok || plural == "" || g == "" {
			return "", false
		}
		if act == aRootName && w.dir == DirectionResponse && w.t.std[g] {
			w.dropRoot = true
			return "", false
		}
		if ng, ok := table[g]; ok {
			return plural + "." + ng, true
		}
	case aMessage:
		if out := w.t.ResponseMessage(s); out != s {
			return out, true
		}
	case aRef:
		for _, prefix := range []string{schemaRefPrefix, definitionsPrefix} {
			if name, ok := strings.CutPrefix(s, prefix); ok {
				if n, ok := w.t.openAPIName(name, w.dir); ok {
					return prefix + n, true
				}
			}
		}
	case aOperationID:
		if out := w.t.operationIDs[w.dir].Replace(s); out != s {
			return out, true
		}
	case aTag:
		tok, v, ok := strings.Cut(s, "_")
		if nt, found := w.t.openAPITags[w.dir][tok]; found {
			if ok {
				return nt + "_" + v, true
			}
			return nt, true
		}
	}
	return "", false
}
