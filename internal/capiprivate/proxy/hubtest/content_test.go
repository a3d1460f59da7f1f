package hubtest

import (
	"bytes"
	"encoding/json"
	"fmt"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/metadata"

	"github.com/dcm-sp/acm-cluster-sp/internal/capiprivate/proxy"
)

// Content types. Binary Accept is answered as JSON (counted); a CBOR body is refused; a protobuf Secret owned
// by a KubevirtMachine is stored private; a protobuf body of a type the proxy cannot decode is refused; gzip from
// kube-apiserver is decoded and translated; Tables and metadata-only lists are translated; a body above 3 MiB is
// 413.
func TestS8ContentTypes(t *testing.T) {
	ctx := t.Context()
	ps := startProxy(t, proxy.Options{})
	ns := env.NewNamespace(t, "s8")
	createMachines(t, ns, 300, 8)
	base := ps.URL + "/apis/cluster.x-k8s.io/v1beta2/namespaces/" + ns + "/machines"

	for _, c := range []struct{ accept, forced string }{
		{"application/vnd.kubernetes.protobuf", "protobuf"},
		{"application/vnd.kubernetes.protobuf, application/json", "protobuf"},
		{"application/cbor", "cbor"},
	} {
		code, hdr, body := rawRequest(t, "GET", base+"/m-0000", env.AdminToken, nil, "Accept", c.accept)
		if code != 200 || !strings.HasPrefix(hdr.Get("Content-Type"), "application/json") || !json.Valid(body) || !bytes.Contains(body, []byte(`"apiVersion":"cluster.x-k8s.io/v1beta2"`)) {
			t.Errorf("Accept %s: %d %s", c.accept, code, hdr.Get("Content-Type"))
		}
	}
	if p, c := ps.metric(t, "capi_private_proxy_forced_json_total", "requested", "protobuf"), ps.metric(t, "capi_private_proxy_forced_json_total", "requested", "cbor"); p != 2 || c != 1 {
		t.Errorf("forced_json_total protobuf %v cbor %v, want 2 and 1", p, c)
	}

	// A CBOR body: 415.
	code, _, body := rawRequest(t, "POST", base, env.AdminToken, []byte{0xa1, 0x61, 0x61, 0x01}, "Content-Type", "application/cbor")
	if code != 415 {
		t.Errorf("CBOR body: %d %s", code, body)
	}
	// A protobuf body of a type client-go's scheme lacks, naming a mapped group: 415 "send JSON".
	u := runtime.Unknown{TypeMeta: runtime.TypeMeta{APIVersion: "cluster.x-k8s.io/v1beta2", Kind: "Machine"}, Raw: []byte(`{"spec":{}}`)}
	raw, err := u.Marshal()
	if err != nil {
		t.Fatal(err)
	}
	code, _, body = rawRequest(t, "POST", base, env.AdminToken, append([]byte("k8s\x00"), raw...), "Content-Type", "application/vnd.kubernetes.protobuf")
	if code != 415 || !strings.Contains(string(body), "send JSON") {
		t.Errorf("unknown protobuf: %d %s", code, body)
	}
	if n := ps.metric(t, "capi_private_proxy_translation_errors_total", "direction", "request", "reason", "unsupported_media_type"); n != 2 {
		t.Errorf("translation_errors{request,unsupported_media_type} %v, want 2", n)
	}

	// A protobuf Secret owned by a KubevirtMachine (controller-runtime sends built-ins as protobuf).
	pbCfg := ps.config(env.AdminToken)
	pbCfg.ContentType = "application/vnd.kubernetes.protobuf"
	kc, err := kubernetes.NewForConfig(pbCfg)
	if err != nil {
		t.Fatal(err)
	}
	kvm, err := ps.dynamic(t, env.AdminToken).Resource(gvr(stdInfra, "v1alpha1", "kubevirtmachines")).Namespace(ns).
		Create(ctx, kinds[14].object("v1alpha1", ns, "kvm"), metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	before := ps.metric(t, "capi_private_proxy_objects_translated_total", "direction", "request")
	secret := &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Name: "kvm-userdata", Namespace: ns, OwnerReferences: []metav1.OwnerReference{
		{APIVersion: stdInfra + "/v1alpha1", Kind: "KubevirtMachine", Name: "kvm", UID: kvm.GetUID()}}}}
	if _, err := kc.CoreV1().Secrets(ns).Create(ctx, secret, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	stored, err := kubernetes.NewForConfigOrDie(env.Config).CoreV1().Secrets(ns).Get(ctx, "kvm-userdata", metav1.GetOptions{})
	if err != nil || stored.OwnerReferences[0].APIVersion != privInfra+"/v1alpha1" {
		t.Fatalf("stored protobuf Secret owners %+v %v", stored.OwnerReferences, err)
	}
	if after := ps.metric(t, "capi_private_proxy_objects_translated_total", "direction", "request"); after != before+1 {
		t.Errorf("objects_translated{request} %v → %v", before, after)
	}

	// gzip: 300 Machines (~2.5 MB) come compressed from kube-apiserver, translated uncompressed to the client.
	upBefore := ps.metric(t, "capi_private_proxy_bytes_total", "side", "upstream", "direction", "response")
	clBefore := ps.metric(t, "capi_private_proxy_bytes_total", "side", "client", "direction", "response")
	code, hdr, body := rawRequest(t, "GET", base, env.AdminToken, nil, "Accept-Encoding", "gzip")
	var list struct {
		Items []struct {
			APIVersion string `json:"apiVersion"`
			Spec       struct {
				InfrastructureRef struct {
					APIGroup string `json:"apiGroup"`
				} `json:"infrastructureRef"`
			} `json:"spec"`
		} `json:"items"`
	}
	if err := json.Unmarshal(body, &list); code != 200 || err != nil || len(list.Items) != 300 || hdr.Get("Content-Encoding") != "" {
		t.Fatalf("list: %d %v, %d items, Content-Encoding %q", code, err, len(list.Items), hdr.Get("Content-Encoding"))
	}
	for _, it := range list.Items {
		if it.APIVersion != stdCore+"/v1beta2" || it.Spec.InfrastructureRef.APIGroup != stdInfra {
			t.Fatalf("item %+v", it)
		}
	}
	up := ps.metric(t, "capi_private_proxy_bytes_total", "side", "upstream", "direction", "response") - upBefore
	cl := ps.metric(t, "capi_private_proxy_bytes_total", "side", "client", "direction", "response") - clBefore
	if up*4 > cl || cl != float64(len(body)) {
		t.Errorf("upstream %v bytes, client %v bytes (body %d): kube-apiserver's answer was not compressed", up, cl, len(body))
	}

	// Table with objects.
	code, _, body = rawRequest(t, "GET", base+"?limit=5&includeObject=Object", env.AdminToken, nil, "Accept", "application/json;as=Table;v=v1;g=meta.k8s.io")
	var table metav1.Table
	if err := json.Unmarshal(body, &table); code != 200 || err != nil || len(table.Rows) != 5 {
		t.Fatalf("table: %d %v", code, err)
	}
	for _, r := range table.Rows {
		if !bytes.Contains(r.Object.Raw, []byte(`"apiVersion":"cluster.x-k8s.io/v1beta2"`)) || bytes.Contains(r.Object.Raw, []byte("hypershift")) {
			t.Fatalf("table row object %s", r.Object.Raw)
		}
	}

	// Metadata-only list and watch (metadata informers): ownerReferences in the standard group.
	_, err = direct(t).Resource(gvr(privCore, "v1beta2", "machines")).Namespace(ns).Patch(ctx, "m-0001", "application/merge-patch+json",
		fmt.Appendf(nil, `{"metadata":{"ownerReferences":[{"apiVersion":"%s/v1alpha1","kind":"KubevirtMachine","name":"kvm","uid":"%s"}]}}`, privInfra, kvm.GetUID()), metav1.PatchOptions{})
	if err != nil {
		t.Fatal(err)
	}
	mc, err := metadata.NewForConfig(ps.config(env.AdminToken))
	if err != nil {
		t.Fatal(err)
	}
	pom, err := mc.Resource(gvr(stdCore, "v1beta2", "machines")).Namespace(ns).Get(ctx, "m-0001", metav1.GetOptions{})
	if err != nil || len(pom.OwnerReferences) != 1 || pom.OwnerReferences[0].APIVersion != stdInfra+"/v1alpha1" {
		t.Fatalf("metadata get: %+v %v", pom, err)
	}
	poml, err := mc.Resource(gvr(stdCore, "v1beta2", "machines")).Namespace(ns).List(ctx, metav1.ListOptions{Limit: 10})
	if err != nil || len(poml.Items) != 10 || poml.Items[1].OwnerReferences[0].APIVersion != stdInfra+"/v1alpha1" {
		t.Fatalf("metadata list: %v", err)
	}

	// 413 above 3 MiB.
	big := append([]byte(`{"apiVersion":"cluster.x-k8s.io/v1beta2","kind":"Machine","metadata":{"name":"big","annotations":{"a":"`), bytes.Repeat([]byte("x"), proxy.MaxRequestBody)...)
	big = append(big, `"}}}`...)
	if code, _, body := rawRequest(t, "POST", base, env.AdminToken, big, "Content-Type", "application/json"); code != 413 {
		t.Errorf("4 MiB body: %d %s", code, body)
	}
	if n := ps.metric(t, "capi_private_proxy_rejected_total", "reason", proxy.RejectRequestTooLarge); n != 1 {
		t.Errorf("rejected request_too_large %v", n)
	}
}
