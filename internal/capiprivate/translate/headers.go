package translate

import (
	"slices"
	"strings"
)

// Forced names the binary encoding a client asked for in Accept and did not get (the
// capi_private_proxy_forced_json_total{requested} label); "" when nothing was forced.
type Forced string

// Values of Forced.
const (
	ForcedNone     Forced = ""
	ForcedProtobuf Forced = "protobuf"
	ForcedCBOR     Forced = "cbor"
)

// Media types of the protobuf-encoded OpenAPI v2 document, as kube-openapi's handler serves it: it answers with
// OpenAPIV2Protobuf and also accepts the deprecated form, which client-go's discovery still asks for.
const (
	OpenAPIV2Protobuf           = "application/com.github.proto-openapi.spec.v2.v1.0+protobuf"
	OpenAPIV2ProtobufDeprecated = "application/com.github.proto-openapi.spec.v2@v1.0+protobuf"
)

// RequestAccept rewrites an Accept header so kube-apiserver always answers JSON, the only encoding this package
// translates. Each media range becomes application/json with its parameters kept (as=Table, as=PartialObject-
// Metadata[List], g/v of aggregated discovery, stream=watch); duplicates are removed and order is kept. An empty
// header stays empty (kube-apiserver defaults to JSON).
func (t *Translator) RequestAccept(accept string) (string, Forced) {
	if strings.TrimSpace(accept) == "" {
		return accept, ForcedNone
	}
	forced := ForcedNone
	var out []string
	for _, r := range strings.Split(accept, ",") {
		r = strings.TrimSpace(r)
		if r == "" {
			continue
		}
		typ, params, _ := strings.Cut(r, ";")
		typ = strings.ToLower(strings.TrimSpace(typ))
		switch typ {
		case "application/vnd.kubernetes.protobuf", OpenAPIV2Protobuf, OpenAPIV2ProtobufDeprecated:
			if forced == ForcedNone {
				forced = ForcedProtobuf
			}
		case "application/cbor", "application/cbor-seq":
			if forced == ForcedNone {
				forced = ForcedCBOR
			}
		}
		var ps []string
		for _, p := range strings.Split(params, ";") {
			if p = strings.TrimSpace(p); p != "" {
				ps = append(ps, p)
			}
		}
		mr := strings.Join(append([]string{"application/json"}, ps...), ";")
		if !slices.Contains(out, mr) {
			out = append(out, mr)
		}
	}
	return strings.Join(out, ","), forced
}

// ResponseWarning translates a Warning header value (`299 - "text"`): private group tokens in the text become
// standard, longest first. The tokens contain no quote or backslash, so the quoted-string stays valid.
func (t *Translator) ResponseWarning(v string) string { return t.ResponseMessage(v) }

// ResponseETag suffixes the ETag of a translated document (aggregated discovery, OpenAPI v3) with the mapping
// hash: `"<upstream>"` → `"<upstream>-<hash>"` (weak tags stay weak). The translated bytes are a function of the
// upstream bytes and the table, so the pair identifies them.
func (t *Translator) ResponseETag(etag string) string {
	if etag == "" {
		return ""
	}
	weak := strings.HasPrefix(etag, "W/")
	v := strings.TrimPrefix(etag, "W/")
	suffix := "-" + t.m.Hash()
	if len(v) >= 2 && v[0] == '"' && v[len(v)-1] == '"' {
		v = `"` + v[1:len(v)-1] + suffix + `"`
	} else {
		v += suffix
	}
	if weak {
		v = "W/" + v
	}
	return v
}

// RequestIfNoneMatch strips the mapping-hash suffix ResponseETag added from each entity tag of an If-None-Match
// header, so kube-apiserver can answer 304. Tags without the current suffix (issued upstream directly, or under
// another table) are dropped, since their content is not what this proxy would send; "*" is kept. An empty
// result means: remove the header. Apply it only on paths whose responses are translated documents.
func (t *Translator) RequestIfNoneMatch(v string) string {
	suffix := "-" + t.m.Hash()
	var out []string
	for _, tag := range strings.Split(v, ",") {
		tag = strings.TrimSpace(tag)
		if tag == "*" {
			out = append(out, tag)
			continue
		}
		weak := strings.HasPrefix(tag, "W/")
		s := strings.TrimPrefix(tag, "W/")
		quoted := len(s) >= 2 && s[0] == '"' && s[len(s)-1] == '"'
		if quoted {
			s = s[1 : len(s)-1]
		}
		base, ok := strings.CutSuffix(s, suffix)
		if !ok || base == "" {
			continue
		}
		if quoted {
			base = `"` + base + `"`
		}
		if weak {
			base = "W/" + base
		}
		out = append(out, base)
	}
	return strings.Join(out, ", ")
}
