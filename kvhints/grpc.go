package kvhints

// gRPC requests (docs/spec.md, Reading a body the way the worker does).
//
// A gRPC request body is a sequence of length-prefixed messages: a flag byte
// (0, or 1 for a compressed message) and a 4-byte big-endian length, then the
// message. The workers' HTTP paths read bodies with Python's json.loads and
// their gRPC paths carry no kv_hints, so by default a gRPC request passes
// uninspected (counted by the filter); with "grpc": "refuse" it is answered
// the gRPC way instead.
//
// Which requests are gRPC. The Content-Type is application/grpc or
// application/grpc+<subtype> (any subtype: +proto, +json, custom codecs),
// case-insensitively, with or without parameters; that is what gRPC servers
// accept. application/grpc-web is not: browsers' gRPC-Web is translated to
// gRPC before it reaches a worker, so a worker never serves it.
//
// The label is not trusted: a client can put any Content-Type on a JSON
// body. Whether the body passes is decided from its bytes (DecideGRPC), so
// that no body json.loads could read ever passes uninspected.

// GRPCPrefixLen is the length of a gRPC message prefix: the flag byte and the
// 4-byte message length.
const GRPCPrefixLen = 5

// IsGRPCContentType reports whether a Content-Type header value names gRPC:
// application/grpc, or application/grpc+<subtype>, optionally followed by
// parameters (";..."), in any letter case, between optional spaces.
func IsGRPCContentType(v []byte) bool {
	v = trimSpace(v)
	const base = "application/grpc"
	if len(v) < len(base) || !EqualFold(v[:len(base)], base) {
		return false
	}
	rest := v[len(base):]
	if len(rest) > 0 && rest[0] == '+' {
		// A subtype: a token up to the parameters.
		n := 1
		for n < len(rest) && rest[n] != ';' && rest[n] != ' ' && rest[n] != '\t' {
			n++
		}
		if n == 1 {
			return false
		}
		rest = rest[n:]
	}
	rest = trimSpace(rest)
	return len(rest) == 0 || rest[0] == ';'
}

// trimSpace drops spaces and tabs at both ends.
func trimSpace(v []byte) []byte {
	for len(v) > 0 && (v[0] == ' ' || v[0] == '\t') {
		v = v[1:]
	}
	for len(v) > 0 && (v[len(v)-1] == ' ' || v[len(v)-1] == '\t') {
		v = v[:len(v)-1]
	}
	return v
}

// DecideGRPC decides whether a body labelled gRPC passes uninspected, from
// its first bytes b. eos says that b is the whole body. It returns done =
// false when it needs more of the body to decide; otherwise pass says
// whether the body passes uninspected (false: it is inspected like any body,
// and a body that is neither gRPC nor UTF-8 JSON gets 400).
//
// The rule: the body starts with a gRPC message prefix (at least
// GRPCPrefixLen bytes, flag byte 0 or 1), and Python's json.loads cannot
// read it. The decision depends only on the body's bytes, never on how they
// were split into chunks, and needs only the start of the body (at most
// GRPCLookahead bytes), so client-streaming and bidirectional RPCs pass as
// they stream.
//
// Why a passed body can never be read by json.loads(body). On bytes,
// json.loads first decodes the whole body, s =
// body.decode(json.detect_encoding(body), "surrogatepass"), and fails if
// that fails. Then s must be JSON whitespace (space, \t, \n, \r only), one
// JSON value in Python's grammar (RFC 8259 plus NaN, Infinity, -Infinity;
// no control character inside a string) and whitespace. detect_encoding
// on a body of 4 or more bytes whose first byte is 0 or 1 (no byte order
// mark starts with 1; only UTF-32's big-endian one, 00 00 FE FF, starts
// with 0):
//
//   - first byte 1: UTF-8 if the second byte is not 0, else UTF-16-LE or
//     UTF-32-LE. In all three the first character is U+0001 (the byte 0x01,
//     the unit 0x0001, the unit 0x00000001), which no JSON text starts with.
//     Such a body passes at once.
//   - first byte 0, second byte not 0: UTF-16-BE, 2-byte units.
//   - first bytes 00 00 FE FF: UTF-32 with a big-endian byte order mark: the
//     mark is dropped, 4-byte big-endian units follow.
//   - first bytes 00 00, then anything else: UTF-32-BE, 4-byte units.
//
// For the last three, DecideGRPC decodes the units in order, as Python does,
// and follows Python's JSON grammar over them (jsonPrefix). The body passes
// as soon as a unit cannot be decoded (a UTF-32 unit over U+10FFFF: the
// decoding fails) or cannot continue any JSON text (the parse fails,
// whatever follows), or when the body ends and what it holds is not a whole
// JSON text (or ends in the middle of a unit). A surrogate unit is taken as
// a character (surrogatepass), which JSON allows only inside a string,
// paired or not. The body is inspected when it is a whole JSON text, or
// when the first GRPCLookahead bytes, or a nesting deeper than
// jsonMaxDepth, still read as the start of one: every approximation here
// errs towards inspecting.
//
// What this costs gRPC: a gRPC message is inspected (and refused with 400
// as UTF-16 or UTF-32) only if its bytes read as the start of a UTF-32-BE
// (or, for a message of 16 MiB or more, UTF-16-BE) JSON text. The prefix
// alone can: for a message of 31,488 bytes (length 00 00 7B 00) the text
// starts with "{"; but then the next unit is the low length byte followed
// by three message bytes, which decodes only when the length is a
// multiple of 256 and the first message byte at most 0x10, and which must
// then be whitespace, a quote or a brace. Real messages decide at their
// fifth to eighth byte.
func DecideGRPC(b []byte, eos bool) (pass, done bool) {
	if len(b) < GRPCPrefixLen {
		return false, eos // too short to be gRPC: inspect
	}
	switch b[0] {
	case 1:
		return true, true
	case 0:
	default:
		return false, true // not a gRPC message prefix: inspect
	}
	unit, i := 2, 0
	if b[1] == 0 {
		unit = 4
		if b[2] == 0xfe && b[3] == 0xff {
			i = 4
		}
	}
	var v jsonPrefix
	for ; i+unit <= len(b); i += unit {
		if i >= GRPCLookahead {
			return false, true // still a JSON text's start: inspect
		}
		var c uint32
		if unit == 2 {
			c = uint32(b[i])<<8 | uint32(b[i+1])
		} else {
			c = uint32(b[i])<<24 | uint32(b[i+1])<<16 | uint32(b[i+2])<<8 | uint32(b[i+3])
			if c > 0x10ffff {
				return true, true // Python cannot decode the body
			}
		}
		switch v.next(c) {
		case jsonNo:
			return true, true
		case jsonTooDeep:
			return false, true
		}
	}
	if !eos {
		return false, false
	}
	// The whole body: json.loads reads it only if it decodes (no cut unit
	// at the end) to a whole JSON text.
	return i != len(b) || !v.complete(), true
}

