package translate

import (
	"encoding/base64"
)

// The proxy's second direction (its admission side): CAPI's own validating and defaulting webhooks guard the private
// CRDs. kube-apiserver sends them AdmissionReviews about private objects; the proxy's webhook side translates each
// review private → standard (the response direction of the API proxy: what kube-apiserver stores becomes what a
// CAPI binary expects) and the webhook's answer standard → private (the request direction), patch included.

// AdmissionRequest translates an admission.k8s.io AdmissionReview sent by kube-apiserver (private → standard, and
// standard → escaped, exactly like an API response): the group of request.kind, request.resource,
// request.requestKind and request.requestResource, and request.object, request.oldObject and request.options
// through the object rule. request.userInfo is opaque. A review without needles is returned as is.
func (t *Translator) AdmissionRequest(review []byte) (Result, error) {
	if !t.needsResponse(review) {
		return Result{Body: review}, nil
	}
	return t.admission(DirectionResponse, review)
}

// AdmissionResponse translates the AdmissionReview a webhook answered with back to what kube-apiserver stores
// (standard → private, escaped → standard, like an API request): response.patch, a base64 JSON patch, is decoded,
// translated like a request JSON patch (values at …/apiVersion, …/apiGroup, …/apiGroups/N and object values
// through the rule; labels, annotations and finalizers untouched; pointers never rewritten) and re-encoded;
// response.status.details.group too. Messages and warnings are free text and stay as the webhook wrote them.
// The patch cannot be checked for needles without decoding it, so a review with a patch always takes the slow path.
func (t *Translator) AdmissionResponse(review []byte) (Result, error) {
	return t.admission(DirectionRequest, review)
}

func (t *Translator) admission(dir Direction, review []byte) (Result, error) {
	if p := skipWS(review, 0); p >= len(review) || review[p] != '{' {
		return Result{}, newError(ReasonInvalidAdmissionReview, p, "an AdmissionReview is a JSON object")
	}
	return t.rewrite(dir, review, sAdmission, Context{})
}

// patch translates the base64 JSON patch whose string literal is in[vs:ve].
func (w *rewriter) patch(vs, ve int) error {
	enc := unquote(w.in[vs:ve])
	raw, err := base64.StdEncoding.DecodeString(enc)
	if err != nil {
		return newError(ReasonInvalidAdmissionReview, vs, "response.patch is not base64: %v", err)
	}
	res, err := w.t.jsonPatch(w.dir, raw, Context{})
	if err != nil {
		return err
	}
	if !res.Changed {
		return nil
	}
	w.emit(vs, ve)
	w.out = appendQuoted(w.out, base64.StdEncoding.EncodeToString(res.Body))
	return nil
}
