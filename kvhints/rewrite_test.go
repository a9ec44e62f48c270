package kvhints

import (
	"bytes"
	"runtime"
	"strconv"
	"strings"
	"testing"
	"unsafe"
)

func TestRewriteUntrusted(t *testing.T) {
	cases := []struct {
		name, body, want string
		outcome          Outcome
	}{
		{"no hint", `{"model":"m","messages":[]}`, "", OutcomeNoHint},
		{"middle", `{"a":1, "kv_hints":{}, "b":2}`, `{"a":1, "b":2}`, OutcomeStripped},
		{"first", `{"kv_hints":{} ,"a":1}`, `{"a":1}`, OutcomeStripped},
		{"last", `{"a":1 , "kv_hints":{}}`, `{"a":1}`, OutcomeStripped},
		{"only", `{ "kv_hints":{} }`, `{  }`, OutcomeStripped},
		{"null only", `{"kv_hints":null}`, `{}`, OutcomeNullHint},
		{"null and value", `{"kv_hints":null,"a":1,"kv_hints":[1]}`, `{"a":1}`, OutcomeStripped},
		{"value then null", `{"kv_hints":[1],"a":1,"kv_hints":null}`, `{"a":1}`, OutcomeNullHint},
		{"last of three null", `{"kv_hints":1,"kv_hints":2,"kv_hints":null}`, `{}`, OutcomeNullHint},
		{"last of three not null", `{"kv_hints":null,"kv_hints":null,"kv_hints":0}`, `{}`, OutcomeStripped},
		{"escaped key", `{"kv\u005fhints":1,"a":2}`, `{"a":2}`, OutcomeStripped},
		{"all escaped", `{"a":0,"\u006b\u0076\u005f\u0068\u0069\u006e\u0074\u0073":"x"}`, `{"a":0}`, OutcomeStripped},
		{"three of them", "{\"kv_hints\":1,\n\"kv_hints\":2 , \"x\":3,\t\"kv_hints\":4,\"y\":5,\"kv_hints\":6}", "{\"x\":3,\"y\":5}", OutcomeStripped},
		{"adjacent after kept", `{"x":1,"kv_hints":1,"kv_hints":2,"y":2}`, `{"x":1,"y":2}`, OutcomeStripped},
		{"all removed", `{ "kv_hints":1 , "kv_hints":2 }`, `{  }`, OutcomeStripped},
		{"nested untouched", `{"a":{"kv_hints":1},"b":["kv_hints"]}`, "", OutcomeNoHint},
		{"other names", `{"KV_HINTS":1,"kv_hints ":2,"kv_hints\"":3,"kv_hint":4}`, "", OutcomeNoHint},
		{"BOM kept", "\xef\xbb\xbf{\"kv_hints\":1}", "\xef\xbb\xbf{}", OutcomeStripped},
		{"NaN outside", `{"t":NaN,"u":-Infinity,"kv_hints":{}}`, `{"t":NaN,"u":-Infinity}`, OutcomeStripped},
		{"non-object top", `[{"kv_hints":1}]`, "", OutcomeNoHint},
		{"string top", `"kv_hints"`, "", OutcomeNoHint},
		{"trailing whitespace", "{\"kv_hints\":1}\n", "{}\n", OutcomeStripped},
		{"encoded surrogate kept", "{\"p\":\"\xed\xa0\x80\xed\xb8\x80\",\"kv_hints\":1}", "{\"p\":\"\xed\xa0\x80\xed\xb8\x80\"}", OutcomeStripped},
		{"encoded surrogate in hint", "{\"kv_hints\":{\"\xed\xbf\xbf\":\"\xed\xa0\x80\"},\"a\":1}", `{"a":1}`, OutcomeStripped},
		{"encoded surrogate in key", "{\"\xed\xa0\x80\":1}", "", OutcomeNoHint},
		{"deep elsewhere", `{"d":` + nest(100000, "0") + `,"kv_hints":1}`, `{"d":` + nest(100000, "0") + `}`, OutcomeStripped},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			out, res := Rewrite([]byte(c.body), Policy{})
			want := c.want
			if want == "" {
				want = c.body
			}
			if string(out) != want || res.Outcome != c.outcome {
				t.Fatalf("got %q %v, want %q %v", out, res.Outcome, want, c.outcome)
			}
			if (res.Reason == ReasonUntrusted) != (c.outcome == OutcomeStripped) {
				t.Fatalf("reason %q for %v", res.Reason, res.Outcome)
			}
		})
	}
}

