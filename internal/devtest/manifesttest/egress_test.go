package manifesttest

import (
	"net"
	"net/url"
	"slices"
	"strconv"
	"strings"
	"testing"

	networkingv1 "k8s.io/api/networking/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/runtime"
	"sigs.k8s.io/yaml"
)

// Every Pod either product installs is selected by an egress NetworkPolicy of its namespace, and that policy admits
// kube-apiserver's port.
func TestEveryPodHasAnEgressPolicy(t *testing.T) {
	for _, dir := range []string{"deploy", "deploy/capi-private/base"} {
		objs := Render(t, dir)
		n := 0
		for _, o := range objs {
			if o.GetKind() != "Deployment" {
				continue
			}
			n++
			podLabels, _, _ := unstructured.NestedStringMap(o.Object, "spec", "template", "metadata", "labels")
			var rules []networkingv1.NetworkPolicyEgressRule
			for _, p := range egressPolicies(t, objs, o.GetNamespace()) {
				if sel, err := metav1.LabelSelectorAsSelector(&p.Spec.PodSelector); err == nil && sel.Matches(labels.Set(podLabels)) {
					rules = append(rules, p.Spec.Egress...)
				}
			}
			if len(rules) == 0 {
				t.Errorf("%s: Deployment %s/%s is selected by no egress NetworkPolicy", dir, o.GetNamespace(), o.GetName())
			} else if !admits(rules, "", 6443) {
				t.Errorf("%s: the egress of Deployment %s does not admit kube-apiserver's port 6443 on any address", dir, o.GetName())
			}
		}
		if n == 0 {
			t.Errorf("%s: no Deployment rendered", dir)
		}
	}
}

// The SP's egress policy admits what its configuration calls: the registry and NATS, by their Service's namespace and
// port, so a change of either in config.yaml without the policy fails here.
func TestSPEgressAdmitsItsConfiguration(t *testing.T) {
	objs := Render(t, "deploy")
	var cm *unstructured.Unstructured
	for _, o := range objs {
		if o.GetKind() == "ConfigMap" && strings.HasPrefix(o.GetName(), "acm-cluster-sp-config") {
			cm = o
		}
	}
	if cm == nil {
		t.Fatal("no acm-cluster-sp-config ConfigMap rendered")
	}
	raw, _, _ := unstructured.NestedString(cm.Object, "data", "config.yaml")
	var cfg struct {
		NATSURL         string `json:"natsURL"`
		RegistrationURL string `json:"registrationURL"`
	}
	if err := yaml.Unmarshal([]byte(raw), &cfg); err != nil {
		t.Fatal(err)
	}
	var rules []networkingv1.NetworkPolicyEgressRule
	for _, p := range egressPolicies(t, objs, "acm-cluster-sp") {
		rules = append(rules, p.Spec.Egress...)
	}
	for _, raw := range []string{cfg.NATSURL, cfg.RegistrationURL} {
		u, err := url.Parse(raw)
		if err != nil || u.Port() == "" {
			t.Fatalf("%q: %v (no port)", raw, err)
		}
		host, _, _ := net.SplitHostPort(u.Host)
		parts := strings.Split(host, ".") // <service>.<namespace>.svc
		if len(parts) < 3 || parts[2] != "svc" {
			t.Fatalf("%q is not a Service address", raw)
		}
		port, _ := strconv.Atoi(u.Port())
		if !admits(rules, parts[1], port) {
			t.Errorf("the SP's egress does not admit %s (namespace %s, port %d)", raw, parts[1], port)
		}
	}
}

func egressPolicies(t *testing.T, objs []*unstructured.Unstructured, namespace string) []networkingv1.NetworkPolicy {
	t.Helper()
	var out []networkingv1.NetworkPolicy
	for _, o := range objs {
		if o.GetKind() != "NetworkPolicy" || o.GetNamespace() != namespace {
			continue
		}
		var p networkingv1.NetworkPolicy
		if err := runtime.DefaultUnstructuredConverter.FromUnstructured(o.Object, &p); err != nil {
			t.Fatal(err)
		}
		if slices.Contains(p.Spec.PolicyTypes, networkingv1.PolicyTypeEgress) {
			out = append(out, p)
		}
	}
	return out
}

// admits reports whether a rule lets TCP traffic out to port in namespace ("": any address, a rule without peers).
func admits(rules []networkingv1.NetworkPolicyEgressRule, namespace string, port int) bool {
	for _, r := range rules {
		portOK := len(r.Ports) == 0 || slices.ContainsFunc(r.Ports, func(p networkingv1.NetworkPolicyPort) bool {
			return p.Port != nil && p.Port.IntValue() == port
		})
		if !portOK {
			continue
		}
		if len(r.To) == 0 {
			return true
		}
		if namespace == "" {
			continue
		}
		for _, peer := range r.To {
			if peer.NamespaceSelector == nil || peer.PodSelector != nil || peer.IPBlock != nil {
				continue
			}
			if sel, err := metav1.LabelSelectorAsSelector(peer.NamespaceSelector); err == nil &&
				sel.Matches(labels.Set{"kubernetes.io/metadata.name": namespace}) {
				return true
			}
		}
	}
	return false
}
