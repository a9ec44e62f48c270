package kvhints

import (
	"bytes"
	"strconv"
	"strings"
	"sync"
	"testing"
)

// refEnvelope is the reference envelope of docs/spec.md, canonical.
const refEnvelope = `{"protocol_version":"0.1","message_id":"msg-123","actions":[{"action_id":"a1","action_type":"kv.fetch","action_version":"1.0","payload":{"source_control_endpoint":"tcp://127.0.0.1:23280","block_hashes":[11,22]}}]}`

// env builds an envelope around one action whose payload is p.
func env(p string) string {
	return `{"protocol_version":"0.1","message_id":"m","actions":[{"action_id":"a","action_type":"kv.fetch","action_version":"1.0","payload":` + p + `}]}`
}

// nest wraps v in n arrays.
func nest(n int, v string) string { return strings.Repeat("[", n) + v + strings.Repeat("]", n) }

func TestReferenceEnvelopeIs213Bytes(t *testing.T) {
	if len(refEnvelope) != 213 {
		t.Fatalf("reference envelope is %d bytes", len(refEnvelope))
	}
	s, r := Admit([]byte(refEnvelope), Limits{})
	if r != ReasonNone || s == nil || string(s.b) != refEnvelope {
		t.Fatalf("Admit(reference) = %v, %v", s, r)
	}
}

