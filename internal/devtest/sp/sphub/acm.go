package sphub

import (
	"context"
	"crypto/tls"
	"encoding/json"
	"fmt"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"time"

	admissionv1 "k8s.io/api/admission/v1"
	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
	authenticationv1 "k8s.io/api/authentication/v1"
	authorizationv1 "k8s.io/api/authorization/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"k8s.io/utils/ptr"
	clusterv1 "open-cluster-management.io/api/cluster/v1"
)

// ClusterSetLabel assigns a ManagedCluster to a ManagedClusterSet.
const ClusterSetLabel = "cluster.open-cluster-management.io/clusterset"

// acmWebhook plays the part of ACM's registration webhook that matters to the SP's RBAC: whoever creates a
// ManagedCluster that the hub accepts (spec.hubAcceptsClient) must be allowed update on
// register.open-cluster-management.io managedclusters/accept, and whoever puts it into a ManagedClusterSet must be
// allowed create on cluster.open-cluster-management.io managedclustersets/join for that set. ACM itself cannot run
// on the local hub; its webhook's checks are these two SubjectAccessReviews.
type acmWebhook struct {
	sar kubernetes.Interface
	srv *http.Server
}

// startACMWebhook serves the webhook over HTTPS on loopback (a listener it keeps) and registers it for
// ManagedCluster creates and updates.
func startACMWebhook(ctx context.Context, cfg *rest.Config, dir string) (*acmWebhook, error) {
	cs, err := kubernetes.NewForConfig(cfg)
	if err != nil {
		return nil, err
	}
	certDir := filepath.Join(dir, "acm-webhook")
	if err := os.MkdirAll(certDir, 0o700); err != nil {
		return nil, err
	}
	caFile, certFile, keyFile, err := SelfSignedServing(certDir)
	if err != nil {
		return nil, err
	}
	cert, err := tls.LoadX509KeyPair(certFile, keyFile)
	if err != nil {
		return nil, err
	}
	caPEM, err := os.ReadFile(caFile)
	if err != nil {
		return nil, err
	}
	l, err := tls.Listen("tcp", "127.0.0.1:0", &tls.Config{Certificates: []tls.Certificate{cert}, MinVersion: tls.VersionTLS12})
	if err != nil {
		return nil, err
	}
	w := &acmWebhook{sar: cs}
	mux := http.NewServeMux()
	mux.HandleFunc("/validate-managedclusters", w.validate)
	w.srv = &http.Server{Handler: mux, ReadHeaderTimeout: 10 * time.Second}
	go func() { _ = w.srv.Serve(l) }()

	url := fmt.Sprintf("https://%s/validate-managedclusters", l.Addr().(*net.TCPAddr).String())
	vwc := &admissionregistrationv1.ValidatingWebhookConfiguration{
		ObjectMeta: metav1.ObjectMeta{Name: "acm-managedcluster-validator.local-hub"},
		Webhooks: []admissionregistrationv1.ValidatingWebhook{{
			Name:                    "managedclustervalidators.admission.cluster.open-cluster-management.io",
			ClientConfig:            admissionregistrationv1.WebhookClientConfig{URL: &url, CABundle: caPEM},
			Rules:                   []admissionregistrationv1.RuleWithOperations{{Operations: []admissionregistrationv1.OperationType{admissionregistrationv1.Create, admissionregistrationv1.Update}, Rule: admissionregistrationv1.Rule{APIGroups: []string{clusterv1.GroupName}, APIVersions: []string{"v1"}, Resources: []string{"managedclusters"}}}},
			FailurePolicy:           ptr.To(admissionregistrationv1.Fail),
			SideEffects:             ptr.To(admissionregistrationv1.SideEffectClassNone),
			AdmissionReviewVersions: []string{"v1"},
			TimeoutSeconds:          ptr.To[int32](10),
		}},
	}
	if _, err := cs.AdmissionregistrationV1().ValidatingWebhookConfigurations().Create(ctx, vwc, metav1.CreateOptions{}); err != nil {
		_ = w.srv.Close()
		return nil, fmt.Errorf("registering the ACM webhook stand-in: %w", err)
	}
	return w, nil
}

func (w *acmWebhook) close() {
	if w != nil {
		_ = w.srv.Close()
	}
}

func (w *acmWebhook) validate(rw http.ResponseWriter, r *http.Request) {
	var review admissionv1.AdmissionReview
	if err := json.NewDecoder(r.Body).Decode(&review); err != nil || review.Request == nil {
		http.Error(rw, "not an AdmissionReview", http.StatusBadRequest)
		return
	}
	req := review.Request
	resp := &admissionv1.AdmissionResponse{UID: req.UID, Allowed: true}
	var mc, old clusterv1.ManagedCluster
	_ = json.Unmarshal(req.Object.Raw, &mc)
	if req.OldObject.Raw != nil {
		_ = json.Unmarshal(req.OldObject.Raw, &old)
	}
	deny := func(msg string) {
		resp.Allowed = false
		resp.Result = &metav1.Status{Status: metav1.StatusFailure, Code: http.StatusForbidden, Reason: metav1.StatusReasonForbidden, Message: msg}
	}
	if mc.Spec.HubAcceptsClient && (req.Operation == admissionv1.Create || !old.Spec.HubAcceptsClient) {
		if !w.allowed(r.Context(), req.UserInfo, "register.open-cluster-management.io", "managedclusters", "accept", "update", mc.Name) {
			deny(fmt.Sprintf("user %q cannot update the HubAcceptsClient field", req.UserInfo.Username))
		}
	}
	if set := mc.Labels[ClusterSetLabel]; resp.Allowed && set != "" && set != old.Labels[ClusterSetLabel] {
		if !w.allowed(r.Context(), req.UserInfo, clusterv1.GroupName, "managedclustersets", "join", "create", set) {
			deny(fmt.Sprintf("user %q cannot add/remove a ManagedCluster to/from ManagedClusterSet %q", req.UserInfo.Username, set))
		}
	}
	review.Response = resp
	review.Request = nil
	rw.Header().Set("Content-Type", "application/json")
	_ = json.NewEncoder(rw).Encode(review)
}

func (w *acmWebhook) allowed(ctx context.Context, ui authenticationv1.UserInfo, group, resource, sub, verb, name string) bool {
	extra := map[string]authorizationv1.ExtraValue{}
	for k, v := range ui.Extra {
		extra[k] = authorizationv1.ExtraValue(v)
	}
	sar := &authorizationv1.SubjectAccessReview{Spec: authorizationv1.SubjectAccessReviewSpec{
		User: ui.Username, Groups: ui.Groups, UID: ui.UID, Extra: extra,
		ResourceAttributes: &authorizationv1.ResourceAttributes{Group: group, Resource: resource, Subresource: sub, Verb: verb, Name: name},
	}}
	got, err := w.sar.AuthorizationV1().SubjectAccessReviews().Create(ctx, sar, metav1.CreateOptions{})
	return err == nil && got.Status.Allowed
}
