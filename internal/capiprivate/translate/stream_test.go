package translate

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"reflect"
	"runtime"
	"strings"
	"testing"
	"testing/iotest"
)

// readers yields the input through several chunkings, so the framer meets every boundary.
func readers(b []byte) map[string]io.Reader {
	return map[string]io.Reader{
		"whole":    bytes.NewReader(b),
		"one-byte": iotest.OneByteReader(bytes.NewReader(b)),
		"half":     iotest.HalfReader(bytes.NewReader(b)),
		"data-err": iotest.DataErrReader(bytes.NewReader(b)),
	}
}

func TestResponseStreamFraming(t *testing.T) {
	cases := []struct {
		name     string
		ctx      Context
		in, want string
		stats    StreamStats
	}{
		{name: "list", in: `{"kind":"MachineList","apiVersion":"cluster.hypershift.openshift.io/v1beta2","metadata":{"resourceVersion":"5"},"items":[{"apiVersion":"cluster.hypershift.openshift.io/v1beta2","kind":"Machine"},{"apiVersion":"v1","kind":"Plain"}]}`,
			want:  `{"kind":"MachineList","apiVersion":"cluster.x-k8s.io/v1beta2","metadata":{"resourceVersion":"5"},"items":[{"apiVersion":"cluster.x-k8s.io/v1beta2","kind":"Machine"},{"apiVersion":"v1","kind":"Plain"}]}` + "\n",
			stats: StreamStats{Items: 2, Translated: 2}},
		{name: "items first, envelope after (no key order)", in: `{"items":[{"apiVersion":"cluster.hypershift.openshift.io/v1beta2"}],"apiVersion":"cluster.hypershift.openshift.io/v1beta2","kind":"MachineList"}`,
			want:  `{"items":[{"apiVersion":"cluster.x-k8s.io/v1beta2"}],"apiVersion":"cluster.x-k8s.io/v1beta2","kind":"MachineList"}` + "\n",
			stats: StreamStats{Items: 1, Translated: 2}},
		{name: "braces, brackets and quotes inside strings",
			in:    `{"items":[{"s":"}{][\"\\\"","apiVersion":"cluster.hypershift.openshift.io/v1beta2","t":"\\"},{"u":"\u007d"}],"kind":"L"}`,
			want:  `{"items":[{"s":"}{][\"\\\"","apiVersion":"cluster.x-k8s.io/v1beta2","t":"\\"},{"u":"\u007d"}],"kind":"L"}` + "\n",
			stats: StreamStats{Items: 2, Translated: 1}},
		{name: "whitespace between tokens", in: " {\n \"kind\" : \"List\" ,\n \"items\" : [ {\"apiVersion\": \"cluster.hypershift.openshift.io/v1beta2\"} ,\n 1 , \"s\" , null ] } \n",
			want:  `{"kind":"List","items":[{"apiVersion": "cluster.x-k8s.io/v1beta2"},1,"s",null]}` + "\n",
			stats: StreamStats{Items: 4, Translated: 1}},
		{name: "empty list", in: `{"kind":"List","items":[]}`, want: `{"kind":"List","items":[]}` + "\n"},
		{name: "null items", in: `{"kind":"List","items":null}`, want: `{"kind":"List","items":null}` + "\n"},
		{name: "not a list: one unit", in: `{"apiVersion":"cluster.hypershift.openshift.io/v1beta2","kind":"Machine"}`,
			want: `{"apiVersion":"cluster.x-k8s.io/v1beta2","kind":"Machine"}` + "\n", stats: StreamStats{Translated: 1}},
		{name: "empty object", in: `{}`, want: "{}\n"},
		{name: "CRD list drops platform items", ctx: Context{CRD: true},
			in:    `{"kind":"CustomResourceDefinitionList","items":[{"metadata":{"name":"machines.cluster.x-k8s.io"}},{"metadata":{"name":"machines.cluster.hypershift.openshift.io"}},{"metadata":{"name":"ipaddresses.ipam.cluster.x-k8s.io"}}]}`,
			want:  `{"kind":"CustomResourceDefinitionList","items":[{"metadata":{"name":"machines.cluster.x-k8s.io"}}]}` + "\n",
			stats: StreamStats{Items: 3, Translated: 3, Dropped: 2}},
		{name: "Table rows", ctx: Context{CRD: true},
			in:    `{"kind":"Table","columnDefinitions":[],"rows":[{"cells":["machines.cluster.x-k8s.io"]},{"cells":["machines.cluster.hypershift.openshift.io"]}]}`,
			want:  `{"kind":"Table","columnDefinitions":[],"rows":[{"cells":["machines.cluster.x-k8s.io"]}]}` + "\n",
			stats: StreamStats{Items: 2, Translated: 2, Dropped: 1}},
		{name: "rows of something else are not streamed", in: `{"rows":[{"cells":["machines.cluster.hypershift.openshift.io"]}],"kind":"NotATable"}`,
			want: `{"rows":[{"cells":["machines.cluster.hypershift.openshift.io"]}],"kind":"NotATable"}` + "\n", stats: StreamStats{Translated: 1}},
		{name: "a single platform CRD", ctx: Context{CRD: true}, in: `{"metadata":{"name":"machines.cluster.x-k8s.io"}}`,
			want: "", stats: StreamStats{Translated: 1, Drop: true}},
	}
	for _, c := range cases {
		for rname, r := range readers([]byte(c.in)) {
			t.Run(c.name+"/"+rname, func(t *testing.T) {
				var out bytes.Buffer
				st, err := tr.ResponseStream(&out, r, c.ctx, 0)
				if err != nil {
					t.Fatal(err)
				}
				if out.String() != c.want {
					t.Errorf("\n got %q\nwant %q", out.String(), c.want)
				}
				if st != c.stats {
					t.Errorf("stats %+v, want %+v", st, c.stats)
				}
			})
		}
	}
}

