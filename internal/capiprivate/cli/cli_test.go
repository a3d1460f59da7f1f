package cli

import (
	"bytes"
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	"sigs.k8s.io/yaml"

	"github.com/dcm-sp/acm-cluster-sp/internal/capiprivate/crds"
)

func run(t *testing.T, args ...string) (int, string, string) {
	t.Helper()
	var stdout, stderr bytes.Buffer
	code := Main(context.Background(), args, &stdout, &stderr)
	return code, stdout.String(), stderr.String()
}

func TestPlaceholders(t *testing.T) {
	if code, _, stderr := run(t, "dev"); code != 1 || !strings.Contains(stderr, "make run-capi") {
		t.Errorf("dev in the production build: exit %d, stderr %q", code, stderr)
	}
	if code, _, stderr := run(t, "migrate"); code != 1 || !strings.Contains(stderr, "--leader-election-namespace") {
		t.Errorf("migrate without a Lease namespace: exit %d, stderr %q", code, stderr)
	}
	if code, _, stderr := run(t, "migrate", "--leader-election-namespace", "x", "--deployments", " , "); code != 1 || !strings.Contains(stderr, "--deployments") {
		t.Errorf("migrate with no Deployments: exit %d, stderr %q", code, stderr)
	}
	if code, _, stderr := run(t, "webhook"); code != 1 || !strings.Contains(stderr, "--tls-cert-file") {
		t.Errorf("webhook without TLS flags: exit %d, %q", code, stderr)
	}
}

// The proxy's flag checks (a known auth mode; TLS off loopback; own-identity on loopback only; an https webhook
// upstream) refuse before anything listens or reads a kubeconfig.
func TestProxyFlags(t *testing.T) {
	for _, c := range []struct {
		args []string
		want string
	}{
		{[]string{"proxy", "--auth", "anonymous"}, `--auth "anonymous"`},
		{[]string{"proxy", "--listen", "0.0.0.0:8080"}, "needs --tls-cert-file and --tls-private-key-file"},
		{[]string{"proxy", "--listen", "10.0.0.1:8080", "--tls-cert-file", "c", "--tls-private-key-file", "k", "--auth", "own-identity"}, "loopback only"},
		{[]string{"proxy", "--webhook-upstream", "http://127.0.0.1:9443"}, "an https URL"},
	} {
		code, _, stderr := run(t, c.args...)
		if code != 1 || !strings.Contains(stderr, c.want) {
			t.Errorf("%v: exit %d, stderr %q, want %q", c.args, code, stderr, c.want)
		}
	}
}