func TestRewriteTrusted(t *testing.T) {
	pretty := "{\n  \"protocol_version\": \"0.1\",\n  \"message_id\": \"msg-123\",\n  \"actions\": [{\"action_id\":\"a1\",\"action_type\":\"kv.fetch\",\"action_version\":\"1.0\",\"payload\":{\"source_control_endpoint\":\"tcp://127.0.0.1:23280\",\"block_hashes\":[11, 22]}}]\n}"
	cases := []struct {
		name, body, want string
		outcome          Outcome
		reason           Reason
	}{
		{"admitted verbatim", `{"a":1,"kv_hints":` + refEnvelope + `}`, "", OutcomeAdmitted, ReasonNone},
		{"admitted canonicalised", `{"a":1, "kv\u005fhints" : ` + pretty + ` ,"b":2}`, `{"a":1, "kv_hints" : ` + refEnvelope + ` ,"b":2}`, OutcomeAdmitted, ReasonNone},
		{"escaped key made literal", `{"\u006b\u0076\u005f\u0068\u0069\u006e\u0074\u0073":` + refEnvelope + `}`, `{"kv_hints":` + refEnvelope + `}`, OutcomeAdmitted, ReasonNone},
		{"escaped key, discarded", `{"kv\u005fhints":{},"a":1}`, `{"a":1}`, OutcomeDiscarded, ReasonMalformed},
		{"escaped key, null kept", `{"kv\u005fhints":null}`, "", OutcomeNullHint, ReasonNone},
		{"null kept", `{"kv_hints":null}`, "", OutcomeNullHint, ReasonNone},
		{"two members", `{"kv_hints":null,"kv_hints":` + refEnvelope + `}`, `{}`, OutcomeDiscarded, ReasonMalformed},
		{"two members, last null", `{"kv_hints":` + refEnvelope + `,"a":1,"kv_hints":null}`, `{"a":1}`, OutcomeNullHint, ReasonNone},
		{"two nulls", `{"kv_hints":null,"kv_hints":null}`, `{}`, OutcomeNullHint, ReasonNone},
		{"two envelopes", `{"kv_hints":` + refEnvelope + `,"kv_hints":` + refEnvelope + `}`, `{}`, OutcomeDiscarded, ReasonMalformed},
		{"unknown version", `{"kv_hints":{"protocol_version":"0.2"},"a":1}`, `{"a":1}`, OutcomeDiscarded, ReasonUnknownVersion},
		{"malformed", `{"a":1,"kv_hints":{"protocol_version":"0.1"}}`, `{"a":1}`, OutcomeDiscarded, ReasonMalformed},
		{"not an object", `{"kv_hints":"x"}`, `{}`, OutcomeDiscarded, ReasonMalformed},
		{"NaN inside", `{"kv_hints":` + env(`{"a":NaN}`) + `}`, `{}`, OutcomeDiscarded, ReasonMalformed},
		{"oversized", `{"kv_hints":` + env(`{"s":"`+strings.Repeat("x", 70000)+`"}`) + `}`, `{}`, OutcomeDiscarded, ReasonOversized},
		{"encoded surrogate inside", `{"kv_hints":` + env("{\"a\":\"\xed\xa0\x80\"}") + `}`, `{}`, OutcomeDiscarded, ReasonMalformed},
		{"encoded surrogate outside", "{\"p\":\"\xed\xa0\x80\",\"kv_hints\":" + refEnvelope + "}", "", OutcomeAdmitted, ReasonNone},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			out, res := Rewrite([]byte(c.body), Policy{Trusted: true})
			want := c.want
			if want == "" {
				want = c.body
			}
			if string(out) != want || res.Outcome != c.outcome || res.Reason != c.reason {
				t.Fatalf("got %.200q %v %q, want %.200q %v %q", out, res.Outcome, res.Reason, want, c.outcome, c.reason)
			}
			if (res.Snapshot != nil) != (c.outcome == OutcomeAdmitted) {
				t.Fatal("snapshot presence does not match the outcome")
			}
		})
	}
}

