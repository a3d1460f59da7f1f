package translate

import (
	"bytes"
	"encoding/json"
	"io"
	"os"
	"path/filepath"
	"reflect"
	"sort"
	"strconv"
	"strings"
	"testing"

	"github.com/dcm-sp/acm-cluster-sp/internal/capiprivate/groups"
	"github.com/dcm-sp/acm-cluster-sp/internal/capiprivate/translate/internal/fixtures"
)

// seeds are the fuzz corpora's starting points: every rule case, the fixture objects in both forms, every
// recorded upstream body under 64 KiB and a few framing traps.
func seeds(f *testing.F, add func(b []byte)) {
	for _, c := range bijectiveCases {
		add([]byte(c.view))
		add([]byte(c.stored))
	}
	for _, n := range []fixtures.Naming{fixtures.View(groups.Default), fixtures.Stored(groups.Default)} {
		for _, o := range fixtures.Objects(n, "ns", "platform") {
			add(o.JSON())
		}
	}
	files, _ := filepath.Glob("testdata/upstream/*.json")
	for _, file := range files {
		if b, err := os.ReadFile(file); err == nil && len(b) < 64<<10 && !strings.HasSuffix(file, "headers.json") {
			add(b)
		}
	}
	for _, s := range []string{
		`{"items":[{"s":"}{][\"\\\"","apiVersion":"cluster.hypershift.openshift.io/v1beta2","t":"\\"},{"u":"\u007d"}]}`,
		`{"kind":"Table","rows":[{"cells":["a.cluster.x-k8s.io"],"object":{"apiVersion":"cluster.x-k8s.io/v1"}}]}`,
		`{"kind":"Status","message":"cluster.hypershift.openshift.io","details":{"group":"cluster.x-k8s.io","name":"a.cluster.x-k8s.io"}}`,
		`{"rules":[{"apiGroups":["*"],"resources":["customresourcedefinitions/status"],"resourceNames":["a.cluster.x-k8s.io.platform.invalid"]}]}`,
		`{"apiVersion":"cluster\u002ex-k8s.io/v1","metadata":{"labels":{"apiVersion":"cluster.x-k8s.io/v1"}}}`,
		`[{"apiVersion":"cluster.x-k8s.io/v1"}, 1, "x", null, true]`,
		`{"a":{"b":{"c":[[[{"apiGroup":"ipam.cluster.x-k8s.io"}]]]}}}`,
	} {
		add([]byte(s))
	}
}

// privateOrEscaped reports whether any decoded string or key of v contains a private or an escape group, i.e.
// whether v leaves the client's view (privateOrEscaped with escaped=false checks private groups only).
func mentions(v any, private, escaped bool) bool {
	found := false
	var walk func(any)
	check := func(s string) {
		for _, r := range groups.Default.Rows() {
			if private && strings.Contains(s, r.Private) || escaped && strings.Contains(s, groups.EscapeSuffix) {
				found = true
			}
		}
	}
	walk = func(v any) {
		switch v := v.(type) {
		case map[string]any:
			for k, x := range v {
				check(k)
				walk(x)
			}
		case []any:
			for _, x := range v {
				walk(x)
			}
		case string:
			check(v)
		}
	}
	walk(v)
	return found
}

// escapesPlainBytes reports whether b holds a JSON escape of a character encoding/json writes plainly.
func escapesPlainBytes(b []byte) bool {
	for i := 0; i+1 < len(b); i++ {
		if b[i] != '\\' {
			continue
		}
		switch c := b[i+1]; {
		case c == '/':
			return true
		case c == 'u' && i+5 < len(b):
			if r, err := strconv.ParseUint(string(b[i+2:i+6]), 16, 32); err == nil && r >= 0x20 && r < 0x7f &&
				r != '<' && r != '>' && r != '&' && r != '"' && r != '\\' {
				return true
			}
		}
		i++
	}
	return false
}

