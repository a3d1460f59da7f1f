package translate

import (
	"bytes"
	"mime"
	"strconv"
	"strings"

	"k8s.io/apimachinery/pkg/runtime"
	k8sjson "k8s.io/apimachinery/pkg/runtime/serializer/json"
	"k8s.io/apimachinery/pkg/runtime/serializer/protobuf"
	"k8s.io/client-go/kubernetes/scheme"
	"sigs.k8s.io/yaml"
)

// Request body content types kube-apiserver accepts.
const (
	ContentTypeJSON           = "application/json"
	ContentTypeMergePatch     = "application/merge-patch+json"
	ContentTypeStrategicPatch = "application/strategic-merge-patch+json"
	ContentTypeJSONPatch      = "application/json-patch+json"
	ContentTypeApplyYAML      = "application/apply-patch+yaml"
	ContentTypeApplyCBOR      = "application/apply-patch+cbor"
	ContentTypeYAML           = "application/yaml"
	ContentTypeProtobuf       = "application/vnd.kubernetes.protobuf"
	ContentTypeCBOR           = "application/cbor"
)

// BodyResult is a translated request body and the Content-Type to forward it with.
type BodyResult struct {
	Result
	// ContentType is the Content-Type header to send upstream: the client's, unless the body was re-encoded
	// (protobuf and YAML become application/json). When it changes the proxy also sets a fixed Content-Length.
	ContentType string
}

// RequestBody translates a request body by its Content-Type (the header value as sent):
//   - JSON, merge patch, strategic merge patch: RequestObject;
//   - JSON patch: RequestJSONPatch;
//   - apply-patch+yaml: RequestApply (the result is JSON, still sent as apply-patch+yaml);
//   - application/yaml: converted to JSON, then the object rule;
//   - protobuf: RequestProtobuf;
//   - CBOR (application/cbor, apply-patch+cbor): ReasonUnsupportedMediaType (415 "send JSON");
//   - anything else passes untouched if it holds no needle, and is refused as unsupported otherwise.
//
// A body without needles is returned as is, whatever its type.
func (t *Translator) RequestBody(contentType string, body []byte, ctx Context) (BodyResult, error) {
	out := BodyResult{Result: Result{Body: body}, ContentType: contentType}
	if len(body) == 0 {
		return out, nil
	}
	mt, _, err := mime.ParseMediaType(contentType)
	if err != nil {
		mt = strings.ToLower(strings.TrimSpace(contentType))
	}
	var res Result
	switch mt {
	case ContentTypeJSON, ContentTypeMergePatch, ContentTypeStrategicPatch, "":
		res, err = t.RequestObject(body, ctx)
	case ContentTypeJSONPatch:
		res, err = t.RequestJSONPatch(body, ctx)
	case ContentTypeApplyYAML:
		res, err = t.RequestApply(body, ctx)
	case ContentTypeYAML:
		res, err = t.RequestApply(body, ctx)
		if err == nil && res.Changed {
			out.ContentType = ContentTypeJSON
		}
	case ContentTypeProtobuf:
		res, err = t.RequestProtobuf(body, ctx)
		if err == nil && res.Changed {
			out.ContentType = ContentTypeJSON
		}
	case ContentTypeCBOR, ContentTypeApplyCBOR:
		return out, newError(ReasonUnsupportedMediaType, -1, "%s request bodies are not supported by the capi-private proxy: send JSON", mt)
	default:
		if t.needsRequest(body) {
			return out, newError(ReasonUnsupportedMediaType, -1, "cannot translate a %q request body: send JSON", mt)
		}
		return out, nil
	}
	if err != nil {
		return out, err
	}
	out.Result = res
	return out, nil
}

// RequestJSONPatch translates an RFC 6902 JSON patch. Pointers (path, from) are never rewritten. A string value
// at a pointer whose last token the rule names (…/apiVersion, …/apiGroup, …/apiGroups/N, …/spec/group of a CRD,
// …) is translated; object and array values go through the rule in the state the pointer leads to, so values
// under opaque pointers (/metadata/labels, /metadata/annotations, …) stay as they are. `test` values are
// translated too, so they compare against what is stored.
func (t *Translator) RequestJSONPatch(body []byte, ctx Context) (Result, error) {
	if !t.needsRequest(body) {
		return Result{Body: body}, nil
	}
	return t.jsonPatch(DirectionRequest, body, ctx)
}

// jsonPatch is RequestJSONPatch in either direction (an AdmissionReview's patch travels both ways).
func (t *Translator) jsonPatch(dir Direction, body []byte, ctx Context) (Result, error) {
	w := rewriter{t: t, dir: dir, crd: ctx.CRD, in: body, kindRoot: -1, sibObj: -1, ruleObj: -1, sarObj: -1}
	in := body
	p := skipWS(in, 0)
	if p >= len(in) || in[p] != '[' {
		return Result{}, newError(ReasonInvalidJSONPatch, p, "a JSON patch is an array of operations")
	}
	p = skipWS(in, p+1)
	if p < len(in) && in[p] == ']' {
		p++
	} else {
		for {
			if p >= len(in) || in[p] != '{' {
				return Result{}, newError(ReasonInvalidJSONPatch, p, "a JSON patch operation is an object")
			}
			end, err := w.patchOp(p)
			if err != nil {
				return Result{}, err
			}
			p = skipWS(in, end)
			if p < len(in) && in[p] == ',' {
				p = skipWS(in, p+1)
				continue
			}
			if p < len(in) && in[p] == ']' {
				p++
				break
			}
			return Result{}, errSyntax("expected ',' or ']'", p)
		}
	}
	if q := skipWS(in, p); q != len(in) {
		return Result{}, errSyntax("data after the top-level value", q)
	}
	res := Result{Body: in, Translated: true}
	if w.out != nil {
		res.Body = append(w.out, in[w.last:]...)
		res.Changed = true
	}
	return res, nil
}

