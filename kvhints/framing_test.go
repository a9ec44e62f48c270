package kvhints

import (
	"testing"
	"unicode/utf8"
)

func TestBodyTooLarge(t *testing.T) {
	for _, c := range []struct {
		n      int64
		limit  int
		status int
	}{
		{-1, 10, 0}, {0, 10, 0}, {10, 10, 0}, {11, 10, 413}, {1 << 40, 4 << 20, 413}, {4<<20 + 1, 4 << 20, 413},
	} {
		status, msg := BodyTooLarge(c.n, c.limit)
		if status != c.status || (status == 0) != (msg == "") {
			t.Errorf("BodyTooLarge(%d, %d) = %d %q, want %d", c.n, c.limit, status, msg, c.status)
		}
	}
	if _, msg := BodyTooLarge(5, 4); msg != "request body is larger than the limit of 4 bytes" {
		t.Errorf("message %q", msg)
	}
	// The rewrite's own 413 is the same decision, with the same words.
	var rw Rewriter
	if _, res := rw.Rewrite([]byte(`{"a":1}`), Policy{MaxBodyBytes: 4}); res.Outcome != OutcomeRejected || res.Status != 413 || res.Message != TooLargeMessage(4) {
		t.Errorf("Rewrite over the limit: %+v", res)
	}
}

func TestCheckContentEncoding(t *testing.T) {
	for v, want := range map[string]int{"": 0, "identity": 0, "Identity, identity": 0, " , ": 0,
		"gzip": 415, "br": 415, "identity, gzip": 415, "x\xff": 415} {
		got, msg := CheckContentEncoding(v)
		if got != want || (got == 0) != (msg == "") || !utf8.ValidString(msg) {
			t.Errorf("%q: %d %q, want %d", v, got, msg, want)
		}
	}
}
