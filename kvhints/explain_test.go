package kvhints

import (
	"go/ast"
	"go/parser"
	"go/token"
	"regexp"
	"strings"
	"testing"
)

// explainRef is the reference envelope of docs/spec.md.
const explainRef = `{"protocol_version":"0.1","message_id":"msg-123","actions":[{"action_id":"a1","action_type":"kv.fetch","action_version":"1.0","payload":{"source_control_endpoint":"tcp://127.0.0.1:23280","block_hashes":[11,22]}}]}`

func TestExplain(t *testing.T) {
	// act builds a one-action envelope whose action is a (raw JSON).
	act := func(a string) string {
		return `{"protocol_version":"0.1","message_id":"m","actions":[` + a + `]}`
	}
	okAction := `{"action_id":"a","action_type":"t","action_version":"1","payload":{}}`
	for _, c := range []struct {
		raw, path, detail string
		reason            Reason
		lim               Limits
	}{
		{raw: explainRef},
		{raw: " null "},
		{raw: `[1,2]`, detail: "kv_hints is not an object but an array", reason: ReasonMalformed},
		{raw: `"secret-string"`, detail: "kv_hints is not an object but a string", reason: ReasonMalformed},
		{raw: `NaN`, detail: "kv_hints is not an object but NaN or Infinity", reason: ReasonMalformed},
		{raw: `{"message_id":"m","actions":[]}`, path: "protocol_version", detail: "protocol_version is missing", reason: ReasonMalformed},
		{raw: `{"protocol_version":"0.1","protocol_version":"0.1","message_id":"m","actions":[]}`, path: "protocol_version", detail: "protocol_version appears 2 times", reason: ReasonMalformed},
		{raw: `{"protocol_version":1,"message_id":"m","actions":[]}`, path: "protocol_version", detail: "protocol_version is not a string", reason: ReasonMalformed},
		{raw: `{"protocol_version":"9.9","message_id":"m","actions":[]}`, path: "protocol_version", detail: `protocol_version is not "0.1"`, reason: ReasonUnknownVersion},
		{raw: `{"protocol_version":"0.1","message_id":"` + strings.Repeat("x", MaxCompactBytes) + `","actions":[]}`, detail: "the envelope's compact form is over 65536 bytes", reason: ReasonOversized},
		{raw: `{"protocol_version":"0.1","actions":[]}`, path: "message_id", detail: "message_id is missing", reason: ReasonMalformed},
		{raw: `{"protocol_version":"0.1","message_id":7,"actions":[]}`, path: "message_id", detail: "message_id is not a string but a number", reason: ReasonMalformed},
		{raw: `{"protocol_version":"0.1","message_id":"","actions":[]}`, path: "message_id", detail: "message_id is an empty string", reason: ReasonMalformed},
		{raw: `{"protocol_version":"0.1","message_id":"m"}`, path: "actions", detail: "actions is missing", reason: ReasonMalformed},
		{raw: `{"protocol_version":"0.1","message_id":"m","actions":{}}`, path: "actions", detail: "actions is not an array but an object", reason: ReasonMalformed},
		{raw: act(okAction + `,"x"`), path: "actions[1]", detail: "actions[1] is not an object but a string", reason: ReasonMalformed},
		{raw: act(`{"action_type":"t","action_version":"1","payload":{}}`), path: "actions[0].action_id", detail: "actions[0].action_id is missing", reason: ReasonMalformed},
		{raw: act(`{"action_id":"a","action_type":"","action_version":"1","payload":{}}`), path: "actions[0].action_type", detail: "actions[0].action_type is an empty string", reason: ReasonMalformed},
		{raw: act(`{"action_id":"a","action_type":"t","action_version":true,"payload":{}}`), path: "actions[0].action_version", detail: "actions[0].action_version is not a string but a boolean", reason: ReasonMalformed},
		{raw: act(`{"action_id":"a","action_type":"t","action_version":"1","payload":[]}`), path: "actions[0].payload", detail: "actions[0].payload is not an object but an array", reason: ReasonMalformed},
		{raw: act(`{"action_id":"a","action_type":"t","action_version":"1"}`), path: "actions[0].payload", detail: "actions[0].payload is missing", reason: ReasonMalformed},
		// Content rules, found where they are; names the envelope does not
		// define are positions.
		{raw: act(`{"action_id":"a","action_type":"t","action_version":"1","payload":{"secret_key":[1,NaN]}}`), path: "actions[0].payload{0}[1]", detail: "actions[0].payload{0}[1] is NaN or Infinity", reason: ReasonMalformed},
		{raw: act(`{"action_id":"a","action_type":"t","action_version":"1","payload":{"a":1,"b":[18446744073709551616]}}`), path: "actions[0].payload{1}[0]", detail: "actions[0].payload{1}[0] is an integer outside -2^63 to 2^64-1", reason: ReasonMalformed},
		{raw: act(`{"action_id":"a","action_type":"t","action_version":"1","payload":{"f":1e400}}`), path: "actions[0].payload{0}", detail: "actions[0].payload{0} is a number that is not finite as a float64", reason: ReasonMalformed},
		{raw: act(`{"action_id":"a","action_type":"t","action_version":"1","payload":{"s":"\ud800"}}`), path: "actions[0].payload{0}", detail: "actions[0].payload{0} is a string that holds a lone surrogate", reason: ReasonMalformed},
		{raw: act(`{"action_id":"a","action_id":"b","action_type":"t","action_version":"1","payload":{}}`), path: "actions[0]", detail: "actions[0] has action_id twice", reason: ReasonMalformed},
		{raw: act(`{"action_id":"a","action_type":"t","action_version":"1","payload":{"k":1,"\u006b":2}}`), path: "actions[0].payload", detail: "actions[0].payload has a member twice", reason: ReasonMalformed},
		{raw: `{"protocol_version":"0.1","message_id":"m","actions":[],"x":{"\udc00":1}}`, path: "{3}", detail: "{3} has a member name with a lone surrogate", reason: ReasonMalformed},
		{raw: act(`{"action_id":"a","action_type":"t","action_version":"1","payload":{"d":[[[1]]]}}`), lim: Limits{MaxDepth: 5}, detail: "kv_hints is nested deeper than max_depth (5)", reason: ReasonMalformed},
		{raw: act(`{"action_id":"a","action_type":"t","action_version":"1","payload":{"d":[1]}}`), lim: Limits{MaxDepth: 5}},
	} {
		_, admitted := Admit([]byte(c.raw), c.lim)
		if admitted != c.reason {
			t.Errorf("%.60s: Admit says %v, the case %v", c.raw, admitted, c.reason)
		}
		e := Explain([]byte(c.raw), c.lim)
		if c.reason == ReasonNone {
			if e != nil {
				t.Errorf("%.60s: %v, want nil", c.raw, e)
			}
			continue
		}
		if e == nil || e.Reason != c.reason || e.Path != c.path || e.Detail != c.detail {
			t.Errorf("%.80s:\n got %+v\nwant {Reason:%v Path:%s Detail:%s}", c.raw, e, c.reason, c.path, c.detail)
		}
	}
}