func TestResponseStreamFailClosed(t *testing.T) {
	cases := []struct {
		name, in, reason string
		max              int
	}{
		{"truncated item", `{"items":[{"apiVersion":"cluster.hypershift.openshift.io/v1beta2"`, ReasonInvalidJSON, 0},
		{"truncated envelope", `{"kind":"List","apiVersion":`, ReasonInvalidJSON, 0},
		{"missing comma", `{"items":[{} {}]}`, ReasonInvalidJSON, 0},
		{"missing colon", `{"items" [{}]}`, ReasonInvalidJSON, 0},
		{"bad item", `{"items":[{"apiVersion":"cluster.hypershift.openshift.io/v1beta2",}]}`, ReasonInvalidJSON, 0},
		{"trailing data", `{"items":[]} {}`, ReasonInvalidJSON, 0},
		{"unterminated string", `{"items":["cluster.hypershift.openshift.io`, ReasonInvalidJSON, 0},
		{"item over the cap", `{"items":[{"apiVersion":"` + strings.Repeat("x", 100) + `"}]}`, ReasonTooLarge, 64},
		{"envelope over the cap", `{"metadata":{"a":"` + strings.Repeat("x", 100) + `"},"items":[]}`, ReasonTooLarge, 64},
		{"empty body", ``, ReasonInvalidJSON, 0},
		{"missing item", `{"items":[,{}]}`, ReasonInvalidJSON, 0},
		{"missing value", `{"kind":,"items":[]}`, ReasonInvalidJSON, 0},
		{"bad scalar item", `{"items":[tru]}`, ReasonInvalidJSON, 0},
		{"lone comma", `,`, ReasonInvalidJSON, 0},
		{"not JSON", `<html>cluster.hypershift.openshift.io</html>`, ReasonInvalidJSON, 0},
	}
	for _, c := range cases {
		_, err := tr.ResponseStream(io.Discard, strings.NewReader(c.in), Context{}, c.max)
		if ReasonOf(err) != c.reason {
			t.Errorf("%s: err = %v, want %s", c.name, err, c.reason)
		}
	}
	// A read error is passed through as is.
	boom := errors.New("connection reset")
	_, err := tr.ResponseStream(io.Discard, io.MultiReader(strings.NewReader(`{"items":[{}`), iotest.ErrReader(boom)), Context{}, 0)
	if !errors.Is(err, boom) {
		t.Errorf("read error: %v", err)
	}
}

