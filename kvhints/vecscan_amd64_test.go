package kvhints

import (
	"bytes"
	"math/rand/v2"
	"strings"
	"testing"
	"unicode/utf8"
)

// forcePortable clears vecScan for the rest of the test: the portable
// path, on a machine that has AVX2.
func forcePortable(t testing.TB) {
	old := vecScan
	vecScan = false
	t.Cleanup(func() { vecScan = old })
}

// cpuVec is what vecScan was set to from the CPU.
var cpuVec = vecScan

// textRef reads string text from b[0] the way scanString does, byte by
// byte with utf8.DecodeRune: the offset it stops at, and whether it read
// an escape (escapes set) and an encoded surrogate.
func textRef(b []byte, escapes bool) (stop int, esc, sur bool) {
	i := 0
	for i < len(b) {
		c := b[i]
		switch {
		case c == '"' || c < 0x20:
			return i, esc, sur
		case c == '\\':
			if !escapes {
				return i, esc, sur
			}
			n, err := escapeLen(b, i)
			if err != nil {
				return i, esc, sur
			}
			esc = true
			i += n
		case c < 0x80:
			i++
		default:
			r, size := utf8.DecodeRune(b[i:])
			if r == utf8.RuneError && size <= 1 {
				if !encodedSurrogate(b[i:]) {
					return i, esc, sur
				}
				sur, size = true, 3
			}
			i += size
		}
	}
	return i, esc, sur
}

// hasSurrogateLead reports whether b holds ED A0..BF.
func hasSurrogateLead(b []byte) bool {
	for i := 0; i+1 < len(b); i++ {
		if b[i] == 0xED && b[i+1] >= 0xA0 && b[i+1] <= 0xBF {
			return true
		}
	}
	return false
}

// checkRun checks stringRunAVX2 on b against textRef: where it stops (a
// character boundary no later than textRef, exactly there at a special
// byte with a block to spare) and its flags.
func checkRun(t testing.TB, b []byte) {
	t.Helper()
	for _, escapes := range []bool{false, true} {
		n, flags := stringRunAVX2(b, escapes)
		stop, _, _ := textRef(b, escapes)
		if n < 0 || n > stop {
			t.Fatalf("stringRunAVX2(%q, %v) = %d, past %d", b, escapes, n, stop)
		}
		got, esc, sur := textRef(b[:n], escapes)
		if got != n {
			t.Fatalf("stringRunAVX2(%q, %v) = %d, not a whole run (%d)", b, escapes, n, got)
		}
		if esc != (flags&1 != 0) {
			t.Fatalf("stringRunAVX2(%q, %v) = %d, flags %b: escape %v", b, escapes, n, flags, esc)
		}
		if sur && flags&2 == 0 || flags&2 != 0 && !hasSurrogateLead(b) {
			t.Fatalf("stringRunAVX2(%q, %v) = %d, flags %b: surrogate %v", b, escapes, n, flags, sur)
		}
		if stop < len(b) && stop+32 <= len(b) && (b[stop] == '"' || b[stop] < 0x20 || b[stop] == '\\') && n != stop {
			t.Fatalf("stringRunAVX2(%q, %v) = %d, want %d at %q", b, escapes, n, stop, b[stop])
		}
	}
}

// checkVec compares the vectorised and the portable path on b: the raw
// run, scanString on b read as a string's text after a quote, and
// multibyteRun from every non-ASCII byte. It reports whether the string
// was valid.
func checkVec(t *testing.T, text []byte) {
	t.Helper()
	if !cpuVec {
		t.Skip("no AVX2 on this CPU")
	}
	checkRun(t, text)
	b := append([]byte{'"'}, text...)
	vecScan = true
	end1, esc1, err1 := scanString(b, 0)
	vecScan = false
	end2, esc2, err2 := scanString(b, 0)
	vecScan = cpuVec
	if end1 != end2 || esc1 != esc2 || errString(err1) != errString(err2) {
		t.Fatalf("scanString(%q): avx2 (%d, %v, %v), portable (%d, %v, %v)", b, end1, esc1, err1, end2, esc2, err2)
	}
}

func errString(err error) string {
	if err == nil {
		return ""
	}
	return err.Error()
}

// checkVecBody compares the two paths on a whole body through Rewrite.
func checkVecBody(t *testing.T, body []byte) {
	t.Helper()
	for _, p := range []Policy{{}, {Trusted: true}} {
		var r1, r2 Rewriter
		vecScan = true
		out1, res1 := r1.Rewrite(body, p)
		vecScan = false
		out2, res2 := r2.Rewrite(body, p)
		vecScan = cpuVec
		if !bytes.Equal(out1, out2) || res1.Outcome != res2.Outcome || res1.Reason != res2.Reason || res1.Message != res2.Message || res1.Status != res2.Status {
			t.Fatalf("Rewrite(%q, %+v): avx2 %v %q, portable %v %q", body, p, res1, out1, res2, out2)
		}
	}
}

