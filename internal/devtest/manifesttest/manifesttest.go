// Package manifesttest is the test support both products' deployment tests share: it renders a kustomize
// directory of the repository as the install would, reads the alert rules out of it and checks each rule's metric
// names against a registry, and records the 403s a client is answered (the RBAC tests run components as their
// deployed ServiceAccounts and require none). Import it from tests only.
package manifesttest

import (
	"bytes"
	"encoding/json"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"runtime"
	"strings"
	"sync"
	"testing"

	"github.com/prometheus/client_golang/prometheus"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"sigs.k8s.io/yaml"

	"github.com/dcm-sp/acm-cluster-sp/internal/devtest/localhub"
)

// Root is the repository's root directory.
func Root() string {
	_, file, _, _ := runtime.Caller(0)
	return filepath.Join(filepath.Dir(file), "..", "..", "..")
}

var (
	renderedMu sync.Mutex
	rendered   = map[string][]*unstructured.Unstructured{}
)

// Render renders dir (relative to the repository's root) with the kubectl the local hub was built with
// (kustomize inside), once per test binary: callers must not change the objects (DeepCopy them first).
func Render(t testing.TB, dir string) []*unstructured.Unstructured {
	t.Helper()
	renderedMu.Lock()
	defer renderedMu.Unlock()
	if objs, ok := rendered[dir]; ok {
		return objs
	}
	out, err := exec.Command(filepath.Join(localhub.DefaultBinDir(), "kubectl"), "kustomize", filepath.Join(Root(), dir)).Output()
	if err != nil {
		t.Fatalf("kubectl kustomize %s: %v", dir, err)
	}
	var objs []*unstructured.Unstructured
	for _, doc := range bytes.Split(out, []byte("\n---\n")) {
		if len(bytes.TrimSpace(doc)) == 0 {
			continue
		}
		u := &unstructured.Unstructured{}
		if err := yaml.Unmarshal(doc, &u.Object); err != nil {
			t.Fatal(err)
		}
		objs = append(objs, u)
	}
	rendered[dir] = objs
	return objs
}

// Find returns the object of objs with this kind and name (nil if none).
func Find(objs []*unstructured.Unstructured, kind, name string) *unstructured.Unstructured {
	for _, o := range objs {
		if o.GetKind() == kind && o.GetName() == name {
			return o
		}
	}
	return nil
}

// AlertRules returns the rules of every PrometheusRule of objs.
func AlertRules(objs []*unstructured.Unstructured) []map[string]any {
	var rules []map[string]any
	for _, o := range objs {
		if o.GetKind() != "PrometheusRule" {
			continue
		}
		groups, _, _ := unstructured.NestedSlice(o.Object, "spec", "groups")
		for _, g := range groups {
			rs, _, _ := unstructured.NestedSlice(g.(map[string]any), "rules")
			for _, r := range rs {
				rules = append(rules, r.(map[string]any))
			}
		}
	}
	return rules
}

// CheckAlert checks that rule has a severity (warning or critical), a summary and a for, and that the document
// docPath (relative to the repository's root) has a section "### <alert>" saying what to do when it fires; it
// returns the alert's name and expression.
func CheckAlert(t testing.TB, rule map[string]any, docPath string) (name, expr string) {
	t.Helper()
	name, _ = rule["alert"].(string)
	expr, _ = rule["expr"].(string)
	labels, _ := rule["labels"].(map[string]any)
	annotations, _ := rule["annotations"].(map[string]any)
	if labels["severity"] != "warning" && labels["severity"] != "critical" || annotations["summary"] == nil || rule["for"] == nil {
		t.Errorf("%s: needs severity warning|critical, a summary and a for: %v", name, rule)
	}
	docs, err := os.ReadFile(filepath.Join(Root(), docPath))
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(string(docs), "### "+name) {
		t.Errorf("%s: %s has no section %q saying what to do", name, docPath, "### "+name)
	}
	return name, expr
}

// PromQLWords are the PromQL functions, aggregations and keywords the rules use; each test adds its label names.
var PromQLWords = []string{"sum", "min", "max", "by", "and", "or", "unless", "absent", "rate", "increase",
	"min_over_time", "histogram_quantile", "time", "le"}

var (
	identifier = regexp.MustCompile(`[a-zA-Z_:][a-zA-Z0-9_:]*`)
	quoted     = regexp.MustCompile(`"[^"]*"|\[[^\]]*\]`)
)

// MetricNames returns the identifiers of a PromQL expression that are not inside quotes or a range's brackets
// and are none of words: the metric names, once words holds the functions, keywords and label names.
func MetricNames(expr string, words map[string]bool) []string {
	var out []string
	for _, id := range identifier.FindAllString(quoted.ReplaceAllString(expr, " "), -1) {
		if !words[id] {
			out = append(out, id)
		}
	}
	return out
}

// Words is PromQLWords plus labels, as a set for MetricNames.
func Words(labels ...string) map[string]bool {
	out := map[string]bool{}
	for _, w := range append(append([]string{}, PromQLWords...), labels...) {
		out[w] = true
	}
	return out
}

// Registered reports whether reg has a collector of this metric family (a histogram's _bucket, _sum and _count are
// its series): registering another collector of the same name fails with a conflict exactly when one exists.
func Registered(reg prometheus.Registerer, name string) bool {
	for _, suffix := range []string{"_bucket", "_sum", "_count"} {
		if base, ok := strings.CutSuffix(name, suffix); ok && Registered(reg, base) {
			return true
		}
	}
	probe := prometheus.NewGauge(prometheus.GaugeOpts{Name: name, Help: "probe"})
	err := reg.Register(probe)
	if err == nil {
		reg.Unregister(probe)
		return false
	}
	return strings.Contains(err.Error(), "previously registered descriptor with the same fully-qualified name")
}

// Forbidden wraps a client transport and records every 403 the hub answers ("METHOD path: message"), and counts
// the answers.
type Forbidden struct {
	mu       sync.Mutex
	seen     []string
	requests int
}

// Wrap is a rest.Config WrapTransport.
func (f *Forbidden) Wrap(rt http.RoundTripper) http.RoundTripper {
	return roundTripperFunc(func(r *http.Request) (*http.Response, error) {
		resp, err := rt.RoundTrip(r)
		if err != nil {
			return resp, err
		}
		f.mu.Lock()
		f.requests++
		if resp.StatusCode == http.StatusForbidden {
			body, _ := io.ReadAll(io.LimitReader(resp.Body, 4096))
			_ = resp.Body.Close()
			resp.Body = io.NopCloser(bytes.NewReader(body))
			f.seen = append(f.seen, r.Method+" "+r.URL.Path+": "+statusMessage(body))
		}
		f.mu.Unlock()
		return resp, err
	})
}

// Requests is how many answers the hub gave.
func (f *Forbidden) Requests() int {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.requests
}

// List returns the 403s recorded so far.
func (f *Forbidden) List() []string {
	f.mu.Lock()
	defer f.mu.Unlock()
	return append([]string(nil), f.seen...)
}

type roundTripperFunc func(*http.Request) (*http.Response, error)

func (f roundTripperFunc) RoundTrip(r *http.Request) (*http.Response, error) { return f(r) }

// statusMessage is the message of a Status body (the body itself when it is none).
func statusMessage(body []byte) string {
	var st struct{ Message string }
	if json.Unmarshal(body, &st) == nil && st.Message != "" {
		return st.Message
	}
	return string(body)
}
