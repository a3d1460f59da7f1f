// Package translate is capi-private's pure translation library: it renames the mapped API groups in everything
// that crosses the proxy — request paths, queries, headers and bodies (standard → private, escaped → standard)
// and response bodies, headers, watch events, discovery and OpenAPI (the exact inverse) — without network access
// or a Kubernetes client.
//
// The rule is structural and keyed on member names: values of apiVersion, apiGroup, apiGroups, CRD-rule resourceNames
// and a few `group` members are renamed; label keys, annotations, finalizers, selectors, managedFields[].fieldsV1,
// ConfigMap/Secret data, continue tokens and resourceVersions are never touched, and versions are never converted.
// Rewriting works on the original bytes: only the renamed string literals change, every other byte (key order,
// whitespace, numbers, escapes) is copied verbatim.
//
// Each unit (an object, a list item, a watch event) first goes through the fast path: if it contains none of the
// mapping's needles it is returned as the same slice, with no copy and no decode. Translation fails closed: every
// failure is an *Error whose Reason labels capi_private_proxy_translation_errors_total.
package translate

import (
	"bytes"
	"slices"
	"strings"

	"github.com/dcm-sp/acm-cluster-sp/internal/capiprivate/groups"
)

// Direction is the way a unit travels: requests map standard → private and escaped → standard; responses apply
// the exact inverse.
type Direction uint8

const (
	// DirectionRequest is client → kube-apiserver.
	DirectionRequest Direction = iota
	// DirectionResponse is kube-apiserver → client.
	DirectionResponse
)

// String is the `direction` metric label.
func (d Direction) String() string {
	if d == DirectionRequest {
		return "request"
	}
	return "response"
}

// Context is what the path tells about a unit. Build it with Path.Context.
type Context struct {
	// CRD: the unit is (or lists, or watches) CustomResourceDefinitions. CRDs are recognised by path because
	// their list items and metadata-only forms carry no kind of their own.
	CRD bool
}

// Result is the outcome of translating one unit.
type Result struct {
	// Body is the unit to forward. When Changed is false it is the input slice itself.
	Body []byte
	// Translated: the unit held a needle and was decoded (the slow path). False means the fast path copied it.
	Translated bool
	// Changed: Body differs from the input.
	Changed bool
	// Drop: the unit must not reach the client at all (a platform CRD of a mapped group, or its watch event).
	Drop bool
	// Dropped counts what was removed inside the unit: platform CRDs from a list or Table, the platform's entries
	// of mapped groups from a discovery document, the platform's documents from the OpenAPI index.
	Dropped int
}

// Translator translates between the client's view and what kube-apiserver stores, for one groups.Mapping. It is
// immutable and safe for concurrent use.
type Translator struct {
	m *groups.Mapping

	respNeedles  [][]byte // a response unit without these passes untouched
	reqNeedles   [][]byte // a JSON request body without these passes untouched
	groupNeedles [][]byte // a request body in a binary encoding (protobuf) without these passes untouched

	// group renames per direction, for byte-keyed lookups without allocation
	groupTo [2]map[string]string
	// standard groups (platform CRDs of these are dropped from responses)
	std map[string]bool

	messages *strings.Replacer // private → standard tokens in free text, longest first
	privates []string

	// OpenAPI names: reversed groups (util.ToRESTFriendlyName) and operation-ID tokens.
	openAPINames [2]map[string]string
	openAPIStd   map[string]bool // reversed standard groups: the platform's schema names
	operationIDs [2]*strings.Replacer
	openAPITags  [2]map[string]string
}

