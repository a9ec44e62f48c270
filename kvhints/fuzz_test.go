package kvhints

import (
	"bytes"
	"encoding/json"
	"io"
	"math"
	"reflect"
	"slices"
	"strconv"
	"strings"
	"testing"
	"unicode/utf8"
)

func addSeeds(f *testing.F, add func(string)) {
	for _, s := range []string{
		refEnvelope, `null`, `{}`, `[]`, `"x"`, `{"protocol_version":"0.2"}`,
		env(`{"a":NaN}`), env(`{"a":"\ud800"}`), env(`{"a":18446744073709551616}`),
		env(`{"a":{"b":1,"b":2}}`), env(`{"a":` + nest(130, "1") + `}`),
		env("{\"a\":\"\xed\xa0\x80\"}"), env("{\"\xed\xbf\xbf\":\"\xed\xa0\xbd\xed\xb8\x80\"}"),
		"{\n \"protocol_version\" : \"0\\u002e1\", \"message_id\":\"m\", \"actions\":[]}",
	} {
		add(s)
	}
}

// FuzzAdmit checks admission against its own promises and against
// encoding/json, an independent parser.
func FuzzAdmit(f *testing.F) {
	addSeeds(f, func(s string) { f.Add([]byte(s)) })
	// Runs of integers deep enough for canonicalize's fast path, and each
	// thing that ends one: a fraction, an exponent, a leading zero, a
	// space, a sign, a value out of range, the size limit.
	for _, s := range []string{
		`{"a":[[[[1,2,3.5,4e2,5E1,6]]]]}`, `{"protocol_version":"0.1","actions":[1,2,3]}`, `{"actions":[[1,2,3]]}`,
		`{"actions":[{"a":[1,2,3]},[4,5]]}`, `{"a":[[[[1,20,01,3]]]]}`, `{"a":[[[[1,2, 3,-4,5]]]]}`, "{\"a\":[[[[1 ,\n 2\t,3 , 4.0 ,5 ]]]]}", `{"a":[[[[1, 02]]]]}`,
		`{"a":[[[[1,18446744073709551615,18446744073709551616]]]]}`, `{"a":[[[[1,2,]]]]}`, `{"a":[[[[1,2.]]]]}`,
		`{"a":[[[[1,2-3]]]]}`, `{"a":[{"b":[7,8,9]}]}`, `{"a":[[[7,8,9]]]}`,
		`{"a":[[[[0` + strings.Repeat(`,1234567890`, (MaxCompactBytes-20)/11) + `]]]]}`,
		`{"a":[[[[0` + strings.Repeat(`,1234567890`, (MaxCompactBytes-40)/11) + `]]]]}`,
	} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, raw []byte) {
		// The fast path for runs of integers changes nothing: the same
		// encoding, end and verdict as the general loop alone.
		fast, slow := canonicalizer{}, canonicalizer{generalOnly: true}
		fastOut, fastEnd, fastSt := fast.canonicalize(raw, DefaultMaxDepth, MaxCompactBytes)
		slowOut, slowEnd, slowSt := slow.canonicalize(raw, DefaultMaxDepth, MaxCompactBytes)
		if fastSt != slowSt || fastEnd != slowEnd || !bytes.Equal(fastOut, slowOut) ||
			!slices.Equal(fast.top, slow.top) || !slices.Equal(fast.elems, slow.elems) ||
			!slices.Equal(fast.actionMembers, slow.actionMembers) {
			t.Fatalf("%q: fast path (%d, %v), general loop (%d, %v)", raw, fastEnd, fastSt, slowEnd, slowSt)
		}
		s, r := Admit(raw, Limits{})
		if s == nil {
			if r == ReasonNone && string(bytes.TrimSpace(raw)) != "null" {
				t.Fatalf("no snapshot and no reason for %q", raw)
			}
			return
		}
		b := s.b
		if r != ReasonNone || len(b) > MaxCompactBytes {
			t.Fatalf("snapshot with reason %q, %d bytes", r, len(b))
		}
		// Admitted snapshots re-admit to themselves.
		if again, r := Admit(b, Limits{}); r != ReasonNone || !bytes.Equal(again.b, b) {
			t.Fatalf("re-admission of %q: %q", b, r)
		}
		// The canonical form is compact valid JSON meaning what raw meant.
		if !json.Valid(b) {
			t.Fatalf("canonical form is not JSON: %q", b)
		}
		var compact bytes.Buffer
		if err := json.Compact(&compact, b); err != nil || !bytes.Equal(compact.Bytes(), b) {
			t.Fatalf("canonical form is not compact: %q", b)
		}
		// A string of an admitted envelope is valid UTF-8, so an encoded
		// surrogate, which the tokenizer reads as Python does, is not.
		if !utf8.Valid(raw) {
			t.Fatalf("admitted an envelope that is not UTF-8: %q", raw)
		}
		if json.Valid(raw) {
			if !sameJSON(t, raw, b) {
				t.Fatalf("canonical form %q changes the meaning of %q", b, raw)
			}
		}
		// Every action view reads back a one-action envelope that admits.
		for i := 0; i < s.NumActions(); i++ {
			one := s.Action(i).Envelope()
			if _, r := Admit(one.b, Limits{}); r != ReasonNone || one.NumActions() != 1 {
				t.Fatalf("one-action envelope %d: %q", i, r)
			}
		}
	})
}

