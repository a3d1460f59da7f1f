package clusters

import (
	"encoding/json"
	"errors"
)

// CheckPullSecret verifies a dockerconfigjson: JSON with a non-empty "auths" object. The error never quotes the
// content.
func CheckPullSecret(data []byte) error {
	var v struct {
		Auths map[string]json.RawMessage `json:"auths"`
	}
	if err := json.Unmarshal(data, &v); err != nil {
		return errors.New("pull secret is not JSON")
	}
	if len(v.Auths) == 0 {
		return errors.New("pull secret has no \"auths\" entries")
	}
	return nil
}