func TestAdmitRules(t *testing.T) {
	big := func(n int) string { // an envelope of exactly n compact bytes
		base := env(`{"s":""}`)
		return env(`{"s":"` + strings.Repeat("x", n-len(base)) + `"}`)
	}
	cases := []struct {
		name  string
		raw   string
		want  Reason
		canon string // expected canonical bytes when admitted; "" = raw
	}{
		{"reference", refEnvelope, ReasonNone, ""},
		{"null is no hint", ` null `, ReasonNone, "-"},
		{"array", `[1]`, ReasonMalformed, ""},
		{"string", `"x"`, ReasonMalformed, ""},
		{"not json", `{`, ReasonMalformed, ""},
		{"empty", ``, ReasonMalformed, ""},
		{"version missing", `{"message_id":"m","actions":[]}`, ReasonMalformed, ""},
		{"version number", `{"protocol_version":0.1,"message_id":"m","actions":[]}`, ReasonMalformed, ""},
		{"version null", `{"protocol_version":null,"message_id":"m","actions":[]}`, ReasonMalformed, ""},
		{"version repeated", `{"protocol_version":"0.1","protocol_version":"0.1","message_id":"m","actions":[]}`, ReasonMalformed, ""},
		{"version 0.2", `{"protocol_version":"0.2","message_id":"m","actions":[]}`, ReasonUnknownVersion, ""},
		{"version empty", `{"protocol_version":"","message_id":"m","actions":[]}`, ReasonUnknownVersion, ""},
		{"unknown version wins over malformed", `{"protocol_version":"9.9","actions":7}`, ReasonUnknownVersion, ""},
		{"escaped version", `{"protocol_version":"0\u002e1","message_id":"m","actions":[]}`, ReasonNone, `{"protocol_version":"0.1","message_id":"m","actions":[]}`},
		{"escaped version key", `{"protocol\u005fversion":"0.2","message_id":"m","actions":[]}`, ReasonUnknownVersion, ""},
		{"empty actions", `{"protocol_version":"0.1","message_id":"m","actions":[]}`, ReasonNone, ""},
		{"message_id missing", `{"protocol_version":"0.1","actions":[]}`, ReasonMalformed, ""},
		{"message_id empty", `{"protocol_version":"0.1","message_id":"","actions":[]}`, ReasonMalformed, ""},
		{"message_id number", `{"protocol_version":"0.1","message_id":1,"actions":[]}`, ReasonMalformed, ""},
		{"actions missing", `{"protocol_version":"0.1","message_id":"m"}`, ReasonMalformed, ""},
		{"actions object", `{"protocol_version":"0.1","message_id":"m","actions":{}}`, ReasonMalformed, ""},
		{"action not object", `{"protocol_version":"0.1","message_id":"m","actions":[1]}`, ReasonMalformed, ""},
		{"payload array", env(`[]`), ReasonMalformed, ""},
		{"payload null", env(`null`), ReasonMalformed, ""},
		{"action_id empty", strings.Replace(refEnvelope, `"action_id":"a1"`, `"action_id":""`, 1), ReasonMalformed, ""},
		{"action_type missing", strings.Replace(refEnvelope, `"action_type":"kv.fetch",`, ``, 1), ReasonMalformed, ""},
		{"action_version null", strings.Replace(refEnvelope, `"action_version":"1.0"`, `"action_version":null`, 1), ReasonMalformed, ""},
		{"unknown action type kept", strings.Replace(refEnvelope, `kv.fetch`, `kv.future`, 1), ReasonNone, ""},
		{"extra members kept", `{"protocol_version":"0.1","x":{"y":[true,false,null]},"message_id":"m","actions":[{"z":1,"action_id":"a","action_type":"t","action_version":"v","payload":{}}]}`, ReasonNone, ""},
		{"duplicate at envelope", `{"protocol_version":"0.1","message_id":"m","message_id":"n","actions":[]}`, ReasonMalformed, ""},
		{"duplicate by escape", `{"protocol_version":"0.1","message_id":"m","actions":[],"a":1,"\u0061":2}`, ReasonMalformed, ""},
		{"duplicate in payload", env(`{"a":{"b":1,"b":2}}`), ReasonMalformed, ""},
		{"same key in sibling objects", env(`{"a":{"b":1},"c":{"b":2}}`), ReasonNone, ""},
		{"duplicate in large object", env(`{` + manyKeys(40) + `,"k7":0}`), ReasonMalformed, ""},
		{"large object then sibling", env(`{"a":{` + manyKeys(40) + `},"b":{` + manyKeys(40) + `}}`), ReasonNone, ""},
		{"NaN", env(`{"a":NaN}`), ReasonMalformed, ""},
		{"Infinity", env(`{"a":Infinity}`), ReasonMalformed, ""},
		{"-Infinity", env(`{"a":-Infinity}`), ReasonMalformed, ""},
		{"int min", env(`{"a":-9223372036854775808}`), ReasonNone, ""},
		{"int min-1", env(`{"a":-9223372036854775809}`), ReasonMalformed, ""},
		{"uint max", env(`{"a":18446744073709551615}`), ReasonNone, ""},
		{"uint max+1", env(`{"a":18446744073709551616}`), ReasonMalformed, ""},
		{"big int at envelope level", `{"protocol_version":"0.1","message_id":"m","actions":[],"x":[99999999999999999999]}`, ReasonMalformed, ""},
		{"exponent is a float", env(`{"a":1e19}`), ReasonNone, env(`{"a":1e+19}`)},
		{"float max", env(`{"a":1e308}`), ReasonNone, env(`{"a":1e+308}`)},
		{"float overflow", env(`{"a":1e309}`), ReasonMalformed, ""},
		{"float underflow is finite", env(`{"a":-1.5e-400}`), ReasonNone, env(`{"a":-0.0}`)},
		// Numbers as the worker's json.dumps writes back what json.loads read.
		{"floats as Python writes them", env(`{"a":[1.0,1E2,1e15,1e16,1e-5,0.0001,1234567890123456.0,12345678901234567.0,0.10,2.5E+300,-0.0,0e999999,5e-324]}`),
			ReasonNone, env(`{"a":[1.0,100.0,1000000000000000.0,1e+16,1e-05,0.0001,1234567890123456.0,1.2345678901234568e+16,0.1,2.5e+300,-0.0,0.0,5e-324]}`)},
		{"-0 is the integer 0", env(`{"a":[-0,0,-1]}`), ReasonNone, env(`{"a":[0,0,-1]}`)},
		{"a long float is its double", env(`{"a":3.` + strings.Repeat("1415926535", 200) + `}`), ReasonNone, env(`{"a":3.1415926535141594}`)},
		{"a long float with a compensating exponent", env(`{"a":0.` + strings.Repeat("0", 20000) + `15e20005}`), ReasonNone, env(`{"a":15000.0}`)},
		{"overflow counts as Infinity", env(`{"a":1e400}`), ReasonMalformed, ""},
		{"integer of 4300 digits is out of range", env(`{"a":` + strings.Repeat("9", 4300) + `}`), ReasonMalformed, ""},
		{"integer of 4301 digits is not JSON to Python", env(`{"a":-` + strings.Repeat("9", 4301) + `}`), ReasonMalformed, ""},
		{"float of 4301 integer digits", env(`{"a":` + strings.Repeat("1", 4301) + `.0}`), ReasonMalformed, ""},
		{"1e15 grows to 18 bytes", floats("1e15", MaxCompactBytes/18), ReasonOversized, ""},
		{"1e15 grown to exactly 65536", floatsTo("1e15", "1000000000000000.0", MaxCompactBytes), ReasonNone,
			strings.ReplaceAll(floatsTo("1e15", "1000000000000000.0", MaxCompactBytes), "1e15", "1000000000000000.0")},
		{"1e15 grown to 65537", floatsTo("1e15", "1000000000000000.0", MaxCompactBytes+1), ReasonOversized, ""},
		{"long decimals shrink", floats(longDecimal, MaxCompactBytes/40), ReasonNone,
			strings.ReplaceAll(floats(longDecimal, MaxCompactBytes/40), longDecimal, "0.1")},
		{"lone high surrogate", env(`{"a":"\ud800"}`), ReasonMalformed, ""},
		{"lone low surrogate", env(`{"a":"x\udc00y"}`), ReasonMalformed, ""},
		{"lone surrogate in key", env(`{"\ud800":1}`), ReasonMalformed, ""},
		{"surrogate pair", env(`{"a":"\ud83d\ude00"}`), ReasonNone, env(`{"a":"😀"}`)},
		{"encoded surrogate", env("{\"a\":\"x\xed\xa0\x80\"}"), ReasonMalformed, ""},
		{"encoded surrogate pair", env("{\"a\":\"\xed\xa0\xbd\xed\xb8\x80\"}"), ReasonMalformed, ""},
		{"encoded surrogate in key", env("{\"\xed\xbf\xbf\":1}"), ReasonMalformed, ""},
		{"encoded surrogate in message_id", `{"protocol_version":"0.1","message_id":"m` + "\xed\xb0\x80" + `","actions":[]}`, ReasonMalformed, ""},
		{"encoded surrogate in version", `{"protocol_version":"0.1` + "\xed\xa0\x80" + `","message_id":"m","actions":[]}`, ReasonUnknownVersion, ""},
		{"surrogate at 65536 is malformed", strings.Replace(big(65536), "xxx", "\xed\xa0\x80", 1), ReasonMalformed, ""},
		{"escaped surrogate at 65536 is malformed", strings.Replace(big(65536), "xxx", `\ud800`, 1), ReasonMalformed, ""},
		{"surrogate at 65537 is oversized", strings.Replace(big(65537), "xxx", "\xed\xa0\x80", 1), ReasonOversized, ""},
		{"escaped surrogate at 65537 is oversized", strings.Replace(big(65537), "xxx", `\udfff`, 1), ReasonOversized, ""},
		{"escapes canonicalised", env(`{"a":"\u0041\/\u001F\u00e9\n\"\\\u2028"}`), ReasonNone, env("{\"a\":\"A/\\u001fé\\n\\\"\\\\\u2028\"}")},
		{"whitespace dropped", " {\n \"protocol_version\" : \"0.1\" ,\t\"message_id\":\"m\",\r\"actions\" : [ ] } ", ReasonNone, `{"protocol_version":"0.1","message_id":"m","actions":[]}`},
		{"depth 128", env(`{"a":` + nest(123, `{}`) + `}`), ReasonNone, ""},
		{"depth 129", env(`{"a":` + nest(124, `{}`) + `}`), ReasonMalformed, ""},
		{"exactly 65536", big(65536), ReasonNone, ""},
		{"65537", big(65537), ReasonOversized, ""},
		{"oversized wins over malformed", env(`{"s":"` + strings.Repeat("x", 70000) + `","s":1}`), ReasonOversized, ""},
		{"pretty printed fits", strings.Replace(big(65536), `,`, ",\n    ", -1), ReasonNone, big(65536)},
		{"1 MiB of whitespace, 56 compact bytes", "{\"protocol_version\":\"0.1\"," + strings.Repeat(" \n\t\r", 1<<18) + `"message_id":"m","actions":[]}`, ReasonNone, `{"protocol_version":"0.1","message_id":"m","actions":[]}`},
		{"pretty printed 1 MiB", strings.Replace(strings.Replace(refEnvelope, ",", ",\n"+strings.Repeat(" ", 100<<10), -1), `":`, `" : `, -1), ReasonNone, refEnvelope},
		{"whitespace does not hide size", `{"protocol_version":"0.1","s":"` + strings.Repeat("x", MaxCompactBytes) + `"` + strings.Repeat(" ", 1<<20) + `}`, ReasonOversized, ""},
		{"escapes shrink to fit", env(`{"s":"` + strings.Repeat(`\u0078`, 20000) + `"}`), ReasonNone, env(`{"s":"` + strings.Repeat("x", 20000) + `"}`)},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			s, r := Admit([]byte(c.raw), Limits{})
			if r != c.want {
				t.Fatalf("reason = %q, want %q", r, c.want)
			}
			if c.want != ReasonNone || c.canon == "-" {
				if s != nil {
					t.Fatalf("got a snapshot with reason %q", r)
				}
				return
			}
			want := c.canon
			if want == "" {
				want = c.raw
			}
			if string(s.b) != want {
				t.Fatalf("canonical =\n%.300s\nwant\n%.300s", s.b, want)
			}
		})
	}
}