// sameJSON decodes both documents with encoding/json and compares them,
// numbers as Python reads them (pyNumbers).
func sameJSON(t *testing.T, a, b []byte) bool {
	var va, vb any
	da, db := json.NewDecoder(bytes.NewReader(a)), json.NewDecoder(bytes.NewReader(b))
	da.UseNumber()
	db.UseNumber()
	if da.Decode(&va) != nil || db.Decode(&vb) != nil {
		return false
	}
	return reflect.DeepEqual(pyNumbers(va), pyNumbers(vb))
}

// pyInt and pyFloat are a number as Python reads it: an integer exactly,
// its digits with -0 as 0, and anything with a fraction or an exponent as
// the bits of its float64 (so that -0.0 is not 0.0).
type (
	pyInt   string
	pyFloat uint64
)

// pyNumbers replaces every json.Number in a decoded value by its pyInt or
// pyFloat.
func pyNumbers(v any) any {
	switch v := v.(type) {
	case json.Number:
		if strings.ContainsAny(string(v), ".eE") {
			f, _ := strconv.ParseFloat(string(v), 64) // ±Inf past the range, as Python
			return pyFloat(math.Float64bits(f))
		}
		if v == "-0" {
			return pyInt("0")
		}
		return pyInt(v)
	case map[string]any:
		for k, x := range v {
			v[k] = pyNumbers(x)
		}
	case []any:
		for i, x := range v {
			v[i] = pyNumbers(x)
		}
	}
	return v
}

// intsFit reports whether every integer literal of the JSON document b
// has at most maxIntDigits digits, so that Python can convert it.
func intsFit(b []byte) bool {
	d := json.NewDecoder(bytes.NewReader(bytes.TrimPrefix(b, []byte("\xef\xbb\xbf"))))
	d.UseNumber()
	for {
		tok, err := d.Token()
		if err != nil {
			return true // the end, or an error encoding/json reports itself
		}
		if n, ok := tok.(json.Number); ok && !strings.ContainsAny(string(n), ".eE") &&
			len(strings.TrimPrefix(string(n), "-")) > maxIntDigits {
			return false
		}
	}
}

