package kvhints

import (
	"encoding/binary"
	"math/bits"
	"strconv"
	"unicode/utf8"
)

// This file is the tokenizer shared by the body scanner and admission. It
// accepts exactly the JSON that Python's json.loads accepts on UTF-8 bytes:
// NaN, Infinity and -Infinity as values, any nesting depth, and UTF-8 as
// Python decodes it for json.loads, with "surrogatepass": valid UTF-8 plus
// the three-byte encodings of the surrogates U+D800..U+DFFF (ED A0..BF
// 80..BF), which it reads as lone surrogates. Admission refuses those
// inside an envelope (a string must be valid UTF-8); elsewhere they are
// just characters, as they are for the worker.
//
// Nothing here recurses: containers are tracked on an explicit stack of one
// byte per level, so depth is limited only by the body size.

// errCode says why bytes are not JSON. The codes are shared with quickScan
// (quickscan_wasm.s), which reports the same code at the same offset as the Go
// scanner for every input.
type errCode uint8

const (
	errUnterminated errCode = 1 + iota
	errControl
	errUTF8
	errUEscape
	errEscape
	errNumber
	errValue
	errEnd
	errComma
	errName
	errColon
	errExtra
	errBlank // the whole body is whitespace: a message without an offset
	// errIntDigits: an integer literal of more than maxIntDigits digits,
	// which Python's json.loads cannot convert (ValueError).
	errIntDigits
)

var errMessages = [...]string{
	errUnterminated: "unterminated string",
	errControl:      "control character in string",
	errUTF8:         "invalid UTF-8 in string",
	errUEscape:      "invalid \\u escape",
	errEscape:       "invalid escape",
	errNumber:       "invalid number",
	errValue:        "expecting value",
	errEnd:          "unexpected end of data",
	errComma:        "expecting ',' delimiter",
	errName:         "expecting property name enclosed in double quotes",
	errColon:        "expecting ':' delimiter",
	errExtra:        "extra data",
	errIntDigits:    "integer of more than 4300 digits",
}

// syntaxError describes why bytes are not JSON, with the offset it was found at.
type syntaxError struct {
	off  int
	code errCode
}

func (e *syntaxError) Error() string { return errMessages[e.code] + " at byte " + strconv.Itoa(e.off) }

func errAt(off int, code errCode) error { return &syntaxError{off: off, code: code} }

// isWS reports JSON insignificant whitespace, the four bytes Python skips.
func isWS(c byte) bool { return c == ' ' || c == '\t' || c == '\n' || c == '\r' }

func skipWS(b []byte, i int) int {
	for i < len(b) && isWS(b[i]) {
		i++
	}
	return i
}

const (
	lsb = 0x0101010101010101
	msb = 0x8080808080808080
)

// stringSpecial returns a mask whose lowest set high bit marks the first byte
// of w (little-endian) that ends the fast path of a string: '"', '\\', a
// control byte below 0x20, or a non-ASCII byte.
//
// For an ASCII byte x, x-c has its high bit set exactly when x < c, and
// x^c - 1 exactly when x == c; non-ASCII bytes are flagged by w itself. A
// subtraction borrows only out of a byte that matched, so bits set by
// borrows lie above a true match and the lowest set bit is exact.
func stringSpecial(w uint64) uint64 {
	q := (w ^ (lsb * '"')) - lsb
	s := (w ^ (lsb * '\\')) - lsb
	c := w - lsb*0x20
	return (q | s | c | w) & msb
}

