package kvhints

import (
	"bytes"
	"math/rand/v2"
	"strings"
	"testing"
	"unicode/utf8"
)

// The UTF-8 side of the vectorised scan at block edges: multibyte text is
// validated 32 bytes at a time, and two blocks a turn once 64 bytes are
// left, carrying the block before for the sequences that straddle two; a
// block of multibyte text holding simple escapes is read at once. These
// tests put sequences, good and bad, and escapes at every offset around
// the edges of 16-, 32- and 64-byte blocks after multibyte text, and
// compare with the portable path (checkVec, checkVecBody).

// mixedFill returns n bytes of mixed-script text from mixedText (shifted
// by skip characters), cut at a character boundary and padded with 'x',
// with its escapes taken out so that the text alone decides the run.
func mixedFill(skip, n int) []byte {
	src := mixedPlain
	for range skip % 200 {
		_, size := utf8.DecodeRuneInString(src)
		src = src[size:]
	}
	b := []byte(src)
	for len(b) < n {
		b = append(b, src...)
	}
	k := n
	for k > 0 && k < len(b) && !utf8.RuneStart(b[k]) {
		k--
	}
	b = b[:k:k]
	for len(b) < n {
		b = append(b, 'x')
	}
	return b
}

var mixedPlain = strings.NewReplacer(`\n`, "  ", `\"`, "«»").Replace(mixedText + mixedText)

// utf8EdgeFills are the texts before and after a piece: multibyte all
// the way (two-, three-, four-byte and mixed), and ASCII.
var utf8EdgeFills = []func(n int) []byte{
	func(n int) []byte { return mixedFill(0, n) },
	func(n int) []byte { return mixedFill(7, n) },
	func(n int) []byte { return fillOf("中", n) },
	func(n int) []byte { return fillOf("я", n) },
	func(n int) []byte { return fillOf("🚀", n) },
	func(n int) []byte { return fillOf("é中🚀 ", n) },
	func(n int) []byte { return fillOf("x", n) },
}

// fillOf is s repeated to n bytes, the rest 'x'.
func fillOf(s string, n int) []byte {
	b := bytes.Repeat([]byte(s), n/len(s))
	for len(b) < n {
		b = append(b, 'x')
	}
	return b
}

// utf8EdgePieces: every kind of sequence the validator tells apart, the
// escapes a multibyte block may hold, and one of each special.
var utf8EdgePieces = []string{
	"é", "中", "🚀", "\xef\xbf\xbf", "\xf4\x8f\xbf\xbf", "\xe0\xa0\x80", "\xf0\x90\x80\x80",
	"\xed\xa0\x80", "\xed\xbf\xbf", // encoded surrogates
	"\xc0\x80", "\xc1\xbf", "\xe0\x9f\xbf", "\xf0\x8f\xbf\xbf", "\xf4\x90\x80\x80", "\xf5\x80\x80\x80", "\xff",
	"\x80", "\xbf\xbf", "\xc3", "\xe4\xb8", "\xf0\x9f\x9a", "\xc3A", "\xe4\xb8A", "\xf0\x9f\x9aA", "中\x80", "🚀\x80",
	`\n`, `\"`, `\\`, `\/`, `\t`, `\u00e9`, `\uD83D\uDE80`, `\n\"`, `\\\n`, `\x`, `\u12G4`, "\\é", "\\\x00",
	`"`, `\`, "\x00", "\x1f", "\x7f",
}

// TestVectorScanUTF8BlockEdges puts each piece so that it starts at every
// offset from 16 bytes before to 4 after each 16-byte edge of the first
// 256 bytes, in texts that end right after it, a block later, and far
// after it, and with the rest of the string and a body after that.
func TestVectorScanUTF8BlockEdges(t *testing.T) {
	if !cpuVec {
		t.Skip("no AVX2 on this CPU")
	}
	t.Cleanup(func() { vecScan = cpuVec })
	for fi, fill := range utf8EdgeFills {
		for _, piece := range utf8EdgePieces {
			for edge := 16; edge <= 256; edge += 16 {
				for off := edge - 16; off <= edge+4; off++ {
					for _, after := range []int{0, 1, 31, 33, 64, 130} {
						if fi > 1 && after != 0 && after != 33 && after != 130 {
							continue // the mixed fills take every length, the others a few
						}
						text := append(fill(off), piece...)
						text = append(text, fill(after)...)
						checkVec(t, text)
						checkVec(t, append(bytes.Clone(text), '"'))
						if after == 33 {
							checkVec(t, append(bytes.Clone(text), `", "next": "`+strings.Repeat("z", 40)+`"}`...))
						}
					}
				}
			}
		}
	}
}