func TestCRDsGenerate(t *testing.T) {
	dir := t.TempDir()
	ca := filepath.Join(dir, "ca.pem")
	if err := os.WriteFile(ca, []byte("-----BEGIN CERTIFICATE-----\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	code, stdout, stderr := run(t, "crds", "generate", "--webhook-url", "https://127.0.0.1:9443/convert", "--ca-bundle-file", ca)
	if code != 0 {
		t.Fatalf("exit %d: %s", code, stderr)
	}
	docs := strings.Split(stdout, "\n---\n")
	if len(docs) != len(crds.Sources) {
		t.Fatalf("%d documents, want one per private CRD (%d)", len(docs), len(crds.Sources))
	}
	webhooks := 0
	for _, doc := range docs {
		var crd apiextensionsv1.CustomResourceDefinition
		if err := yaml.UnmarshalStrict([]byte(doc), &crd); err != nil {
			t.Fatal(err)
		}
		if crd.Spec.Conversion.Strategy != apiextensionsv1.WebhookConverter {
			continue
		}
		webhooks++
		cc := crd.Spec.Conversion.Webhook.ClientConfig
		if cc.URL == nil || *cc.URL != "https://127.0.0.1:9443/convert" || cc.Service != nil || string(cc.CABundle) != "-----BEGIN CERTIFICATE-----\n" {
			t.Errorf("%s: clientConfig %+v", crd.Name, cc)
		}
	}
	// Core Cluster API's 12 kinds and CAPIBM's 8 multi-version kinds; every other provider serves one version.
	if webhooks != 20 {
		t.Errorf("%d CRDs with a conversion webhook, want 20", webhooks)
	}

	out := filepath.Join(dir, "out")
	if code, _, stderr := run(t, "crds", "generate", "--webhook-service-namespace", "hcp", "--output-dir", out); code != 0 {
		t.Fatalf("exit %d: %s", code, stderr)
	}
	data, err := os.ReadFile(filepath.Join(out, "machines.cluster.hypershift.openshift.io.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	var crd apiextensionsv1.CustomResourceDefinition
	if err := yaml.UnmarshalStrict(data, &crd); err != nil {
		t.Fatal(err)
	}
	if s := crd.Spec.Conversion.Webhook.ClientConfig.Service; s == nil || s.Namespace != "hcp" || s.Name != "capi-private-webhook" || *s.Path != "/convert" {
		t.Errorf("service %+v", s)
	}
}

// spPackages are acm-cluster-sp's runtime and dev harness (every package under these folders): neither
// capi-private binary may link one.
var spPackages = []string{"/internal/sp/", "/internal/devtest/sp/"}

// testMachinery is capi-private's (and the shared) test and dev machinery: only cmd/capi-private-dev links it.
var testMachinery = []string{"/internal/devtest/", "/internal/capiprivate/crds/upstream"}

func deps(t *testing.T, pkg string) []string {
	t.Helper()
	out, err := exec.Command("go", "list", "-deps", pkg).CombinedOutput()
	if err != nil {
		t.Fatalf("go list: %v\n%s", err, out)
	}
	return strings.Fields(string(out))
}

func linked(pkgs []string, suffixes []string) []string {
	var out []string
	for _, pkg := range pkgs {
		for _, f := range suffixes {
			if p := "github.com/dcm-sp/acm-cluster-sp" + f; pkg == p || strings.HasPrefix(pkg, p) && strings.HasSuffix(f, "/") {
				out = append(out, pkg)
			}
		}
	}
	return out
}

// capi-private shares no runtime package with acm-cluster-sp, and links none of our test machinery. (It does
// link the standard library's testing package: upstream's util/conversion, which every v1beta1 API package
// imports for MarshalData, also holds FuzzTestFunc.) The dev binary links the test machinery, still no SP package.
func TestBinaryDependencies(t *testing.T) {
	prod := deps(t, "github.com/dcm-sp/acm-cluster-sp/cmd/capi-private")
	for _, pkg := range linked(prod, append(slices.Clone(spPackages), testMachinery...)) {
		t.Errorf("cmd/capi-private links %s", pkg)
	}
	for _, pkg := range prod {
		if strings.Contains(pkg, "controller-runtime/pkg/envtest") || strings.HasPrefix(pkg, "sigs.k8s.io/cluster-api/controllers") {
			t.Errorf("cmd/capi-private links test machinery: %s", pkg)
		}
	}
	dev := deps(t, "github.com/dcm-sp/acm-cluster-sp/cmd/capi-private-dev")
	for _, pkg := range linked(dev, spPackages) {
		t.Errorf("cmd/capi-private-dev links %s", pkg)
	}
	if !slices.Contains(dev, "github.com/dcm-sp/acm-cluster-sp/internal/devtest/capi/devcmd") {
		t.Error("cmd/capi-private-dev does not link devcmd")
	}
}

// Listeners reachable from beyond the pod default to the pod's IP (POD_IP, from the downward API), never to every
// interface; without POD_IP they fall back to loopback. Metrics stay on loopback.
func TestListenDefaults(t *testing.T) {
	for _, c := range []struct {
		podIP string
		port  int
		want  string
	}{
		{"10.128.2.7", 9443, "10.128.2.7:9443"},
		{"fd01:0:0:1::7", 9444, "[fd01:0:0:1::7]:9444"},
		{"", 9443, "127.0.0.1:9443"},
		{"not-an-ip", 9443, "127.0.0.1:9443"},
		{"0.0.0.0", 9443, "127.0.0.1:9443"},
		{"::", 9443, "127.0.0.1:9443"},
	} {
		if got := podListen(c.podIP, c.port); got != c.want {
			t.Errorf("podListen(%q, %d) = %q, want %q", c.podIP, c.port, got, c.want)
		}
	}

	t.Setenv("POD_IP", "10.128.2.7")
	root := newRoot(&bytes.Buffer{}, &bytes.Buffer{})
	for _, c := range []struct{ cmd, flag, want string }{
		{"webhook", "listen", "10.128.2.7:9443"},
		{"webhook", "metrics-listen", "127.0.0.1:9440"},
		{"proxy", "webhook-listen", "10.128.2.7:9444"},
		{"proxy", "listen", "127.0.0.1:8080"},
		{"proxy", "metrics-listen", "127.0.0.1:9441"},
		{"inject", "listen", "10.128.2.7:9443"},
		{"inject", "metrics-listen", "127.0.0.1:9444"},
		{"rbac-mirror", "metrics-listen", "127.0.0.1:9446"},
	} {
		cmd, _, err := root.Find([]string{c.cmd})
		if err != nil {
			t.Fatal(err)
		}
		if f := cmd.Flags().Lookup(c.flag); f == nil || f.DefValue != c.want {
			t.Errorf("%s --%s default %v, want %s", c.cmd, c.flag, f, c.want)
		}
	}
}