func TestRewriteRejects(t *testing.T) {
	cases := []struct {
		name, body string
		status     int
		msg        string
	}{
		{"spaces", "  \n", 400, "whitespace"},
		{"trailing object", `{} {}`, 400, "extra data"},
		{"trailing garbage", `{"a":1}x`, 400, "extra data"},
		{"unterminated", `{"a":"x`, 400, "unterminated"},
		{"bad escape", `{"a":"\x"}`, 400, "escape"},
		{"bad unicode escape", `{"a":"\u12G4"}`, 400, "escape"},
		{"control char", "{\"a\":\"\x01\"}", 400, "control"},
		{"single quotes", `{'a':1}`, 400, "property name"},
		{"trailing comma object", `{"a":1,}`, 400, "property name"},
		{"trailing comma array", `{"a":[1,]}`, 400, "expecting value"},
		{"leading zero", `{"a":01}`, 400, "delimiter"},
		{"bare dot", `{"a":1.}`, 400, "delimiter"},
		{"leading dot", `{"a":.5}`, 400, "expecting value"},
		{"plus", `{"a":+1}`, 400, "expecting value"},
		{"missing colon", `{"a" 1}`, 400, "':'"},
		{"minus alone", `{"a":-}`, 400, "number"},
		{"-NaN", `{"a":-NaN}`, 400, "number"},
		{"invalid utf8", "{\"a\":\"\xff\"}", 400, "UTF-8"},
		{"truncated surrogate", "{\"a\":\"\xed\xa0\"}", 400, "UTF-8"},
		{"surrogate cut short", "{\"a\":\"\xed\xa0A\"}", 400, "UTF-8"},
		{"surrogate at the end", "{\"a\":\"\xed\xbf", 400, "UTF-8"},
		{"surrogate outside a string", "{\"a\":\xed\xa0\x80}", 400, "value"},
		{"overlong surrogate", "{\"a\":\"\xe0\xa0\x80\xed\x80\xc0\"}", 400, "UTF-8"},
		{"utf16le bom", "\xff\xfe{\x00}\x00", 400, "UTF-16"},
		{"utf16be", "\x00{\x00}", 400, "UTF-16"},
		{"utf32le", "{\x00\x00\x00}\x00\x00\x00", 400, "UTF-32"},
		{"utf32be bom", "\x00\x00\xfe\xff\x00\x00\x00{", 400, "UTF-32"},
		{"unclosed", `{"a":[1,2}`, 400, "delimiter"},
		{"hint breaks body", `{"kv_hints":{"a":}}`, 400, "value"},
		// Python's json.loads cannot convert an integer of more than 4300
		// digits (ValueError), wherever it is.
		{"integer of 4301 digits", `{"a":` + digits9(4301) + `}`, 400, "4300 digits at byte 5"},
		{"negative integer of 4301 digits", `{"a":[1,-` + digits9(4301) + `]}`, 400, "4300 digits at byte 8"},
		{"integer of 4301 digits in a hint", `{"kv_hints":{"protocol_version":"0.1","n":` + digits9(4301) + `}}`, 400, "4300 digits"},
		{"integer of 4301 digits at the top", digits9(4301), 400, "4300 digits at byte 0"},
		{"integer of 4301 digits, then garbage", `{"a":` + digits9(4301) + `x}`, 400, "4300 digits"},
	}
	for _, c := range cases {
		for _, trusted := range []bool{false, true} {
			out, res := Rewrite([]byte(c.body), Policy{Trusted: trusted})
			if out != nil || res.Outcome != OutcomeRejected || res.Status != c.status || !strings.Contains(res.Message, c.msg) {
				t.Errorf("%s (trusted=%v): %q %+v", c.name, trusted, out, res)
			}
		}
	}
	_, res := Rewrite([]byte(`{"a":"12345"}`), Policy{MaxBodyBytes: 12})
	if res.Status != 413 {
		t.Errorf("over limit: %+v", res)
	}
	if out, res := Rewrite([]byte(`{"a":"1234"}`), Policy{MaxBodyBytes: 12}); res.Outcome != OutcomeNoHint || len(out) != 12 {
		t.Errorf("at limit: %+v", res)
	}
}

