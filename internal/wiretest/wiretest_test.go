package wiretest

import (
	"bytes"
	"testing"
	"unicode/utf16"
)

func TestEncodings(t *testing.T) {
	if got, want := GRPCFrame(1, []byte("ab")), []byte{1, 0, 0, 0, 2, 'a', 'b'}; !bytes.Equal(got, want) {
		t.Errorf("GRPCFrame = %v, want %v", got, want)
	}
	if got, want := GRPCFrame(0, make([]byte, 0x10203)), []byte{0, 0, 1, 2, 3}; !bytes.Equal(got[:5], want) || len(got) != 5+0x10203 {
		t.Errorf("GRPCFrame prefix = %v (len %d), want %v", got[:5], len(got), want)
	}
	if got, want := UTF32BE(`{"é"}`), []byte{0, 0, 0, '{', 0, 0, 0, '"', 0, 0, 0, 0xe9, 0, 0, 0, '"', 0, 0, 0, '}'}; !bytes.Equal(got, want) {
		t.Errorf("UTF32BE = %v, want %v", got, want)
	}
	s := `{"kv_hints":1}`
	u := utf16.Encode([]rune(s))
	got := UTF16BE(s)
	for i, c := range u {
		if got[2*i] != byte(c>>8) || got[2*i+1] != byte(c) {
			t.Fatalf("UTF16BE(%q) = %v, unit %d wrong", s, got, i)
		}
	}
	if len(got) != 2*len(u) {
		t.Errorf("UTF16BE length %d, want %d", len(got), 2*len(u))
	}
}