// vecPieces are what the table test puts at every offset of a block.
var vecPieces = []string{
	// Valid: two-, three-, four-byte characters, the edges of each range.
	"é", "\xc2\x80", "\xdf\xbf", "中", "\xe0\xa0\x80", "\xed\x9f\xbf", "\xee\x80\x80", "\xef\xbf\xbf",
	"🚀", "\xf0\x90\x80\x80", "\xf3\xbf\xbf\xbf", "\xf4\x8f\xbf\xbf",
	// Encoded surrogates: read, and flagged.
	"\xed\xa0\x80", "\xed\xbf\xbf", "\xed\xb0\x80",
	// Overlong, above U+10FFFF, F5..FF, stray and missing continuations.
	"\xc0\x80", "\xc1\xbf", "\xe0\x9f\xbf", "\xe0\x80\x80", "\xf0\x8f\xbf\xbf", "\xf0\x80\x80\x80",
	"\xf4\x90\x80\x80", "\xf4\xbf\xbf\xbf", "\xf5\x80\x80\x80", "\xf8\x88\x80\x80\x80", "\xff", "\xfe", "\xf7\xbf\xbf\xbf",
	"\x80", "\xbf", "\xc3", "\xe4\xb8", "\xf0\x9f\x9a", "\xc3A", "\xe4\xb8A", "\xf0\x9f\x9aA", "\xed\xa0", "\xed\xa0A",
	"é\x80", "中\x80", "🚀\x80", "\xe4\x80\x80\x80", "\xc3\xa9\xa9",
	// Specials and escapes, good and bad.
	`"`, `\`, "\x00", "\x1f", "\n", "\x7f", " ", `\n`, `\"`, `\\`, `\/`, `\u00e9`, `\uD83D\uDE80`, `\uABCD`,
	`\u12G4`, `\u123`, `\x`, `\'`, `\u`, "\\\x00", "\\é",
}

// vecFills are the texts the pieces sit in.
var vecFills = []string{"a", "abcdefg ", "я", "中", "🚀", "\\n", "é z"}

// TestVectorScan puts every piece at every offset from 0 to 70 of every
// fill, in texts of 31 to 65 bytes and longer ones, with and without a
// closing quote and bytes after it, and compares the two paths.
func TestVectorScan(t *testing.T) {
	if !cpuVec {
		t.Skip("no AVX2 on this CPU")
	}
	t.Cleanup(func() { vecScan = cpuVec })
	fillTo := func(fill string, n int) []byte {
		var b []byte
		for len(b)+len(fill) <= n {
			b = append(b, fill...)
		}
		for len(b) < n {
			b = append(b, 'x')
		}
		return b
	}
	for _, fill := range vecFills {
		for _, piece := range vecPieces {
			for off := 0; off <= 70; off++ {
				for _, total := range []int{31, 32, 33, 63, 64, 65, 96, 130} {
					if off+len(piece) > total {
						continue
					}
					text := append(fillTo(fill, off), piece...)
					text = append(text, fillTo(fill, total-len(text))...)
					checkVec(t, text)
					checkVec(t, append(bytes.Clone(text), '"'))
					checkVec(t, append(bytes.Clone(text), `", "next": "`+strings.Repeat("z", 40)+`"}`...))
				}
			}
		}
	}
	// A quote, a backslash, a control byte at every position of two blocks.
	for _, s := range []byte{'"', '\\', 0, 0x1f, '\n'} {
		for _, fill := range vecFills {
			for n := 0; n <= 100; n++ {
				for pos := 0; pos < n; pos++ {
					b := fillTo(fill, n)
					b[pos] = s
					checkVec(t, b)
				}
			}
		}
	}
}

// TestVectorScanRandom compares the two paths on random texts made of the
// pieces, and on bodies holding them.
func TestVectorScanRandom(t *testing.T) {
	if !cpuVec {
		t.Skip("no AVX2 on this CPU")
	}
	t.Cleanup(func() { vecScan = cpuVec })
	rng := rand.New(rand.NewPCG(3, 4))
	for range 20000 {
		var b []byte
		for len(b) < rng.IntN(400) {
			if rng.IntN(8) == 0 {
				b = append(b, vecPieces[rng.IntN(len(vecPieces))]...)
			} else {
				b = append(b, vecFills[rng.IntN(len(vecFills))]...)
			}
		}
		checkVec(t, b)
		checkVecBody(t, []byte(`{"model":"m","messages":[{"role":"user","content":"`+string(b)+`"}],"kv_hints":null}`))
	}
}