// scanString validates the string whose opening quote is at b[i] and returns
// the offset just past its closing quote and whether it contains an escape
// or an encoded surrogate: escaped is false only for a literal that is
// already its own canonical form.
func scanString(b []byte, i int) (end int, escaped bool, err error) {
	start := i
	i++
	for {
		for i+8 <= len(b) {
			m := stringSpecial(binary.LittleEndian.Uint64(b[i:]))
			if m != 0 && !(vecScan && escaped && m&0x80 == 0 && i+8+vecMin <= len(b)) { // amd64: see vecRun
				i += bits.TrailingZeros64(m) >> 3
				goto special
			}
			i += 8
			if vecScan && i+vecMin <= len(b) { // amd64 AVX2: this word and on in bulk (vecscan_amd64.go)
				i, escaped = vecRun(b, i-8, escaped)
			} else if bulkPlain { // on wasm, a run longer than a word in bulk; keys never get here
				i += plainWords(b[i:])
			}
		}
		for i < len(b) {
			c := b[i]
			if c == '"' || c == '\\' || c < 0x20 || c >= 0x80 {
				goto special
			}
			i++
		}
		return 0, false, errAt(start, errUnterminated)
	special:
		switch c := b[i]; {
		case c == '"':
			return i + 1, escaped, nil
		case c == '\\':
			escaped = true
			if i+1 < len(b) && simpleEscape[b[i+1]] {
				i += 2
				continue
			}
			n, err := escapeLen(b, i)
			if err != nil {
				return 0, false, err
			}
			i += n
		case c < 0x20:
			return 0, false, errAt(i, errControl)
		default:
			n, surrogate := multibyteRun(b, i)
			if n == i {
				return 0, false, errAt(i, errUTF8)
			}
			escaped = escaped || surrogate
			i = n
		}
	}
}

// multibyteRun reads the text of a string from b[i], a byte ≥ 0x80, up to
// the first '"', '\\', control byte or malformed UTF-8 sequence (or the
// end), and returns the offset it stopped at, so i itself when the first
// sequence is malformed, and whether the text read holds an encoded
// surrogate (see encodedSurrogate), which it accepts as Python does. Text
// in a non-Latin script is runs of multibyte characters between spaces and
// punctuation; reading all of it here, a word at a time over ASCII and
// without a call per character, is what keeps it near the speed of ASCII.
// It accepts exactly the ASCII that stringSpecial passes, what DecodeRune
// accepts and encoded surrogates (FuzzMultibyteRun); vecText may end it early.
func multibyteRun(b []byte, i int) (end int, surrogate bool) {
	// amd64 AVX2: text with no ASCII between its characters (Chinese,
	// Japanese) in bulk from its first lead byte, the boundary the
	// vectorised scan needs; what it stops at, the loop below decides.
	if vecScan && b[i] >= 0xC2 && i+vecMin <= len(b) {
		if n, s := vecText(b, i, false); n > i {
			return n, s
		}
	}
	for i < len(b) {
		c := b[i]
		switch {
		case c < 0x80:
			if vecScan && i+vecMin <= len(b) { // amd64 AVX2: the rest in bulk (vecscan_amd64.go)
				return vecText(b, i, surrogate)
			} // else spaces and punctuation a word at a time, so that mixed text stays in this loop
			if i+8 <= len(b) {
				if m := stringSpecial(binary.LittleEndian.Uint64(b[i:])); m != 0 {
					n := bits.TrailingZeros64(m) >> 3
					if n == 0 {
						return i, surrogate // '"', '\\' or a control byte
					}
					i += n
				} else {
					i += 8
				}
				continue
			}
			if c == '"' || c == '\\' || c < 0x20 {
				return i, surrogate
			}
			i++
		case c < 0xC2: // a continuation byte, or an overlong lead
			return i, surrogate
		case c < 0xE0:
			// Four two-byte characters at once when the next eight bytes
			// are (Cyrillic, Greek, Arabic, Hebrew, accented Latin words).
			if i+8 <= len(b) {
				if w := binary.LittleEndian.Uint64(b[i:]); w&twoMask == twoBits &&
					((w&twoLeadLow)+twoCarry)&twoLanes == twoLanes {
					i += 8
					continue
				}
			}
			if i+1 >= len(b) || b[i+1]&0xC0 != 0x80 {
				return i, surrogate
			}
			i += 2
		case c < 0xF0:
			// Two three-byte characters at once when the next six bytes
			// are two valid ones and neither is a surrogate (CJK,
			// Devanagari, Hangul, full-width punctuation).
			if i+8 <= len(b) {
				if w := binary.LittleEndian.Uint64(b[i:]); w&threeMask == threeBits &&
					plainThree(byte(w), byte(w>>8)) && plainThree(byte(w>>24), byte(w>>32)) {
					i += 6
					continue
				}
			}
			if i+2 >= len(b) {
				return i, surrogate
			}
			c1, c2 := b[i+1], b[i+2]
			if c1&0xC0 != 0x80 || c2&0xC0 != 0x80 || (c == 0xE0 && c1 < 0xA0) {
				return i, surrogate
			}
			if c == 0xED && c1 >= 0xA0 {
				surrogate = true // U+D800..U+DFFF, read by surrogatepass
			}
			i += 3
		case c < 0xF5:
			if i+3 >= len(b) {
				return i, surrogate
			}
			c1, c2, c3 := b[i+1], b[i+2], b[i+3]
			if c1&0xC0 != 0x80 || c2&0xC0 != 0x80 || c3&0xC0 != 0x80 ||
				(c == 0xF0 && c1 < 0x90) || (c == 0xF4 && c1 > 0x8F) {
				return i, surrogate
			}
			i += 4
		default:
			return i, surrogate
		}
	}
	return i, surrogate
}

