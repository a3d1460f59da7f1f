package proxy

import (
	"bytes"
	"net/http"
	"net/textproto"
	"strings"

	"github.com/dcm-sp/acm-cluster-sp/internal/capiprivate/translate"
	"github.com/dcm-sp/acm-cluster-sp/internal/loopback"
)

// This file holds the pure decisions about a request: who may pass, which headers go upstream, what the request
// is called in metrics. They are table-tested on their own.

// AuthMode is how the proxy authenticates to kube-apiserver: passthrough by default, so it holds no credentials.
type AuthMode string

const (
	// AuthPassthrough forwards the caller's bearer token (and Impersonate-* headers) unchanged: RBAC, audit and
	// APF see the real caller. The proxy holds no credentials; a request without a bearer token gets 401.
	AuthPassthrough AuthMode = "passthrough"
	// AuthOwnIdentity sends every request with the proxy's own kubeconfig credentials. Loopback only; a request
	// that carries Authorization or Impersonate-* gets 400.
	AuthOwnIdentity AuthMode = "own-identity"
	// authInProcess is WrapTransport's mode: the caller's own transport adds the credentials.
	authInProcess AuthMode = "in-process"
)

// rejection is the proxy's own answer to a request it does not forward.
type rejection struct {
	code    int
	reason  string // rejected_total label
	message string
}

// NoBearerTokenMessage is the 401 message of passthrough mode.
const NoBearerTokenMessage = "capi-private proxy forwards bearer tokens only"

// authorize decides whether a request may be forwarded under mode. remoteAddr is the caller's address.
func authorize(mode AuthMode, h http.Header, remoteAddr string) *rejection {
	switch mode {
	case AuthPassthrough:
		v := h.Values("Authorization")
		if len(v) != 1 || !isBearer(v[0]) {
			return &rejection{http.StatusUnauthorized, RejectNoBearerToken, NoBearerTokenMessage}
		}
	case AuthOwnIdentity:
		if !loopback.Is(remoteAddr) {
			return &rejection{http.StatusForbidden, RejectNotLoopback, "capi-private proxy in own-identity mode serves loopback callers only"}
		}
		if len(h.Values("Authorization")) > 0 || hasImpersonation(h) {
			return &rejection{http.StatusBadRequest, RejectOwnIdentityCredentials,
				"capi-private proxy runs with its own identity: requests must not carry Authorization or Impersonate-* headers"}
		}
	}
	return nil
}

func isBearer(v string) bool {
	scheme, token, ok := strings.Cut(strings.TrimSpace(v), " ")
	return ok && strings.EqualFold(scheme, "bearer") && strings.TrimSpace(token) != ""
}

func hasImpersonation(h http.Header) bool {
	for k := range h {
		if strings.HasPrefix(k, "Impersonate-") {
			return true
		}
	}
	return false
}

// hopHeaders are connection-level headers a proxy never forwards (RFC 9110 §7.6.1).
var hopHeaders = []string{"Connection", "Proxy-Connection", "Keep-Alive", "Proxy-Authenticate", "Proxy-Authorization",
	"Te", "Trailer", "Transfer-Encoding", "Upgrade"}

// removeHopHeaders removes the hop-by-hop headers, including those the Connection header names.
func removeHopHeaders(h http.Header) {
	for _, v := range h.Values("Connection") {
		for _, f := range strings.Split(v, ",") {
			if f = textproto.TrimString(f); f != "" {
				h.Del(f)
			}
		}
	}
	for _, k := range hopHeaders {
		h.Del(k)
	}
}

// upstreamHeaders builds the headers sent to kube-apiserver from the client's: hop-by-hop headers, X-Remote-*
// (front-proxy identity headers a client could forge) and Accept-Encoding (Go's transport negotiates gzip and
// decompresses) are removed; Accept is forced to JSON where responses are translated; If-None-Match is mapped
// back on translated documents. Authorization and Impersonate-* pass unchanged (passthrough).
func upstreamHeaders(t *translate.Translator, in http.Header, kind translate.PathKind) (http.Header, translate.Forced) {
	h := in.Clone()
	removeHopHeaders(h)
	for k := range h {
		if strings.HasPrefix(k, "X-Remote-") {
			delete(h, k)
		}
	}
	h.Del("Accept-Encoding")
	forced := translate.ForcedNone
	if translatedKind(kind) {
		if a := h.Values("Accept"); len(a) > 0 {
			var v string
			v, forced = t.RequestAccept(strings.Join(a, ","))
			h.Set("Accept", v)
		}
	}
	if documentKind(kind) {
		if v := h.Values("If-None-Match"); len(v) > 0 {
			if nv := t.RequestIfNoneMatch(strings.Join(v, ",")); nv != "" {
				h.Set("If-None-Match", nv)
			} else {
				h.Del("If-None-Match")
			}
		}
	}
	return h, forced
}