// TestIntegerDigitLimit holds the body scanner to Python's limit on the
// digits of an integer: up to 4300, the sign not counted, is read; a float
// is read at any length.
func TestIntegerDigitLimit(t *testing.T) {
	for _, c := range []struct {
		name, value string
		ok          bool
	}{
		{"4300 digits", digits9(4300), true},
		{"-4300 digits", "-" + digits9(4300), true},
		{"4301 digits", digits9(4301), false},
		{"-4301 digits", "-" + digits9(4301), false},
		{"4301 digits and a fraction", digits9(4301) + ".0", true},
		{"4301 digits and an exponent", digits9(4301) + "e-4301", true},
		{"4301 digits of fraction", "0." + digits9(4301), true},
		{"4301-digit exponent", "1e" + digits9(4301), true},
	} {
		for _, trusted := range []bool{false, true} {
			for _, body := range []string{`{"a":` + c.value + `}`, `{"kv_hints":{"n":[` + c.value + `]},"b":1}`, c.value} {
				out, res := Rewrite([]byte(body), Policy{Trusted: trusted})
				if rejected := res.Outcome == OutcomeRejected; rejected == c.ok || rejected && (out != nil || res.Status != 400) {
					t.Errorf("%s (trusted=%v, %.12s…): %+v", c.name, trusted, body, res)
				}
			}
		}
	}
}

func TestEmptyBodyIsNoBody(t *testing.T) {
	for _, trusted := range []bool{false, true} {
		out, res := Rewrite([]byte{}, Policy{Trusted: trusted})
		if len(out) != 0 || res.Outcome != OutcomeNoHint {
			t.Errorf("trusted=%v: %q %+v", trusted, out, res)
		}
	}
}

// Rewrite returns its input itself exactly when the body is unchanged:
// hosts decide "replace the body or not" by identity, without comparing.
func TestRewriteReturnsSameSliceWhenUnchanged(t *testing.T) {
	for _, c := range []struct {
		body    string
		trusted bool
		same    bool
	}{
		{`{"kv_hints":null}`, true, true},
		{`{"a":1}`, false, true},
		{`{"kv_hints":` + refEnvelope + `,"a":1}`, true, true},
		{`{"kv_hints": ` + refEnvelope + `,"a":1}`, true, true},                            // whitespace before the value is kept
		{`{"kv_hints":` + refEnvelope + ` ,"a":1}`, true, true},                            // and after it
		{`{"kv\u005fhints":` + refEnvelope + `,"a":1}`, true, false},                       // the key is respelled
		{`{"kv_hints":` + strings.Replace(refEnvelope, `":`, `": `, 1) + `}`, true, false}, // not canonical
		{`{"kv_hints":` + refEnvelope + `,"a":1}`, false, false},
	} {
		body := []byte(c.body)
		out, res := Rewrite(body, Policy{Trusted: c.trusted})
		same := len(out) == len(body) && &out[0] == &body[0]
		if same != c.same || same != bytes.Equal(out, body) {
			t.Errorf("%s (trusted=%v, %v): returned the input itself: %v, want %v", c.body, c.trusted, res.Outcome, same, c.same)
		}
	}
}

