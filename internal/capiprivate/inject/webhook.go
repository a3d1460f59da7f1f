package inject

import (
	"context"
	"encoding/json"
	"net/http"
	"strings"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	admissionv1 "k8s.io/api/admission/v1"
	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/selection"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/webhook/admission"
)

// Path is where kube-apiserver sends the Pod AdmissionReviews.
const Path = "/inject"

// Webhook names in the MutatingWebhookConfiguration.
const (
	ComponentsWebhook = "components.inject.capi-private.hypershift.openshift.io"
	OperatorWebhook   = "operator.inject.capi-private.hypershift.openshift.io"
)

// WebhookConfiguration is the MutatingWebhookConfiguration name that sends exactly c's target Pods to the
// injector at cc (whose service path or URL must end in Path). Both webhooks fail closed (failurePolicy Fail).
// The components webhook selects the control plane components by ComponentLabel in every hosted control plane
// namespace (HostedControlPlaneLabel=true: HyperShift labels the namespace before it creates a component, so a
// cluster is proxied from its first Pod), and the injector decides each namespace's route (RouteOf). The operator
// webhook selects the operator by OperatorSelector in namespaces labelled MarkerLabel=MarkerValue (the private
// operator's, by its install). A Pod that matches neither never reaches the injector, so it is never blocked by
// it; a Pod that matches is refused while the injector is down.
func WebhookConfiguration(name string, c *Config, cc admissionregistrationv1.WebhookClientConfig) *admissionregistrationv1.MutatingWebhookConfiguration {
	var hooks []admissionregistrationv1.MutatingWebhook
	if len(c.Reroutes) > 0 {
		ns := &metav1.LabelSelector{MatchLabels: map[string]string{HostedControlPlaneLabel: "true"}}
		sel := &metav1.LabelSelector{MatchExpressions: []metav1.LabelSelectorRequirement{{
			Key: c.ComponentLabel, Operator: metav1.LabelSelectorOpIn, Values: c.components(),
		}}}
		hooks = append(hooks, podWebhook(ComponentsWebhook, cc, ns, sel))
	}
	if c.OperatorSelector != nil && !c.OperatorSelector.Empty() {
		ns := &metav1.LabelSelector{MatchLabels: map[string]string{MarkerLabel: MarkerValue}}
		hooks = append(hooks, podWebhook(OperatorWebhook, cc, ns, selectorOf(c)))
	}
	return &admissionregistrationv1.MutatingWebhookConfiguration{ObjectMeta: metav1.ObjectMeta{Name: name}, Webhooks: hooks}
}

func podWebhook(name string, cc admissionregistrationv1.WebhookClientConfig, ns, obj *metav1.LabelSelector) admissionregistrationv1.MutatingWebhook {
	return admissionregistrationv1.MutatingWebhook{
		Name: name, ClientConfig: *cc.DeepCopy(),
		Rules: []admissionregistrationv1.RuleWithOperations{{
			Operations: []admissionregistrationv1.OperationType{admissionregistrationv1.Create},
			Rule: admissionregistrationv1.Rule{
				APIGroups: []string{""}, APIVersions: []string{"v1"}, Resources: []string{"pods"},
				Scope: ptr.To(admissionregistrationv1.NamespacedScope),
			},
		}},
		FailurePolicy: ptr.To(admissionregistrationv1.Fail), MatchPolicy: ptr.To(admissionregistrationv1.Equivalent),
		NamespaceSelector: ns.DeepCopy(), ObjectSelector: obj,
		SideEffects:             ptr.To(admissionregistrationv1.SideEffectClassNone),
		TimeoutSeconds:          ptr.To[int32](10),
		AdmissionReviewVersions: []string{"v1"},
		ReinvocationPolicy:      ptr.To(admissionregistrationv1.NeverReinvocationPolicy),
	}
}

// selectorOf is OperatorSelector as a LabelSelector (labels.Selector's requirements map one to one).
func selectorOf(c *Config) *metav1.LabelSelector {
	reqs, _ := c.OperatorSelector.Requirements()
	out := &metav1.LabelSelector{}
	ops := map[selection.Operator]metav1.LabelSelectorOperator{
		selection.Equals: metav1.LabelSelectorOpIn, selection.DoubleEquals: metav1.LabelSelectorOpIn, selection.In: metav1.LabelSelectorOpIn,
		selection.NotEquals: metav1.LabelSelectorOpNotIn, selection.NotIn: metav1.LabelSelectorOpNotIn,
		selection.Exists: metav1.LabelSelectorOpExists, selection.DoesNotExist: metav1.LabelSelectorOpDoesNotExist,
	}
	for _, r := range reqs {
		req := metav1.LabelSelectorRequirement{Key: r.Key(), Operator: ops[r.Operator()]}
		if req.Operator == metav1.LabelSelectorOpIn || req.Operator == metav1.LabelSelectorOpNotIn {
			req.Values = r.Values().List()
		}
		out.MatchExpressions = append(out.MatchExpressions, req)
	}
	return out
}

