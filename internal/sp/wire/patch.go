package wire

import (
	"encoding/json"

	"github.com/dcm-sp/acm-cluster-sp/internal/sp/clusters"
)

// DecodePatch reads an update body — {"spec": …}, an RFC 7396 merge patch of the spec and nothing else — and
// applies it to stored, the spec stored at create (its canonical JSON). Merged is the spec as a create body would
// carry it: encoded and decoded again, so the stored and the patched values come as the same number type.
func DecodePatch(body []byte, stored string) (clusters.Patch, error) {
	var obj map[string]any
	if err := decode(body, &obj, "request body is not a JSON object"); err != nil {
		return clusters.Patch{}, err
	}
	for k := range obj {
		if k != "spec" {
			return clusters.Patch{}, clusters.InvalidFields([]clusters.FieldError{{Field: k, Message: "unknown field: an update is a merge patch of {\"spec\": {…}}"}})
		}
	}
	changes, ok := obj["spec"].(map[string]any)
	if !ok {
		return clusters.Patch{}, clusters.InvalidFields([]clusters.FieldError{{Field: "spec", Message: "must be an object"}})
	}
	var old map[string]any
	if err := json.Unmarshal([]byte(stored), &old); err != nil {
		return clusters.Patch{}, &clusters.Error{Kind: clusters.KindInternal, Message: "reading the stored spec", Err: err}
	}
	var merged map[string]any
	data, err := json.Marshal(MergePatch(old, changes))
	if err == nil {
		err = decode(data, &merged, "the patched spec")
	}
	if err != nil {
		return clusters.Patch{}, &clusters.Error{Kind: clusters.KindInternal, Message: "applying the patch", Err: err}
	}
	return clusters.Patch{Changes: changes, Stored: old, Merged: merged}, nil
}

// MergePatch applies an RFC 7396 merge patch to target and returns the result (target is not changed): null
// removes a key, an object merges into the object it names, anything else replaces.
func MergePatch(target, patch map[string]any) map[string]any {
	out := make(map[string]any, len(target))
	for k, v := range target {
		out[k] = v
	}
	for k, v := range patch {
		switch pv := v.(type) {
		case nil:
			delete(out, k)
		case map[string]any:
			t, _ := out[k].(map[string]any)
			out[k] = MergePatch(t, pv)
		default:
			out[k] = v
		}
	}
	return out
}
