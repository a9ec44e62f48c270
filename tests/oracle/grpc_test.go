// Package oracle_test checks the filter's gRPC rule against Python itself:
// the worker's json.loads is the only judge of what a body it could read.
package oracle_test

import (
	"bufio"
	"bytes"
	"encoding/base64"
	"encoding/binary"
	"math/rand/v2"
	"os/exec"
	"strings"
	"testing"
	"unicode/utf16"

	"github.com/kvgate/kvgate/internal/envoytest"
	"github.com/kvgate/kvgate/kvhints"
)

// jsonTexts are JSON texts of every shape a value can start with, which
// Python's json.loads reads.
var jsonTexts = []string{
	`{}`, `{"kv_hints":{"protocol_version":"0.1"},"model":"m"}`, `[]`, `[1,{"a":[true,false,null]}]`,
	`""`, `"x\u0041\"\\"`, `"é漢😀"`, `0`, `-1`, `12.5e-3`, `-0.0E+1`, `true`, `false`, `null`, `NaN`, `Infinity`, `-Infinity`,
	`{"a" : 1 , "b" : [ 2 , 3 ] }`,
}

var spaces = []string{"", " ", "\t", "\n", "\r", " \t\r\n ", strings.Repeat(" ", 40)}

// encodings are the ways a client can send a JSON text that json.loads
// decodes (json.detect_encoding), byte order marks included.
var encodings = map[string]func(string) []byte{
	"utf-8":         func(s string) []byte { return []byte(s) },
	"utf-8-bom":     func(s string) []byte { return append([]byte{0xef, 0xbb, 0xbf}, s...) },
	"utf-16-be":     func(s string) []byte { return u16(s, binary.BigEndian, nil) },
	"utf-16-le":     func(s string) []byte { return u16(s, binary.LittleEndian, nil) },
	"utf-16-be-bom": func(s string) []byte { return u16(s, binary.BigEndian, []byte{0xfe, 0xff}) },
	"utf-16-le-bom": func(s string) []byte { return u16(s, binary.LittleEndian, []byte{0xff, 0xfe}) },
	"utf-32-be":     func(s string) []byte { return u32(s, binary.BigEndian, nil) },
	"utf-32-le":     func(s string) []byte { return u32(s, binary.LittleEndian, nil) },
	"utf-32-be-bom": func(s string) []byte { return u32(s, binary.BigEndian, []byte{0, 0, 0xfe, 0xff}) },
	"utf-32-le-bom": func(s string) []byte { return u32(s, binary.LittleEndian, []byte{0xff, 0xfe, 0, 0}) },
}

func u16(s string, o binary.AppendByteOrder, b []byte) []byte {
	for _, u := range utf16.Encode([]rune(s)) {
		b = o.AppendUint16(b, u)
	}
	return b
}

func u32(s string, o binary.AppendByteOrder, b []byte) []byte {
	for _, r := range s {
		b = o.AppendUint32(b, uint32(r))
	}
	return b
}

// pythonReads runs json.loads on every body, in one Python process, and
// returns whether each was read.
func pythonReads(t *testing.T, bodies [][]byte) []bool {
	t.Helper()
	const prog = `
import base64, json, sys
for line in sys.stdin:
    try:
        json.loads(base64.b64decode(line))
        print(1)
    except Exception:
        print(0)
`
	var in bytes.Buffer
	for _, b := range bodies {
		in.WriteString(base64.StdEncoding.EncodeToString(b))
		in.WriteByte('\n')
	}
	cmd := exec.Command(envoytest.Python(t), "-c", prog)
	cmd.Stdin = &in
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("python: %v", err)
	}
	var reads []bool
	sc := bufio.NewScanner(bytes.NewReader(out))
	for sc.Scan() {
		reads = append(reads, sc.Text() == "1")
	}
	if len(reads) != len(bodies) {
		t.Fatalf("python answered %d of %d bodies", len(reads), len(bodies))
	}
	return reads
}

// No body that Python's json.loads reads passes uninspected as gRPC
// (kvhints.DecideGRPC), checked on Python itself: JSON texts of every shape
// in every encoding json.loads detects, after whitespace, with every cut
// and many one-byte changes of their first bytes, and gRPC messages of
// every length byte and random bodies that start like gRPC. Every body
// DecideGRPC passes must be one Python cannot read; JSON texts must all be
// read (else the test proves nothing), and many candidates must pass.
func TestGRPCNeverPassesJSON(t *testing.T) {
	var bodies [][]byte
	var isJSON []bool
	addBody := func(b []byte, json bool) {
		bodies = append(bodies, b)
		isJSON = append(isJSON, json)
	}
	var texts [][]byte
	for _, enc := range encodings {
		for _, ws := range spaces {
			for _, j := range jsonTexts {
				b := enc(ws + j + ws)
				texts = append(texts, b)
				addBody(b, true)
			}
		}
	}
	// Cuts and one-byte changes near the start of each text.
	for _, b := range texts {
		for n := 5; n < len(b) && n < 48; n++ {
			addBody(b[:n], false)
		}
		for i := 0; i < len(b) && i < 12; i++ {
			for _, v := range []byte{0x00, 0x01, 0x09, 0x20, 0x7b, 0xfe, 0xff} {
				c := bytes.Clone(b)
				c[i] = v
				addBody(c, false)
			}
		}
	}
	// gRPC messages: every second length byte (the first character Python
	// decodes), low length bytes 0 and 1, with several contents.
	contents := [][]byte{nil, []byte("\x0a\x05llama"), []byte("\x00\x00\x00\x7d"), []byte("\x00\x00\x00 \x00\x00\x00}"), []byte("\x00\x00\x00\"\x00\x00\x00\"")}
	for hi := 0; hi < 256; hi++ {
		for _, lo := range []byte{0, 1} {
			for _, m := range contents {
				addBody(append([]byte{0, 0, 0, byte(hi), lo}, m...), false)
				addBody(append([]byte{1, 0, 0, byte(hi), lo}, m...), false)
				addBody(append([]byte{0, byte(hi), 0, 0, lo}, m...), false)
			}
		}
	}
	// Random bodies that start like gRPC.
	rng := rand.New(rand.NewPCG(1, 2))
	for range 20000 {
		b := make([]byte, 5+rng.IntN(40))
		for i := range b {
			if rng.IntN(3) == 0 {
				b[i] = []byte{0, 0, 0, ' ', '\t', '{', '}', '"', '[', ']', '1', ':', ',', 'n', 'u', 'l'}[rng.IntN(16)]
			} else {
				b[i] = byte(rng.Uint32())
			}
		}
		b[0] = byte(rng.IntN(2))
		if rng.IntN(2) == 0 {
			b[1] = 0
		}
		addBody(b, false)
	}

	reads := pythonReads(t, bodies)
	passed, read := 0, 0
	for i, b := range bodies {
		pass, done := kvhints.DecideGRPC(b, true)
		if !done {
			t.Fatalf("undecided on a whole body %x", b)
		}
		if reads[i] {
			read++
		}
		if isJSON[i] && !reads[i] {
			t.Errorf("Python does not read the JSON text %x: the test's encodings are wrong", b)
		}
		if pass {
			passed++
			if reads[i] {
				t.Errorf("passes uninspected, but json.loads reads it: %x", b)
			}
		}
	}
	t.Logf("%d bodies: %d read by json.loads, %d passed as gRPC", len(bodies), read, passed)
	if passed < len(bodies)/4 || read < len(texts) {
		t.Errorf("too few passed (%d) or read (%d) for the check to mean much", passed, read)
	}
}
