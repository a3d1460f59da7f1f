package translate

import (
	"strings"
)

// Prefixes of OpenAPI $refs to schemas: v3 components, v2 definitions.
const (
	schemaRefPrefix   = "#/components/schemas/"
	definitionsPrefix = "#/definitions/"
)

// platformKey reports whether the member name key of an OpenAPI paths (st == sOAPaths) or schemas object names
// the platform's own standard-group document: /apis/<std>/… or <reversed std>.<version>.<Kind>.
func (t *Translator) platformKey(st state, key string) bool {
	if st == sOAPaths {
		rest, ok := strings.CutPrefix(key, "/apis/")
		g, _, _ := strings.Cut(rest, "/")
		return ok && t.std[g]
	}
	k := strings.LastIndexByte(key, '.')
	if k <= 0 {
		return false
	}
	v := strings.LastIndexByte(key[:k], '.')
	return v > 0 && t.openAPIStd[key[:v]]
}

// openAPIName maps an OpenAPI schema name built by util.ToRESTFriendlyName from "<group>/<version>.<Kind>":
// io.openshift.hypershift.cluster.v1beta2.Machine ↔ io.x-k8s.cluster.v1beta2.Machine.
func (t *Translator) openAPIName(name string, dir Direction) (string, bool) {
	k := strings.LastIndexByte(name, '.')
	if k <= 0 {
		return "", false
	}
	v := strings.LastIndexByte(name[:k], '.')
	if v <= 0 {
		return "", false
	}
	if g, ok := t.openAPINames[dir][name[:v]]; ok {
		return g + name[v:], true
	}
	return "", false
}

// ResponseOpenAPIIndex translates the OpenAPI v3 index (/openapi/v3): each key apis/<private>/<v> becomes
// apis/<std>/<v> and its serverRelativeURL /openapi/v3/apis/<std>/<v>?hash=… (the hash is upstream's: the proxy
// forwards it, and kube-apiserver checks it against the private document). Keys of the platform's standard groups
// are removed: those documents are invisible. The caller rewrites the ETag with ResponseETag.
func (t *Translator) ResponseOpenAPIIndex(body []byte) (Result, error) {
	if !t.needsResponse(body) {
		return Result{Body: body}, nil
	}
	p := skipWS(body, 0)
	if !validJSON(body) {
		return Result{}, errSyntax("invalid OpenAPI index", p)
	}
	if body[p] != '{' {
		return Result{}, newError(ReasonInvalidOpenAPI, p, "an OpenAPI index is an object")
	}
	ps, pe, ok := memberValue(body, p, "paths")
	if !ok || body[ps] != '{' {
		return Result{}, newError(ReasonInvalidOpenAPI, p, "OpenAPI index without paths")
	}
	in := body
	out := make([]byte, 0, len(in))
	out = append(out, in[:ps]...)
	out = append(out, '{')
	n, dropped := 0, 0
	for q := skipWS(in, ps+1); in[q] != '}'; {
		ke, _, _ := scanString(in, q)
		key := unquote(in[q:ke])
		vs := skipWS(in, skipWS(in, ke)+1)
		ve, _ := skipValue(in, vs, 1)
		keep, newKey := true, key
		if rest, ok := strings.CutPrefix(key, "apis/"); ok {
			g, v, _ := strings.Cut(rest, "/")
			switch {
			case t.std[g]:
				keep = false // the platform's document
			case t.m.IsPrivate(g):
				std, _ := t.m.ToStandard(g)
				newKey = "apis/" + std + "/" + v
			}
		}
		if keep {
			if n > 0 {
				out = append(out, ',')
			}
			out = appendQuoted(out, newKey)
			out = append(out, ':')
			out = t.appendIndexEntry(out, in, vs, ve)
			n++
		} else {
			dropped++
		}
		q = skipWS(in, ve)
		if in[q] == ',' {
			q = skipWS(in, q+1)
		}
	}
	out = append(out, '}')
	out = append(out, in[pe:]...)
	return Result{Body: out, Translated: true, Changed: true, Dropped: dropped}, nil
}

// appendIndexEntry appends the index entry in[vs:ve] with its serverRelativeURL mapped.
func (t *Translator) appendIndexEntry(out, in []byte, vs, ve int) []byte {
	if in[vs] != '{' {
		return append(out, in[vs:ve]...)
	}
	us, ue, ok := memberValue(in, vs, "serverRelativeURL")
	if !ok || in[us] != '"' {
		return append(out, in[vs:ve]...)
	}
	url := unquote(in[us:ue])
	nu := t.ResponsePath(url)
	if nu == url {
		return append(out, in[vs:ve]...)
	}
	out = append(out, in[vs:us]...)
	out = appendQuoted(out, nu)
	return append(out, in[ue:ve]...)
}

// ResponseOpenAPIDocument translates an OpenAPI v3 group-version document (/openapi/v3/apis/<g>/<v>) or the
// Swagger 2.0 document (/openapi/v2): schema names (components.schemas or definitions keys) and $refs
// (io.openshift.hypershift.cluster.v1beta2.Machine ↔ io.x-k8s.cluster.v1beta2.Machine),
// x-kubernetes-group-version-kind groups, paths keys (/apis/<g>/<v>/…) and the group token of operationIds and
// tags. The platform's own schemas and paths of the standard groups are dropped (a v2 document holds both sides;
// the private ones take their names). Descriptions are left alone. The caller rewrites the ETag with
// ResponseETag.
func (t *Translator) ResponseOpenAPIDocument(body []byte) (Result, error) {
	if !t.needsResponse(body) {
		return Result{Body: body}, nil
	}
	p := skipWS(body, 0)
	if p >= len(body) || body[p] != '{' {
		return Result{}, newError(ReasonInvalidOpenAPI, p, "an OpenAPI document is an object")
	}
	return t.rewrite(DirectionResponse, body, sOARoot, Context{})
}
