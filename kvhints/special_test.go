package kvhints

import (
	"encoding/binary"
	"math/bits"
	"math/rand"
	"testing"
)

// TestStringSpecial checks the word test against a byte loop.
func TestStringSpecial(t *testing.T) {
	r := rand.New(rand.NewSource(1))
	interesting := []byte{0, 1, 0x1f, 0x20, 0x21, '"', '#', '[', '\\', ']', 0x7f, 0x80, 0xff, 'a'}
	for n := 0; n < 1_000_000; n++ {
		var b [8]byte
		for i := range b {
			if r.Intn(2) == 0 {
				b[i] = interesting[r.Intn(len(interesting))]
			} else {
				b[i] = byte(r.Intn(256))
			}
		}
		want := 8
		for i, c := range b {
			if c == '"' || c == '\\' || c < 0x20 || c >= 0x80 {
				want = i
				break
			}
		}
		m := stringSpecial(binary.LittleEndian.Uint64(b[:]))
		got := 8
		if m != 0 {
			got = bits.TrailingZeros64(m) >> 3
		}
		if got != want {
			t.Fatalf("% x: first special byte %d, want %d", b, got, want)
		}
	}
}