// machineItem is a realistic stored Machine (recorded) as a list item.
func machineItem(t testing.TB) []byte {
	b := upstreamTB(t, "get-machine.json")
	return bytes.TrimSpace(b)
}

func upstreamTB(t testing.TB, name string) []byte {
	b, err := readTestdata("testdata/upstream/" + name)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

var comma = []byte{','}

// listReader produces `{"kind":…,"items":[item,item,…]}` with n items lazily, never holding the list.
type listReader struct {
	item    []byte
	n, i    int
	pending []byte
	state   int
}

func (l *listReader) Read(p []byte) (int, error) {
	for len(l.pending) == 0 {
		switch {
		case l.state == 0:
			l.pending = []byte(`{"kind":"MachineList","apiVersion":"cluster.hypershift.openshift.io/v1beta2","metadata":{"resourceVersion":"9"},"items":[`)
			l.state = 1
		case l.state == 1 && l.i < l.n:
			l.pending = l.item
			l.i++
			l.state = 3
		case l.state == 3 && l.i < l.n:
			l.pending = comma
			l.state = 1
		case l.state == 1 || l.state == 3:
			l.pending = []byte("]}\n")
			l.state = 2
		default:
			return 0, io.EOF
		}
	}
	n := copy(p, l.pending)
	l.pending = l.pending[n:]
	return n, nil
}

// countingWriter checks the output without keeping it (the streamer writes each item in one call).
type countingWriter struct {
	n      int64
	hits   int
	needle []byte
}

func (w *countingWriter) Write(p []byte) (int, error) {
	w.n += int64(len(p))
	w.hits += bytes.Count(p, w.needle)
	return len(p), nil
}

// Memory is bounded by the largest item, not the list: streaming 5,000 translated Machines (~18 MiB) allocates
// a small, constant amount, and so does a list that needs no translation.
func TestResponseStreamMemoryIsBoundedByTheItem(t *testing.T) {
	item := machineItem(t)
	plain := bytes.ReplaceAll(item, []byte("cluster.hypershift.openshift.io"), []byte("example.com"))
	plain = bytes.ReplaceAll(plain, []byte("x-k8s.io"), []byte("example.org"))
	for name, it := range map[string][]byte{"translated": item, "fast path": plain} {
		t.Run(name, func(t *testing.T) {
			const n = 5000
			w := &countingWriter{needle: []byte(`"apiVersion":"cluster.x-k8s.io/v1beta2","kind":"Machine"`)}
			var before, after runtime.MemStats
			runtime.GC()
			runtime.ReadMemStats(&before)
			st, err := tr.ResponseStream(w, &listReader{item: it, n: n}, Context{}, 0)
			runtime.ReadMemStats(&after)
			if err != nil {
				t.Fatal(err)
			}
			if st.Items != n {
				t.Fatalf("%d items", st.Items)
			}
			total := int64(n) * int64(len(it))
			allocated := after.TotalAlloc - before.TotalAlloc
			t.Logf("%d items, %.1f MiB streamed, %.1f KiB allocated", n, float64(total)/(1<<20), float64(allocated)/1024)
			if allocated > 512<<10 {
				t.Errorf("allocated %d bytes for a %d byte list: not bounded by the item", allocated, total)
			}
			if name == "translated" && w.hits != n {
				t.Errorf("%d translated Machines in the output, want %d", w.hits, n)
			}
		})
	}
}

func TestFrameReader(t *testing.T) {
	frames := []string{
		`{"type":"ADDED","object":{"s":"}\"{","n":1}}`,
		`{"type":"BOOKMARK","object":{"metadata":{"resourceVersion":"7"}}}`,
		`{"type":"ERROR","object":{"kind":"Status","message":"]]]"}}`,
	}
	for sep, in := range map[string]string{
		"newline":    strings.Join(frames, "\n") + "\n",
		"none":       strings.Join(frames, ""),
		"whitespace": " \r\n" + strings.Join(frames, " \t\n ") + "\n\n",
	} {
		for rname, r := range readers([]byte(in)) {
			fr := NewFrameReader(r, 0)
			var got []string
			for {
				f, err := fr.Next()
				if err == io.EOF {
					break
				}
				if err != nil {
					t.Fatalf("%s/%s: %v", sep, rname, err)
				}
				got = append(got, string(f))
			}
			if !reflect.DeepEqual(got, frames) {
				t.Errorf("%s/%s: got %q", sep, rname, got)
			}
		}
	}
	fr := NewFrameReader(strings.NewReader(`{"type":"ADDED","object":{"a":"`+strings.Repeat("x", 200)+`"}}`), 100)
	if _, err := fr.Next(); ReasonOf(err) != ReasonTooLarge {
		t.Errorf("over the cap: %v", err)
	}
	fr = NewFrameReader(strings.NewReader(`{"type":"ADDED","object":{`), 0)
	if _, err := fr.Next(); ReasonOf(err) != ReasonInvalidJSON {
		t.Errorf("truncated: %v", err)
	}
	fr = NewFrameReader(strings.NewReader(`,`), 0)
	if _, err := fr.Next(); ReasonOf(err) != ReasonInvalidJSON {
		t.Errorf("lone comma: %v", err)
	}
	fr = NewFrameReader(strings.NewReader(`"ADDED"`), 0)
	if _, err := fr.Next(); ReasonOf(err) != ReasonInvalidWatchEvent {
		t.Errorf("not an object: %v", err)
	}
}

func TestErrorEvent(t *testing.T) {
	ev := ErrorEvent(fmt.Errorf("bad \"frame\"\n"))
	if !bytes.HasSuffix(ev, []byte("\n")) {
		t.Error("no trailing newline")
	}
	var got struct {
		Type   string
		Object struct {
			Kind, APIVersion, Status, Message, Reason string
			Code                                      int
		}
	}
	if err := json.Unmarshal(ev, &got); err != nil {
		t.Fatal(err)
	}
	if got.Type != "ERROR" || got.Object.Kind != "Status" || got.Object.Code != 500 || got.Object.Reason != "InternalError" ||
		!strings.Contains(got.Object.Message, `bad "frame"`) {
		t.Errorf("%+v", got)
	}
}

func TestWatchEvents(t *testing.T) {
	ctx := Context{}
	// An ERROR event's Status: details.group and message tokens.
	in := `{"type":"ERROR","object":{"kind":"Status","apiVersion":"v1","metadata":{},"status":"Failure","message":"too old resource version: 5 (17) for machines.cluster.hypershift.openshift.io","reason":"Expired","details":{"group":"cluster.hypershift.openshift.io","kind":"machines"},"code":410}}`
	want := `{"type":"ERROR","object":{"kind":"Status","apiVersion":"v1","metadata":{},"status":"Failure","message":"too old resource version: 5 (17) for machines.cluster.x-k8s.io","reason":"Expired","details":{"group":"cluster.x-k8s.io","kind":"machines"},"code":410}}`
	res, err := tr.ResponseWatchEvent([]byte(in), ctx)
	if err != nil || string(res.Body) != want {
		t.Errorf("ERROR event:\n got %s\nwant %s (%v)", res.Body, want, err)
	}
	// Events on a CRD watch: platform CRDs dropped in every event type.
	for _, typ := range []string{"ADDED", "MODIFIED", "DELETED"} {
		ev := `{"type":"` + typ + `","object":{"kind":"CustomResourceDefinition","metadata":{"name":"machines.cluster.x-k8s.io"},"spec":{"group":"cluster.x-k8s.io"}}}`
		res, err := tr.ResponseWatchEvent([]byte(ev), Context{CRD: true})
		if err != nil || !res.Drop {
			t.Errorf("%s of a platform CRD: %+v %v", typ, res, err)
		}
	}
}