func TestRewriterReuse(t *testing.T) {
	var r Rewriter
	first, _ := r.Rewrite([]byte(`{"kv_hints":1,"a":1}`), Policy{})
	if string(first) != `{"a":1}` {
		t.Fatal(string(first))
	}
	body := []byte(`{"b":2,"kv_hints":1}`)
	allocs := testing.AllocsPerRun(100, func() { r.Rewrite(body, Policy{}) })
	if allocs != 0 {
		t.Fatalf("steady-state untrusted rewrite allocates %v times", allocs)
	}
}

func TestRewriterNoSnapshotAllocatesNothing(t *testing.T) {
	r := Rewriter{NoSnapshot: true}
	body := []byte(`{"model":"m", "kv_hints": ` + refEnvelope + `, "prompt":"x"}`)
	out, res := r.Rewrite(body, Policy{Trusted: true})
	if res.Outcome != OutcomeAdmitted || res.Snapshot != nil || string(out) != string(body) {
		t.Fatalf("%+v %s", res, out)
	}
	if &out[0] != &body[0] {
		t.Fatal("an envelope already canonical was copied")
	}
	allocs := testing.AllocsPerRun(100, func() { r.Rewrite(body, Policy{Trusted: true}) })
	if allocs != 0 {
		t.Fatalf("steady-state trusted rewrite allocates %v times", allocs)
	}
}

// An admitted envelope whose numbers are rewritten as Python writes them
// (floats that grow, shrink or stay, a long literal, -0) costs no
// allocation in steady state, and its rewrite grows the body within the
// room Reserve set aside.
func TestRewriterFloatsAllocateNothing(t *testing.T) {
	floats := `[1e15,0.10,1E2,-0,-0.0,1e-400,2.5,0.` + strings.Repeat("1", 900) + `,` + strings.Repeat("1e15,", 1000) + `7]`
	body := []byte(`{"model":"m","kv_hints":` + strings.Replace(refEnvelope, `"block_hashes":[11,22]`, `"f":`+floats, 1) + `,"prompt":"x"}`)
	r := Rewriter{NoSnapshot: true}
	r.Reserve(len(body))
	buf := cap(r.out)
	out, res := r.Rewrite(body, Policy{Trusted: true})
	if res.Outcome != OutcomeAdmitted || len(out) <= len(body) || !strings.Contains(string(out), `"f":[1000000000000000.0,0.1,100.0,0,-0.0,0.0,2.5,0.1111111111111111,`) {
		t.Fatalf("%v: %.300s", res, out)
	}
	if cap(r.out) != buf {
		t.Errorf("the rewrite grew the reserved buffer from %d to %d bytes", buf, cap(r.out))
	}
	if allocs := testing.AllocsPerRun(20, func() { r.Rewrite(body, Policy{Trusted: true}) }); allocs != 0 {
		t.Fatalf("steady-state rewrite of floats allocates %v times", allocs)
	}
}

