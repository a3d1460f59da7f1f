package hubtest

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"sort"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/serializer/protobuf"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/kubernetes/scheme"
	"k8s.io/utils/ptr"

	"github.com/dcm-sp/acm-cluster-sp/internal/capiprivate/groups"
	"github.com/dcm-sp/acm-cluster-sp/internal/capiprivate/proxy"
)

const seqHeader = "X-Hubtest-Seq"

// exchangeRecord is one request and its response as seen on one side of the proxy.
type exchangeRecord struct {
	method, query, path string
	reqBody, respBody   []byte
}

// recorder records exchanges by sequence number on one side.
type recorder struct {
	mu   sync.Mutex
	recs map[string]*exchangeRecord
	next *atomic.Int64 // client side: assigns sequence numbers
	rt   http.RoundTripper
}

func (r *recorder) RoundTrip(req *http.Request) (*http.Response, error) {
	if r.next != nil {
		req = req.Clone(req.Context())
		req.Header.Set(seqHeader, strconv.FormatInt(r.next.Add(1), 10))
	}
	seq := req.Header.Get(seqHeader)
	rec := &exchangeRecord{method: req.Method, query: req.URL.RawQuery, path: req.URL.Path}
	if req.Body != nil && req.Body != http.NoBody {
		b, err := io.ReadAll(req.Body)
		if err != nil {
			return nil, err
		}
		rec.reqBody = b
		req.Body = io.NopCloser(bytes.NewReader(b))
	}
	resp, err := r.rt.RoundTrip(req)
	if err != nil {
		return nil, err
	}
	b, err := io.ReadAll(resp.Body)
	_ = resp.Body.Close()
	if err != nil {
		return nil, err
	}
	rec.respBody = b
	resp.Body = io.NopCloser(bytes.NewReader(b))
	r.mu.Lock()
	r.recs[seq] = rec
	r.mu.Unlock()
	return resp, nil
}

// leafDiff is one value that differs between the two sides of the proxy.
type leafDiff struct {
	path     string
	a, b     any
	category string // "group" (a renamed group value) or what else changed
}

// diffJSON walks two JSON documents of the same shape and returns every differing leaf. A difference in shape
// (keys, lengths, types) is a leafDiff with category "shape".
func diffJSON(a, b any, path string, out *[]leafDiff) {
	switch av := a.(type) {
	case map[string]any:
		bv, ok := b.(map[string]any)
		if !ok || len(av) != len(bv) {
			*out = append(*out, leafDiff{path, a, b, "shape"})
			return
		}
		keys := make([]string, 0, len(av))
		for k := range av {
			keys = append(keys, k)
		}
		sort.Strings(keys)
		for _, k := range keys {
			bb, ok := bv[k]
			if !ok {
				*out = append(*out, leafDiff{path + "/" + k, av[k], nil, "shape"})
				continue
			}
			diffJSON(av[k], bb, path+"/"+k, out)
		}
	case []any:
		bv, ok := b.([]any)
		if !ok || len(av) != len(bv) {
			*out = append(*out, leafDiff{path, a, b, "shape"})
			return
		}
		for i := range av {
			diffJSON(av[i], bv[i], path+"/"+strconv.Itoa(i), out)
		}
	default:
		if fmt.Sprint(a) != fmt.Sprint(b) {
			*out = append(*out, leafDiff{path, a, b, classify(a, b)})
		}
	}
}

// classify says whether two strings differ exactly by a renamed group (standard/private, escaped/standard).
func classify(a, b any) string {
	as, ok1 := a.(string)
	bs, ok2 := b.(string)
	if !ok1 || !ok2 {
		return "value"
	}
	for _, r := range groups.Default.Rows() {
		esc, _ := groups.Default.Escape(r.Standard)
		for _, pair := range [][2]string{{r.Standard, r.Private}, {esc, r.Standard}} {
			if strings.Replace(as, pair[0], pair[1], 1) == bs || strings.Replace(bs, pair[0], pair[1], 1) == as {
				return "group"
			}
		}
	}
	return "value"
}

// untouchable: no byte under these members may change.
var untouchable = []string{"/labels", "/annotations", "/finalizers", "/selector", "/matchLabels", "/matchExpressions", "/clusterSelector", "/data", "/fieldsV1"}