// longDecimal is a decimal of 45 characters that reads as 0.1.
var longDecimal = "0.1" + strings.Repeat("0", 41) + "1"

// floats is an envelope whose payload holds n copies of the float literal lit.
func floats(lit string, n int) string {
	return env(`{"f":[` + strings.Repeat(lit+",", n-1) + lit + `]}`)
}

// floatsTo is an envelope of copies of the float literal lit, whose
// canonical form is written py, and a string padded so that its compact
// size, as the worker measures it, is exactly size.
func floatsTo(lit, py string, size int) string {
	frame := len(env(`{"f":[],"s":""}`))
	n := (size - frame - 100) / (len(py) + 1)
	pad := size - frame - n*(len(py)+1) + 1
	return env(`{"f":[` + strings.Repeat(lit+",", n-1) + lit + `],"s":"` + strings.Repeat("x", pad) + `"}`)
}

func manyKeys(n int) string {
	var b strings.Builder
	for i := 0; i < n; i++ {
		if i > 0 {
			b.WriteByte(',')
		}
		b.WriteString(`"k` + strconv.Itoa(i) + `":0`)
	}
	return b.String()
}

// TestHugeValueStopsAtTheLimit: a value far over the size limit is
// rejected as oversized after encoding no more than the limit, whatever
// the shape of its significant bytes (the encoder's output buffer, which
// would hold the whole value otherwise, is the witness), and rule 3 still
// reads its version.
func TestHugeValueStopsAtTheLimit(t *testing.T) {
	const n = 16 << 20
	for _, c := range []struct {
		name, value string
		want        Reason
	}{
		{"string", `{"protocol_version":"0.1","s":"` + strings.Repeat("x", n) + `"}`, ReasonOversized},
		{"escapes", `{"protocol_version":"0.1","s":"` + strings.Repeat(`\u0041`, n/6) + `"}`, ReasonOversized},
		{"numbers", `{"protocol_version":"0.1","a":[` + strings.Repeat("1,", n/2) + `1]}`, ReasonOversized},
		{"nesting", `{"protocol_version":"0.1","a":` + nest(n/2, "1") + `}`, ReasonOversized},
		{"version after", `{"s":"` + strings.Repeat("x", n) + `","protocol_version":"0.2"}`, ReasonUnknownVersion},
		{"no version", `{"s":"` + strings.Repeat("x", n) + `"}`, ReasonMalformed},
	} {
		var a Admitter
		if _, r := a.Admit([]byte(c.value), Limits{}); r != c.want {
			t.Errorf("%s: %q, want %q", c.name, r, c.want)
		}
		if got := cap(a.canon.out); got > 4*MaxCompactBytes {
			t.Errorf("%s: the encoder's buffer grew to %d bytes", c.name, got)
		}
	}
}

