package hub

import "encoding/json"

// parseSupportedVersions reads the operator's ConfigMap value {"versions":["4.20","4.19",…]}.
func parseSupportedVersions(s string) ([]string, bool) {
	var v struct {
		Versions []string `json:"versions"`
	}
	if s == "" || json.Unmarshal([]byte(s), &v) != nil {
		return nil, false
	}
	return v.Versions, true
}
