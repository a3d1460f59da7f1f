package clusters

import (
	"encoding/base64"
	"encoding/binary"
	"hash/crc32"
	"strconv"
	"strings"
	"time"
)

// Page sizes of LIST (AEP-158 as DCM's providers apply it).
const (
	DefaultPageSize = 50
	MaxPageSize     = 100
)

// PageSize applies the default and the clamp: absent → 50, above 100 → 100, below 1 → invalid.
func PageSize(requested *int) (int, error) {
	if requested == nil {
		return DefaultPageSize, nil
	}
	n := *requested
	if n < 1 {
		return 0, &Error{Kind: KindInvalid, Message: "max_page_size: must be at least 1", Fields: []FieldError{{"max_page_size", "must be at least 1"}}}
	}
	if n > MaxPageSize {
		return MaxPageSize, nil
	}
	return n, nil
}

// EncodePageToken makes the opaque keyset token of the last item of a page: base64url of
// "<unix nanos>/<id>" followed by a CRC-32 of it, so that an edited token is detected rather than silently seeking
// somewhere else.
func EncodePageToken(k Key) string {
	payload := strconv.FormatInt(k.Created.UnixNano(), 10) + "/" + k.ID
	sum := make([]byte, 4)
	binary.BigEndian.PutUint32(sum, crc32.ChecksumIEEE([]byte(payload)))
	return base64.RawURLEncoding.EncodeToString(append([]byte(payload), sum...))
}

// DecodePageToken reverses EncodePageToken; a malformed or altered token is a KindInvalid error.
func DecodePageToken(token string) (Key, error) {
	bad := &Error{Kind: KindInvalid, Message: "page_token: invalid or altered; use the next_page_token of a previous page", Fields: []FieldError{{"page_token", "invalid or altered"}}}
	raw, err := base64.RawURLEncoding.DecodeString(token)
	if err != nil || len(raw) < 6 {
		return Key{}, bad
	}
	payload, sum := raw[:len(raw)-4], raw[len(raw)-4:]
	if crc32.ChecksumIEEE(payload) != binary.BigEndian.Uint32(sum) {
		return Key{}, bad
	}
	nanos, id, ok := strings.Cut(string(payload), "/")
	n, err := strconv.ParseInt(nanos, 10, 64)
	if !ok || err != nil || id == "" {
		return Key{}, bad
	}
	return Key{Created: time.Unix(0, n).UTC(), ID: id}, nil
}