// Router says a hosted control plane namespace's route (Routes).
type Router interface {
	Route(ctx context.Context, namespace string) (RouteDecision, error)
}

// Handler is the admission handler: it decodes the Pod, asks the namespace's route for a control plane
// component and Inject, and answers with the JSON patch, an unchanged admission or a denial.
type Handler struct {
	Config  *Config
	Routes  Router
	Metrics *Metrics
	decoder admission.Decoder
}

// NewHandler builds the admission webhook (an http.Handler) for c, deciding namespaces' routes with r and counting
// into m (nil: no metrics).
func NewHandler(c *Config, r Router, m *Metrics) http.Handler {
	h := &Handler{Config: c, Routes: r, Metrics: m, decoder: admission.NewDecoder(runtime.NewScheme())}
	return &admission.Webhook{Handler: h}
}

// Handle implements admission.Handler.
func (h *Handler) Handle(ctx context.Context, req admission.Request) admission.Response {
	start := time.Now()
	if req.Kind.Group != "" || req.Kind.Kind != "Pod" || req.Operation != admissionv1.Create {
		return admission.Allowed("not a Pod create")
	}
	pod := &corev1.Pod{}
	if err := h.decoder.Decode(req, pod); err != nil {
		return admission.Errored(http.StatusBadRequest, err)
	}
	if pod.Namespace == "" {
		pod.Namespace = req.Namespace
	}
	if comp, _, ok := h.Config.Target(pod); ok && comp != OperatorComponent {
		r, err := h.Routes.Route(ctx, pod.Namespace)
		if err != nil {
			h.Metrics.observe(Decision{Component: comp, Result: Refused}, time.Since(start))
			return admission.Denied("capi-private sidecar injection (" + comp + "): cannot decide the namespace's route, retry: " + err.Error())
		}
		switch r.Route {
		case Unknown:
			h.Metrics.observe(Decision{Component: comp, Result: Refused}, time.Since(start))
			return admission.Denied("capi-private sidecar injection (" + comp + "): undecided, retry: " + r.Reason)
		case Direct:
			h.Metrics.observe(Decision{Component: comp, Result: NotTarget}, time.Since(start))
			return admission.Allowed("not proxied: " + r.Reason)
		}
	}
	out, d := Inject(pod, h.Config)
	h.Metrics.observe(d, time.Since(start))
	switch d.Result {
	case Refused:
		return admission.Denied("capi-private sidecar injection (" + d.Component + "): " + d.Reason)
	case Injected:
		raw, err := json.Marshal(out)
		if err != nil {
			return admission.Errored(http.StatusInternalServerError, err)
		}
		resp := admission.PatchResponseFromRaw(req.Object.Raw, raw)
		if len(d.Skipped) > 0 {
			resp.Warnings = append(resp.Warnings, "capi-private: containers not rerouted: "+describe(d.Skipped))
		}
		return resp
	}
	return admission.Allowed(strings.ReplaceAll(string(d.Result), "_", " "))
}

// Metrics of the injector.
type Metrics struct {
	Pods     *prometheus.CounterVec
	Duration prometheus.Histogram
}

// NewMetrics registers the injector's metrics with reg.
func NewMetrics(reg prometheus.Registerer) (*Metrics, error) {
	m := &Metrics{
		Pods: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "capi_private_inject_pods_total", Help: "Pod admissions the injector answered, by component and result.",
		}, []string{"component", "result"}),
		Duration: prometheus.NewHistogram(prometheus.HistogramOpts{
			Name: "capi_private_inject_decision_duration_seconds", Help: "Time to decide and build one Pod's injection.",
			Buckets: prometheus.ExponentialBuckets(0.00005, 2, 14),
		}),
	}
	for _, c := range []prometheus.Collector{m.Pods, m.Duration} {
		if err := reg.Register(c); err != nil {
			return nil, err
		}
	}
	return m, nil
}

func (m *Metrics) observe(d Decision, took time.Duration) {
	if m == nil {
		return
	}
	m.Pods.WithLabelValues(d.Component, string(d.Result)).Inc()
	m.Duration.Observe(took.Seconds())
}