// A traffic diff around the proxy. Every request and response is recorded on the client side and on the
// kube-apiserver side; the two differ only in group values at apiVersion/apiGroup/group members. No label,
// annotation, finalizer or selector byte changes, and label selectors in queries pass byte for byte. CAPI finds
// the <cluster>-kubeconfig Secret by label through the proxy.
func TestS7TrafficDiff(t *testing.T) {
	ctx := t.Context()
	upstream := &recorder{recs: map[string]*exchangeRecord{}}
	ps := startProxy(t, proxy.Options{WrapUpstream: func(rt http.RoundTripper) http.RoundTripper { upstream.rt = rt; return upstream }})
	client := &recorder{recs: map[string]*exchangeRecord{}, next: &atomic.Int64{}}
	cfg := ps.config(env.AdminToken)
	cfg.WrapTransport = func(rt http.RoundTripper) http.RoundTripper { client.rt = rt; return client }
	dc, err := dynamic.NewForConfig(cfg)
	if err != nil {
		t.Fatal(err)
	}
	kc, err := kubernetes.NewForConfig(cfg)
	if err != nil {
		t.Fatal(err)
	}
	ns := env.NewNamespace(t, "s7")
	keys := map[string]string{
		"cluster.x-k8s.io/cluster-name": "c1", "cluster.x-k8s.io/set-name": "ms", "cluster.x-k8s.io/deployment-name": "md",
		"cluster.x-k8s.io/watch-filter": "capi", "cluster.x-k8s.io/v1beta2": "v1beta2",
	}
	annotations := map[string]string{
		"cluster.x-k8s.io/paused": "", "cluster.x-k8s.io/delete-machine": "yes",
		"cluster.x-k8s.io/cloned-from-groupkind": "KubevirtMachineTemplate.infrastructure.cluster.x-k8s.io",
		"cluster.x-k8s.io/cloned-from-name":      "infrastructure.cluster.x-k8s.io/v1alpha1",
		"note":                                   `{"apiVersion":"cluster.x-k8s.io/v1beta2","apiGroup":"cluster.hypershift.openshift.io"}`,
	}
	machines := dc.Resource(gvr(stdCore, "v1beta2", "machines")).Namespace(ns)
	owner, err := dc.Resource(gvr(stdCore, "v1beta2", "clusters")).Namespace(ns).Create(ctx, kinds[0].object("v1beta2", ns, "c1"), metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	for i := range 3 {
		m := kinds[2].object("v1beta2", ns, fmt.Sprintf("m%d", i))
		m.SetLabels(keys)
		m.SetAnnotations(annotations)
		m.SetFinalizers([]string{"machine.cluster.x-k8s.io", "kubevirtmachine.infrastructure.cluster.x-k8s.io"})
		m.SetOwnerReferences([]metav1.OwnerReference{{APIVersion: stdCore + "/v1beta2", Kind: "Cluster", Name: "c1", UID: owner.GetUID(), Controller: ptr.To(true)}})
		if _, err := machines.Create(ctx, m, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	ms := kinds[3].object("v1beta2", ns, "ms")
	_ = unstructured.SetNestedField(ms.Object, map[string]any{
		"matchLabels":      map[string]any{"cluster.x-k8s.io/cluster-name": "c1", "cluster.x-k8s.io/set-name": "ms"},
		"matchExpressions": []any{map[string]any{"key": "cluster.x-k8s.io/deployment-name", "operator": "In", "values": []any{"md", "cluster.x-k8s.io"}}},
	}, "spec", "selector")
	_ = unstructured.SetNestedStringMap(ms.Object, keys, "spec", "template", "metadata", "labels")
	if _, err := dc.Resource(gvr(stdCore, "v1beta2", "machinesets")).Namespace(ns).Create(ctx, ms, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	// The kubeconfig Secret CAPI looks up by label, owned by the Cluster.
	secret := &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Name: "c1-kubeconfig", Namespace: ns, Labels: map[string]string{"cluster.x-k8s.io/cluster-name": "c1"},
		OwnerReferences: []metav1.OwnerReference{{APIVersion: stdCore + "/v1beta2", Kind: "Cluster", Name: "c1", UID: owner.GetUID()}}},
		Data: map[string][]byte{"value": []byte("apiVersion: cluster.x-k8s.io/v1beta2")}}
	if _, err := kc.CoreV1().Secrets(ns).Create(ctx, secret, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	sel := "cluster.x-k8s.io/cluster-name=c1,cluster.x-k8s.io/deployment-name in (md),!cluster.x-k8s.io/paused"
	l, err := machines.List(ctx, metav1.ListOptions{LabelSelector: sel})
	if err != nil || len(l.Items) != 3 {
		t.Fatalf("selector list: %v, %d items", err, len(l.Items))
	}
	secrets, err := kc.CoreV1().Secrets(ns).List(ctx, metav1.ListOptions{LabelSelector: "cluster.x-k8s.io/cluster-name=c1"})
	if err != nil || len(secrets.Items) != 1 || secrets.Items[0].Name != "c1-kubeconfig" {
		t.Fatalf("kubeconfig Secret by label: %v %v", err, secrets)
	}
	if _, err := machines.Patch(ctx, "m0", types.MergePatchType, []byte(`{"metadata":{"labels":{"cluster.x-k8s.io/set-name":"ms2"},"annotations":{"cluster.x-k8s.io/paused":null}}}`), metav1.PatchOptions{}); err != nil {
		t.Fatal(err)
	}
	if _, err := machines.Patch(ctx, "m1", types.JSONPatchType, []byte(`[{"op":"add","path":"/metadata/labels/cluster.x-k8s.io~1remediate","value":"cluster.x-k8s.io"},{"op":"add","path":"/metadata/finalizers/-","value":"cluster.x-k8s.io/v1beta2"}]`), metav1.PatchOptions{}); err != nil {
		t.Fatal(err)
	}
	if _, err := machines.Get(ctx, "m1", metav1.GetOptions{}); err != nil {
		t.Fatal(err)
	}

	// The diff.
	client.mu.Lock()
	upstream.mu.Lock()
	defer client.mu.Unlock()
	defer upstream.mu.Unlock()
	groupDiffs := 0
	for seq, c := range client.recs {
		u, ok := upstream.recs[seq]
		if !ok {
			t.Errorf("request %s %s never reached kube-apiserver", c.method, c.path)
			continue
		}
		if u.query != c.query {
			t.Errorf("query changed: %q → %q", c.query, u.query)
		}
		for _, side := range []struct {
			name string
			a, b []byte
		}{{"request", c.reqBody, u.reqBody}, {"response", u.respBody, c.respBody}} {
			if len(side.a) == 0 && len(side.b) == 0 {
				continue
			}
			var a, b any
			side.a, side.b = asJSON(t, side.a), asJSON(t, side.b)
			if err := json.Unmarshal(side.a, &a); err != nil {
				t.Fatalf("%s %s %s: %v", c.method, c.path, side.name, err)
			}
			if err := json.Unmarshal(side.b, &b); err != nil {
				t.Fatalf("%s %s %s: %v", c.method, c.path, side.name, err)
			}
			var diffs []leafDiff
			diffJSON(a, b, "", &diffs)
			for _, d := range diffs {
				last := d.path[strings.LastIndex(d.path, "/")+1:]
				if _, err := strconv.Atoi(last); err == nil { // an element of apiGroups
					p := strings.TrimSuffix(d.path, "/"+last)
					last = p[strings.LastIndex(p, "/")+1:]
				}
				ok := d.category == "group" && (last == "apiVersion" || last == "apiGroup" || last == "group" || last == "apiGroups")
				for _, u := range untouchable {
					if strings.Contains(d.path, u+"/") || strings.HasSuffix(d.path, u) {
						ok = false
					}
				}
				if !ok {
					t.Errorf("%s %s %s: %s changed %v → %v (%s)", c.method, c.path, side.name, d.path, d.a, d.b, d.category)
				} else {
					groupDiffs++
				}
			}
		}
	}
	if len(client.recs) < 10 || groupDiffs < 20 {
		t.Errorf("%d exchanges, %d group renames: the diff saw too little to mean anything", len(client.recs), groupDiffs)
	}
}

// asJSON re-encodes a protobuf body (client-go's typed clients send built-ins as protobuf) as JSON for the diff.
func asJSON(t *testing.T, b []byte) []byte {
	t.Helper()
	if !bytes.HasPrefix(b, []byte("k8s\x00")) {
		return b
	}
	obj, gvk, err := protobuf.NewSerializer(scheme.Scheme, scheme.Scheme).Decode(b, nil, nil)
	if err != nil {
		t.Fatal(err)
	}
	obj.GetObjectKind().SetGroupVersionKind(*gvk)
	out, err := json.Marshal(obj)
	if err != nil {
		t.Fatal(err)
	}
	return out
}