// TestVectorScanUTF8Split cuts every multibyte character of mixed text
// at every byte, at every offset up to 200: the text ends inside the
// character (truncated input), goes on with ASCII, with a quote, or with
// another character's lead, so that each block edge falls inside a
// sequence every way there is.
func TestVectorScanUTF8Split(t *testing.T) {
	if !cpuVec {
		t.Skip("no AVX2 on this CPU")
	}
	t.Cleanup(func() { vecScan = cpuVec })
	for _, ch := range []string{"é", "ß", "Я", "م", "中", "の", "…", "👋", "🙂", "\xed\xa0\x80"} {
		for cut := 1; cut < len(ch); cut++ {
			for off := 0; off <= 200; off++ {
				head := mixedFill(off, off)
				for _, rest := range []string{"", "x", `"`, "中", strings.Repeat("x", 40), "中文字符" + strings.Repeat("я", 20) + `"`} {
					text := append(append(bytes.Clone(head), ch[:cut]...), rest...)
					checkVec(t, text)
				}
				// The whole character with the block edge anywhere in it.
				text := append(append(bytes.Clone(head), ch...), mixedFill(3, 96)...)
				checkVec(t, text)
			}
		}
	}
}

// TestVectorScanUTF8Escapes puts two escapes at every pair of offsets (in
// steps) of 160 bytes of multibyte text: the blocks read at once, and
// every way one falls back to the escapes one at a time (a backslash as
// the last byte of a block, \u, a quote of the text's own, a bad escape,
// a control byte).
func TestVectorScanUTF8Escapes(t *testing.T) {
	if !cpuVec {
		t.Skip("no AVX2 on this CPU")
	}
	t.Cleanup(func() { vecScan = cpuVec })
	escs := []string{`\n`, `\"`, `\/`, `\t`, `\\`, `\u00e9`, `\x`, `"`, "\x01", `\`, "\\é", `\\\"`}
	for _, fill := range []func(int) []byte{utf8EdgeFills[0], utf8EdgeFills[2], utf8EdgeFills[4]} {
		for _, e1 := range escs {
			for _, e2 := range escs[:6] {
				for i := 0; i < 140; i++ {
					for j := i + len(e1); j < 150; j += 5 {
						b := fill(160)
						if !utf8.RuneStart(b[i]) || !utf8.RuneStart(b[j]) {
							continue
						}
						b = append(append(append(append(b[:i:i], e1...), b[i:j]...), e2...), b[j:]...)
						checkVec(t, b)
					}
				}
			}
		}
	}
}

// TestVectorScanUTF8Random: random mixed-script texts with escapes and
// now and then a malformed or special piece, as strings of bodies too.
func TestVectorScanUTF8Random(t *testing.T) {
	if !cpuVec {
		t.Skip("no AVX2 on this CPU")
	}
	t.Cleanup(func() { vecScan = cpuVec })
	rng := rand.New(rand.NewPCG(8, 64))
	for range 20000 {
		b := mixedFill(rng.IntN(200), rng.IntN(300))
		for range rng.IntN(4) {
			p := utf8EdgePieces[rng.IntN(len(utf8EdgePieces))]
			i := rng.IntN(len(b) + 1)
			b = append(b[:i:i], append([]byte(p), b[i:]...)...)
		}
		checkVec(t, b)
		checkVecBody(t, []byte(`{"model":"m","messages":[{"role":"user","content":"x`+string(b)+`"}],"kv_hints":null}`))
	}
}

// FuzzVecScanUTF8 compares the vectorised and the portable path on
// arbitrary bytes after shift bytes of mixed-script text, which moves
// the block edges through the fuzzer's bytes, as a string's text and in
// a body.
func FuzzVecScanUTF8(f *testing.F) {
	f.Add([]byte(mixedText), uint8(0))
	f.Add([]byte(multilingualText), uint8(5))
	f.Add([]byte(utf8Text+`"`), uint8(31))
	f.Add([]byte(mixedText[:200]+"\xed\xa0\x80"+mixedText[200:400]), uint8(17))
	f.Add([]byte(mixedText[:97]+"\xf0\x9f\x9a"+mixedText[100:300]), uint8(63))
	f.Add([]byte(strings.Repeat("中文\\n", 30)+`"`), uint8(1))
	f.Add([]byte(strings.Repeat("я", 31)+"\\"+strings.Repeat("я", 40)), uint8(0))
	f.Fuzz(func(t *testing.T, b []byte, shift uint8) {
		if !cpuVec {
			t.Skip("no AVX2 on this CPU")
		}
		text := append(mixedFill(int(shift), int(shift)), b...)
		checkVec(t, text)
		checkVecBody(t, append(append([]byte(`{"a":"`), text...), `"}`...))
	})
}
