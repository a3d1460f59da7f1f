package translate

import (
	"strings"
	"unicode"
)

// restFriendly is util.ToRESTFriendlyName's group part: the group's labels reversed
// (cluster.x-k8s.io → io.x-k8s.cluster).
func restFriendly(group string) string {
	parts := strings.Split(group, ".")
	for i, j := 0, len(parts)-1; i < j; i, j = i+1, j-1 {
		parts[i], parts[j] = parts[j], parts[i]
	}
	return strings.Join(parts, ".")
}

// operationID is the group token kube-apiserver puts in OpenAPI operation IDs and tags
// (k8s.io/apiserver/pkg/endpoints/openapi.GetOperationIDAndTags): the group without a ".k8s.io" suffix, letters
// only, each word capitalized (operation IDs) or all but the first (tags).
func operationID(group string, capitalizeFirst bool) string {
	s := strings.TrimSuffix(group, ".k8s.io")
	var b strings.Builder
	capitalize := capitalizeFirst
	for i, r := range s {
		if unicode.IsLetter(r) || r == '_' || (i != 0 && unicode.IsDigit(r)) {
			if capitalize {
				b.WriteRune(unicode.ToUpper(r))
				capitalize = false
			} else {
				b.WriteRune(r)
			}
		} else {
			capitalize = true
		}
	}
	return b.String()
}