// After Reserve(n), rewrites of bodies up to n bytes write into the one
// reserved buffer, whatever their order of sizes.
func TestRewriterReserve(t *testing.T) {
	const n = 1 << 20
	body := func(size int, hint string) []byte {
		head := `{"model":"m","kv_hints":` + hint + `,"prompt":"`
		return []byte(head + strings.Repeat("x", size-len(head)-2) + `"}`)
	}
	pretty := strings.ReplaceAll(strings.ReplaceAll(refEnvelope, ",", ",\n  "), ":", ": ")
	for _, c := range []struct {
		name    string
		policy  Policy
		hint    string
		outcome Outcome
	}{
		{"untrusted", Policy{}, refEnvelope, OutcomeStripped},
		{"trusted-canonicalized", Policy{Trusted: true}, pretty, OutcomeAdmitted},
		{"trusted-discarded", Policy{Trusted: true}, `{"protocol_version":"0.1"}`, OutcomeDiscarded},
	} {
		t.Run(c.name, func(t *testing.T) {
			var r Rewriter
			r.Reserve(n)
			reserved := unsafe.SliceData(r.out)
			for _, size := range []int{1 << 10, n / 2, n / 4, n} {
				in := body(size, c.hint)
				out, res := r.Rewrite(in, c.policy)
				if res.Outcome != c.outcome || len(out) >= len(in) {
					t.Fatalf("%d bytes: %v, %d bytes out", size, res.Outcome, len(out))
				}
				if unsafe.SliceData(out) != reserved {
					t.Fatalf("%d bytes: the output left the reserved buffer", size)
				}
			}
		})
	}
}

func TestOutcomeStrings(t *testing.T) {
	want := map[Outcome]string{OutcomeNoHint: "no_hint", OutcomeNullHint: "null_hint", OutcomeStripped: "stripped", OutcomeAdmitted: "admitted", OutcomeDiscarded: "discarded", OutcomeRejected: "rejected"}
	for o, s := range want {
		if o.String() != s {
			t.Errorf("%d: %q", o, o)
		}
	}
}

// TestUTF8AsPythonReadsIt holds the body scanner to pythonUTF8 on every
// two-byte sequence and on every three-byte sequence whose last byte is
// one of a set that straddles each range boundary, inside a string: a
// body is read exactly when Python's json.loads would decode it.
func TestUTF8AsPythonReadsIt(t *testing.T) {
	var r Rewriter
	check := func(seq []byte) {
		body := append(append([]byte(`{"p":"`), seq...), `"}`...)
		_, res := r.Rewrite(body, Policy{})
		want := pythonUTF8(seq) && !bytes.ContainsAny(seq, "\"\\") && !bytes.ContainsFunc(seq, func(c rune) bool { return c < 0x20 })
		if got := res.Outcome != OutcomeRejected; got != want {
			t.Fatalf("% x: read %v, want %v (%s)", seq, got, want, res.Message)
		}
	}
	lasts := []byte{0x00, 0x22, 0x41, 0x7f, 0x80, 0x8f, 0x90, 0x9f, 0xa0, 0xbf, 0xc0, 0xff}
	for a := 0x80; a < 0x100; a++ {
		for b := 0; b < 0x100; b++ {
			check([]byte{byte(a), byte(b)})
			for _, c := range lasts {
				check([]byte{byte(a), byte(b), c})
			}
		}
	}
}

// manyMembers returns a body of n top-level members, each a kv_hints
// member where hint(i) says so, with separators and whitespace that vary
// from member to member.
func manyMembers(n int, hint func(i int) bool) []byte {
	seps := []string{",", " ,", ", ", "\n,\t", ",\r\n  "}
	b := []byte("{ ")
	for i := range n {
		if i > 0 {
			b = append(b, seps[i%len(seps)]...)
		}
		if hint(i) {
			key := `"kv_hints"`
			if i%7 == 3 {
				key = `"kv\u005fhints"`
			}
			vals := []string{"[" + strconv.Itoa(i) + "]", `{"x":"}"}`, "null", strconv.Itoa(i), `"\","`}
			colon := []string{":", " : "}[i%2]
			b = append(b, key+colon+vals[i%len(vals)]...)
		} else {
			b = append(b, `"k`+strconv.Itoa(i)+`":`+strconv.Itoa(i)...)
		}
	}
	return append(b, " }\n"...)
}