// FuzzRewrite checks the body rewrite with an independent reading of the
// top level by encoding/json's tokenizer, on every body that it can parse.
func FuzzRewrite(f *testing.F) {
	for _, s := range []string{
		`{"a":1, "kv_hints":{}, "b":2}`, `{ "kv_hints":{} }`, `{"kv\u005fhints":1,"x":[{"kv_hints":2}]}`,
		`{"kv_hints":null,"kv_hints":1}`, `{"kv_hints":1,"kv_hints":null}`, "\xef\xbb\xbf{\"kv_hints\":1}", `[{"kv_hints":1}]`,
		`{"m":"\\\"kv_hints\":1","kv_hints":` + refEnvelope + `}`, `{"t":NaN,"kv_hints":{}}`, `{} {}`,
		"{\"p\":\"\xed\xa0\x80\",\"kv_hints\":{\"\xed\xbf\xbf\":1}}", "{\"kv_hints\":\"\xed\xa0\"}",
	} {
		f.Add([]byte(s), false)
		f.Add([]byte(s), true)
	}
	addSeeds(f, func(s string) { f.Add([]byte(`{"x":0,"kv_hints":`+s+`}`), true) })
	// More members than a scan holds at a time.
	f.Add(manyMembers(hintRecords+3, func(i int) bool { return i%3 != 1 }), false)
	f.Add(manyMembers(2*hintRecords+1, func(i int) bool { return i > 0 }), true)
	var er Rewriter // one for every input, as a host keeps it
	f.Fuzz(func(t *testing.T, body []byte, trusted bool) {
		out, res := Rewrite(body, Policy{Trusted: trusted})
		checkEdits(t, &er, body, Policy{Trusted: trusted}, out, res)
		parsable := json.Valid(body) && pythonUTF8(body) && intsFit(body)
		if res.Outcome == OutcomeRejected {
			if out != nil || res.Status != 400 {
				t.Fatalf("rejection with %d and %d bytes", res.Status, len(out))
			}
			if parsable {
				t.Fatalf("rejected a body encoding/json accepts: %q (%s)", body, res.Message)
			}
			return
		}
		if res.Outcome == OutcomeNoHint && !bytes.Equal(out, body) {
			t.Fatal("no hint, yet the body changed")
		}
		// The contract hosts rely on to skip comparing bodies: the input
		// itself exactly when unchanged.
		if same := len(out) == len(body) && (len(out) == 0 || &out[0] == &body[0]); same != bytes.Equal(out, body) {
			t.Fatalf("returned the input itself: %v, yet bytes equal: %v (%v)", same, !same, res.Outcome)
		}
		// Only an admitted envelope can grow the body (a float written as
		// Python writes it can be longer), and by less than its canonical
		// form: Rewriter.Reserve relies on it.
		if grown := len(out) - len(body); grown > 0 && (res.Outcome != OutcomeAdmitted || grown >= len(res.Snapshot.b)) {
			t.Fatalf("rewritten body longer than the original (%d > %d bytes, %v)", len(out), len(body), res.Outcome)
		}
		if !parsable {
			return
		}
		in, okIn := topMembers(body)
		got, okOut := topMembers(out)
		if !okIn || !okOut {
			t.Fatalf("top level unreadable after rewrite: %q -> %q", body, out)
		}
		var rest, hints []member2
		for _, m := range got {
			if m.name == "kv_hints" {
				hints = append(hints, m)
			} else {
				rest = append(rest, m)
			}
		}
		var restIn, hintsIn []member2
		for _, m := range in {
			if m.name != "kv_hints" {
				restIn = append(restIn, m)
			} else {
				hintsIn = append(hintsIn, m)
			}
		}
		// A hint is counted exactly when the worker would read one: the
		// last member, as Python keeps the last of duplicates, is not null.
		counted := res.Outcome == OutcomeStripped || res.Outcome == OutcomeDiscarded || res.Outcome == OutcomeAdmitted
		if len(hintsIn) == 0 {
			if res.Outcome != OutcomeNoHint {
				t.Fatalf("%v without a kv_hints member: %q", res.Outcome, body)
			}
		} else if lastNull := string(hintsIn[len(hintsIn)-1].raw) == "null"; counted == lastNull {
			t.Fatalf("%v, but the last of %d kv_hints members is %q: %q", res.Outcome, len(hintsIn), hintsIn[len(hintsIn)-1].raw, body)
		}
		// The rest of the body is unchanged, member for member.
		if len(rest) != len(restIn) {
			t.Fatalf("members changed: %q -> %q", body, out)
		}
		for i := range rest {
			if rest[i].name != restIn[i].name || !bytes.Equal(rest[i].raw, restIn[i].raw) {
				t.Fatalf("member %d changed: %q -> %q", i, body, out)
			}
		}
		switch {
		case !trusted && len(hints) != 0:
			t.Fatalf("untrusted output still has kv_hints: %q", out)
		case res.Outcome == OutcomeAdmitted:
			if len(hints) != 1 || !bytes.Equal(hints[0].raw, res.Snapshot.b) {
				t.Fatalf("admitted, but the worker would read %q", out)
			}
			if string(hints[0].key) != `"kv_hints"` {
				t.Fatalf("admitted under the key %s: %q", hints[0].key, out)
			}
		case res.Outcome == OutcomeNullHint && trusted && len(hintsIn) == 1:
			if len(hints) != 1 || string(hints[0].raw) != "null" {
				t.Fatalf("null hint changed: %q", out)
			}
		case trusted && len(hints) != 0:
			t.Fatalf("%v, yet the worker would read a hint in %q", res.Outcome, out)
		}
	})
}