func TestMaxDepthLimit(t *testing.T) {
	raw := []byte(env(`{"a":[{}]}`)) // envelope 1, actions 2, action 3, payload 4, array 5, object 6
	if _, r := Admit(raw, Limits{MaxDepth: 6}); r != ReasonNone {
		t.Fatalf("depth 6 under limit 6: %q", r)
	}
	if _, r := Admit(raw, Limits{MaxDepth: 5}); r != ReasonMalformed {
		t.Fatalf("depth 6 under limit 5: %q", r)
	}
}

func TestDeepValueDoesNotRecurse(t *testing.T) {
	// A million levels: a recursive parser would exhaust the stack.
	raw := env(`{"a":` + nest(1_000_000, "1") + `}`)
	if _, r := Admit([]byte(raw), Limits{}); r != ReasonOversized {
		t.Fatalf("reason = %q", r)
	}
	raw = env(`{"a":` + nest(30_000, "1") + `}`)
	if _, r := Admit([]byte(raw), Limits{}); r != ReasonMalformed {
		t.Fatalf("reason = %q", r)
	}
}

func TestSnapshotViews(t *testing.T) {
	raw := `{"protocol_version":"0.1","message_id":"m\"1","actions":[` +
		`{"action_id":"a1","action_type":"kv.fetch","action_version":"1.0","payload":{"x":1}},` +
		`{"action_id":"a2","action_type":"kv.other","action_version":"2","payload":{},"note":"n"}],"trace":{"id":7}}`
	s, r := Admit([]byte(raw), Limits{})
	if r != ReasonNone {
		t.Fatal(r)
	}
	if s.NumActions() != 2 {
		t.Fatalf("NumActions = %d", s.NumActions())
	}
	v := s.Action(1)
	if v.Index() != 1 || v.ID() != "a2" || v.Type() != "kv.other" || v.Version() != "2" || string(v.Payload()) != `{}` {
		t.Fatalf("view = %d %q %q %q %s", v.Index(), v.ID(), v.Type(), v.Version(), v.Payload())
	}
	one := v.Envelope()
	want := `{"protocol_version":"0.1","message_id":"m\"1","actions":[{"action_id":"a2","action_type":"kv.other","action_version":"2","payload":{},"note":"n"}],"trace":{"id":7}}`
	if string(one.b) != want || one.NumActions() != 1 || one.Action(0).ID() != "a2" {
		t.Fatalf("one-action envelope = %s", one.b)
	}
	// The one-action envelope is itself admissible, byte for byte.
	if again, r := Admit(one.b, Limits{}); r != ReasonNone || !bytes.Equal(again.b, one.b) {
		t.Fatalf("re-admit = %v", r)
	}
	// Views do not copy the envelope; reading them does not change it.
	p := s.Action(0).Payload()
	p[0] = 'X'
	if string(s.Action(0).Payload()) != `{"x":1}` {
		t.Fatal("payload copy aliases the snapshot")
	}
	if s.String() != "kvhints.Snapshot("+strconv.Itoa(len(raw))+" bytes, 2 actions)" || strings.Contains(s.String(), "a1") {
		t.Fatalf("String leaks or is wrong: %s", s)
	}
}

