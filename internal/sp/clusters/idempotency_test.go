package clusters

import (
	"strings"
	"testing"
)

func TestIdempotencyKeys(t *testing.T) {
	ok := []string{"0b8d5c4e-7f1a-4c59-9a55-2f3b8f0e6d21", "a", strings.Repeat("k", MaxIdempotencyKeyLength), "ce:01J9Z3/ABC+x=~!"}
	for _, k := range ok {
		if err := CheckIdempotencyKey(k); err != nil {
			t.Errorf("%q refused: %v", k, err)
		}
		id := KeyID(k)
		if err := CheckID(id); err != nil || len(id) != 36 {
			t.Errorf("KeyID(%q) = %q is not an instance id: %v", k, id, err)
		}
		if KeyID(k) != id {
			t.Errorf("KeyID(%q) is not deterministic", k)
		}
	}
	if KeyID("a") == KeyID("b") {
		t.Error("two keys, one id")
	}
	// A fixed value: the derivation is part of the contract (an id once given must be derived again after an
	// upgrade of the SP).
	if got := KeyID("0b8d5c4e-7f1a-4c59-9a55-2f3b8f0e6d21"); got != "82be99e6-eba2-5fba-b0f7-6099b054bdef" {
		t.Errorf("KeyID = %s: the derivation changed", got)
	}
	for _, k := range []string{"", strings.Repeat("k", MaxIdempotencyKeyLength+1), "with space", "tab\t", "nl\n", "é"} {
		err := CheckIdempotencyKey(k)
		if err == nil || KindOf(err) != KindInvalid || !strings.Contains(err.Error(), "Idempotency-Key") {
			t.Errorf("%q: %v, want a 400 naming Idempotency-Key", k, err)
		}
	}
}