// UTF-8-encoded surrogate bytes in a string are found down to the object
// that holds them (or the string itself, where the scanner reads them).
func TestExplainEncodedSurrogate(t *testing.T) {
	raw := []byte("{\"protocol_version\":\"0.1\",\"message_id\":\"m\",\"actions\":[{\"action_id\":\"a\",\"action_type\":\"t\",\"action_version\":\"1\",\"payload\":{\"s\":\"\xed\xa0\x80\"}}]}")
	e := Explain(raw, Limits{})
	if e == nil || e.Reason != ReasonMalformed || !strings.HasSuffix(e.Detail, "lone surrogate") {
		t.Fatalf("%+v", e)
	}
	// Where the body scan reads such strings, they are found in place.
	var r Rewriter
	if _, res := r.Rewrite(append(append([]byte(`{"kv_hints":`), raw...), '}'), Policy{Trusted: true}); res.Outcome != OutcomeRejected &&
		!strings.HasPrefix(e.Path, "actions[0].payload") {
		t.Errorf("path %q", e.Path)
	}
}

func TestExplainBody(t *testing.T) {
	bad := `{"protocol_version":"0.1","message_id":"m","actions":{}}`
	for _, c := range []struct{ body, detail string }{
		{`{"model":"m"}`, ""},
		{`[1]`, ""},
		{`{"kv_hints":null}`, ""},
		{`{"kv_hints":` + explainRef + `}`, ""},
		{"\xef\xbb\xbf {\"kv\\u005fhints\":" + bad + "}", "actions is not an array but an object"},
		{`{"kv_hints":null,"a":1,"kv_hints":{}}`, "kv_hints appears 2 times in the body"},
		{`{"a":{"kv_hints":[]},"kv_hints":[]}`, "kv_hints is not an object but an array"},
	} {
		e := ExplainBody([]byte(c.body), Limits{})
		got := ""
		if e != nil {
			got = e.Detail
		}
		if got != c.detail {
			t.Errorf("%s: %q, want %q", c.body, got, c.detail)
		}
	}
}

