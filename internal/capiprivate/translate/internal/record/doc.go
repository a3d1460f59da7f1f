// Package record records the real kube-apiserver responses that capi-private's translation tests replay from
// ../../testdata/upstream. It holds only a test behind the `record` build tag, so ordinary test runs stay pure:
//
//	go test -tags record -run TestRecord -count=1 ./internal/capiprivate/translate/internal/record/
//
// It starts kube-apiserver v1.34.10 (internal/devtest/localhub), installs the upstream Cluster API v1.13.4 CRDs twice —
// in the standard groups (the platform's) and renamed into the private groups — stores the fixture objects
// privately and records discovery (v1 and aggregated), OpenAPI v3, objects, lists, Tables, Status bodies,
// Warning headers and watch streams exactly as served.
package record
