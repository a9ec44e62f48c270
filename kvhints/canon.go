package kvhints

import (
	"bytes"
	"strconv"
	"unicode/utf8"
)

// canonicalizer re-encodes a syntactically valid JSON value in the canonical
// compact form of DESIGN.md section 3 rule 4 while checking the content rules
// of rule 5 that apply to the whole envelope: no duplicate keys, no NaN or
// Infinity, no lone surrogate escapes, integers within -2^63..2^64-1, finite
// floats, nesting depth within the limit. It never recurses.
//
// Size comes before content in the rule order, so after the first content
// violation it stops checking but keeps encoding: an envelope that is both
// too large and malformed is reported as oversized. Encoding stops as soon as
// the output passes the size limit.
//
// The zero value is ready; its buffers are reused across calls.
type canonicalizer struct {
	out    []byte
	stack  []byte   // expected closer per open container
	frames []frame  // one per open object while checks are on
	keys   [][2]int // spans in out of the keys of open small objects
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

// canonicalize encodes the valid JSON value b. It returns the canonical
// bytes (aliasing c.out), and ok=false with oversized=true when the encoding
// passed limit, or ok=false when a content rule failed.
func (c *canonicalizer) canonicalize(b []byte, maxDepth, limit int) (out []byte, oversized, ok bool) {
	c.out = c.out[:0]
	c.stack = c.stack[:0]
	c.frames = c.frames[:0]
	c.keys = c.keys[:0]
	checking := true
	i := skipWS(b, 0)
	for {
		switch b[i] {
		case '{', '[':
			closer := byte('}')
			if b[i] == '[' {
				closer = ']'
			}
			c.out = append(c.out, b[i])
			c.stack = append(c.stack, closer)
			if len(c.stack) > maxDepth {
				checking = false
			}
			i = skipWS(b, i+1)
			if b[i] == closer {
				c.stack = c.stack[:len(c.stack)-1]
				c.out = append(c.out, closer)
				i++
				break
			}
			if closer == '}' {
				if checking {
					c.frames = append(c.frames, frame{keys: len(c.keys)})
				}
				i, checking = c.key(b, i, checking)
			}
			continue
		case '"':
			end, escaped, _ := scanString(b, i)
			var lone bool
			c.out, lone = appendCanonString(c.out, b[i:end], escaped)
			if lone {
				checking = false
			}
			i = end
		case 't':
			c.out = append(c.out, "true"...)
			i += 4
		case 'f':
			c.out = append(c.out, "false"...)
			i += 5
		case 'n':
			c.out = append(c.out, "null"...)
			i += 4
		case 'N': // NaN
			c.out = append(c.out, "NaN"...)
			checking = false
			i += 3
		case 'I': // Infinity
			c.out = append(c.out, "Infinity"...)
			checking = false
			i += 8
		default:
			end, kind, _ := scanNumber(b, i)
			if checking && !numberOK(b[i:end], kind) {
				checking = false
			}
			c.out = append(c.out, b[i:end]...)
			i = end
		}
		if len(c.out) > limit {
			return nil, true, false
		}
		// A value ended: close containers until one wants another element.
		for {
			if len(c.stack) == 0 {
				return c.out, false, checking
			}
			i = skipWS(b, i)
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
					return nil, true, false
				}
				continue
			}
			c.out = append(c.out, ',')
			i = skipWS(b, i+1)
			if closer == '}' {
				i, checking = c.key(b, i, checking)
			}
			break
		}
	}
}

// key encodes the member name at b[i] and the colon, checks it against the
// names already seen in the innermost object, and returns the offset of the
// member's value.
func (c *canonicalizer) key(b []byte, i int, checking bool) (int, bool) {
	end, escaped, _ := scanString(b, i)
	start := len(c.out)
	var lone bool
	c.out, lone = appendCanonString(c.out, b[i:end], escaped)
	if lone {
		checking = false
	}
	if checking {
		// Canonical encoding is injective, so equal names have equal bytes.
		f := &c.frames[len(c.frames)-1]
		name := c.out[start:]
		if f.set != nil {
			if _, dup := f.set[string(name)]; dup {
				checking = false
			} else {
				f.set[string(name)] = struct{}{}
			}
		} else {
			for _, k := range c.keys[f.keys:] {
				if bytes.Equal(c.out[k[0]:k[1]], name) {
					checking = false
					break
				}
			}
			c.keys = append(c.keys, [2]int{start, len(c.out)})
			if checking && len(c.keys)-f.keys > smallObject {
				f.set = make(map[string]struct{}, 2*smallObject)
				for _, k := range c.keys[f.keys:] {
					f.set[string(c.out[k[0]:k[1]])] = struct{}{}
				}
				c.keys = c.keys[:f.keys]
			}
		}
	}
	c.out = append(c.out, ':')
	return skipWS(b, skipWS(b, end)+1), checking
}

// numberOK applies the range rules to one number literal. Integers are
// compared as digit strings (the grammar rules out leading zeros), which is
// exact and needs no parsing.
func numberOK(lit []byte, kind numKind) bool {
	switch kind {
	case numNonFinite:
		return false
	case numInt:
		if lit[0] == '-' {
			return digitsAtMost(lit[1:], "9223372036854775808")
		}
		return digitsAtMost(lit, "18446744073709551615")
	}
	_, err := strconv.ParseFloat(string(lit), 64)
	return err == nil
}

// digitsAtMost compares two decimal numerals without leading zeros.
func digitsAtMost(d []byte, max string) bool {
	return len(d) < len(max) || len(d) == len(max) && string(d) <= max
}

// appendCanonString appends the canonical encoding of the valid string
// literal lit (quotes included). lone reports a lone surrogate escape, which
// is kept as received so that the size can still be measured.
func appendCanonString(dst, lit []byte, escaped bool) (out []byte, lone bool) {
	if !escaped {
		// Without escapes a valid literal is already canonical: raw UTF-8
		// with no control bytes, quotes or backslashes inside.
		return append(dst, lit...), false
	}
	dst = append(dst, '"')
	s := lit[1 : len(lit)-1]
	for i := 0; i < len(s); {
		c := s[i]
		if c != '\\' {
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
		r, _ := hex4(s, i+2)
		n := 6
		if r >= 0xD800 && r < 0xDC00 && i+12 <= len(s) && s[i+6] == '\\' && s[i+7] == 'u' {
			if r2, _ := hex4(s, i+8); r2 >= 0xDC00 && r2 < 0xE000 {
				r = 0x10000 + (r-0xD800)<<10 + (r2 - 0xDC00)
				n = 12
			}
		}
		if r >= 0xD800 && r < 0xE000 {
			dst = append(dst, s[i:i+6]...)
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