// explainWords are the only characters an explanation is made of.
var explainWords = regexp.MustCompile(`^[A-Za-z0-9_ .,:"^()\[\]{}'-]*$`)

// vocabulary is every word of the string literals in explain.go: an
// explanation may use those and no other, so that nothing of the hint's
// text can be in it.
func vocabulary(t testing.TB) map[string]bool {
	f, err := parser.ParseFile(token.NewFileSet(), "explain.go", nil, 0)
	if err != nil {
		t.Fatal(err)
	}
	words := map[string]bool{}
	ast.Inspect(f, func(n ast.Node) bool {
		if lit, ok := n.(*ast.BasicLit); ok && lit.Kind == token.STRING {
			for _, w := range wordRE.FindAllString(lit.Value, -1) {
				words[w] = true
			}
		}
		return true
	})
	return words
}

var wordRE = regexp.MustCompile(`[A-Za-z_]+`)

// FuzzExplain: Explain agrees with Admit on the reason, never panics, and
// says nothing but its own words, whatever the value.
func FuzzExplain(f *testing.F) {
	for _, s := range []string{explainRef, `{"protocol_version":"0.1","message_id":"m","actions":[{"payload":{"a":[NaN]}}]}`,
		`{"protocol_version":"0.1","message_id":"m","actions":[{"action_id":"a","action_type":"t","action_version":"1","payload":{"k":"\ud800","k":1}}]}`,
		`[]`, `{}`, `null`, `{"protocol_version":"0.2"}`} {
		f.Add([]byte(s), 4)
	}
	words := vocabulary(f)
	f.Fuzz(func(t *testing.T, raw []byte, depth int) {
		var r Rewriter
		if _, res := r.Rewrite(append(append([]byte(`{"kv_hints":`), raw...), '}'), Policy{Trusted: true}); res.Outcome == OutcomeRejected {
			return // not JSON the worker reads: admission never sees it
		}
		lim := Limits{MaxDepth: 1 + depth&15}
		_, reason := Admit(raw, lim)
		e := Explain(raw, lim)
		switch {
		case reason == ReasonNone && e != nil:
			t.Fatalf("admitted or null, yet %v", e)
		case reason != ReasonNone && (e == nil || e.Reason != reason):
			t.Fatalf("Admit: %v; Explain: %+v", reason, e)
		case e != nil && (!explainWords.MatchString(e.Detail) || len(e.Detail) > 300 || !strings.HasPrefix(e.Detail, e.Path)):
			t.Fatalf("detail %q (path %q)", e.Detail, e.Path)
		}
		if e != nil {
			for _, w := range wordRE.FindAllString(e.Detail, -1) {
				if !words[w] {
					t.Fatalf("detail %q has the word %q, not one of explain.go's", e.Detail, w)
				}
			}
		}
	})
}
