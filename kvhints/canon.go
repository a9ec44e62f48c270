package kvhints

import (
	"bytes"
	"math"
	"unicode/utf8"
)

// canonicalizer re-encodes a JSON value in the canonical compact form of
// docs/spec.md ("Compact size") while checking its syntax and the content rules
// of rule 5 that apply to the whole envelope: no duplicate keys, no NaN or
// Infinity, no lone surrogates (escaped or encoded), integers within -2^63..2^64-1, finite
// floats, nesting depth within the limit. It never recurses. Numbers are
// written as the worker writes them back (appendLiteral), so that the size
// measured here is the size the worker measures.
//
// Size comes before content in the rule order, so after the first content
// violation it stops checking content but keeps encoding: an envelope that
// is both too large and malformed is reported as oversized. Encoding stops
// as soon as the output passes the size limit, and no string is read past
// the point where it would have to pass it (see window), so the work on a
// value of any size is bounded by the limit and the length of its number
// literals, which are read whole; whitespace is skipped, never counted.
//
// It also records where things are in the output, so that admission reads
// the envelope's fields without another pass: the members of the outermost
// object (top), and, inside its "actions" member, each element (elems) and
// each member of an element that is an object (actionMembers).
//
// The zero value is ready; its buffers are reused across calls.
type canonicalizer struct {
	out    []byte
	stack  []byte   // expected closer per open container
	frames []frame  // one per open object while checks are on
	keys   [][2]int // spans in out of the keys of open small objects
	top    []topMember
	elems  []elem
	// actionMembers holds the members of the action objects, in order.
	actionMembers []topMember
	inActions     bool // the open member of the outermost object is "actions"
	// generalOnly keeps runs of integers in the general loop (no
	// integers): FuzzAdmit compares the two ways.
	generalOnly bool
	// num holds a long float literal shortened for parsing (parseLongFloat).
	num [floatDigits + 32]byte
}

// topMember locates one member of an object in the output.
type topMember struct{ key, val span }

// elem locates one element of the actions array and its members, if it is
// an object: actionMembers[first:last].
type elem struct {
	val         span
	first, last int
}

// frame holds the names seen so far in one open object: spans in keys while
// the object is small, a set once it is large.
type frame struct {
	keys int
	set  map[string]struct{}
}

// smallObject is the key count up to which duplicate keys are found by
// comparing spans; larger objects switch to a set.
const smallObject = 16

// canonStatus is the verdict of one canonicalization.
type canonStatus uint8

const (
	canonOK        canonStatus = iota
	canonOversized             // the output passed the limit; nothing else is known
	canonContent               // valid JSON that breaks a content rule
	canonSyntax                // not JSON
)

