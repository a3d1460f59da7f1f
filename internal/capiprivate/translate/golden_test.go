package translate

import (
	"bytes"
	"encoding/json"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"testing"

	"github.com/dcm-sp/acm-cluster-sp/internal/capiprivate/groups"
	"github.com/dcm-sp/acm-cluster-sp/internal/capiprivate/translate/internal/fixtures"
	"github.com/dcm-sp/acm-cluster-sp/internal/devtest/golden"
)

// Objects built from the upstream CAPI v1.13.4 Go types: the client's view translates to exactly what is stored,
// byte for byte, and back.
func TestFixturesViewToStored(t *testing.T) {
	view := fixtures.Objects(fixtures.View(groups.Default), "clusters-hc1", "openshift-cluster-api")
	stored := fixtures.Objects(fixtures.Stored(groups.Default), "clusters-hc1", "openshift-cluster-api")
	for i, v := range view {
		s := stored[i]
		t.Run(v.Name, func(t *testing.T) {
			p, err := tr.RequestPath(v.Path)
			if err != nil || p.Hidden {
				t.Fatalf("RequestPath(%s) = %+v, %v", v.Path, p, err)
			}
			if want, _ := tr.RequestPath(v.Path); p.Upstream != want.Upstream {
				t.Fatal("RequestPath is not deterministic")
			}
			if p.Upstream != s.Path {
				t.Errorf("upstream path %s, want %s", p.Upstream, s.Path)
			}
			req, err := tr.RequestObject(v.JSON(), p.Context())
			if err != nil {
				t.Fatal(err)
			}
			if !bytes.Equal(req.Body, s.JSON()) {
				t.Errorf("RequestObject:\n got %s\nwant %s", req.Body, s.JSON())
			}
			resp, err := tr.ResponseObject(s.JSON(), p.Context())
			if err != nil {
				t.Fatal(err)
			}
			if !bytes.Equal(resp.Body, v.JSON()) {
				t.Errorf("ResponseObject:\n got %s\nwant %s", resp.Body, v.JSON())
			}
			golden.Assert(t, "golden/request-"+v.Name+".json", append(indent(t, req.Body), '\n'))
		})
	}
}

// upstreamHeaders is testdata/upstream/headers.json: per recording, the request line and kept response headers.
func upstreamHeaders(t *testing.T) map[string]map[string][]string {
	t.Helper()
	b, err := os.ReadFile("testdata/upstream/headers.json")
	if err != nil {
		t.Fatal(err)
	}
	var h map[string]map[string][]string
	if err := json.Unmarshal(b, &h); err != nil {
		t.Fatal(err)
	}
	return h
}

// clientPath is the path a client of the proxy used for a recorded upstream request, and its parse.
func clientPath(t *testing.T, requestLine string) Path {
	t.Helper()
	_, target, _ := strings.Cut(requestLine, " ")
	upstream, _, _ := strings.Cut(target, "?")
	p, err := tr.RequestPath(tr.ResponsePath(upstream))
	if err != nil {
		t.Fatalf("%s: %+v %v", requestLine, p, err)
	}
	if p.Hidden {
		return p // a platform object: no client path reaches it
	}
	if p.Upstream != upstream {
		t.Fatalf("%s: view path %s maps back to %s", requestLine, tr.ResponsePath(upstream), p.Upstream)
	}
	return p
}

// Every response recorded from kube-apiserver 1.34.10 goes through the function its path selects; the results
// are golden files, and none of them shows a private group outside opaque members.
func TestUpstreamResponsesGolden(t *testing.T) {
	hdrs := upstreamHeaders(t)
	names := make([]string, 0, len(hdrs))
	for n := range hdrs {
		names = append(names, n)
	}
	sort.Strings(names)
	translatedHeaders := map[string]map[string][]string{}
	for _, name := range names {
		h := hdrs[name]
		t.Run(name, func(t *testing.T) {
			p := clientPath(t, h["Request"][0])
			if p.Hidden {
				// The platform's CRD: only a list or watch could carry it, and there it is dropped.
				body, _ := os.ReadFile("testdata/upstream/" + name + ".json")
				res, err := tr.ResponseObject(body, p.Context())
				if err != nil || !res.Drop || res.Body != nil {
					t.Fatalf("platform object not dropped: %+v %v", res, err)
				}
				return
			}
			file := "testdata/upstream/" + name + ".json"
			if _, err := os.Stat(file); err != nil {
				file = "testdata/upstream/" + name + ".jsonl"
			}
			body, err := os.ReadFile(file)
			if err != nil {
				t.Fatal(err)
			}
			var out []byte
			switch {
			case strings.HasSuffix(file, ".jsonl"):
				out = translateWatch(t, body, p.Context())
			case p.Kind == PathDiscoveryRoot || p.Kind == PathDiscoveryGroup || p.Kind == PathDiscoveryVersion:
				res, err := tr.ResponseDiscovery(body)
				if err != nil {
					t.Fatal(err)
				}
				out = res.Body
			case p.Kind == PathOpenAPIIndex:
				res, err := tr.ResponseOpenAPIIndex(body)
				if err != nil {
					t.Fatal(err)
				}
				out = res.Body
			case p.Kind == PathOpenAPIDocument:
				res, err := tr.ResponseOpenAPIDocument(body)
				if err != nil {
					t.Fatal(err)
				}
				out = res.Body
			default:
				out = translateResource(t, body, p.Context())
			}
			assertNoPrivateGroups(t, out)
			th := map[string][]string{}
			for k, vs := range h {
				for _, v := range vs {
					switch k {
					case "Warning":
						v = tr.ResponseWarning(v)
					case "Etag":
						v = tr.ResponseETag(v)
					}
					th[k] = append(th[k], v)
				}
			}
			translatedHeaders[name] = th
			if strings.HasSuffix(file, ".jsonl") {
				golden.Assert(t, "golden/"+name+".jsonl", out)
			} else {
				golden.Assert(t, "golden/"+name+".json", append(indent(t, out), '\n'))
			}
		})
	}
	hb, _ := json.MarshalIndent(translatedHeaders, "", "  ")
	golden.Assert(t, "golden/headers.json", append(hb, '\n'))
}

