package kvhints

import (
	"bytes"
	"encoding/binary"
	"strings"
	"testing"
	"unicode/utf8"

	"github.com/kvgate/kvgate/internal/wiretest"
)

func TestIsGRPCContentType(t *testing.T) {
	for v, want := range map[string]bool{
		"application/grpc":                        true,
		"application/grpc+proto":                  true,
		"application/grpc+json":                   true,
		"application/grpc+custom-codec":           true,
		"Application/GRPC":                        true,
		" application/grpc ":                      true,
		"application/grpc;charset=utf-8":          true,
		"application/grpc ; x=y":                  true,
		"application/grpc+proto; charset=utf-8":   true,
		"application/grpc+":                       false,
		"application/grpc-web":                    false,
		"application/grpc-web+proto":              false,
		"application/grpc-web-text":               false,
		"application/grpcx":                       false,
		"application/json":                        false,
		"application/grp":                         false,
		"":                                        false,
		"text/plain; x=application/grpc":          false,
		"application/grpc+proto x":                false,
		"application/json, application/grpc":      false,
		"application/grpc\x00":                    false,
		"application/grpc+proto;application/json": true,
	} {
		if got := IsGRPCContentType([]byte(v)); got != want {
			t.Errorf("IsGRPCContentType(%q) = %v, want %v", v, got, want)
		}
	}
}

func TestDecideGRPC(t *testing.T) {
	hint := `{"kv_hints":{"protocol_version":"0.1"},"model":"m"}`
	pad := func(n int) []byte { return bytes.Repeat([]byte{0x5a}, n) }
	for _, c := range []struct {
		name string
		body []byte
		pass bool
	}{
		{"message", wiretest.GRPCFrame(0, []byte("\x0a\x05hello")), true},
		{"empty message", wiretest.GRPCFrame(0, nil), true},
		{"compressed", wiretest.GRPCFrame(1, []byte("\x1f\x8b\x08\x00")), true},
		{"compressed with zero length bytes", []byte{1, 0, 0, 0, 0}, true},
		{"two messages", append(wiretest.GRPCFrame(0, []byte("\x08\x01")), wiretest.GRPCFrame(0, []byte("\x08\x02"))...), true},
		{"bad flag", []byte{2, 0, 0, 0, 0}, false},
		{"too short", []byte{0, 0, 0, 0}, false},
		{"empty", nil, false},
		{"UTF-8 JSON", []byte(hint), false},
		// The case: UTF-32-BE JSON labelled gRPC is read by Python.
		{"UTF-32-BE JSON", wiretest.UTF32BE(hint), false},
		{"UTF-32-BE JSON with BOM", append([]byte{0, 0, 0xfe, 0xff}, wiretest.UTF32BE(hint)...), false},
		{"UTF-32-BE JSON after whitespace", wiretest.UTF32BE(" \t\r\n" + hint), false},
		{"UTF-32-BE number", wiretest.UTF32BE("12345"), false},
		{"UTF-32-BE -Infinity", wiretest.UTF32BE("-Infinity"), false},
		{"UTF-32-BE string with non-ASCII", append(append(wiretest.UTF32BE(`"`), 0, 1, 0xf6, 0x00), wiretest.UTF32BE(`"`)...), false},
		{"UTF-16-BE JSON", wiretest.UTF16BE(hint), false},
		{"UTF-16-BE JSON after whitespace", wiretest.UTF16BE("\n " + hint), false},
		// gRPC messages whose prefix reads as the start of a UTF-32-BE text
		// pass once the text goes wrong.
		{"length 0x7B01: '{' then an undecodable unit", wiretest.GRPCFrame(0, pad(0x7b01)), true},
		{"length 0x7B00: '{' then U+0A0102", wiretest.GRPCFrame(0, append([]byte{0x0a, 0x01, 0x02}, pad(0x7b00-3)...)), true},
		{"length 0x2000: ' ' then U+0000", wiretest.GRPCFrame(0, make([]byte, 0x2000)), true},
		{"length 0x3100: '1' then NUL", wiretest.GRPCFrame(0, make([]byte, 0x3100)), true},
		{"length 0x0900: tab, then tab, then '{' and NUL", wiretest.GRPCFrame(0, append([]byte{0, 0, 9, 0, 0, 0, 0x7b}, make([]byte, 0x900-7)...)), true},
		{"UTF-32-BE of only whitespace", wiretest.UTF32BE("    "), true},
		{"UTF-32-BE JSON cut in a unit", wiretest.UTF32BE("{}")[:7], true},
		{"UTF-32-BE JSON with data after it", wiretest.UTF32BE("{} x"), true},
		{"UTF-32-BE unclosed object", wiretest.UTF32BE(`{"a":1`), true},
		{"UTF-32-BE control character in a string", wiretest.UTF32BE("\"a\x01\""), true},
		{"UTF-32-BE second BOM", append([]byte{0, 0, 0xfe, 0xff}, wiretest.UTF32BE("\ufeff{}")...), true},
		{"UTF-16-BE odd length", append(wiretest.UTF16BE("{}"), 0), true},
		{"UTF-16-BE message of 16 MiB", []byte{0, 1, 0, 0, 0, 0x0a}, true},
		// Deeper than followed, or longer than looked at: inspected.
		{"UTF-32-BE deep", wiretest.UTF32BE(strings.Repeat("[", jsonMaxDepth+1)), false},
		{"UTF-32-BE long string", wiretest.UTF32BE(`"` + strings.Repeat("x", GRPCLookahead) + `"`), false},
	} {
		pass, done := DecideGRPC(c.body, true)
		if !done || pass != c.pass {
			t.Errorf("%s: DecideGRPC(%x..., eos) = %v, %v; want %v", c.name, c.body[:min(len(c.body), 12)], pass, done, c.pass)
		}
		if c.pass {
			// Whatever a passed body is, the rulebook refuses it as JSON.
			if _, res := Rewrite(c.body, Policy{}); res.Outcome != OutcomeRejected || res.Status != 400 {
				t.Errorf("%s: passed, but kvhints reads it: %+v", c.name, res)
			}
		}
	}
}