// canonicalize encodes the JSON value that starts at b[0] (after optional
// whitespace). It returns the canonical bytes (aliasing c.out) and the
// offset just past the value, which the caller checks for trailing data.
func (c *canonicalizer) canonicalize(b []byte, maxDepth, limit int) ([]byte, int, canonStatus) {
	c.out = c.out[:0]
	c.stack = c.stack[:0]
	c.frames = c.frames[:0]
	c.keys = c.keys[:0]
	c.top = c.top[:0]
	c.elems = c.elems[:0]
	c.actionMembers = c.actionMembers[:0]
	c.inActions = false
	checking := true
	i := skipWS(b, 0)
	for {
		if i >= len(b) {
			return nil, 0, canonSyntax
		}
		if c.inActions && len(c.stack) == 2 && c.stack[1] == ']' {
			n := len(c.actionMembers)
			c.elems = append(c.elems, elem{val: span{start: len(c.out)}, first: n, last: n})
		}
		switch b[i] {
		case '{', '[':
			closer := byte('}')
			if b[i] == '[' {
				closer = ']'
			}
			c.out = append(c.out, b[i])
			if len(c.out) > limit {
				return nil, 0, canonOversized
			}
			c.stack = append(c.stack, closer)
			if len(c.stack) > maxDepth {
				checking = false
			}
			i = skipWS(b, i+1)
			if i < len(b) && b[i] == closer {
				c.stack = c.stack[:len(c.stack)-1]
				c.out = append(c.out, closer)
				i++
				break
			}
			if closer == '}' {
				if checking {
					c.frames = append(c.frames, frame{keys: len(c.keys)})
				}
				var st canonStatus
				if i, checking, st = c.key(b, i, checking, limit); st != canonOK {
					return nil, 0, st
				}
			}
			continue
		case '"':
			w := c.window(b, i, limit)
			end, escaped, err := scanString(w, i)
			if err != nil {
				return nil, 0, cut(w, b)
			}
			var lone bool
			c.out, lone = appendCanonString(c.out, b[i:end], escaped)
			checking = checking && !lone
			i = end
		default:
			// A literal is read whole, without a window: a keyword is
			// shorter than any window, an integer is at most
			// maxIntDigits digits (scanNumber), and a float's canonical
			// form is at most 24 bytes whatever its text, so reading one
			// costs one pass over its digits and decides it exactly.
			end, kind, err := scanLiteral(b, i)
			if err != nil {
				return nil, 0, canonSyntax
			}
			checking = c.appendLiteral(b[i:end], kind, checking)
			i = end
			if !c.generalOnly && len(c.stack) > 3 && c.stack[len(c.stack)-1] == ']' {
				i, checking = c.integers(b, i, checking, limit)
			}
		}
		if len(c.out) > limit {
			return nil, 0, canonOversized
		}
		// A value ended: close containers until one wants another element.
		for {
			switch len(c.stack) {
			case 0:
				if !checking {
					return c.out, i, canonContent
				}
				return c.out, i, canonOK
			case 1:
				if n := len(c.top); n > 0 && c.top[n-1].val.end == 0 {
					c.top[n-1].val.end = len(c.out)
				}
				c.inActions = false
			case 2:
				if n := len(c.elems); c.inActions && c.stack[1] == ']' && n > 0 && c.elems[n-1].val.end == 0 {
					c.elems[n-1].val.end = len(c.out)
					c.elems[n-1].last = len(c.actionMembers)
				}
			case 3:
				if n := len(c.actionMembers); c.inActions && n > 0 && c.actionMembers[n-1].val.end == 0 {
					c.actionMembers[n-1].val.end = len(c.out)
				}
			}
			i = skipWS(b, i)
			if i >= len(b) {
				return nil, 0, canonSyntax
			}
			closer := c.stack[len(c.stack)-1]
			if b[i] == closer {
				if closer == '}' && checking {
					f := c.frames[len(c.frames)-1]
					c.keys = c.keys[:f.keys]
					c.frames = c.frames[:len(c.frames)-1]
				}
				c.stack = c.stack[:len(c.stack)-1]
				c.out = append(c.out, closer)
				i++
				if len(c.out) > limit {
					return nil, 0, canonOversized
				}
				continue
			}
			if b[i] != ',' {
				return nil, 0, canonSyntax
			}
			c.out = append(c.out, ',')
			i = skipWS(b, i+1)
			if closer == '}' {
				var st canonStatus
				if i, checking, st = c.key(b, i, checking, limit); st != canonOK {
					return nil, 0, st
				}
			}
			break
		}
	}
}

// integers encodes the rest of a run of positive integers in an array,
// ", 123,456" (the shape of a fetch action's block hashes), from b[i] just
// after the previous element. It does what the loop of canonicalize does
// for each of them, without its general steps, and leaves everything else
// to that loop: another kind of value, a fraction or an exponent, the end
// of the array, an integer that would take the output past limit (which
// also bounds the output buffer). Only arrays deeper than an action's
// members (len(c.stack) > 3) come here: the loop records nothing for
// their elements.
func (c *canonicalizer) integers(b []byte, i int, checking bool, limit int) (int, bool) {
	for {
		k := skipWS(b, i)
		if k >= len(b) || b[k] != ',' {
			return i, checking
		}
		k = skipWS(b, k+1)
		if k >= len(b) || b[k]-'1' >= 9 {
			return i, checking
		}
		j := skipDigits(b, k)
		// Past 20 digits an integer is out of range, and past
		// maxIntDigits not JSON to Python: the general loop says which.
		if j < len(b) && (b[j] == '.' || b[j] == 'e' || b[j] == 'E') || j-k > 20 || len(c.out)+1+j-k > limit {
			return i, checking
		}
		checking = checking && digitsAtMost(b[k:j], "18446744073709551615")
		c.out = append(c.out, ',')
		c.out = append(c.out, b[k:j]...)
		i = j
	}
}