// patchOp translates the value of the operation object at in[p].
func (w *rewriter) patchOp(p int) (int, error) {
	in := w.in
	st, act := w.pointer(stringMember(in, p, "path"))
	p = skipWS(in, p+1)
	if p < len(in) && in[p] == '}' {
		return p + 1, nil
	}
	for {
		if p >= len(in) || in[p] != '"' {
			return 0, errSyntax("expected member name", p)
		}
		ke, _, err := scanString(in, p)
		if err != nil {
			return 0, err
		}
		isValue := unquote(in[p:ke]) == "value"
		p = skipWS(in, ke)
		if p >= len(in) || in[p] != ':' {
			return 0, errSyntax("expected ':'", p)
		}
		vs := skipWS(in, p+1)
		var ve int
		if isValue {
			ve, err = w.member(vs, st, act, -1, 1)
		} else {
			ve, err = skipValue(in, vs, 1)
		}
		if err != nil {
			return 0, err
		}
		p = skipWS(in, ve)
		if p < len(in) && in[p] == ',' {
			p = skipWS(in, p+1)
			continue
		}
		if p < len(in) && in[p] == '}' {
			return p + 1, nil
		}
		return 0, errSyntax("expected ',' or '}'", p)
	}
}

// pointer walks the rule along a JSON pointer from the object root and returns the state and action of the
// value it points at. Unresolvable pointers are opaque: nothing under them is translated.
func (w *rewriter) pointer(ptr string) (state, action) {
	if ptr == "" {
		return sTop, aNone
	}
	if ptr[0] != '/' {
		return sOpaque, aNone
	}
	toks := strings.Split(ptr[1:], "/")
	st := sTop
	for i, tok := range toks {
		tok = strings.ReplaceAll(strings.ReplaceAll(tok, "~1", "/"), "~0", "~")
		var cst state
		var act action
		if arrayState(st) {
			idx, err := strconv.Atoi(tok)
			if err != nil {
				idx = -1 // "-" appends
			}
			cst, act = w.elem(st, idx)
		} else {
			cst, act = w.child(st, tok, -1, -1)
		}
		if i == len(toks)-1 {
			return cst, act
		}
		if cst == sOpaque || act == aDelete {
			return sOpaque, aNone
		}
		st = cst
	}
	return sOpaque, aNone
}

// RequestApply translates a server-side apply body (apply-patch+yaml, in YAML or JSON): it is parsed with
// sigs.k8s.io/yaml (as kube-apiserver does), the rule applied — root apiVersion included — and sent as JSON,
// which is valid YAML, so the Content-Type stays. A body with no needle and no backslash (YAML escapes could
// spell a group) is returned as is.
func (t *Translator) RequestApply(body []byte, ctx Context) (Result, error) {
	if !t.needsRequest(body) && bytes.IndexByte(body, '\\') < 0 {
		return Result{Body: body}, nil
	}
	js := body
	if !validJSON(body) {
		var err error
		if js, err = yaml.YAMLToJSON(body); err != nil {
			return Result{}, newError(ReasonInvalidYAML, -1, "apply body: %v", err)
		}
	}
	res, err := t.rewrite(DirectionRequest, js, sTop, ctx)
	if err != nil {
		return Result{}, err
	}
	if !res.Changed {
		return Result{Body: body, Translated: true}, nil // nothing renamed: keep the client's bytes
	}
	return res, nil
}

var (
	protobufSerializer = protobuf.NewSerializer(scheme.Scheme, scheme.Scheme)
	jsonSerializer     = k8sjson.NewSerializerWithOptions(k8sjson.DefaultMetaFactory, scheme.Scheme, scheme.Scheme, k8sjson.SerializerOptions{})
)

// RequestProtobuf translates a protobuf request body (controller-runtime sends built-in kinds as protobuf, e.g. a
// provider's Secret owned by a KubevirtMachine). Bytes without a mapped or escaped group pass untouched.
// Otherwise the body is decoded with client-go's scheme, re-encoded as JSON, and the rule applied: the result is
// JSON (Changed is true). A type the scheme does not know fails with ReasonUnsupportedMediaType (415 "send
// JSON"); custom resources never arrive as protobuf.
func (t *Translator) RequestProtobuf(body []byte, ctx Context) (Result, error) {
	if !containsAny(body, t.groupNeedles) {
		return Result{Body: body}, nil
	}
	obj, gvk, err := protobufSerializer.Decode(body, nil, nil)
	if err != nil {
		if runtime.IsNotRegisteredError(err) {
			return Result{}, newError(ReasonUnsupportedMediaType, -1, "protobuf body of a type the proxy cannot decode: send JSON: %v", err)
		}
		return Result{}, newError(ReasonInvalidProtobuf, -1, "%v", err)
	}
	obj.GetObjectKind().SetGroupVersionKind(*gvk)
	var buf bytes.Buffer
	if err := jsonSerializer.Encode(obj, &buf); err != nil {
		return Result{}, newError(ReasonInvalidProtobuf, -1, "re-encoding %s as JSON: %v", gvk, err)
	}
	res, err := t.rewrite(DirectionRequest, buf.Bytes(), sTop, ctx)
	if err != nil {
		return Result{}, err
	}
	res.Changed = true
	return res, nil
}
