package clusters

import (
	"errors"
	"fmt"

	"github.com/google/uuid"
)

// MaxIdempotencyKeyLength bounds an Idempotency-Key. DCM's Environment Agent sends the id of the CloudEvent that
// carried the request (a UUID today); any 4xx is final to it, so the bounds are wide enough for any CloudEvent id
// a producer would choose.
const MaxIdempotencyKeyLength = 256

// idempotencyNamespace is the UUIDv5 namespace of ids derived from Idempotency-Keys.
var idempotencyNamespace = uuid.NewSHA1(uuid.NameSpaceURL, []byte("https://acm-cluster-sp.dcm.io/idempotency-key"))

// CheckIdempotencyKey accepts 1–256 visible ASCII characters (0x21–0x7E): what fits a header, an annotation and a
// log line unescaped.
func CheckIdempotencyKey(key string) error {
	bad := len(key) == 0 || len(key) > MaxIdempotencyKeyLength
	for i := 0; i < len(key) && !bad; i++ {
		bad = key[i] < 0x21 || key[i] > 0x7e
	}
	if bad {
		return &Error{Kind: KindInvalid, Message: fmt.Sprintf("Idempotency-Key must be 1 to %d visible ASCII characters (no spaces)", MaxIdempotencyKeyLength),
			Fields: []FieldError{{Field: "Idempotency-Key", Message: "invalid format"}}}
	}
	return nil
}

// ErrInstanceKnown is the cause of a create's refusal that tells the instance exists or existed (a replay with
// another spec, a deleted keyed instance): the HTTP layer answers it only to a caller who may read the instance.
var ErrInstanceKnown = errors.New("the instance exists or existed")

// KeyID is the instance id of a create that names none but carries an Idempotency-Key: the UUIDv5 of the key, so
// every replica, before and after a restart, derives the same id from the same key (a valid id: 36 characters of
// lower-case hex and hyphens).
func KeyID(key string) string { return uuid.NewSHA1(idempotencyNamespace, []byte(key)).String() }
