//lint:file-ignore SA1019 the deprecated v1beta1 (and ipam v1alpha1) API packages are what this webhook serves.

package webhook_test

import (
	"bytes"
	"context"
	"crypto/tls"
	"crypto/x509"
	"encoding/json"
	"io"
	"net"
	"net/http"
	"strings"
	"testing"
	"time"

	dto "github.com/prometheus/client_model/go"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/metadata"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/dcm-sp/acm-cluster-sp/internal/capiprivate/webhook"
)

// metric is the value of a counter, or the sample count of a histogram, in env.Metrics with exactly labels.
func metric(t *testing.T, name string, labels map[string]string) float64 {
	t.Helper()
	families, err := env.Metrics.Gather()
	if err != nil {
		t.Fatal(err)
	}
	for _, f := range families {
		if f.GetName() != name {
			continue
		}
		for _, m := range f.GetMetric() {
			if !hasLabels(m, labels) {
				continue
			}
			if h := m.GetHistogram(); h != nil {
				return float64(h.GetSampleCount())
			}
			return m.GetCounter().GetValue()
		}
	}
	return 0
}

func hasLabels(m *dto.Metric, labels map[string]string) bool {
	if len(m.GetLabel()) != len(labels) {
		return false
	}
	for _, l := range m.GetLabel() {
		if labels[l.GetName()] != l.GetValue() {
			return false
		}
	}
	return true
}

// The webhook's metrics: conversions by kind, versions and result; their duration by kind; apiVersion lookups by
// result.
func TestMetrics(t *testing.T) {
	ns := env.NewNamespace(t, "metrics")
	ctx := t.Context()
	kv := "infrastructure.cluster.hypershift.openshift.io"
	if err := env.Client.Create(ctx, privateMachine(ns, "m1", kv, "KubevirtMachine")); err != nil {
		t.Fatal(err)
	}
	const conversions = "capi_private_webhook_conversions_total"
	const duration = "capi_private_webhook_conversion_duration_seconds"
	const lookups = "capi_private_webhook_apiversion_lookups_total"
	success := map[string]string{"kind": "Machine", "from": "v1beta2", "to": "v1beta1", "result": "success"}
	failure := map[string]string{"kind": "Machine", "from": "v1beta2", "to": "v1beta1", "result": "failure"}
	machine := map[string]string{"kind": "Machine"}
	cache, live := map[string]string{"result": "cache"}, map[string]string{"result": "live"}
	// A failed lookup is an error, or answered from the negative cache when a conversion in the background (the
	// v1beta1 watch cache) already found the CRD missing.
	failedLookups := func() float64 {
		return metric(t, lookups, map[string]string{"result": "error"}) + metric(t, lookups, map[string]string{"result": "negative"})
	}

	ok0, dur0, cache0 := metric(t, conversions, success), metric(t, duration, machine), metric(t, lookups, cache)
	get(t, webhook.CoreGroup+"/v1beta1", "Machine", ns, "m1")
	if metric(t, conversions, success) <= ok0 || metric(t, duration, machine) <= dur0 || metric(t, lookups, cache) <= cache0 {
		t.Errorf("after a v1beta1 GET: conversions %v→%v, durations %v→%v, cache lookups %v→%v", ok0, metric(t, conversions, success),
			dur0, metric(t, duration, machine), cache0, metric(t, lookups, cache))
	}

	// A ref to a kind without a CRD cannot be converted down: a failure and a lookup error.
	bad := privateMachine(ns, "bad", "missing.example.com", "Nothing")
	if err := env.Client.Create(ctx, bad); err != nil {
		t.Fatal(err)
	}
	fail0, err0 := metric(t, conversions, failure), failedLookups()
	if err := env.Client.Get(ctx, client.ObjectKeyFromObject(bad), machineAt("v1beta1", ns, "bad")); code(err) != http.StatusInternalServerError {
		t.Errorf("v1beta1 GET of an unconvertible Machine: %v, want 500", err)
	}
	if metric(t, conversions, failure) <= fail0 || failedLookups() <= err0 {
		t.Errorf("after a failed conversion: failures %v→%v, failed lookups %v→%v", fail0, metric(t, conversions, failure), err0, failedLookups())
	}
	// It also blocks the v1beta1 watch cache of Machines: delete it and wait until that recovers.
	if err := env.Client.Delete(ctx, bad); err != nil {
		t.Fatal(err)
	}
	waitV1beta1List(t, ns)

	// A getter whose CRD informer has not listed yet answers from a live GET.
	mc, err := metadata.NewForConfig(env.TokenConfig(env.WebhookToken))
	if err != nil {
		t.Fatal(err)
	}
	live0 := metric(t, lookups, live)
	g := webhook.NewAPIVersionGetter(mc, func(result string) { env.Webhook.Metrics.Lookups.WithLabelValues(result).Inc() })
	for gk, want := range map[schema.GroupKind]string{
		{Group: kv, Kind: "KubevirtMachine"}:                                kv + "/v1alpha1",
		{Group: "hypershift.openshift.io", Kind: "HostedControlPlane"}:      "hypershift.openshift.io/v1beta1",
		{Group: "infrastructure.cluster.x-k8s.io", Kind: "KubevirtMachine"}: "infrastructure.cluster.x-k8s.io/v1alpha1",
	} {
		if got, err := g.APIVersion(gk); got != want || err != nil {
			t.Errorf("%v: %q, %v; want %q", gk, got, err, want)
		}
	}
	if got := metric(t, lookups, live) - live0; got != 3 {
		t.Errorf("%v live lookups, want 3", got)
	}
}

