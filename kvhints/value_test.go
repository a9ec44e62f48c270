package kvhints

import (
	"bytes"
	"math/rand/v2"
	"testing"

	"github.com/kvgate/kvgate/tests/vectors"
)

// checkQuickSkip holds quickSkipValue to skipValue on the value at b[i]:
// an answer it gives must be skipValue's, and on wasm it may decline only
// what it is documented to leave alone (an error, more containers than
// its stack holds).
func checkQuickSkip(t *testing.T, b []byte, i int) (accepted bool) {
	t.Helper()
	var closers [64]byte
	got := quickSkipValue(b, i, closers[:])
	want, _, err := skipValue(b, i, nil)
	if got >= 0 {
		if err != nil || got != want {
			t.Fatalf("quickSkipValue(%q, %d) = %d; skipValue gives %d, %v", b, i, got, want, err)
		}
		return true
	}
	if bulkPlain && err == nil && bytes.Count(b[i:want], []byte("{"))+bytes.Count(b[i:want], []byte("[")) <= len(closers) {
		t.Fatalf("quickSkipValue(%q, %d) declined a value skipValue ends at %d", b, i, want)
	}
	return false
}

// checkQuickScan holds quickScan to Rewriter.scanGo on the body b: an
// answer it gives must be scanGo's (the same kv_hints members and first
// kept member), and on wasm it may decline only what it is documented to
// leave alone.
func checkQuickScan(t *testing.T, b []byte) (accepted bool) {
	t.Helper()
	start := 0
	if hasPrefix(b, "\xef\xbb\xbf") {
		start = 3
	}
	var r Rewriter
	n := quickScan(b, start, r.closers[:], r.quick[:])
	r.reset()
	msg := r.scanGo(b, start)
	firstKept := r.st.firstKept
	if n >= 0 {
		if msg != "" || n != r.hints.count || r.st.n != n || int(r.quick[0]) != firstKept {
			t.Fatalf("quickScan(%q) = %d hints, first kept %d; scanGo: %d hints, first kept %d, %q", b, n, r.quick[0], r.hints.count, firstKept, msg)
		}
		for k, h := range r.st.recs[:r.st.n] {
			q := r.quick[1+5*k : 6+5*k]
			if got := (member{int(q[0]), int(q[1]), int(q[2]), int(q[3]), int(q[4])}); got != h {
				t.Fatalf("quickScan(%q): hint %d is %+v, scanGo's is %+v", b, k, got, h)
			}
		}
		return true
	}
	rest := b[start:]
	if j := skipWS(rest, 0); bulkPlain && msg == "" && j < len(rest) && rest[j] == '{' &&
		!bytes.Contains(b, []byte(`\`)) && r.hints.count <= 4 && bytes.Count(b, []byte("{"))+bytes.Count(b, []byte("[")) <= len(r.closers) {
		t.Fatalf("quickScan(%q) declined a body scanGo reads", b)
	}
	return false
}

// mutator makes test bodies: one to three edits, each replacing,
// inserting or deleting a byte from alphabet, or inserting one of tokens.
type mutator struct {
	rng      *rand.Rand
	alphabet []byte
	tokens   []string
}

// pick returns a copy of a random body of corpus.
func (m *mutator) pick(corpus [][]byte) []byte {
	return append([]byte(nil), corpus[m.rng.IntN(len(corpus))]...)
}

func (m *mutator) mutate(b []byte) []byte {
	for range 1 + m.rng.IntN(3) {
		p := m.rng.IntN(len(b) + 1)
		c := m.alphabet[m.rng.IntN(len(m.alphabet))]
		switch k := m.rng.IntN(4); {
		case k == 0 && p < len(b):
			b[p] = c
		case k == 1 && len(m.tokens) > 0:
			b = append(b[:p], append([]byte(m.tokens[m.rng.IntN(len(m.tokens))]), b[p:]...)...)
		case k <= 2:
			b = append(b[:p], append([]byte{c}, b[p:]...)...)
		case p < len(b):
			b = append(b[:p], b[p+1:]...)
		}
	}
	return b
}

// vectorBodies returns the shared vectors' request bodies of up to 8 KiB.
func vectorBodies(t *testing.T) [][]byte {
	cases, err := vectors.Load("../tests/vectors")
	if err != nil {
		t.Fatal(err)
	}
	var bodies [][]byte
	for _, c := range cases {
		if len(c.Request.Body) <= 8<<10 {
			bodies = append(bodies, c.Request.Body)
		}
	}
	return bodies
}

// quickSeeds are values at the edges of the grammar quickSkipValue covers.
var quickSeeds = []string{
	`"a"`, `""`, `"\"\\\/\b\f\n\r\t"`, `"\u00e9\uD83D\uDE00"`, `"\u12"`, `"\x"`, `"abc`, "\"a\x01\"", "\"a\x7f\"", "\"é\"",
	"\"\xc2\xa0 \xdf\xbf \xe0\xa0\x80 \xed\x9f\xbf \xee\x80\x80 \xef\xbf\xbd \xf0\x90\x80\x80 \xf4\x8f\xbf\xbf\"", "\"中文 é 😀\"",
	"\"\xc0\x80\"", "\"\xc1\xbf\"", "\"\xe0\x9f\xbf\"", "\"\xed\xa0\x80\"", "\"\xf0\x8f\xbf\xbf\"", "\"\xf4\x90\x80\x80\"", "\"\xf5\x80\x80\x80\"",
	"\"\xc3\"", "\"\xe4\xb8\"", "\"\xf0\x9f\x98\"", "\"\xc3(\"", "\"\x80\"", "\"\xff\"",
	// Encoded surrogates, which Python reads, and their near misses.
	"\"\xed\xbf\xbf\"", "\"\xed\xa0\xbd\xed\xb8\x80\"", "\"\xed\x9f\xbf\xed\xa0\x80\xee\x80\x80\"", "\"\xed\xa0\"", "\"\xed\xa0",
	"\"\xed\xa0\x7f\"", "\"\xed\xc0\x80\"", "\"\xed\x7f\x80\"", "\"\xec\xbf\xbf\xed\xbf\xc0\"",
	"\"0123456789abcde\xed\xa0\x800123456789abcdef\"", "\"0123456789abcdef0123456789abcd\xed\xb0\x80\"",
	`"0123456789abcdef0123456789abcdef"`, `"0123456789abcde\"0123456789abcdef"`, `"0123456789abcdef\\n0123456789abcdef"`,
	`0`, `-0`, `12`, `-`, `-x`, `01`, `1.`, `1.5`, `1.e5`, `1e`, `1e+`, `1E-7`, `1e+07x`, `-1.25e-3`, `123456789012345678901234567890`,
	`true`, `tru`, `truex`, `false`, `fals`, `null`, `nul`, `NaN`, `Na`, `Infinity`, `Infinit`, `-Infinity`, `-Inf`,
	`{}`, `{ }`, `[]`, `[ ]`, `{"a":1}`, `{"a" : [1, 2, {"b": null}] , "c":"d"}`, `[1,]`, `[,1]`, `{"a":1,}`, `{"a"}`, `{"a":}`,
	`{1:2}`, `[1 2]`, `[[[[[]]]]]`, `[{"a":[{"b":[true,false,null,NaN,-Infinity]}]}]`, "[\t\n\r 1 \t\n\r]", `{"a":1}}`, `[1]]`,
	`{"model":"llama","messages":[{"role":"user","content":"hi"}],"max_tokens":16,"stream":true}`,
}

// TestQuickSkipValue runs checkQuickSkip over the seeds, every value in the
// shared vectors' bodies, and random mutations of both.
func TestQuickSkipValue(t *testing.T) {
	var corpus [][]byte
	for _, s := range quickSeeds {
		corpus = append(corpus, []byte(s))
	}
	corpus = append(corpus, vectorBodies(t)...)
	// Deep nesting: at the stack's size and one past it.
	for _, n := range []int{63, 64, 65} {
		corpus = append(corpus, []byte(string(bytes.Repeat([]byte("["), n))+string(bytes.Repeat([]byte("]"), n))))
	}
	accepted := 0
	everyStart := func(b []byte) {
		for i := range b {
			if !isWS(b[i]) && checkQuickSkip(t, b, i) {
				accepted++
			}
		}
	}
	for _, b := range corpus {
		everyStart(b)
	}
	// Mutations of windows of the corpus, then truncated now and then.
	m := mutator{rng: rand.New(rand.NewPCG(7, 11)), alphabet: []byte("\"\\{}[],:0123456789-+.eEtrufalsnNIiy \t\n\r\x00\x1f\x7f\x80\xc3\xffub/x\xed\xa0\xbf")}
	for range 3000 {
		b := m.pick(corpus)
		if len(b) > 512 {
			start := m.rng.IntN(len(b) - 256)
			b = b[start : start+256]
		}
		b = m.mutate(b)
		if m.rng.IntN(4) == 0 {
			b = b[:m.rng.IntN(len(b)+1)]
		}
		everyStart(b)
	}
	if bulkPlain && accepted < 10000 {
		t.Fatalf("quickSkipValue accepted only %d values", accepted)
	}
	t.Logf("%d values accepted by quickSkipValue", accepted)
}

// TestQuickScan runs checkQuickScan over the vectors' bodies, bodies built
// around kv_hints members, and random mutations of both.
func TestQuickScan(t *testing.T) {
	corpus := vectorBodies(t)
	for _, s := range []string{
		`{}`, ` { } `, "\xef\xbb\xbf{}", `{"kv_hints":1}`, `{"kv_hints":null,"x":0}`, `{"x":0,"kv_hints":{}}`,
		`{"kv_hints":[1],"kv_hints":{"a":"b"},"y":[true]}`, `{"a":1,"kv_hints":2,"b":3,"kv_hints":4,"c":5}`,
		`{"kv_hints":1,"kv_hints":2,"kv_hints":3,"kv_hints":4,"kv_hints":5}`, `{"kv_hints" : 1 , "x" : 0 }`,
		`{"kv_hint":1,"kv_hintss":2,"Kv_hints":3,"kv\u005fhints":4}`, `{"model":"m","messages":[{"role":"user","content":"0123456789abcdef0123456789abcdef"}],"kv_hints":{"protocol_version":"0.1"}}`,
		`[]`, `"kv_hints"`, `{"a":1}x`, `{"a":1} `, `{"a":1`, `{"a" 1}`, `{"a":1,}`,
		"{\"\xed\xa0\x80\":1,\"kv_hints\":{\"s\":\"\xed\xbf\xbf\"},\"p\":\"\xed\xa0\xbd\xed\xb8\x80 0123456789abcdef\"}",
		"{\"kv_hints\":\"\xed\xa0\"}", "{\"kv_hints\":1,\"p\":\"\xed\xa0\x80\xed\"}",
	} {
		corpus = append(corpus, []byte(s))
	}
	accepted := 0
	for _, b := range corpus {
		if checkQuickScan(t, b) {
			accepted++
		}
	}
	m := mutator{rng: rand.New(rand.NewPCG(3, 5)), alphabet: []byte("\"\\{}[],:0123456789-.eEtrufalsnNI \t\n\r\x00\x1f\x80\xc3\xed\xa0\xbf"),
		tokens: []string{`"kv_hints":`, `"kv_hints":1,`, `,"kv_hints":null`, `{`, `}`, `[`, `]`, `"`, `,`, `\`}}
	for range 20000 {
		b := m.mutate(m.pick(corpus))
		if checkQuickScan(t, b) {
			accepted++
		}
	}
	if bulkPlain && accepted < 2000 {
		t.Fatalf("quickScan accepted only %d bodies", accepted)
	}
	t.Logf("%d bodies accepted by quickScan", accepted)
}

// FuzzQuickScan runs checkQuickScan on arbitrary bodies.
func FuzzQuickScan(f *testing.F) {
	f.Add([]byte(`{"a":1,"kv_hints":2,"b":3,"kv_hints":4,"c":5}`))
	f.Add([]byte(`{"model":"m","kv_hints":{"protocol_version":"0.1"},"max_tokens":1}`))
	f.Add([]byte("{\"\xed\xa0\x80\":\"\xed\xbf\xbf\",\"kv_hints\":\"\xed\xa0\xbd\xed\xb8\x80\"}"))
	f.Fuzz(func(t *testing.T, b []byte) { checkQuickScan(t, b) })
}

// FuzzQuickSkipValue runs checkQuickSkip on every start of arbitrary bytes.
func FuzzQuickSkipValue(f *testing.F) {
	for _, s := range quickSeeds {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, b []byte) {
		for i := range b {
			checkQuickSkip(t, b, i)
		}
	})
}