// pythonUTF8 reports whether Python decodes b for json.loads, that is with
// "surrogatepass": valid UTF-8 where each invalid sequence is the
// three-byte encoding of a surrogate, ED A0..BF 80..BF. It is written from
// that definition, apart from the scanner's encodedSurrogate.
func pythonUTF8(b []byte) bool {
	for len(b) > 0 {
		r, n := utf8.DecodeRune(b)
		if r == utf8.RuneError && n <= 1 {
			if len(b) < 3 || b[0] != 0xED || b[1] < 0xA0 || b[1] > 0xBF || b[2] < 0x80 || b[2] > 0xBF {
				return false
			}
			n = 3
		}
		b = b[n:]
	}
	return true
}

type member2 struct {
	name     string
	key, raw []byte // the key's literal, the compacted value
}

// topMembers lists the top-level members of a JSON object with
// encoding/json, duplicates included, with compacted raw values.
func topMembers(b []byte) ([]member2, bool) {
	b = bytes.TrimPrefix(b, []byte("\xef\xbb\xbf"))
	d := json.NewDecoder(bytes.NewReader(b))
	d.UseNumber()
	tok, err := d.Token()
	if err != nil {
		return nil, false
	}
	if tok != json.Delim('{') {
		return nil, true
	}
	var ms []member2
	for d.More() {
		before := d.InputOffset()
		k, err := d.Token()
		if err != nil {
			return nil, false
		}
		key := bytes.TrimLeft(b[before:d.InputOffset()], " \t\r\n,")
		var raw json.RawMessage
		if err := d.Decode(&raw); err != nil {
			return nil, false
		}
		var c bytes.Buffer
		json.Compact(&c, raw)
		ms = append(ms, member2{name: k.(string), key: key, raw: c.Bytes()})
	}
	if _, err := d.Token(); err != nil {
		return nil, false
	}
	if _, err := d.Token(); err != io.EOF {
		return nil, false
	}
	return ms, true
}

// multibyteRunRef is multibyteRun spelled byte by byte with
// utf8.DecodeRune and encodedSurrogate, the definition it must keep to.
func multibyteRunRef(b []byte, i int) (int, bool) {
	surrogate := false
	for i < len(b) {
		if c := b[i]; c < 0x80 {
			if c == '"' || c == '\\' || c < 0x20 {
				break
			}
			i++
			continue
		}
		r, size := utf8.DecodeRune(b[i:])
		if r == utf8.RuneError && size <= 1 {
			if !encodedSurrogate(b[i:]) {
				break
			}
			surrogate, size = true, 3
		}
		i += size
	}
	return i, surrogate
}

// FuzzMultibyteRun checks the string scanner's multibyte decoder against
// utf8.DecodeRune plus Python's encoded surrogates, from every offset.
func FuzzMultibyteRun(f *testing.F) {
	for _, s := range []string{
		"é", "中文", "🚀x", "\xed\xa0\x80", "\xed\x9f\xbf", "\xed\xbf\xbf\xed", "\xe0\x9f\x80", "\xe0\xa0\x80",
		"\xf0\x8f\xbf\xbf", "\xf0\x90\x80\x80", "\xf4\x8f\xbf\xbf", "\xf4\x90\x80\x80", "\xf5\x80\x80\x80",
		"\xc0\x80", "\xc1\xbf", "\xc2\x80", "\x80", "\xbf", "\xff", "\xe4\xb8", "\xf0\x9f\x9a", "я\"", "日本\\n",
		"é abcdefghij\"", "é abcdefghijklmnop\x01", "中 a 文 bcdefgh\\", "ü\x7fabcdefgh\xed\xa0\x80 \x1f", "é\xc3",
		// Runs long enough for the fast paths (four two-byte or two
		// three-byte characters at once), and each way to break one.
		"приветмир\"", "пр\xc1\xbfивет", "при\xc3\x41вет", "приве\xd1", "中文中文中文\\",
		"हिंदीहिंदी", "中文\xe0\x9f\x80中文", "中文\xed\x9f\xbf中文", "中文\xed\xa0\x80中文", "中\xe4\xb8\x41文中文",
	} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, b []byte) {
		// The portable path; FuzzVectorScan compares the other with it.
		forcePortable(t)
		for i := range b {
			if b[i] < 0x80 {
				continue
			}
			end, sur := multibyteRun(b, i)
			wantEnd, wantSur := multibyteRunRef(b, i)
			if end != wantEnd || sur != wantSur {
				t.Fatalf("%q at %d: (%d, %v), want (%d, %v)", b, i, end, sur, wantEnd, wantSur)
			}
		}
	})
}