// refRemove is the removal rule written from its definition (tests/vectors
// README): the text before the first member, each kept member preceded by
// the text before it unless it is the first kept one, the text after the
// last member.
func refRemove(t *testing.T, b []byte) []byte {
	type span struct {
		start, end int
		hint       bool
	}
	var ms []span
	i := skipWS(b, 1)
	for b[i] != '}' {
		kend, escaped, err := scanString(b, i)
		if err != nil {
			t.Fatal(err)
		}
		hint := isHintKey(b[i:kend], escaped, nil)
		v := skipWS(b, skipWS(b, kend)+1)
		end, _, err := skipValue(b, v, nil)
		if err != nil {
			t.Fatal(err)
		}
		ms = append(ms, span{i, end, hint})
		if i = skipWS(b, end); b[i] == ',' {
			i = skipWS(b, i+1)
		}
	}
	out := append([]byte(nil), b[:ms[0].start]...)
	first := true
	for k, m := range ms {
		if m.hint {
			continue
		}
		if !first {
			out = append(out, b[ms[k-1].end:m.start]...)
		}
		out = append(out, b[m.start:m.end]...)
		first = false
	}
	return append(out, b[ms[len(ms)-1].end:]...)
}

// TestManyHintMembers: bodies with more kv_hints members than a scan holds
// at a time are cut as they are read; the result is the removal rule's,
// whatever the mix and whichever scan (Go or quickScan) reads them.
func TestManyHintMembers(t *testing.T) {
	var r Rewriter
	for _, n := range []int{1, 2, hintRecords - 1, hintRecords, hintRecords + 1, 2 * hintRecords, 2*hintRecords + 1, 1000} {
		for name, hint := range map[string]func(int) bool{
			"all":         func(int) bool { return true },
			"all but one": func(i int) bool { return i != n/2 },
			"odd":         func(i int) bool { return i%2 == 1 },
			"first kept":  func(i int) bool { return i > 0 },
			"last kept":   func(i int) bool { return i < n-1 },
			"runs":        func(i int) bool { return i%100 < 70 },
		} {
			body := manyMembers(n, hint)
			want := refRemove(t, body)
			for _, p := range []Policy{{}, {Trusted: true}} {
				out, res := r.Rewrite(body, p)
				if res.Outcome == OutcomeRejected || (res.Outcome == OutcomeNoHint) != bytes.Equal(want, body) {
					t.Fatalf("%d %s trusted=%v: %v %s", n, name, p.Trusted, res.Outcome, res.Message)
				}
				if res.Outcome != OutcomeAdmitted && res.Outcome != OutcomeNullHint && !bytes.Equal(out, want) {
					t.Fatalf("%d %s trusted=%v: got\n%q\nwant\n%q", n, name, p.Trusted, out, want)
				}
			}
		}
	}
}

// TestRewriteMemoryIsFlat: the memory a rewrite allocates does not grow
// with the number of kv_hints members; before, each one took a record.
func TestRewriteMemoryIsFlat(t *testing.T) {
	for _, n := range []int{1000, 100000} {
		body := manyMembers(n, func(int) bool { return true })
		var r Rewriter
		r.Reserve(len(body))
		var before, after runtime.MemStats
		runtime.ReadMemStats(&before)
		out, res := r.Rewrite(body, Policy{})
		runtime.ReadMemStats(&after)
		if res.Outcome != OutcomeStripped || strings.TrimSpace(string(out)) != "{  }" {
			t.Fatalf("%d members: %v %q", n, res.Outcome, out)
		}
		if got := after.TotalAlloc - before.TotalAlloc; got > 16<<10 {
			t.Errorf("%d members: the rewrite allocated %d bytes", n, got)
		}
		if a := testing.AllocsPerRun(3, func() { r.Rewrite(body, Policy{Trusted: true}) }); a != 0 {
			t.Errorf("%d members: %v allocations per rewrite", n, a)
		}
	}
}