// window returns the part of b a string starting at b[i] may be read in:
// a string that does not end in it would take the output past limit. The
// canonical form of a string is never shorter than a sixth of its text
// (\u0041 is A; everything else shrinks less or not at all), so the
// window is six times the room left, and a little for quotes. Literals
// are read without one (see canonicalize).
func (c *canonicalizer) window(b []byte, i, limit int) []byte {
	if n := i + 6*(limit-len(c.out)) + 8; n < len(b) {
		return b[:n]
	}
	return b
}

// grownBound is a size limit that the canonical form of n bytes of JSON
// never passes: only a float can grow, to at most 4.5 times its text
// (1e15 is 1000000000000000.0), everything else stays or shrinks.
func grownBound(n int) int { return 5*n + 16 }

// cut is the verdict on a token that could not be read in the window w of
// b: past the size limit if w is short of b, else not JSON.
func cut(w, b []byte) canonStatus {
	if len(w) < len(b) {
		return canonOversized
	}
	return canonSyntax
}

// key encodes the member name at b[i] and the colon, checks the name
// against those already seen in the innermost object, and returns the offset
// of the member's value, or canonSyntax when the bytes there are not a name
// and a colon, or canonOversized when the name passes the limit.
func (c *canonicalizer) key(b []byte, i int, checking bool, limit int) (next int, stillChecking bool, st canonStatus) {
	if i >= len(b) || b[i] != '"' {
		return 0, false, canonSyntax
	}
	w := c.window(b, i, limit)
	end, escaped, err := scanString(w, i)
	if err != nil {
		return 0, false, cut(w, b)
	}
	start := len(c.out)
	var lone bool
	c.out, lone = appendCanonString(c.out, b[i:end], escaped)
	checking = checking && !lone
	if checking {
		checking = c.firstTime(start)
	}
	c.out = append(c.out, ':')
	switch m := (topMember{key: span{start, len(c.out) - 1}, val: span{start: len(c.out)}}); len(c.stack) {
	case 1:
		c.top = append(c.top, m)
		c.inActions = string(c.out[start:len(c.out)-1]) == `"actions"`
	case 3:
		if c.inActions && c.stack[1] == ']' {
			c.actionMembers = append(c.actionMembers, m)
		}
	}
	if len(c.out) > limit {
		return 0, false, canonOversized
	}
	i = skipWS(b, end)
	if i >= len(b) || b[i] != ':' {
		return 0, false, canonSyntax
	}
	return skipWS(b, i+1), checking, canonOK
}

// firstTime records the name just written at c.out[start:] in the innermost
// object and reports whether the object had no member of that name yet.
// Canonical encoding is injective, so equal names have equal bytes.
func (c *canonicalizer) firstTime(start int) bool {
	f := &c.frames[len(c.frames)-1]
	name := c.out[start:]
	if f.set != nil {
		if _, dup := f.set[string(name)]; dup {
			return false
		}
		f.set[string(name)] = struct{}{}
		return true
	}
	for _, k := range c.keys[f.keys:] {
		if bytes.Equal(c.out[k[0]:k[1]], name) {
			return false
		}
	}
	c.keys = append(c.keys, [2]int{start, len(c.out)})
	if len(c.keys)-f.keys > smallObject {
		f.set = make(map[string]struct{}, 2*smallObject)
		for _, k := range c.keys[f.keys:] {
			f.set[string(c.out[k[0]:k[1]])] = struct{}{}
		}
		c.keys = c.keys[:f.keys]
	}
	return true
}