// checkDecision checks DecideGRPC on body against what json.loads would
// do, through the Go scanner (pyDecode and kvhints), and checks that every
// prefix decides the same or waits.
func checkDecision(t *testing.T, body []byte) {
	pass, done := DecideGRPC(body, true)
	if !done {
		t.Fatalf("undecided on the whole body %x", body)
	}
	if pass {
		if len(body) < GRPCPrefixLen || body[0] > 1 {
			t.Fatalf("passed %x, which has no gRPC prefix", body)
		}
		if text, ok := pyDecode(body); ok {
			if _, res := Rewrite(text, Policy{}); res.Outcome != OutcomeRejected {
				t.Fatalf("passed %x, which json.loads reads as %q", body, text)
			}
		}
	}
	for k := 0; k < len(body); k++ {
		if p, d := DecideGRPC(body[:k], false); d && p != pass {
			t.Fatalf("the first %d bytes of %x decide %v, the whole body %v", k, body, p, pass)
		}
	}
}

// A body passes uninspected only when json.loads cannot read it (as the
// Go scanner, which reads what Python reads, tells on the text Python's
// detect_encoding would decode), and how the body is cut into chunks never
// changes the decision.
func FuzzDecideGRPC(f *testing.F) {
	for _, s := range []string{`{}`, `{"kv_hints":{"protocol_version":"0.1"}}`, ` [1,-2.5e3,"x\u0041",true,null,NaN,-Infinity]`, "\t\"\\\"\"", "0", `{"a":{"b":[{}]}}`} {
		f.Add(wiretest.UTF32BE(s))
		f.Add(append([]byte{0, 0, 0xfe, 0xff}, wiretest.UTF32BE(s)...))
		f.Add(wiretest.UTF16BE(s))
		f.Add([]byte(s))
	}
	f.Add(wiretest.GRPCFrame(0, []byte("\x0a\x05hello")))
	f.Add(wiretest.GRPCFrame(1, []byte("x")))
	f.Add(wiretest.GRPCFrame(0, make([]byte, 0x2000)))
	f.Fuzz(func(t *testing.T, body []byte) {
		if len(body) > 3*GRPCLookahead {
			return
		}
		checkDecision(t, body)
	})
}