func TestDecodeReturnsIndependentCopies(t *testing.T) {
	s, _ := Admit([]byte(refEnvelope), Limits{})
	e1, err := s.Decode()
	if err != nil {
		t.Fatal(err)
	}
	e1.MessageID = "changed"
	e1.Actions[0].Payload[2] = 'X'
	e1.Actions = append(e1.Actions, Action{})
	e2, _ := s.Decode()
	b, err := e2.Encode()
	if err != nil || string(b) != refEnvelope {
		t.Fatalf("second decode re-encodes to %s (%v)", b, err)
	}
	if string(s.b) != refEnvelope {
		t.Fatal("snapshot changed")
	}
}

func TestSnapshotSharedAcrossGoroutines(t *testing.T) {
	s, _ := Admit([]byte(refEnvelope), Limits{})
	var wg sync.WaitGroup
	for g := 0; g < 8; g++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := 0; i < 200; i++ {
				e, _ := s.Decode()
				e.Actions[0].ID = "x"
				if one := s.Action(0).Envelope(); one.Len() != 213 {
					t.Error("view length changed")
				}
			}
		}()
	}
	wg.Wait()
	if string(s.b) != refEnvelope {
		t.Fatal("snapshot changed under concurrent use")
	}
}

func TestAdmitterReuseKeepsSnapshotsIntact(t *testing.T) {
	var a Admitter
	s1, _ := a.Admit([]byte(refEnvelope), Limits{})
	s2, _ := a.Admit([]byte(env(`{"other":true}`)), Limits{})
	if string(s1.b) != refEnvelope || s2 == nil {
		t.Fatal("a later admission changed an earlier snapshot")
	}
}

func TestReasonStrings(t *testing.T) {
	want := []string{"untrusted", "unknown_version", "oversized", "malformed"}
	for i, r := range Reasons {
		if r.String() != want[i] {
			t.Errorf("%d: %q", i, r)
		}
	}
	if ReasonNone.String() != "" {
		t.Error("ReasonNone has a label")
	}
}

// TestIntegerRunStopsAtLimit: a long run of integers stops being encoded
// as soon as it passes the size limit, however long the rest of it is, so
// that a hostile envelope cannot grow the encoder's buffer with the body.
func TestIntegerRunStopsAtLimit(t *testing.T) {
	raw := []byte(`{"a":[[[[0` + strings.Repeat(`,1234567890`, 400_000) + `]]]]}`)
	var c canonicalizer
	if _, _, st := c.canonicalize(raw, DefaultMaxDepth, MaxCompactBytes); st != canonOversized {
		t.Fatalf("status %v, want canonOversized", st)
	}
	if cap(c.out) > 2*MaxCompactBytes {
		t.Errorf("encoding buffer grew to %d bytes for a %d-byte limit", cap(c.out), MaxCompactBytes)
	}
}