// translateResource runs a resource body through ResponseObject and ResponseStream (which must agree byte for
// byte), and checks that requests map the result back to what kube-apiserver sent.
func translateResource(t *testing.T, body []byte, ctx Context) []byte {
	t.Helper()
	res, err := tr.ResponseObject(body, ctx)
	if err != nil {
		t.Fatal(err)
	}
	var streamed bytes.Buffer
	stats, err := tr.ResponseStream(&streamed, bytes.NewReader(body), ctx, 0)
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(streamed.Bytes(), res.Body) {
		t.Errorf("ResponseStream and ResponseObject differ:\nstream %s\nobject %s", streamed.Bytes(), res.Body)
	}
	if stats.Dropped == 0 && !bytes.Contains(body, []byte(`"kind":"Status"`)) {
		back, err := tr.RequestObject(res.Body, ctx)
		if err != nil {
			t.Fatal(err)
		}
		if !bytes.Equal(back.Body, body) {
			t.Errorf("RequestObject(ResponseObject(x)) != x:\n got %s\nwant %s", back.Body, body)
		}
	}
	return res.Body
}

func translateWatch(t *testing.T, body []byte, ctx Context) []byte {
	t.Helper()
	fr := NewFrameReader(bytes.NewReader(body), 0)
	var out bytes.Buffer
	for {
		f, err := fr.Next()
		if err != nil {
			break
		}
		res, err := tr.ResponseWatchEvent(f, ctx)
		if err != nil {
			t.Fatal(err)
		}
		if res.Drop {
			out.WriteString("# dropped\n")
			continue
		}
		out.Write(res.Body)
		out.WriteByte('\n')
	}
	return out.Bytes()
}

// assertNoPrivateGroups decodes every JSON document in b and fails if a private group (or its OpenAPI name)
// appears in any key or string outside the opaque members.
func assertNoPrivateGroups(t *testing.T, b []byte) {
	t.Helper()
	dec := json.NewDecoder(bytes.NewReader(b))
	for dec.More() {
		var v any
		if err := dec.Decode(&v); err != nil {
			// watch goldens mark dropped events with a comment line
			if rest := b[dec.InputOffset():]; bytes.HasPrefix(bytes.TrimSpace(rest), []byte("#")) {
				_, after, _ := bytes.Cut(rest, []byte("\n"))
				assertNoPrivateGroups(t, after)
				return
			}
			t.Fatalf("output is not JSON: %v", err)
		}
		walkStrings(v, "", func(path, s string) {
			for _, r := range groups.Default.Rows() {
				if strings.Contains(s, r.Private) || strings.Contains(s, restFriendly(r.Private)) {
					t.Errorf("private group at %s: %.200s", path, s)
				}
			}
		})
	}
}

// opaqueKeys are never translated, so they may hold anything.
var opaqueKeys = map[string]bool{"labels": true, "annotations": true, "finalizers": true, "fieldsV1": true, "data": true}

func walkStrings(v any, path string, f func(path, s string)) {
	switch v := v.(type) {
	case map[string]any:
		for k, x := range v {
			if opaqueKeys[k] {
				continue
			}
			f(path+"/"+k+" (key)", k)
			walkStrings(x, path+"/"+k, f)
		}
	case []any:
		for _, x := range v {
			walkStrings(x, path+"/*", f)
		}
	case string:
		f(path, v)
	}
}

func indent(t *testing.T, b []byte) []byte {
	t.Helper()
	var out bytes.Buffer
	if err := json.Indent(&out, bytes.TrimSpace(b), "", "  "); err != nil {
		t.Fatalf("indent: %v", err)
	}
	return out.Bytes()
}

func decode(t *testing.T, b []byte) any {
	t.Helper()
	d := json.NewDecoder(bytes.NewReader(b))
	d.UseNumber()
	var v any
	if err := d.Decode(&v); err != nil {
		t.Fatalf("decode: %v", err)
	}
	return v
}

func TestGoldenDirIsComplete(t *testing.T) {
	// Every golden file belongs to a test: a stale one means a fixture was renamed without -update.
	hdrs := upstreamHeaders(t)
	view := fixtures.Objects(fixtures.View(groups.Default), "clusters-hc1", "openshift-cluster-api")
	want := map[string]bool{"headers.json": true}
	for n := range hdrs {
		want[n+".json"], want[n+".jsonl"] = true, true
	}
	for _, v := range view {
		want["request-"+v.Name+".json"] = true
	}
	files, _ := filepath.Glob("testdata/golden/*")
	for _, f := range files {
		if !want[filepath.Base(f)] {
			t.Errorf("stale golden file %s", f)
		}
	}
}