// Run serves /convert over HTTPS and /metrics, /healthz, /readyz over HTTP, and stops with its context.
func TestRun(t *testing.T) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	ml, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	// Run installs its own getter, process-wide: give the test environment's back afterwards.
	t.Cleanup(env.Webhook.Install)
	ctx, cancel := context.WithCancel(t.Context())
	done := make(chan error, 1)
	go func() {
		done <- webhook.Run(ctx, webhook.Options{
			Listener: l, MetricsListener: ml, CertFile: env.WebhookCertFile, KeyFile: env.WebhookKeyFile,
			Config: env.TokenConfig(env.WebhookToken),
		})
	}()
	metricsURL := "http://" + ml.Addr().String()
	err = wait.PollUntilContextTimeout(ctx, 50*time.Millisecond, 30*time.Second, true, func(ctx context.Context) (bool, error) {
		resp, err := http.Get(metricsURL + "/readyz")
		if err != nil {
			return false, nil
		}
		_ = resp.Body.Close()
		return resp.StatusCode == http.StatusOK, nil
	})
	if err != nil {
		t.Fatalf("/readyz: %v", err)
	}

	pool := x509.NewCertPool()
	pool.AppendCertsFromPEM(env.WebhookCA)
	hc := &http.Client{Transport: &http.Transport{TLSClientConfig: &tls.Config{RootCAs: pool, MinVersion: tls.VersionTLS12}}}
	m := privateMachine("ns", "m1", "infrastructure.cluster.hypershift.openshift.io", "KubevirtMachine")
	raw, _ := json.Marshal(m.Object)
	review := apiextensionsv1.ConversionReview{Request: &apiextensionsv1.ConversionRequest{
		UID: "r1", DesiredAPIVersion: webhook.CoreGroup + "/v1beta1", Objects: []runtime.RawExtension{{Raw: raw}},
	}}
	review.APIVersion, review.Kind = "apiextensions.k8s.io/v1", "ConversionReview"
	body, _ := json.Marshal(review)
	resp, err := hc.Post("https://"+l.Addr().String()+webhook.ConvertPath, "application/json", bytes.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	var got apiextensionsv1.ConversionReview
	err = json.NewDecoder(resp.Body).Decode(&got)
	_ = resp.Body.Close()
	if err != nil || got.Response == nil || got.Response.Result.Status != "Success" {
		t.Fatalf("convert: %v %+v", err, got.Response)
	}
	var converted unstructured.Unstructured
	if err := json.Unmarshal(got.Response.ConvertedObjects[0].Raw, &converted.Object); err != nil || converted.GetAPIVersion() != webhook.CoreGroup+"/v1beta1" {
		t.Errorf("converted to %s (%v)", converted.GetAPIVersion(), err)
	}

	resp, err = http.Get(metricsURL + "/metrics")
	if err != nil {
		t.Fatal(err)
	}
	text, _ := io.ReadAll(resp.Body)
	_ = resp.Body.Close()
	for _, want := range []string{
		`capi_private_webhook_conversions_total{from="v1beta2",kind="Machine",result="success",to="v1beta1"} 1`,
		`capi_private_webhook_conversion_duration_seconds_count{kind="Machine"} 1`,
		`capi_private_webhook_apiversion_lookups_total{result="cache"} 1`,
		"go_goroutines",
	} {
		if !strings.Contains(string(text), want) {
			t.Errorf("/metrics lacks %s", want)
		}
	}

	cancel()
	select {
	case err := <-done:
		if err != nil {
			t.Errorf("Run: %v", err)
		}
	case <-time.After(30 * time.Second):
		t.Fatal("Run did not stop")
	}
}