// GRPCLookahead bounds how much of a body labelled gRPC DecideGRPC reads:
// a host that buffers the start of such a body needs at most this many
// bytes and a message prefix.
const GRPCLookahead = 4096

// jsonMaxDepth bounds the nesting jsonPrefix follows.
const jsonMaxDepth = 32

// Results of jsonPrefix.next.
const (
	jsonMaybe   = iota // the text so far can start a JSON text
	jsonNo             // no JSON text starts like this
	jsonTooDeep        // nested deeper than jsonMaxDepth: not followed
)

// States of jsonPrefix.
const (
	jValue        uint8 = iota // before a value
	jValueOrClose              // after '[': a value or ']'
	jKeyOrClose                // after '{': a key or '}'
	jKey                       // after ',' in an object: a key
	jColon                     // after a key
	jAfter                     // after a value: ',' or a closer inside a container
	jString                    // in a string
	jEscape                    // after a backslash in a string
	jHex                       // in the hex digits of \u
	jLiteral                   // in true, false, null, NaN, Infinity
	jMinus                     // after '-': a digit or Infinity
	jZero                      // after a number's leading 0
	jInt                       // in a number's integer digits
	jDot                       // after the decimal point: a digit
	jFrac                      // in the fraction's digits
	jExp                       // after e or E: a sign or a digit
	jExpSign                   // after the exponent's sign: a digit
	jExpDigits                 // in the exponent's digits
)

// jsonPrefix follows a text, one character at a time, as Python's JSON
// decoder reads it, far enough to tell when no JSON text can start like
// it. Its zero value is at the start of a text.
type jsonPrefix struct {
	state uint8
	ret   uint8  // the state after a string: jColon for a key, jAfter for a value
	lit   string // the rest of a literal
	hex   uint8  // hex digits left in \u
	depth uint8
	open  [jsonMaxDepth]byte // '{' or '[' per level
}

func jsonSpace(c uint32) bool { return c == ' ' || c == '\t' || c == '\n' || c == '\r' }

func jsonDigit(c uint32) bool { return '0' <= c && c <= '9' }