// translatedKind: responses on these paths are translated (JSON only).
func translatedKind(k translate.PathKind) bool {
	return k != translate.PathOther && k != translate.PathStream
}

// documentKind: discovery and OpenAPI documents, whose ETags carry the mapping hash.
func documentKind(k translate.PathKind) bool {
	switch k {
	case translate.PathDiscoveryRoot, translate.PathDiscoveryGroup, translate.PathDiscoveryVersion,
		translate.PathOpenAPIIndex, translate.PathOpenAPIDocument, translate.PathOpenAPIV2:
		return true
	}
	return false
}

// wantsV2Protobuf reports whether a client's Accept header prefers the protobuf encoding of the OpenAPI v2
// document: its first media range is one of kube-openapi's protobuf types (client-go's discovery and older
// kubectl send nothing else).
func wantsV2Protobuf(accept string) bool {
	first, _, _ := strings.Cut(accept, ",")
	typ, _, _ := strings.Cut(first, ";")
	typ = strings.ToLower(strings.TrimSpace(typ))
	return typ == translate.OpenAPIV2Protobuf || typ == translate.OpenAPIV2ProtobufDeprecated
}

// isWatch: a watch request (legacy /watch/ path or ?watch=true|1).
func isWatch(p translate.Path, method, rawQuery string) bool {
	if p.Kind != translate.PathResource || method != http.MethodGet {
		return false
	}
	if p.Watch {
		return true
	}
	for rawQuery != "" {
		var kv string
		kv, rawQuery, _ = strings.Cut(rawQuery, "&")
		if k, v, _ := strings.Cut(kv, "="); k == "watch" {
			return v == "true" || v == "1"
		}
	}
	return false
}

// verb names a request like kube-apiserver's RequestInfo (lower case), with connect for streaming subresources
// and the HTTP method for everything else.
func verb(p translate.Path, method string, watch bool) string {
	if watch {
		return "watch"
	}
	if p.Kind == translate.PathStream {
		return "connect"
	}
	if p.Kind != translate.PathResource {
		switch method {
		case http.MethodGet, http.MethodHead, http.MethodPost, http.MethodPut, http.MethodPatch, http.MethodDelete, http.MethodOptions:
			return strings.ToLower(method)
		}
		return "other"
	}
	switch method {
	case http.MethodGet, http.MethodHead:
		if p.Name == "" {
			return "list"
		}
		return "get"
	case http.MethodPost:
		return "create"
	case http.MethodPut:
		return "update"
	case http.MethodPatch:
		return "patch"
	case http.MethodDelete:
		if p.Name == "" {
			return "deletecollection"
		}
		return "delete"
	}
	return "other"
}

// Label values for requests kube-apiserver did not serve.
const unknownLabel = "unknown"

// requestLabels returns the group and resource labels of a finished request. They are the client's (standard)
// names, kept only when kube-apiserver served the resource: any answer below 400, or an object-level 404/409/422
// (its Status names the object). Anything else (unknown resources, 403 on made-up names, the proxy's own
// rejections) is labelled "unknown", so clients cannot grow the label set.
func requestLabels(p translate.Path, code int, rejected bool, errBody []byte) (group, resource string) {
	if rejected {
		return unknownLabel, unknownLabel
	}
	switch {
	case code < 400:
	case code == http.StatusNotFound || code == http.StatusConflict || code == http.StatusUnprocessableEntity:
		if !bytes.Contains(errBody, []byte(`"details":{"name":`)) {
			return unknownLabel, unknownLabel
		}
	default:
		return unknownLabel, unknownLabel
	}
	resource = p.Resource
	if p.Subresource != "" && p.Kind == translate.PathResource {
		resource += "/" + p.Subresource
	}
	return p.Group, resource
}

// eventType returns the type of a watch frame as a bounded label value. kube-apiserver writes the type first;
// other encoders are looked up in the frame's first bytes.
func eventType(frame []byte) string {
	i := bytes.Index(frame, []byte(`"type":"`))
	if i < 0 || i > 64 {
		i = bytes.Index(frame, []byte(`"type": "`))
		if i < 0 || i > 64 {
			return "other"
		}
		i++
	}
	rest := frame[i+8:]
	for _, t := range []string{"ADDED", "MODIFIED", "DELETED", "BOOKMARK", "ERROR"} {
		if len(rest) > len(t) && string(rest[:len(t)]) == t && rest[len(t)] == '"' {
			return t
		}
	}
	return "other"
}
