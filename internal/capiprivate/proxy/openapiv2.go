package proxy

import (
	"sync"

	openapi_v2 "github.com/google/gnostic-models/openapiv2"
	"google.golang.org/protobuf/proto"
)

// The OpenAPI v2 document is requested from kube-apiserver as JSON (the only encoding translated) and, for a
// client that asked for protobuf, encoded back after translation as kube-openapi's handler does (gnostic's
// Document). Encoding a whole document is costly, so the last result is kept, keyed by the upstream ETag (the
// translated bytes are a function of the upstream bytes).

// v2Protobuf caches the protobuf encoding of the last translated v2 document.
type v2Protobuf struct {
	mu   sync.Mutex
	etag string
	pb   []byte
}

// encode returns the protobuf encoding of the translated JSON document doc, whose upstream ETag is etag ("" when
// kube-apiserver sent none: not cached).
func (c *v2Protobuf) encode(etag string, doc []byte) ([]byte, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if etag != "" && etag == c.etag {
		return c.pb, nil
	}
	d, err := openapi_v2.ParseDocument(doc)
	if err != nil {
		return nil, err
	}
	pb, err := proto.Marshal(d)
	if err != nil {
		return nil, err
	}
	if etag != "" {
		c.etag, c.pb = etag, pb
	}
	return pb, nil
}