// appendLiteral appends the canonical form of one literal of the given
// kind, the text the worker's json.dumps writes for what json.loads read
// (docs/spec.md, "Compact size"), and applies the range rules to it: it
// returns checking, cleared when the literal breaks them.
//
//   - an integer stays as it came, Python's ints being exact, except -0,
//     which Python reads as the int 0 and writes as 0; it must lie in
//     -2^63..2^64-1, compared as digit strings (the grammar rules out
//     leading zeros), which is exact and needs no parsing;
//   - a float (a fraction or an exponent) is written as float.__repr__
//     writes the float64 Python reads it as: 1E2 is 100.0, 1e15 is
//     1000000000000000.0, 0.10 is 0.1, -0.0 stays -0.0, 1e-400 is 0.0 and
//     1e400 is Infinity, which the range rule then refuses;
//   - NaN, Infinity, -Infinity, true, false and null stay as they came;
//     the first three break the rules.
func (c *canonicalizer) appendLiteral(lit []byte, kind numKind, checking bool) bool {
	switch kind {
	case numInt:
		switch {
		case lit[0] != '-':
			checking = checking && digitsAtMost(lit, "18446744073709551615")
		case len(lit) == 2 && lit[1] == '0':
			lit = lit[1:] // -0 is the int 0
		default:
			checking = checking && digitsAtMost(lit[1:], "9223372036854775808")
		}
	case numFloat:
		f := parseFloatLit(lit, &c.num)
		c.out = appendPyFloat(c.out, f)
		return checking && !math.IsInf(f, 0)
	case numNonFinite:
		checking = false
	}
	c.out = append(c.out, lit...)
	return checking
}

// digitsAtMost compares two decimal numerals without leading zeros.
func digitsAtMost(d []byte, bound string) bool {
	return len(d) < len(bound) || len(d) == len(bound) && string(d) <= bound
}

// appendCanonString appends the canonical encoding of the valid string
// literal lit (quotes included). lone reports a lone surrogate, escaped or
// encoded in the raw bytes; it is written as its three-byte encoding, the
// bytes Python's "surrogatepass" writes for it, so that the size can still
// be measured the way the worker's side would measure it.
func appendCanonString(dst, lit []byte, escaped bool) (out []byte, lone bool) {
	if !escaped {
		// Without escapes or surrogates a valid literal is already
		// canonical: UTF-8 with no control bytes, quotes or backslashes.
		return append(dst, lit...), false
	}
	dst = append(dst, '"')
	s := lit[1 : len(lit)-1]
	for i := 0; i < len(s); {
		c := s[i]
		if c != '\\' {
			// In a valid literal, ED followed by A0..BF is a surrogate.
			lone = lone || c == 0xED && s[i+1] >= 0xA0
			dst = append(dst, c)
			i++
			continue
		}
		e := s[i+1]
		if e != 'u' {
			if e == '/' {
				dst = append(dst, '/')
			} else {
				dst = append(dst, '\\', e)
			}
			i += 2
			continue
		}
		r, n, isLone := unicodeEscape(s, i)
		if isLone {
			dst = append(dst, 0xE0|byte(r>>12), 0x80|byte(r>>6)&0x3F, 0x80|byte(r)&0x3F)
			lone = true
		} else {
			dst = appendCanonRune(dst, r)
		}
		i += n
	}
	return append(dst, '"'), lone
}

// appendCanonRune appends one decoded character with the minimal escape.
func appendCanonRune(dst []byte, r rune) []byte {
	switch r {
	case '"':
		return append(dst, '\\', '"')
	case '\\':
		return append(dst, '\\', '\\')
	case '\b':
		return append(dst, '\\', 'b')
	case '\f':
		return append(dst, '\\', 'f')
	case '\n':
		return append(dst, '\\', 'n')
	case '\r':
		return append(dst, '\\', 'r')
	case '\t':
		return append(dst, '\\', 't')
	}
	if r < 0x20 {
		const hex = "0123456789abcdef"
		return append(dst, '\\', 'u', '0', '0', hex[r>>4], hex[r&15])
	}
	return utf8.AppendRune(dst, r)
}