// TestVectorScanEscapeBlocks puts two escapes, good or bad, at every pair
// of offsets in 96 bytes of ASCII text: the blocks escfast reads at once
// (lone simple escapes, no quote, no control byte) and every way one just
// fails that test, at each edge of a block.
func TestVectorScanEscapeBlocks(t *testing.T) {
	if !cpuVec {
		t.Skip("no AVX2 on this CPU")
	}
	t.Cleanup(func() { vecScan = cpuVec })
	escs := []string{`\n`, `\"`, `\/`, `\b`, `\f`, `\r`, `\t`, `\\`, `\u00e9`, `\x`, `\a`, `\N`, `\'`, `\ `, "\\\x00", `"`, "\x01", `\\\"`, `\`}
	for _, e1 := range escs {
		for _, e2 := range escs[:9] {
			for i := 0; i < 66; i++ {
				for j := i + len(e1); j < 70; j += 3 {
					b := []byte(strings.Repeat("x", 96))
					copy(b[i:], e1)
					copy(b[j:], e2)
					checkVec(t, b)
				}
			}
		}
	}
	// Blocks dense with escapes, now and then one the block-at-once
	// reading must leave to the turns.
	pieces := []string{"x", "x", "x", `\n`, `\"`, `\/`, `\t`, `\\`, `\u00e9`, `"`, "\x01", "é", `\q`}
	r := rand.New(rand.NewPCG(24, 4))
	for range 20000 {
		var b []byte
		for len(b) < 100 {
			p := pieces[r.IntN(len(pieces))]
			if strings.ContainsAny(p, `\"`+"\x01é") && r.IntN(4) > 0 {
				p = pieces[3+r.IntN(4)]
			}
			b = append(b, p...)
		}
		checkVec(t, b)
	}
}

// TestVectorScanBenchBodies: the benchmark bodies are decided the same
// way on both paths.
func TestVectorScanBenchBodies(t *testing.T) {
	if !cpuVec {
		t.Skip("no AVX2 on this CPU")
	}
	t.Cleanup(func() { vecScan = cpuVec })
	for _, para := range []string{proseText, denseText, escapeText, multilingualText, mixedText, utf8Text} {
		checkVecBody(t, chatBodyOf(64<<10, true, para))
	}
}

// FuzzVectorScan compares the vectorised and the portable path on
// arbitrary bytes: as a string's text (result, escape flag, error and its
// offset), multibyteRun from every non-ASCII byte, and whole bodies.
func FuzzVectorScan(f *testing.F) {
	for _, s := range vecPieces {
		f.Add([]byte(strings.Repeat("abc", 10) + s + strings.Repeat("я", 20) + `"`))
		f.Add([]byte(strings.Repeat("中", 10) + s + strings.Repeat("x", 40)))
	}
	f.Add([]byte(strings.Repeat(`ab\"c\n\td\/`, 12) + `"`))
	f.Add([]byte(`{"kv_hints":{"a":"` + strings.Repeat("é\\n", 30) + `"},"b":"` + strings.Repeat("\xed\xa0\x80", 20) + `"}`))
	f.Fuzz(func(t *testing.T, b []byte) {
		if !cpuVec {
			t.Skip("no AVX2 on this CPU")
		}
		checkVec(t, b)
		for i := range b {
			if b[i] >= 0x80 {
				vecScan = true
				e1, s1 := multibyteRun(b, i)
				vecScan = false
				e2, s2 := multibyteRun(b, i)
				vecScan = cpuVec
				// Vectorised, multibyteRun may stop early, at a character
				// boundary, for scanString to go on from.
				if e1 > e2 || e1 == i && e2 != i || s2 && e1 == e2 && !s1 {
					t.Fatalf("multibyteRun(%q, %d): avx2 (%d, %v), portable (%d, %v)", b, i, e1, s1, e2, s2)
				}
			}
		}
		checkVecBody(t, b)
		checkVecBody(t, append(append([]byte(`{"a":"`), b...), `"}`...))
	})
}

// setVecScan turns the vectorised path on or off for a benchmark, and
// reports whether it is there to turn on.
func setVecScan(tb testing.TB, on bool) bool {
	if on && !cpuVec {
		return false
	}
	vecScan = on
	tb.Cleanup(func() { vecScan = cpuVec })
	return true
}

// BenchmarkStringRun is one call of stringRunAVX2: on a short key, where
// the call's fixed cost (its constants) is all of it, and on a 4 KiB
// string of prose, plain and with a simple escape every few words (text
// pasted from code or a transcript). A chat body makes one call per
// string of 40 bytes or more from the end of the body, so the short case
// is most calls.
func BenchmarkStringRun(b *testing.B) {
	if !vecScan {
		b.Skip("no AVX2 path here")
	}
	for _, c := range []struct{ name, text string }{
		{"short", `role":"user","content":"` + strings.Repeat(" ", 40)},
		{"4KiB", strings.Repeat(`Large language model serving stacks route each request. `, 72) + `"}]}` + strings.Repeat(" ", 40)},
		{"4KiB-escapes", strings.Repeat(`He wrote \"route it\" and\n\tthen served each request. `, 72) + `"}]}` + strings.Repeat(" ", 40)},
	} {
		text := []byte(c.text)
		b.Run(c.name, func(b *testing.B) {
			n, _ := stringRunAVX2(text, true) // what one call reads
			b.SetBytes(int64(n))
			for b.Loop() {
				stringRunAVX2(text, true)
			}
		})
	}
}
