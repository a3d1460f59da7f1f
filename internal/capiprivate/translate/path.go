package translate

import (
	"net/url"
	"strings"

	"k8s.io/apimachinery/pkg/fields"

	"github.com/dcm-sp/acm-cluster-sp/internal/capiprivate/groups"
)

// PathKind classifies a request path by what its responses need.
type PathKind uint8

const (
	// PathOther is not an API path this package knows (/healthz, /version, /metrics, ...): bodies pass untouched.
	PathOther PathKind = iota
	// PathResource is a resource path under /api/v1 or /apis/<g>/<v>: objects, lists, Tables, watches, Status.
	// Responses go through ResponseObject, ResponseStream or ResponseWatchEvent.
	PathResource
	// PathStream is a log, exec, attach, port-forward or proxy subresource: never translated either way.
	PathStream
	// PathDiscoveryRoot is /api or /apis (APIGroupList or aggregated discovery): ResponseDiscovery.
	PathDiscoveryRoot
	// PathDiscoveryGroup is /apis/<g> (APIGroup): ResponseDiscovery.
	PathDiscoveryGroup
	// PathDiscoveryVersion is /api/v1 or /apis/<g>/<v> (APIResourceList): ResponseDiscovery.
	PathDiscoveryVersion
	// PathOpenAPIIndex is /openapi/v3: ResponseOpenAPIIndex.
	PathOpenAPIIndex
	// PathOpenAPIDocument is /openapi/v3/api/v1 or /openapi/v3/apis/<g>/<v>: ResponseOpenAPIDocument.
	PathOpenAPIDocument
	// PathOpenAPIV2 is /openapi/v2, the whole Swagger 2.0 document: ResponseOpenAPIDocument too. Its clients
	// often ask for protobuf; the proxy asks for JSON and encodes the translated document back.
	PathOpenAPIV2
)

// Path is a parsed request path (the decoded URL.Path) and where to send it.
type Path struct {
	// Upstream is the path to forward: the group segment (and a CRD name) renamed. The proxy sets URL.Path to it
	// and clears URL.RawPath.
	Upstream string
	// Changed: Upstream differs from the client's path.
	Changed bool
	// Hidden: the client addressed a private or escape group, or a private or platform CRD, directly. Those are
	// not part of the view: answer 404 without forwarding.
	Hidden bool
	// Kind tells which response function applies.
	Kind PathKind

	// The request as the client wrote it. Group is "" for the core group.
	Group, Version, Namespace, Resource, Name, Subresource string
	// Watch: the legacy /watch/ prefix was used (a ?watch=true query is the caller's to check).
	Watch bool
	// Mapped: Group is a mapped standard group, so the path was rewritten to its private group.
	Mapped bool
}

// Context is the translation context of bodies on this path.
func (p Path) Context() Context {
	return Context{CRD: p.Group == "apiextensions.k8s.io" && p.Resource == "customresourcedefinitions"}
}

// streamSubresources are never translated: they carry a stream (logs, exec, attach, port-forward) or the traffic of a
// pod, service or node (proxy), not API objects.
var streamSubresources = map[string]bool{"log": true, "exec": true, "attach": true, "portforward": true, "proxy": true}

// namespaceSubresources are subresources of a Namespace object, not namespaced resources (as RequestInfo).
var namespaceSubresources = map[string]bool{"status": true, "finalize": true}

// RequestPath parses the client's decoded URL path and computes the upstream path: the group segment of
// /apis/<std>/... and /openapi/v3/apis/<std>/<v> becomes private, an escape group becomes standard only where it
// stays invisible (see Hidden), and CRD names <plural>.<std> in customresourcedefinitions paths become private.
// Paths with empty, "." or ".." segments are rejected (ReasonInvalidPath): kube-apiserver would clean them into
// something this parser did not see.
func (t *Translator) RequestPath(path string) (Path, error) {
	p := Path{Upstream: path}
	if path == "" || path[0] != '/' {
		return p, newError(ReasonInvalidPath, -1, "path %q is not absolute", path)
	}
	body := path[1:]
	trailing := strings.HasSuffix(body, "/") && body != ""
	if trailing {
		body = body[:len(body)-1]
	}
	segs := strings.Split(body, "/")
	for _, s := range segs {
		if (s == "" && body != "") || s == "." || s == ".." {
			return p, newError(ReasonInvalidPath, -1, "path %q has an empty, \".\" or \"..\" segment", path)
		}
	}
	if body == "" {
		return p, nil
	}
	var rewritten bool
	switch segs[0] {
	case "api":
		p.corePath(segs)
	case "apis":
		rewritten = t.groupPath(&p, segs)
	case "openapi":
		rewritten = t.openAPIPath(&p, segs)
	}
	if rewritten {
		up := "/" + strings.Join(segs, "/")
		if trailing {
			up += "/"
		}
		p.Changed = up != path
		p.Upstream = up
	}
	return p, nil
}