// The masks of multibyteRun's fast paths, on eight bytes read
// little-endian. twoMask and twoBits match four sequences 110xxxxx
// 10xxxxxx; twoLeadLow, twoCarry and twoLanes check that no lead is C0 or
// C1 (overlong): the lead's bits 1-4, plus 0x7FFF, carry into the high bit
// of each 16-bit lane exactly when one of them is set. threeMask and
// threeBits match two sequences 1110xxxx 10xxxxxx 10xxxxxx in the low six
// bytes.
const (
	twoMask    = 0xC0E0C0E0C0E0C0E0
	twoBits    = 0x80C080C080C080C0
	twoLeadLow = 0x001E001E001E001E
	twoCarry   = 0x7FFF7FFF7FFF7FFF
	twoLanes   = 0x8000800080008000
	threeMask  = 0x0000C0C0F0C0C0F0
	threeBits  = 0x00008080E08080E0
)

// plainThree reports whether a three-byte sequence with lead c and second
// byte c1 (both already of the right shape) is valid and not a surrogate:
// E0 needs c1 ≥ A0 (shorter ones are overlong), ED needs c1 < A0 (the
// surrogates, which the slow path flags).
func plainThree(c, c1 byte) bool {
	return (c != 0xE0 || c1 >= 0xA0) && (c != 0xED || c1 < 0xA0)
}

// encodedSurrogate reports whether b starts with the three-byte encoding of
// a surrogate (U+D800..U+DFFF): ED, then A0..BF, then 80..BF. UTF-8 forbids
// it; Python's "surrogatepass" decoding, which json.loads uses on bytes,
// reads it as a lone surrogate, and nothing else that UTF-8 forbids.
func encodedSurrogate(b []byte) bool {
	return len(b) >= 3 && b[0] == 0xED && b[1]&0xE0 == 0xA0 && b[2]&0xC0 == 0x80
}

// simpleEscape marks the bytes that may follow a backslash on their own.
var simpleEscape = [256]bool{'"': true, '\\': true, '/': true, 'b': true, 'f': true, 'n': true, 'r': true, 't': true}

// escapeLen validates the escape sequence starting with the backslash at b[i]
// and returns its length in bytes.
func escapeLen(b []byte, i int) (int, error) {
	if i+1 >= len(b) {
		return 0, errAt(i, errUnterminated)
	}
	switch b[i+1] {
	case '"', '\\', '/', 'b', 'f', 'n', 'r', 't':
		return 2, nil
	case 'u':
		if _, ok := hex4(b, i+2); !ok {
			return 0, errAt(i, errUEscape)
		}
		return 6, nil
	}
	return 0, errAt(i, errEscape)
}

// hex4 decodes the four hex digits at b[i:i+4].
func hex4(b []byte, i int) (rune, bool) {
	if i+4 > len(b) {
		return 0, false
	}
	var r rune
	for _, c := range b[i : i+4] {
		switch {
		case c >= '0' && c <= '9':
			c -= '0'
		case c >= 'a' && c <= 'f':
			c -= 'a' - 10
		case c >= 'A' && c <= 'F':
			c -= 'A' - 10
		default:
			return 0, false
		}
		r = r<<4 | rune(c)
	}
	return r, true
}

// maxIntDigits is Python's default limit on the digits of an integer
// literal (sys.get_int_max_str_digits(), 4300): json.loads raises
// ValueError for an integer of more digits, the sign not counted, so the
// worker cannot read such a body at all. Floats have no such limit.
const maxIntDigits = 4300

// numKind classifies a scanned number literal.
type numKind uint8