func decodeAny(b []byte) (any, bool) {
	d := json.NewDecoder(bytes.NewReader(b))
	d.UseNumber()
	var v any
	if err := d.Decode(&v); err != nil {
		return nil, false
	}
	if _, err := d.Token(); err == nil {
		return nil, false // trailing data
	}
	return v, true
}

// FuzzRoundTrip: for any object x in the client's view, Resp(Req(x)) == x; for any stored object y,
// Req(Resp(y)) == y (structural equality). Invalid input must fail closed, never come back translated.
func FuzzRoundTrip(f *testing.F) {
	seeds(f, func(b []byte) { f.Add(b, false); f.Add(b, true) })
	f.Fuzz(func(t *testing.T, x []byte, crd bool) {
		ctx := Context{CRD: crd}
		valid := json.Valid(x)
		if validJSON(x) != valid {
			t.Fatalf("validJSON = %v, encoding/json says %v", !valid, valid)
		}
		req, reqErr := tr.RequestObject(x, ctx)
		resp, respErr := tr.ResponseObject(x, ctx)
		for _, r := range []struct {
			res Result
			err error
		}{{req, reqErr}, {resp, respErr}} {
			if r.err == nil && r.res.Translated && !r.res.Drop && !json.Valid(r.res.Body) {
				t.Fatalf("translated output is not JSON: %q", r.res.Body)
			}
			if r.err != nil && valid && ReasonOf(r.err) != ReasonTooDeep {
				t.Fatalf("valid JSON rejected: %v", r.err)
			}
			if r.err == nil && r.res.Translated && !valid {
				t.Fatalf("invalid JSON accepted: %q", x)
			}
		}
		v, ok := decodeAny(x)
		if !ok || reqErr != nil || respErr != nil {
			return
		}
		// The view: no private group; in CRD responses an escaped root name would be dropped.
		if !mentions(v, true, crd) {
			back, err := tr.ResponseObject(req.Body, ctx)
			if err != nil {
				t.Fatalf("ResponseObject(RequestObject(x)): %v", err)
			}
			if !back.Drop {
				got, _ := decodeAny(back.Body)
				if !reflect.DeepEqual(got, v) {
					t.Fatalf("Resp(Req(x)) != x\n   x %s\n req %s\nback %s", x, req.Body, back.Body)
				}
			}
		}
		// Stored: no escape group, and (for CRDs) no platform CRD, which responses drop. kube-apiserver encodes
		// with encoding/json, which never escapes letters, digits, '.', '/' or '-', so stored bytes spell groups
		// plainly (the response needles rely on it); escaped input belongs to the request side only.
		var dropped StreamStats
		if crd {
			dropped, _ = tr.ResponseStream(io.Discard, bytes.NewReader(x), ctx, 0)
		}
		if !mentions(v, false, true) && !resp.Drop && dropped.Dropped == 0 && !escapesPlainBytes(x) {
			back, err := tr.RequestObject(resp.Body, ctx)
			if err != nil {
				t.Fatalf("RequestObject(ResponseObject(x)): %v", err)
			}
			got, _ := decodeAny(back.Body)
			// Status messages are free text, translated one way only.
			if !reflect.DeepEqual(got, v) && !bytes.Contains(x, []byte("Status")) {
				t.Fatalf("Req(Resp(y)) != y\n   y %s\nresp %s\nback %s", x, resp.Body, back.Body)
			}
		}
	})
}