// corePath reads /api/... (the core group is never renamed).
func (p *Path) corePath(segs []string) {
	switch len(segs) {
	case 1:
		p.Kind = PathDiscoveryRoot
	case 2:
		p.Kind, p.Version = PathDiscoveryVersion, segs[1]
	default:
		p.Version = segs[1]
		p.parseResource(segs, 2)
	}
}

// groupPath reads /apis/... and renames the group (and a CRD's name) in segs; it reports whether segs is the
// upstream path now.
func (t *Translator) groupPath(p *Path, segs []string) bool {
	if len(segs) == 1 {
		p.Kind = PathDiscoveryRoot
		return false
	}
	p.Group = segs[1]
	nameIdx := -1
	switch len(segs) {
	case 2:
		p.Kind = PathDiscoveryGroup
	case 3:
		p.Kind, p.Version = PathDiscoveryVersion, segs[2]
	default:
		p.Version = segs[2]
		nameIdx = p.parseResource(segs, 3)
	}
	if t.hiddenGroup(p.Group) {
		p.Hidden = true
		return false
	}
	if priv, ok := t.m.ToPrivate(p.Group); ok {
		p.Mapped = true
		segs[1] = priv
	}
	if p.Context().CRD && nameIdx >= 0 {
		name, hidden := t.requestCRDName(p.Name)
		if hidden {
			p.Hidden = true
			return false
		}
		segs[nameIdx] = name
	}
	return true
}

// openAPIPath reads /openapi/v2 and /openapi/v3[/api/<version>|/apis/<group>/<version>] and renames a group
// document's group in segs; it reports whether segs is the upstream path now.
func (t *Translator) openAPIPath(p *Path, segs []string) bool {
	if len(segs) == 2 && segs[1] == "v2" {
		p.Kind = PathOpenAPIV2
		return false
	}
	if len(segs) < 2 || segs[1] != "v3" {
		return false
	}
	switch {
	case len(segs) == 2:
		p.Kind = PathOpenAPIIndex
	case len(segs) == 4 && segs[2] == "api":
		p.Kind, p.Version = PathOpenAPIDocument, segs[3]
	case len(segs) == 5 && segs[2] == "apis":
		p.Kind, p.Group, p.Version = PathOpenAPIDocument, segs[3], segs[4]
		if t.hiddenGroup(p.Group) {
			p.Hidden = true
			return false
		}
		if priv, ok := t.m.ToPrivate(p.Group); ok {
			p.Mapped = true
			segs[3] = priv
			return true
		}
	}
	return false
}

// hiddenGroup: private and escape groups are not part of the view.
func (t *Translator) hiddenGroup(g string) bool { return t.m.IsPrivate(g) || t.m.IsEscaped(g) }

// requestCRDName maps a CRD name in a path: standard → private; private and platform (escaped) names are hidden.
func (t *Translator) requestCRDName(name string) (string, bool) {
	plural, g, ok := groups.SplitCRDName(name)
	if !ok {
		return name, false
	}
	if t.hiddenGroup(g) {
		return name, true
	}
	if priv, ok := t.m.ToPrivate(g); ok {
		return groups.CRDName(plural, priv), false
	}
	return name, false
}

// parseResource fills the resource part from segs[start:] (the segments after the version), like the
// apiserver's RequestInfo, and returns the index of the name segment in segs, or -1.
func (p *Path) parseResource(segs []string, start int) int {
	p.Kind = PathResource
	i := start
	if segs[i] == "watch" {
		p.Watch = true
		i++
	}
	if len(segs)-i >= 2 && segs[i] == "namespaces" {
		if len(segs)-i > 2 && !namespaceSubresources[segs[i+2]] {
			p.Namespace = segs[i+1]
			i += 2
		} else {
			// The Namespace object itself: /namespaces/<name>[/status|/finalize].
			p.Resource, p.Name = "namespaces", segs[i+1]
			if len(segs)-i > 2 {
				p.Subresource = segs[i+2]
			}
			return i + 1
		}
	}
	if i >= len(segs) {
		return -1
	}
	p.Resource = segs[i]
	nameIdx := -1
	if i+1 < len(segs) {
		p.Name, nameIdx = segs[i+1], i+1
	}
	if i+2 < len(segs) {
		p.Subresource = segs[i+2]
		if streamSubresources[p.Subresource] {
			p.Kind = PathStream
		}
	}
	return nameIdx
}

// ResponsePath maps a path that appears in a response (a Location header, an OpenAPI serverRelativeURL or path
// key) to the client's view: /apis/<private>/... → standard, /apis/<std>/... → escape group, the same under
// /openapi/v3/apis/, and private CRD names in customresourcedefinitions paths. A query string is kept.
func (t *Translator) ResponsePath(path string) string {
	return t.mapPath(path, DirectionResponse)
}