const (
	numInt       numKind = iota // -?digits, no fraction or exponent
	numFloat                    // has a fraction or an exponent
	numNonFinite                // NaN, Infinity, -Infinity
	numLiteral                  // true, false, null: not a number at all
)

// scanNumber scans the number at b[i] by Python's grammar
// -?(0|[1-9][0-9]*)(\.[0-9]+)?([eE][-+]?[0-9]+)? or -Infinity. Like Python it
// stops at the longest valid prefix; the caller's delimiter check rejects the
// rest ("01", "1."). An integer (no fraction, no exponent) of more than
// maxIntDigits digits is an error at its start, as Python cannot convert
// it; it is found once the number has ended, so that quickScan, which
// decides the same way, needs no count while it reads digits.
func scanNumber(b []byte, i int) (int, numKind, error) {
	start := i
	if b[i] == '-' {
		i++
		if i < len(b) && b[i] == 'I' {
			if hasPrefix(b[i:], "Infinity") {
				return i + 8, numNonFinite, nil
			}
			return 0, 0, errAt(start, errNumber)
		}
	}
	if i >= len(b) || b[i] < '0' || b[i] > '9' {
		return 0, 0, errAt(start, errNumber)
	}
	digits := i
	if b[i] == '0' {
		i++
	} else {
		i = skipDigits(b, i)
	}
	end, kind := scanFraction(b, i)
	// Too long only as an integer: a fraction or an exponent makes it a
	// float, which Python reads at any length.
	if kind == numInt && i-digits > maxIntDigits {
		return 0, 0, errAt(start, errIntDigits)
	}
	return end, kind, nil
}

// scanFraction scans the optional fraction and exponent of a number whose
// integer digits end at b[i], and returns its end and kind.
func scanFraction(b []byte, i int) (int, numKind) {
	kind := numInt
	if i+1 < len(b) && b[i] == '.' && b[i+1] >= '0' && b[i+1] <= '9' {
		kind = numFloat
		i = skipDigits(b, i+2)
	}
	if i < len(b) && (b[i] == 'e' || b[i] == 'E') {
		j := i + 1
		if j < len(b) && (b[j] == '+' || b[j] == '-') {
			j++
		}
		if j < len(b) && b[j] >= '0' && b[j] <= '9' {
			kind = numFloat
			i = skipDigits(b, j)
		}
	}
	return i, kind
}

// skipDigits returns the offset of the first non-digit at or after i,
// eight bytes at a time while it can: block hashes are long digit runs.
func skipDigits(b []byte, i int) int {
	for i+8 <= len(b) {
		w := binary.LittleEndian.Uint64(b[i:])
		// A byte is a digit when its high nibble is 3 and adding 6 keeps it so.
		nd := ((w & (lsb * 0xF0)) ^ (lsb * 0x30)) | (((w + lsb*0x06) & (lsb * 0xF0)) ^ (lsb * 0x30))
		if nd != 0 {
			return i + bits.TrailingZeros64(nd)>>3
		}
		i += 8
	}
	for i < len(b) && b[i]-'0' < 10 {
		i++
	}
	return i
}

func hasPrefix(b []byte, s string) bool {
	return len(b) >= len(s) && string(b[:len(s)]) == s
}

// scanLiteral scans a number or a keyword at b[i] and returns its end and kind.
func scanLiteral(b []byte, i int) (int, numKind, error) {
	switch c := b[i]; {
	case c == '-' || (c >= '0' && c <= '9'):
		return scanNumber(b, i)
	case c == 't' && hasPrefix(b[i:], "true"):
		return i + 4, numLiteral, nil
	case c == 'f' && hasPrefix(b[i:], "false"):
		return i + 5, numLiteral, nil
	case c == 'n' && hasPrefix(b[i:], "null"):
		return i + 4, numLiteral, nil
	case c == 'N' && hasPrefix(b[i:], "NaN"):
		return i + 3, numNonFinite, nil
	case c == 'I' && hasPrefix(b[i:], "Infinity"):
		return i + 8, numNonFinite, nil
	}
	return 0, 0, errAt(i, errValue)
}

// push appends closer to a container stack, doubling the stack when it is
// full. A deeply nested body then leaves behind at most as much garbage as
// the stack it needed, where append's growth of large slices by a quarter
// would leave four times as much: in the wasm guest, whose linear memory
// never shrinks, that is the difference between 2 and 5 bytes of memory
// per level of a hostile body.
func push(stack []byte, closer byte) []byte {
	if len(stack) == cap(stack) {
		stack = append(make([]byte, 0, 2*cap(stack)+64), stack...)
	}
	return append(stack, closer)
}