// opaqueMembers returns, sorted, the exact bytes of every labels, annotations and finalizers member anywhere in
// b (json.RawMessage keeps bytes verbatim), with its path.
func opaqueMembers(b []byte) ([]string, bool) {
	var out []string
	var walk func(path string, raw json.RawMessage) bool
	walk = func(path string, raw json.RawMessage) bool {
		raw = bytes.TrimSpace(raw)
		if len(raw) == 0 {
			return true
		}
		switch raw[0] {
		case '{':
			var m map[string]json.RawMessage
			if err := json.Unmarshal(raw, &m); err != nil {
				return false
			}
			for k, v := range m {
				if k == "labels" || k == "annotations" || k == "finalizers" {
					out = append(out, path+"/"+k+"="+string(v))
				}
				if !walk(path+"/"+k, v) {
					return false
				}
			}
		case '[':
			var a []json.RawMessage
			if err := json.Unmarshal(raw, &a); err != nil {
				return false
			}
			for _, v := range a {
				if !walk(path+"/*", v) {
					return false
				}
			}
		}
		return true
	}
	if !walk("", b) {
		return nil, false
	}
	sort.Strings(out)
	return out, true
}

// FuzzOpaque: no byte of a label, annotation or finalizer ever changes, in either direction, whole or streamed.
func FuzzOpaque(f *testing.F) {
	seeds(f, func(b []byte) { f.Add(b) })
	f.Fuzz(func(t *testing.T, x []byte) {
		want, ok := opaqueMembers(x)
		if !ok || !json.Valid(x) {
			return
		}
		check := func(name string, out []byte) {
			got, ok := opaqueMembers(out)
			if !ok {
				t.Fatalf("%s: output is not JSON: %q", name, out)
			}
			if !reflect.DeepEqual(got, want) {
				t.Fatalf("%s changed opaque bytes:\n in %q\nout %q", name, want, got)
			}
		}
		if res, err := tr.RequestObject(x, Context{}); err == nil {
			check("RequestObject", res.Body)
		}
		if res, err := tr.ResponseObject(x, Context{}); err == nil {
			check("ResponseObject", res.Body)
		}
		var buf bytes.Buffer
		if st, err := tr.ResponseStream(&buf, bytes.NewReader(x), Context{}, 0); err == nil && !st.Drop {
			check("ResponseStream", buf.Bytes())
		}
		ev := append(append([]byte(`{"type":"MODIFIED","object":`), x...), '}')
		if res, err := tr.ResponseWatchEvent(ev, Context{}); err == nil {
			got, ok := opaqueMembers(res.Body)
			w, _ := opaqueMembers(ev)
			if !ok || !reflect.DeepEqual(got, w) {
				t.Fatalf("ResponseWatchEvent changed opaque bytes:\n in %q\nout %q", w, got)
			}
		}
	})
}

// FuzzFramer: the streaming framer never panics, accepts every valid JSON body (strings full of braces and
// quotes included) and agrees with the whole-body translation; the watch frame reader never panics either.
func FuzzFramer(f *testing.F) {
	seeds(f, func(b []byte) { f.Add(b) })
	f.Fuzz(func(t *testing.T, x []byte) {
		for _, crd := range []bool{false, true} {
			ctx := Context{CRD: crd}
			var buf bytes.Buffer
			st, err := tr.ResponseStream(&buf, bytes.NewReader(x), ctx, 0)
			if !json.Valid(x) {
				continue
			}
			if err != nil {
				if ReasonOf(err) == ReasonTooDeep {
					continue
				}
				t.Fatalf("valid JSON rejected by the framer: %v\n%q", err, x)
			}
			whole, err := tr.ResponseObject(x, ctx)
			if err != nil {
				t.Fatalf("ResponseObject: %v", err)
			}
			if st.Drop != whole.Drop {
				t.Fatalf("Drop: stream %v, whole %v", st.Drop, whole.Drop)
			}
			if st.Drop {
				continue
			}
			a, okA := decodeAny(buf.Bytes())
			b, okB := decodeAny(whole.Body)
			if !okA || !okB || !reflect.DeepEqual(a, b) {
				t.Fatalf("stream and whole differ:\nstream %q\n whole %q", buf.Bytes(), whole.Body)
			}
		}
		fr := NewFrameReader(bytes.NewReader(x), 1<<16)
		for i := 0; i < 1000; i++ {
			frame, err := fr.Next()
			if err != nil {
				break
			}
			_, _ = tr.ResponseWatchEvent(frame, Context{})
		}
	})
}
