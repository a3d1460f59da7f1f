// Package wire decodes the SP's request bodies into the plain values the domain validates: JSON syntax (numbers kept
// exact), the DCM form {"spec": …} or a bare spec, the API's two key spellings (snake_case and the design's
// camelCase), and RFC 7396 merge patches. It knows no rule of a cluster: internal/sp/clusters decides what the
// values mean (NewSpec, DecideUpdate). Every error is a clusters.Error, so the HTTP layer answers it like any other.
package wire