// skipValue validates the value starting at b[i] (whitespace already
// skipped) and returns the offset just past it. stack is scratch space for
// the container stack; the grown slice is returned for reuse.
func skipValue(b []byte, i int, stack []byte) (int, []byte, error) {
	stack = stack[:0]
	for {
		// A value is expected at b[i].
		if i >= len(b) {
			return 0, stack, errAt(i, errValue)
		}
		switch b[i] {
		case '{':
			i = skipWS(b, i+1)
			if i < len(b) && b[i] == '}' {
				i++
				break
			}
			stack = push(stack, '}')
			var err error
			if i, err = skipKey(b, i); err != nil {
				return 0, stack, err
			}
			continue
		case '[':
			i = skipWS(b, i+1)
			if i < len(b) && b[i] == ']' {
				i++
				break
			}
			stack = push(stack, ']')
			continue
		case '"':
			var err error
			if i, _, err = scanString(b, i); err != nil {
				return 0, stack, err
			}
		default:
			var err error
			if i, _, err = scanLiteral(b, i); err != nil {
				return 0, stack, err
			}
		}
		// A value ended: close containers until one wants another element.
		for {
			if len(stack) == 0 {
				return i, stack, nil
			}
			i = skipWS(b, i)
			if i >= len(b) {
				return 0, stack, errAt(i, errEnd)
			}
			closer := stack[len(stack)-1]
			if b[i] == closer {
				stack = stack[:len(stack)-1]
				i++
				continue
			}
			if b[i] != ',' {
				return 0, stack, errAt(i, errComma)
			}
			i = skipWS(b, i+1)
			if closer == '}' {
				var err error
				if i, err = skipKey(b, i); err != nil {
					return 0, stack, err
				}
			}
			break
		}
	}
}

// skipKey scans `"key" :` followed by whitespace, leaving i at the value.
func skipKey(b []byte, i int) (int, error) {
	if i >= len(b) || b[i] != '"' {
		return 0, errAt(i, errName)
	}
	end, _, err := scanString(b, i)
	if err != nil {
		return 0, err
	}
	i = skipWS(b, end)
	if i >= len(b) || b[i] != ':' {
		return 0, errAt(i, errColon)
	}
	return skipWS(b, i+1), nil
}

// unicodeEscape decodes the valid \uXXXX escape at s[i], joined with the
// next one when the two form a surrogate pair. It returns the character,
// the escape's length (6 or 12) and whether it is a lone surrogate.
func unicodeEscape(s []byte, i int) (r rune, n int, lone bool) {
	r, _ = hex4(s, i+2)
	if r >= 0xD800 && r < 0xDC00 && i+12 <= len(s) && s[i+6] == '\\' && s[i+7] == 'u' {
		if r2, _ := hex4(s, i+8); r2 >= 0xDC00 && r2 < 0xE000 {
			return 0x10000 + (r-0xD800)<<10 + (r2 - 0xDC00), 12, false
		}
	}
	return r, 6, r >= 0xD800 && r < 0xE000
}

// decodeString appends the decoded contents of the valid string literal
// lit (quotes included) to dst. Lone surrogate escapes decode to U+FFFD and
// are reported through lone, since Python would keep them as lone surrogates.
func decodeString(dst, lit []byte) (out []byte, lone bool) {
	s := lit[1 : len(lit)-1]
	for i := 0; i < len(s); {
		c := s[i]
		if c != '\\' {
			dst = append(dst, c)
			i++
			continue
		}
		switch s[i+1] {
		case 'b':
			dst = append(dst, '\b')
		case 'f':
			dst = append(dst, '\f')
		case 'n':
			dst = append(dst, '\n')
		case 'r':
			dst = append(dst, '\r')
		case 't':
			dst = append(dst, '\t')
		case 'u':
			r, n, isLone := unicodeEscape(s, i)
			if isLone {
				lone, r = true, utf8.RuneError
			}
			dst = utf8.AppendRune(dst, r)
			i += n
			continue
		default: // '"', '\\', '/'
			dst = append(dst, s[i+1])
		}
		i += 2
	}
	return dst, lone
}