// New builds a Translator for m.
func New(m *groups.Mapping) *Translator {
	n := m.Needles()
	t := &Translator{
		m:            m,
		respNeedles:  n.Response,
		groupNeedles: n.Request,
		// A JSON \u escape can spell a group without containing its bytes; such bodies take the slow path.
		reqNeedles:   append(slices.Clone(n.Request), []byte(`\u`)),
		groupTo:      [2]map[string]string{{}, {}},
		std:          map[string]bool{},
		openAPINames: [2]map[string]string{{}, {}},
		openAPIStd:   map[string]bool{},
		openAPITags:  [2]map[string]string{{}, {}},
	}
	var msgPairs, opReq, opResp []string
	rows := m.Rows()
	// Longest private group first, so a group that ends in another is replaced whole.
	slices.SortFunc(rows, func(a, b groups.Row) int { return len(b.Private) - len(a.Private) })
	for _, r := range rows {
		esc, _ := m.Escape(r.Standard)
		t.groupTo[DirectionRequest][r.Standard] = r.Private
		t.groupTo[DirectionRequest][esc] = r.Standard
		t.groupTo[DirectionResponse][r.Private] = r.Standard
		t.groupTo[DirectionResponse][r.Standard] = esc
		t.std[r.Standard] = true
		msgPairs = append(msgPairs, r.Private, r.Standard)
		t.privates = append(t.privates, r.Private)

		rs, rp, re := restFriendly(r.Standard), restFriendly(r.Private), restFriendly(esc)
		t.openAPINames[DirectionRequest][rs] = rp
		t.openAPINames[DirectionRequest][re] = rs
		t.openAPINames[DirectionResponse][rp] = rs
		t.openAPINames[DirectionResponse][rs] = re
		t.openAPIStd[rs] = true

		os, op := operationID(r.Standard, true), operationID(r.Private, true)
		opReq = append(opReq, os, op)
		opResp = append(opResp, op, os)
		ts, tp := operationID(r.Standard, false), operationID(r.Private, false)
		t.openAPITags[DirectionRequest][ts] = tp
		t.openAPITags[DirectionResponse][tp] = ts
	}
	t.messages = strings.NewReplacer(msgPairs...)
	t.operationIDs = [2]*strings.Replacer{strings.NewReplacer(opReq...), strings.NewReplacer(opResp...)}
	return t
}

// Mapping returns the table t translates with.
func (t *Translator) Mapping() *groups.Mapping { return t.m }

// needsResponse is the response fast-path check.
func (t *Translator) needsResponse(b []byte) bool { return containsAny(b, t.respNeedles) }

// needsRequest is the request fast-path check.
func (t *Translator) needsRequest(b []byte) bool { return containsAny(b, t.reqNeedles) }

func containsAny(b []byte, needles [][]byte) bool {
	for _, n := range needles {
		if bytes.Contains(b, n) {
			return true
		}
	}
	return false
}

// NeedsResponse reports whether a response unit holds any needle, i.e. whether ResponseObject would decode it.
func (t *Translator) NeedsResponse(unit []byte) bool { return t.needsResponse(unit) }

// NeedsRequest reports whether a JSON request body holds any needle.
func (t *Translator) NeedsRequest(body []byte) bool { return t.needsRequest(body) }

// RequestObject translates a JSON object body: create/update bodies, JSON merge patches and strategic merge
// patches (their directives carry no groups of their own). A body without needles is returned as is.
func (t *Translator) RequestObject(body []byte, ctx Context) (Result, error) {
	if !t.needsRequest(body) {
		return Result{Body: body}, nil
	}
	return t.rewrite(DirectionRequest, body, sTop, ctx)
}

// ResponseObject translates a whole JSON response body: an object, a list (items[]), PartialObjectMetadata[List],
// a Table (rows[].object; for CRDs also cells[0], dropping platform rows), or a Status (details.group, group
// tokens in messages). Platform CRDs are dropped from lists; a platform CRD on its own yields Drop. Bodies too
// large to buffer go through ResponseStream instead.
func (t *Translator) ResponseObject(body []byte, ctx Context) (Result, error) {
	if !t.needsResponse(body) {
		return Result{Body: body}, nil
	}
	return t.rewrite(DirectionResponse, body, sTop, ctx)
}

// ResponseMessage renames private group tokens in free text (Status messages, Warning texts), longest first.
// Standard tokens are left alone: in free text they are label keys far more often than references.
func (t *Translator) ResponseMessage(s string) string {
	for _, p := range t.privates {
		if strings.Contains(s, p) {
			return t.messages.Replace(s)
		}
	}
	return s
}
