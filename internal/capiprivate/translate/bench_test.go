package translate

import (
	"bytes"
	"fmt"
	"io"
	"strings"
	"testing"
)

// secretOfSize is a Secret-like body without needles, padded to about n bytes.
func secretOfSize(n int) []byte {
	pad := strings.Repeat("A", max(0, n-200))
	return []byte(`{"kind":"Secret","apiVersion":"v1","metadata":{"name":"s","namespace":"ns","labels":{"app":"x"}},"data":{"value":"` + pad + `"},"type":"Opaque"}`)
}

// The fast path: no decode, no copy, zero allocations whatever the size.
func BenchmarkFastPath(b *testing.B) {
	for _, n := range []int{1 << 10, 64 << 10, 1 << 20} {
		body := secretOfSize(n)
		b.Run(fmt.Sprintf("ResponseObject/%dKiB", n>>10), func(b *testing.B) {
			b.ReportAllocs()
			b.SetBytes(int64(len(body)))
			for b.Loop() {
				res, _ := tr.ResponseObject(body, Context{})
				if res.Translated {
					b.Fatal("slow path")
				}
			}
		})
		b.Run(fmt.Sprintf("RequestObject/%dKiB", n>>10), func(b *testing.B) {
			b.ReportAllocs()
			b.SetBytes(int64(len(body)))
			for b.Loop() {
				_, _ = tr.RequestObject(body, Context{})
			}
		})
	}
}

// TestFastPathAllocsIndependentOfSize asserts what BenchmarkFastPath reports.
func TestFastPathAllocsIndependentOfSize(t *testing.T) {
	for _, n := range []int{1 << 10, 1 << 20} {
		body := secretOfSize(n)
		for name, f := range map[string]func([]byte, Context) (Result, error){
			"ResponseObject": tr.ResponseObject, "RequestObject": tr.RequestObject, "ResponseWatchEvent": tr.ResponseWatchEvent,
		} {
			var res Result
			allocs := testing.AllocsPerRun(20, func() { res, _ = f(body, Context{}) })
			if allocs != 0 || &res.Body[0] != &body[0] {
				t.Errorf("%s %d bytes: %.0f allocs, same slice %v", name, n, allocs, &res.Body[0] == &body[0])
			}
		}
	}
}

// A translated Machine GET (the ~3.6 KiB Machine recorded from kube-apiserver, with managedFields).
func BenchmarkMachineGET(b *testing.B) {
	body := upstreamTB(b, "get-machine.json")
	b.Run("response", func(b *testing.B) {
		b.ReportAllocs()
		b.SetBytes(int64(len(body)))
		for b.Loop() {
			if _, err := tr.ResponseObject(body, Context{}); err != nil {
				b.Fatal(err)
			}
		}
	})
	view, _ := tr.ResponseObject(body, Context{})
	b.Run("request", func(b *testing.B) {
		b.ReportAllocs()
		b.SetBytes(int64(len(view.Body)))
		for b.Loop() {
			if _, err := tr.RequestObject(view.Body, Context{}); err != nil {
				b.Fatal(err)
			}
		}
	})
}

// A list of 1,000 Machines streamed item by item.
func BenchmarkStreamList1000Machines(b *testing.B) {
	item := machineItem(b)
	var list bytes.Buffer
	_, _ = io.Copy(&list, &listReader{item: item, n: 1000})
	b.ReportAllocs()
	b.SetBytes(int64(list.Len()))
	for b.Loop() {
		if _, err := tr.ResponseStream(io.Discard, bytes.NewReader(list.Bytes()), Context{}, 0); err != nil {
			b.Fatal(err)
		}
	}
}

func BenchmarkWatchEvent(b *testing.B) {
	frame := []byte(`{"type":"MODIFIED","object":` + string(bytes.TrimSpace(machineItem(b))) + `}`)
	b.ReportAllocs()
	b.SetBytes(int64(len(frame)))
	for b.Loop() {
		if _, err := tr.ResponseWatchEvent(frame, Context{}); err != nil {
			b.Fatal(err)
		}
	}
}

func BenchmarkDiscoveryAggregated(b *testing.B) {
	body := upstreamTB(b, "discovery-v2-apis.json")
	b.ReportAllocs()
	b.SetBytes(int64(len(body)))
	for b.Loop() {
		if _, err := tr.ResponseDiscovery(body); err != nil {
			b.Fatal(err)
		}
	}
}