func (t *Translator) mapPath(path string, dir Direction) string {
	pth, query, hasQuery := strings.Cut(path, "?")
	segs := strings.Split(pth, "/")
	gi := -1
	switch {
	case len(segs) > 2 && segs[0] == "" && segs[1] == "apis":
		gi = 2
	case len(segs) > 4 && segs[0] == "" && segs[1] == "openapi" && segs[2] == "v3" && segs[3] == "apis":
		gi = 4
	}
	if gi < 0 {
		return path
	}
	changed := false
	if g, ok := t.groupTo[dir][segs[gi]]; ok {
		segs[gi], changed = g, true
	}
	if gi == 2 && segs[2] == "apiextensions.k8s.io" {
		for i := 4; i+1 < len(segs); i++ {
			if segs[i] == "customresourcedefinitions" {
				if plural, g, ok := groups.SplitCRDName(segs[i+1]); ok {
					if ng, ok := t.groupTo[dir][g]; ok {
						segs[i+1], changed = groups.CRDName(plural, ng), true
					}
				}
				break
			}
		}
	}
	if !changed {
		return path
	}
	out := strings.Join(segs, "/")
	if hasQuery {
		out += "?" + query
	}
	return out
}

// RequestQuery rewrites the raw query of a request on p. Only fieldSelector values change, and only
// `metadata.name` on CRDs (a CRD name) and `involvedObject.apiVersion` / `regarding.apiVersion` on Events.
// labelSelector, continue, resourceVersion and everything else are kept byte for byte, in order.
func (t *Translator) RequestQuery(p Path, rawQuery string) (string, error) {
	if p.Kind != PathResource || rawQuery == "" || !strings.Contains(rawQuery, "fieldSelector") {
		return rawQuery, nil
	}
	crd := p.Context().CRD
	events := p.Resource == "events" && (p.Group == "" || p.Group == "events.k8s.io")
	if !crd && !events {
		return rawQuery, nil
	}
	parts := strings.Split(rawQuery, "&")
	changed := false
	for i, part := range parts {
		k, v, _ := strings.Cut(part, "=")
		key, err := url.QueryUnescape(k)
		if err != nil {
			return "", newError(ReasonInvalidQuery, -1, "query key %q: %v", k, err)
		}
		if key != "fieldSelector" {
			continue
		}
		val, err := url.QueryUnescape(v)
		if err != nil {
			return "", newError(ReasonInvalidQuery, -1, "fieldSelector %q: %v", v, err)
		}
		nv, err := t.requestFieldSelector(val, crd)
		if err != nil {
			return "", err
		}
		if nv != val {
			parts[i] = k + "=" + url.QueryEscape(nv)
			changed = true
		}
	}
	if !changed {
		return rawQuery, nil
	}
	return strings.Join(parts, "&"), nil
}

// requestFieldSelector translates the values of the selector terms the rule names.
func (t *Translator) requestFieldSelector(sel string, crd bool) (string, error) {
	terms := splitUnescaped(sel, ',')
	changed := false
	for i, term := range terms {
		key, op, val, ok := splitTerm(term)
		if !ok {
			continue // upstream rejects it; nothing of ours to translate
		}
		raw, err := fields.UnescapeValue(val)
		if err != nil {
			return "", newError(ReasonInvalidQuery, -1, "fieldSelector term %q: %v", term, err)
		}
		nv := raw
		switch {
		case crd && key == "metadata.name":
			if plural, g, ok := groups.SplitCRDName(raw); ok {
				if ng, ok := t.groupTo[DirectionRequest][g]; ok {
					nv = groups.CRDName(plural, ng)
				}
			}
		case !crd && (key == "involvedObject.apiVersion" || key == "regarding.apiVersion"):
			if g, v, ok := strings.Cut(raw, "/"); ok && isVersion(v) {
				if ng, ok := t.groupTo[DirectionRequest][g]; ok {
					nv = ng + "/" + v
				}
			}
		}
		if nv != raw {
			terms[i] = key + op + fields.EscapeValue(nv)
			changed = true
		}
	}
	if !changed {
		return sel, nil
	}
	return strings.Join(terms, ","), nil
}

// splitUnescaped splits s at sep characters not preceded by a backslash escape.
func splitUnescaped(s string, sep byte) []string {
	var out []string
	start := 0
	for i := 0; i < len(s); i++ {
		switch s[i] {
		case '\\':
			i++
		case sep:
			out = append(out, s[start:i])
			start = i + 1
		}
	}
	return append(out, s[start:])
}

// splitTerm splits a field selector term at its first unescaped operator (!=, ==, =).
func splitTerm(term string) (key, op, val string, ok bool) {
	for i := 0; i < len(term); i++ {
		switch term[i] {
		case '\\':
			i++
		case '!':
			if i+1 < len(term) && term[i+1] == '=' {
				return strings.TrimSpace(term[:i]), "!=", term[i+2:], true
			}
		case '=':
			if i+1 < len(term) && term[i+1] == '=' {
				return strings.TrimSpace(term[:i]), "==", term[i+2:], true
			}
			return strings.TrimSpace(term[:i]), "=", term[i+1:], true
		}
	}
	return "", "", "", false
}
