package kvhints

import "golang.org/x/sys/cpu"

// The vectorised string scan of native amd64 builds: stringRunAVX2
// (vecscan_amd64.s) reads 32 bytes a turn with AVX2 (64 in multibyte
// text, whose simple escapes it reads without leaving the loop), finds
// '"', '\\' and control bytes with compares, and validates UTF-8 with
// nibble lookup tables (the technique of Keiser and Lemire's "Validating
// UTF-8 in less than one instruction per byte"), with the three bytes
// before each block for the sequences that straddle two. scanString and multibyteRun (scan.go) hand
// it the rest of a string once they have read a plain word or a
// multibyte character; what it stops at, they finish as before, so the
// Go code stays the definition and decides every error and its offset.
//
// vecScan is set once, from the CPU: AVX2, and BMI1 and BMI2 for TZCNT
// and BZHI. Tests clear it to run the portable path on the same machine
// (TestVectorScan, FuzzVectorScan compare the two).
var vecScan = cpu.X86.HasAVX2 && cpu.X86.HasBMI1 && cpu.X86.HasBMI2

// vecMin is the least number of bytes worth a call: one block.
const vecMin = 32

// stringRunAVX2 reads the text of a string from b[0], which must be a
// character boundary, and returns n, a character boundary no later than
// where scanString's own reading (ASCII other than '"', '\\' and control
// bytes, valid UTF-8, encoded surrogates, and with escapes set the
// escapes scanString accepts: a simple one, or \u and four hex digits)
// would stop, with every byte before it such text. It stops exactly at a
// '"', a control byte or a backslash it does not read when 32 bytes from
// there are in b; before malformed UTF-8, at the start of the character
// before it; in the last 32 bytes, where the block before ended. So it
// makes progress whenever b[0] is plain ASCII and b holds 32 bytes after
// it. flags has bit 0 set when it read an escape, and bit 1 when it read
// an encoded surrogate, or the first two bytes of one whose third byte it
// left to the caller (which then is a continuation byte, completing it,
// or an error either way).
//
//go:noescape
func stringRunAVX2(b []byte, escapes bool) (n, flags int)

// vecRun is scanString's call, at the start of a word that is plain or
// whose first byte is (it goes past a special only once the string has
// an escape: a key is rarely escaped, and a short string is not worth a
// call): the string's text from b[i] on, escapes included; escaped is
// set when it read an escape or a surrogate. Progress is guaranteed, since
// scanString calls it with 40 bytes or more from b[i].
func vecRun(b []byte, i int, escaped bool) (int, bool) {
	n, f := stringRunAVX2(b[i:], true)
	return i + n, escaped || f != 0
}

// vecText is multibyteRun's call: the text from b[i] up to a backslash
// too, so that surrogate keeps its meaning.
func vecText(b []byte, i int, surrogate bool) (int, bool) {
	n, f := stringRunAVX2(b[i:], false)
	return i + n, surrogate || f != 0
}
