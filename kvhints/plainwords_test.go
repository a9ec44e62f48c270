package kvhints

import (
	"math/rand/v2"
	"testing"
)

// plainRef is the definition plainWords implements, byte by byte.
func plainRef(b []byte) int {
	n := 0
	for n+16 <= len(b) {
		for _, c := range b[n : n+16] {
			if c == '"' || c == '\\' || c < 0x20 || c >= 0x80 {
				return n
			}
		}
		n += 16
	}
	return n
}

// TestPlainWords checks plainWords (assembly on wasm) and plainWordsGo
// against plainRef: every special byte at every position of bodies of
// every length up to 80, then random bodies.
func TestPlainWords(t *testing.T) {
	check := func(b []byte) {
		t.Helper()
		want := plainRef(b)
		if got := plainWords(b); got != want {
			t.Fatalf("plainWords(%q) = %d, want %d", b, got, want)
		}
		if got := plainWordsGo(b); got != want {
			t.Fatalf("plainWordsGo(%q) = %d, want %d", b, got, want)
		}
	}
	specials := []byte{'"', '\\', 0, 0x1f, 0x80, 0xff, '\n'}
	// Neighbours of the specials, which a wrong mask would flag or miss.
	plain := []byte{' ', '!', '#', '[', ']', 0x7f, 'a', '~'}
	for n := 0; n <= 80; n++ {
		for _, p := range plain {
			b := make([]byte, n)
			for i := range b {
				b[i] = p
			}
			check(b)
			for pos := 0; pos < n; pos++ {
				for _, s := range specials {
					b[pos] = s
					check(b)
					// A second special later must not move the answer.
					if pos+9 < n {
						b[pos+9] = '"'
						check(b)
						b[pos+9] = p
					}
				}
				b[pos] = p
			}
		}
	}
	rng := rand.New(rand.NewPCG(1, 2))
	for range 20000 {
		b := make([]byte, rng.IntN(200))
		for i := range b {
			b[i] = byte(0x20 + rng.IntN(0x5f))
			if rng.IntN(64) == 0 {
				b[i] = byte(rng.IntN(256))
			}
		}
		// Misaligned views of the same bytes.
		off := min(len(b), rng.IntN(8))
		check(b[off:])
	}
}

// FuzzPlainWords compares plainWords with plainRef.
func FuzzPlainWords(f *testing.F) {
	f.Add([]byte(`0123456789abcdef"0123456789abcdef`))
	f.Fuzz(func(t *testing.T, b []byte) {
		if got, want := plainWords(b), plainRef(b); got != want {
			t.Fatalf("plainWords(%q) = %d, want %d", b, got, want)
		}
	})
}