// The decision holds for gRPC messages of every length below 64 KiB (the
// length bytes are the first characters Python would decode) with a few
// kinds of content.
func TestDecideGRPCEveryLength(t *testing.T) {
	if testing.Short() {
		t.Skip("65536 lengths")
	}
	msgs := [][]byte{nil, []byte("\x0a\x03abc"), []byte("\x00\x00\x00{"), []byte("\x00\x00\x00 \x00\x00\x00}")}
	for n := 0; n < 1<<16; n++ {
		for _, m := range msgs {
			b := []byte{0, 0, 0, byte(n >> 8), byte(n)}
			b = append(b, m...)
			if len(b) < 5+n {
				b = append(b, make([]byte, min(5+n-len(b), 64))...) // the rest of the message: zeros, cut
			}
			if pass, done := DecideGRPC(b, true); !done {
				t.Fatalf("length %d: undecided", n)
			} else if pass {
				if text, ok := pyDecode(b); ok {
					if _, res := Rewrite(text, Policy{}); res.Outcome != OutcomeRejected {
						t.Fatalf("length %d: passed %x, which json.loads reads", n, b)
					}
				}
			}
		}
	}
}

// pyDecode decodes body as json.loads does before parsing
// (json.detect_encoding, then decoding with surrogatepass) and returns the
// text in UTF-8, surrogates encoded as three bytes the way Python's
// surrogatepass writes them; ok is false when Python's decoding fails or
// leaves a text json.loads cannot start with (secondBOM).
func pyDecode(b []byte) (text []byte, ok bool) {
	enc, skip := "utf-8", 0
	switch {
	case bytes.HasPrefix(b, []byte{0, 0, 0xfe, 0xff}):
		enc, skip = "utf-32-be", 4
	case bytes.HasPrefix(b, []byte{0xff, 0xfe, 0, 0}):
		enc, skip = "utf-32-le", 4
	case bytes.HasPrefix(b, []byte{0xfe, 0xff}):
		enc, skip = "utf-16-be", 2
	case bytes.HasPrefix(b, []byte{0xff, 0xfe}):
		enc, skip = "utf-16-le", 2
	case bytes.HasPrefix(b, []byte{0xef, 0xbb, 0xbf}):
		enc, skip = "utf-8", 3
	case len(b) >= 4 && b[0] == 0:
		enc = map[bool]string{true: "utf-16-be", false: "utf-32-be"}[b[1] != 0]
	case len(b) >= 4 && b[1] == 0:
		enc = map[bool]string{true: "utf-16-le", false: "utf-32-le"}[b[2] != 0 || b[3] != 0]
	case len(b) == 2 && b[0] == 0:
		enc = "utf-16-be"
	case len(b) == 2 && b[1] == 0:
		enc = "utf-16-le"
	}
	b = b[skip:]
	if enc == "utf-8" {
		return b, !secondBOM(b) // kvhints checks UTF-8 itself
	}
	unit := 2
	if strings.HasPrefix(enc, "utf-32") {
		unit = 4
	}
	if len(b)%unit != 0 {
		return nil, false
	}
	le := strings.HasSuffix(enc, "le")
	var units []uint32
	for i := 0; i < len(b); i += unit {
		u := b[i : i+unit]
		var c uint32
		switch {
		case unit == 2 && le:
			c = uint32(binary.LittleEndian.Uint16(u))
		case unit == 2:
			c = uint32(binary.BigEndian.Uint16(u))
		case le:
			c = binary.LittleEndian.Uint32(u)
		default:
			c = binary.BigEndian.Uint32(u)
		}
		if c > 0x10ffff {
			return nil, false
		}
		units = append(units, c)
	}
	for i := 0; i < len(units); i++ {
		c := units[i]
		if unit == 2 && 0xd800 <= c && c < 0xdc00 && i+1 < len(units) && 0xdc00 <= units[i+1] && units[i+1] < 0xe000 {
			c = 0x10000 + (c-0xd800)<<10 + (units[i+1] - 0xdc00)
			i++
		}
		if 0xd800 <= c && c < 0xe000 {
			text = append(text, 0xe0|byte(c>>12), 0x80|byte(c>>6)&0x3f, 0x80|byte(c)&0x3f)
		} else {
			text = utf8.AppendRune(text, rune(c))
		}
	}
	return text, !secondBOM(text)
}

// secondBOM reports decoded text that starts with U+FEFF: the codec took
// the first BOM off, and json.loads parses the rest as a str, where U+FEFF
// is no whitespace ("Expecting value"), though kvhints, reading bytes,
// would take its UTF-8 for a BOM. (Found by FuzzDecideGRPC: 0000feff
// 0000feff 00000030 passed uninspected, rightly; the model said readable.)
func secondBOM(text []byte) bool { return bytes.HasPrefix(text, []byte("\uFEFF")) }