// next reads one more character c.
func (v *jsonPrefix) next(c uint32) int {
	for {
		switch v.state {
		case jValue, jValueOrClose:
			if jsonSpace(c) {
				return jsonMaybe
			}
			if c == ']' && v.state == jValueOrClose {
				return v.close()
			}
			return v.value(c)
		case jKeyOrClose, jKey:
			switch {
			case jsonSpace(c):
				return jsonMaybe
			case c == '"':
				v.state, v.ret = jString, jColon
				return jsonMaybe
			case c == '}' && v.state == jKeyOrClose:
				return v.close()
			}
			return jsonNo
		case jColon:
			switch {
			case jsonSpace(c):
				return jsonMaybe
			case c == ':':
				v.state = jValue
				return jsonMaybe
			}
			return jsonNo
		case jAfter:
			if jsonSpace(c) {
				return jsonMaybe
			}
			if v.depth == 0 {
				return jsonNo // data after the value
			}
			switch open := v.open[v.depth-1]; {
			case c == ',' && open == '{':
				v.state = jKey
				return jsonMaybe
			case c == ',':
				v.state = jValue
				return jsonMaybe
			case c == '}' && open == '{', c == ']' && open == '[':
				return v.close()
			}
			return jsonNo
		case jString:
			switch {
			case c == '"':
				v.state = v.ret
			case c == '\\':
				v.state = jEscape
			case c < 0x20:
				return jsonNo // a control character (Python's strict mode)
			}
			return jsonMaybe
		case jEscape:
			switch c {
			case '"', '\\', '/', 'b', 'f', 'n', 'r', 't':
				v.state = jString
				return jsonMaybe
			case 'u':
				v.state, v.hex = jHex, 4
				return jsonMaybe
			}
			return jsonNo
		case jHex:
			if !jsonDigit(c) && !('a' <= c && c <= 'f') && !('A' <= c && c <= 'F') {
				return jsonNo
			}
			if v.hex--; v.hex == 0 {
				v.state = jString
			}
			return jsonMaybe
		case jLiteral:
			if c != uint32(v.lit[0]) {
				return jsonNo
			}
			if v.lit = v.lit[1:]; v.lit == "" {
				v.state = jAfter
			}
			return jsonMaybe
		case jMinus:
			switch {
			case c == '0':
				v.state = jZero
			case jsonDigit(c):
				v.state = jInt
			case c == 'I':
				v.state, v.lit = jLiteral, "nfinity"
			default:
				return jsonNo
			}
			return jsonMaybe
		case jZero, jInt, jFrac:
			switch {
			case jsonDigit(c) && v.state != jZero:
				return jsonMaybe
			case c == '.' && v.state != jFrac:
				v.state = jDot
				return jsonMaybe
			case c == 'e' || c == 'E':
				v.state = jExp
				return jsonMaybe
			}
			v.state = jAfter // the number ended before c
			continue
		case jDot, jExpSign:
			// Python's number would end before the '.' or the 'e', which
			// nothing after a value can be.
			if !jsonDigit(c) {
				return jsonNo
			}
			v.state++ // jFrac, jExpDigits
			return jsonMaybe
		case jExp:
			switch {
			case c == '+' || c == '-':
				v.state = jExpSign
			case jsonDigit(c):
				v.state = jExpDigits
			default:
				return jsonNo
			}
			return jsonMaybe
		case jExpDigits:
			if jsonDigit(c) {
				return jsonMaybe
			}
			v.state = jAfter
			continue
		}
		return jsonNo
	}
}

// value reads the first character of a value.
func (v *jsonPrefix) value(c uint32) int {
	switch c {
	case '{', '[':
		if v.depth == jsonMaxDepth {
			return jsonTooDeep
		}
		v.open[v.depth] = byte(c)
		v.depth++
		v.state = jKeyOrClose
		if c == '[' {
			v.state = jValueOrClose
		}
	case '"':
		v.state, v.ret = jString, jAfter
	case '-':
		v.state = jMinus
	case '0':
		v.state = jZero
	case 't':
		v.state, v.lit = jLiteral, "rue"
	case 'f':
		v.state, v.lit = jLiteral, "alse"
	case 'n':
		v.state, v.lit = jLiteral, "ull"
	case 'N':
		v.state, v.lit = jLiteral, "aN"
	case 'I':
		v.state, v.lit = jLiteral, "nfinity"
	default:
		if !jsonDigit(c) {
			return jsonNo
		}
		v.state = jInt
	}
	return jsonMaybe
}

// close ends the innermost container.
func (v *jsonPrefix) close() int {
	v.depth--
	v.state = jAfter
	return jsonMaybe
}

// complete reports whether the text read so far is a whole JSON text.
func (v *jsonPrefix) complete() bool {
	if v.depth != 0 {
		return false
	}
	switch v.state {
	case jAfter, jZero, jInt, jFrac, jExpDigits:
		return true
	}
	return false
}

// EqualFold reports whether the ASCII text v (a header name, a media type)
// equals lower, which is in lower case, ignoring case: how HTTP compares
// the names and tokens the filter looks for.
func EqualFold(v []byte, lower string) bool {
	if len(v) != len(lower) {
		return false
	}
	for i := range v {
		c := v[i]
		if 'A' <= c && c <= 'Z' {
			c += 'a' - 'A'
		}
		if c != lower[i] {
			return false
		}
	}
	return true
}
