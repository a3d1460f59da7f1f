package wire

import (
	"testing"

	"github.com/dcm-sp/acm-cluster-sp/internal/sp/clusters"
)

// Any body is answered with a spec or a 400/422 naming the cause: never a panic, never an internal error, and an
// accepted spec is accepted again from its own canonical JSON (what the SP stores and replays).
func FuzzParseSpec(f *testing.F) {
	for _, seed := range []string{designKubeVirt, designBareMetal, dcmForm, `{"spec":{}}`, `[1]`, `{"nodes":{"worker":{},"workers":{}}}`,
		`{"version":"4.17","metadata":{"name":"c1"},"nodes":{"workers":{"count":3.0,"memory":"9e9999999"}}}`} {
		f.Add([]byte(seed))
	}
	f.Fuzz(func(t *testing.T, body []byte) {
		s, err := ParseSpec(body, sc)
		if err != nil {
			if k := clusters.KindOf(err); k != clusters.KindInvalid && k != clusters.KindUnprocessable {
				t.Fatalf("%q: %v (kind %v)", body, err, k)
			}
			return
		}
		again, err := ParseSpec([]byte(s.JSON), sc)
		if err != nil || again.JSON != s.JSON {
			t.Fatalf("%q normalized to %s, which reads back as %v %v", body, s.JSON, again, err)
		}
	})
}

// Any patch body on a stored spec is decoded or refused as a 400: never a panic, never an internal error.
func FuzzDecodePatch(f *testing.F) {
	const stored = `{"metadata":{"name":"c1"},"nodes":{"workers":{"count":3}},"service_type":"cluster","version":"4.17"}`
	for _, seed := range []string{`{"spec":{}}`, `{"spec":{"nodes":{"workers":{"count":null}}}}`, `{"spec":`, `null`, `{"spec":{"a":{"b":{"c":null}}}}`} {
		f.Add([]byte(seed))
	}
	f.Fuzz(func(t *testing.T, body []byte) {
		if _, err := DecodePatch(body, stored); err != nil && clusters.KindOf(err) != clusters.KindInvalid {
			t.Fatalf("%q: %v", body, err)
		}
	})
}