// checkEdits checks r.Edits against what Rewrite gave for the same body
// (out, res): the same decision, edits sorted, disjoint, not adjacent and
// within the body, none exactly when the body goes on unchanged, and,
// applied to the body, the bytes Rewrite returned.
func checkEdits(t *testing.T, r *Rewriter, body []byte, p Policy, out []byte, res Result) {
	t.Helper()
	edits, got := r.Edits(body, p)
	if got.Outcome != res.Outcome || got.Reason != res.Reason || got.Status != res.Status || got.Message != res.Message {
		t.Fatalf("Edits decided %+v, Rewrite %+v", got, res)
	}
	unchanged := res.Outcome != OutcomeRejected && len(out) == len(body) && (len(out) == 0 || &out[0] == &body[0])
	if (len(edits) == 0) != (unchanged || res.Outcome == OutcomeRejected) {
		t.Fatalf("%d edits for a body Rewrite left unchanged: %v (%v)", len(edits), unchanged, res.Outcome)
	}
	var applied []byte
	from := 0
	for i, e := range edits {
		if e.Start < from || e.Start > e.End || e.End > len(body) || i > 0 && e.Start == from {
			t.Fatalf("edit %d of %d [%d,%d) after %d in %d bytes", i, len(edits), e.Start, e.End, from, len(body))
		}
		if e.Start == e.End && len(e.Text) == 0 {
			t.Fatalf("edit %d changes nothing", i)
		}
		applied = append(applied, body[from:e.Start]...)
		applied = append(applied, e.Text...)
		from = e.End
	}
	applied = append(applied, body[from:]...)
	if len(edits) > 0 && !bytes.Equal(applied, out) {
		t.Fatalf("the edits make %q, Rewrite %q", applied, out)
	}
}

// TestEdits: the edits of each kind of rewrite, and a Rewriter that goes
// on from a body cut as it was scanned to an ordinary one.
func TestEdits(t *testing.T) {
	hint := `{"protocol_version":"0.1","message_id":"m","actions":[]}`
	many := manyMembers(2*hintRecords+1, func(i int) bool { return i%2 == 0 })
	for _, c := range []struct {
		name    string
		body    string
		trusted bool
		edits   int
	}{
		{"no hint", `{"a":1}`, false, 0},
		{"null hint, untrusted", `{"a":1,"kv_hints":null}`, false, 1},
		{"null hint, trusted", `{"a":1,"kv_hints":null}`, true, 0},
		{"untrusted, first", `{"kv_hints":1,"a":1}`, false, 1},
		{"untrusted, last", `{"a":1, "kv_hints" : 1 }`, false, 1},
		{"untrusted, two apart", `{"kv_hints":1,"a":1,"kv_hints":2,"b":2}`, false, 2},
		{"untrusted, two together", `{"a":1,"kv_hints":1,"kv_hints":2}`, false, 1},
		{"trusted, canonical", `{"a":1,"kv_hints":` + hint + `}`, true, 0},
		{"trusted, spaced", `{"a":1,"kv_hints": {"protocol_version": "0.1", "message_id": "m", "actions": []}}`, true, 1},
		{"trusted, escaped key", `{"a":1,"kv\u005fhints":` + hint + `}`, true, 2},
		{"trusted, discarded", `{"a":1,"kv_hints":{"protocol_version":"9"}}`, true, 1},
		{"many members", string(many), false, 1},
		{"after many", `{"kv_hints":1,"a":1}`, false, 1},
		{"rejected", `{"a":`, false, 0},
	} {
		var r Rewriter
		if c.name == "after many" {
			r.Edits(many, Policy{})
		}
		p, body := Policy{Trusted: c.trusted}, []byte(c.body)
		out, res := Rewrite(body, p)
		checkEdits(t, &r, body, p, out, res)
		if edits, _ := r.Edits(body, p); len(edits) != c.edits {
			t.Errorf("%s: %d edits, want %d", c.name, len(edits), c.edits)
		}
	}
}
