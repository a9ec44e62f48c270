package kvhints

import (
	"bytes"
	"math/bits"
	"math/rand/v2"
	"os"
	"regexp"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"testing"
	"unsafe"

	"github.com/kvgate/kvgate/tests/vectors"
)

// checkQuickSkip holds skip (quickScan on wasm) to skipValue on the value
// at b[i]: the same end, or the same error at the same offset.
func checkQuickSkip(t *testing.T, b []byte, i int) (valid bool) {
	t.Helper()
	var qs quickState
	got, _, gerr := skip(b, i, make([]byte, 0, 8), &qs)
	want, _, werr := skipValue(b, i, nil)
	if (gerr == nil) != (werr == nil) || gerr == nil && got != want || gerr != nil && gerr.Error() != werr.Error() {
		t.Fatalf("skip(%.300q, %d) = %d, %v; skipValue gives %d, %v", b, i, got, gerr, want, werr)
	}
	return werr == nil
}

// checkQuickScan holds the body scan with quickScan to the Go scanner on
// the body b: the same message, or the same kv_hints members, first kept
// member and bytes cut so far.
func checkQuickScan(t *testing.T, b []byte) (valid bool) {
	t.Helper()
	var rq, rg Rewriter
	mq := rq.scanBody(b, true)
	mg := rg.scanBody(b, false)
	if mq != mg {
		t.Fatalf("body %.300q: quickScan says %q, the Go scanner %q", b, mq, mg)
	}
	if mq != "" {
		return false
	}
	if rq.hints != rg.hints || rq.st.firstKept != rg.st.firstKept || !slices.Equal(rq.st.recs[:rq.st.n], rg.st.recs[:rg.st.n]) ||
		rq.cutting != rg.cutting || rq.from != rg.from || !bytes.Equal(rq.out, rg.out) {
		t.Fatalf("body %.300q: quickScan finds %+v, first kept %d, %d held %v, cut to %d;\nthe Go scanner %+v, first kept %d, %d held %v, cut to %d",
			b, rq.hints, rq.st.firstKept, rq.st.n, rq.st.recs[:rq.st.n], rq.from, rg.hints, rg.st.firstKept, rg.st.n, rg.st.recs[:rg.st.n], rg.from)
	}
	return true
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

// digits9 is an integer literal of n nines.
func digits9(n int) string { return strings.Repeat("9", n) }

// quickSeeds are values at the edges of the grammar quickScan covers.
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
	// Integers at Python's digit limit, and what makes a long one a float.
	digits9(maxIntDigits), "-" + digits9(maxIntDigits), digits9(maxIntDigits + 1), "-" + digits9(maxIntDigits+1),
	digits9(maxIntDigits+1) + ".5", digits9(maxIntDigits+1) + "e1", digits9(maxIntDigits+1) + "E-1", digits9(maxIntDigits+1) + ".",
	digits9(maxIntDigits+1) + "e", digits9(maxIntDigits+1) + "x", "[" + digits9(maxIntDigits+1) + "]", "[1," + digits9(maxIntDigits) + "]",
	`{}`, `{ }`, `[]`, `[ ]`, `{"a":1}`, `{"a" : [1, 2, {"b": null}] , "c":"d"}`, `[1,]`, `[,1]`, `{"a":1,}`, `{"a"}`, `{"a":}`,
	`{1:2}`, `[1 2]`, `[[[[[]]]]]`, `[{"a":[{"b":[true,false,null,NaN,-Infinity]}]}]`, "[\t\n\r 1 \t\n\r]", `{"a":1}}`, `[1]]`,
	`{"model":"llama","messages":[{"role":"user","content":"hi"}],"max_tokens":16,"stream":true}`,
}

// TestQuickSkip runs checkQuickSkip over the seeds, every value in the
// shared vectors' bodies, and random mutations of both.
func TestQuickSkip(t *testing.T) {
	var corpus [][]byte
	for _, s := range quickSeeds {
		corpus = append(corpus, []byte(s))
	}
	corpus = append(corpus, vectorBodies(t)...)
	// Deep nesting around the sizes the stack grows through, closed or not.
	for _, n := range []int{63, 64, 65, 127, 128, 129, 191, 192, 193, 500} {
		corpus = append(corpus, []byte(nest(n, "1")), []byte(nest(n, "")), []byte(strings.Repeat("[", n)),
			[]byte(strings.Repeat(`{"a":`, n)+"1"+strings.Repeat("}", n)), []byte(strings.Repeat(`[{"a":`, n)+`"x`))
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
	if accepted < 10000 {
		t.Fatalf("only %d valid values", accepted)
	}
	t.Logf("%d valid values", accepted)
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
		// Escaped names: kv_hints or nearly.
		`{"kv_hint\u0073":1,"\u006bv_hints":2,"kv\u005Fhints":3,"\u006B\u0076\u005F\u0068\u0069\u006E\u0074\u0073":4}`,
		`{"kv\u005fhintsx":1,"kv\u005fhint":2,"\u004bv_hints":3,"kv\/hints":4,"kv\u005f\u0068ints\n":5,"kv\u005fhints\u0000":6}`,
		`{"\ud83d\ude00kv_hints":1,"kv_hints\ud800":2,"\u006b\u0076\u005f\u0068\u0069\u006e\u0074":3,"k\u00f6":4,"x":"\u006b"}`,
		// Errors of every kind, at the top level and deeper.
		`{"a":"\u12"}`, `{"a":"\x"}`, `{"a":"\`, `{"a":"abc`, `{"a":-}`, `{"a":-x}`, `{"a":-Inf}`, `{"a":x}`, `{"a":tru}`,
		`{"a":[1,]}`, `{"a":[1`, `{"a":{"b"`, `{"a":{"b":1`, `{"a":{1:2}}`, `{"a" 1}`, `{"a":1 "b":2}`, `{,}`, `{`, ` `,
		`{"a":1}}`, `{"a":[}`, `{"a":{"b":1,}}`, "{\"a\":\"\x01\"}", "{\"a\":\"\xc3\"}", "{\"\xff\":1}",
		`{"kv_hints":1,"kv_hints":[` + strings.Repeat("[", 200) + `}`,
	} {
		corpus = append(corpus, []byte(s))
	}
	// More members than the records hold, and deep nesting among them.
	for _, n := range []int{hintRecords - 1, hintRecords, hintRecords + 1, 3*hintRecords + 5} {
		corpus = append(corpus,
			manyMembers(n, func(i int) bool { return i%5 != 2 }),
			manyMembers(n, func(int) bool { return true }),
			[]byte(strings.Replace(string(manyMembers(n, func(i int) bool { return i > 3 })), `"k2":2`, `"k2":`+nest(300, `{"kv_hints":1}`), 1)),
			[]byte(strings.TrimSuffix(string(manyMembers(n, func(i int) bool { return i%2 == 0 })), " }\n")+`,"kv_hints":[[1}`))
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
	if accepted < 2000 {
		t.Fatalf("only %d valid bodies", accepted)
	}
	t.Logf("%d valid bodies", accepted)
}

// FuzzQuickScan runs checkQuickScan on arbitrary bodies.
func FuzzQuickScan(f *testing.F) {
	f.Add([]byte(`{"a":1,"kv_hints":2,"b":3,"kv_hints":4,"c":5}`))
	f.Add([]byte(`{"model":"m","kv_hints":{"protocol_version":"0.1"},"max_tokens":1}`))
	f.Add([]byte("{\"\xed\xa0\x80\":\"\xed\xbf\xbf\",\"kv_hints\":\"\xed\xa0\xbd\xed\xb8\x80\"}"))
	f.Add([]byte(`{"kv\u005fhints":1,"\u006bv_hints":[[[[[[[[1]]]]]]]],"kv_hint\u0073":2}`))
	f.Add(manyMembers(hintRecords+2, func(i int) bool { return i%3 != 0 }))
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

// TestQuickStateLayout holds the numbers quickscan_wasm.s defines for itself
// (ST_* offsets, E_* error codes, quickScan's answers) to the Go
// declarations: a field moved or a code renumbered here would be misread
// there.
func TestQuickStateLayout(t *testing.T) {
	src, err := os.ReadFile("quickscan_wasm.s")
	if err != nil {
		t.Fatal(err)
	}
	defs := map[string]int{}
	for _, m := range regexp.MustCompile(`(?m)^#define (\w+) (\d+)$`).FindAllStringSubmatch(string(src), -1) {
		defs[m[1]], _ = strconv.Atoi(m[2])
	}
	var st scanState
	want := map[string]int{
		"ST_POS": int(unsafe.Offsetof(st.pos)), "ST_DEPTH": int(unsafe.Offsetof(st.depth)),
		"ST_CLOSER": int(unsafe.Offsetof(st.closer)), "ST_CODE": int(unsafe.Offsetof(st.code)),
		"ST_BODY": int(unsafe.Offsetof(st.body)), "ST_IDX": int(unsafe.Offsetof(st.idx)),
		"ST_FIRSTKEPT": int(unsafe.Offsetof(st.firstKept)), "ST_N": int(unsafe.Offsetof(st.n)),
		"ST_FLAGS": int(unsafe.Offsetof(st.flags)), "ST_RECS": int(unsafe.Offsetof(st.recs)), "RECORDS": len(st.recs),
		"DONE": quickDone, "FULL": quickFull, "DEEP": quickDeep, "ERROR": quickError, "NOTOBJECT": quickNotObject,
		"E_UNTERMINATED": int(errUnterminated), "E_CONTROL": int(errControl), "E_UTF8": int(errUTF8),
		"E_UESCAPE": int(errUEscape), "E_ESCAPE": int(errEscape), "E_NUMBER": int(errNumber), "E_VALUE": int(errValue),
		"E_END": int(errEnd), "E_COMMA": int(errComma), "E_NAME": int(errName), "E_COLON": int(errColon),
		"E_EXTRA": int(errExtra), "E_BLANK": int(errBlank), "E_INTDIGITS": int(errIntDigits),
		"MAXINTDIGITS": maxIntDigits,
	}
	for name, w := range want {
		if got, ok := defs[name]; !ok || got != w {
			t.Errorf("quickscan_wasm.s: %s is %d (defined: %v), Go has %d", name, got, ok, w)
		}
	}
	if len(defs) != len(want) {
		t.Errorf("quickscan_wasm.s defines %d numbers, %d checked", len(defs), len(want))
	}
	// SLOT and MEMBERSTART address the records as 40-byte member structs
	// whose next is the fifth word.
	if unsafe.Sizeof(member{}) != 40 || unsafe.Offsetof(member{}.next) != 32 {
		t.Errorf("member is %d bytes, next at %d", unsafe.Sizeof(member{}), unsafe.Offsetof(member{}.next))
	}
}

// TestHostileWorkIsLinear bounds the work on the hostile bodies of the
// benchmarks without timing them: what a rewrite allocates grows at most
// with the nesting depth (the container stack), never with the number of
// members, and a second rewrite allocates nothing but an error message; on
// wasm, quickScan is called once per batch of kv_hints members or
// doubling of the stack, so no byte is scanned twice.
func TestHostileWorkIsLinear(t *testing.T) {
	for _, n := range []int{64 << 10, 1 << 20} {
		for _, h := range hostileBodies(n) {
			var r Rewriter
			r.Reserve(len(h.body))
			var before, after runtime.MemStats
			runtime.ReadMemStats(&before)
			_, res := r.Rewrite(h.body, h.p)
			runtime.ReadMemStats(&after)
			allowed := uint64(16 << 10)
			if strings.Contains(string(h.body), "[[[[") {
				allowed += uint64(4 * n)
			}
			if got := after.TotalAlloc - before.TotalAlloc; got > allowed {
				t.Errorf("%s, %d bytes: the first rewrite allocated %d bytes", h.name, n, got)
			}
			want := 0.0
			if res.Outcome == OutcomeRejected {
				want = 4
			}
			if a := testing.AllocsPerRun(2, func() { r.Rewrite(h.body, h.p) }); a > want {
				t.Errorf("%s, %d bytes: %v allocations per rewrite", h.name, n, a)
			}
			if bulkPlain {
				members := strings.Count(string(h.body), `hints"`)
				if most := 2 + members/hintRecords + 2*bits.Len(uint(n)); r.calls > most {
					t.Errorf("%s, %d bytes: %d calls to quickScan, more than %d", h.name, n, r.calls, most)
				}
			}
		}
	}
}

// genJSON appends a random JSON value to b: containers up to depth deep,
// strings with escapes, UTF-8 and encoded surrogates, names that are or
// look like kv_hints, numbers and keywords.
func genJSON(rng *rand.Rand, b []byte, depth int) []byte {
	ws := func() {
		for rng.IntN(4) == 0 {
			b = append(b, " \t\n\r"[rng.IntN(4)])
		}
	}
	str := func() {
		parts := []string{"a", "kv_hints", `\"`, `\\`, `\/`, `\n`, `\u005f`, `\u006b`, `\ud83d\ude00`, `\ud800`, "é", "中", "\xed\xa0\x80",
			"0123456789abcdef", "\U0001F600", " ", "{", "]", ":", ","}
		b = append(b, '"')
		for range rng.IntN(5) {
			b = append(b, parts[rng.IntN(len(parts))]...)
		}
		b = append(b, '"')
	}
	switch k := rng.IntN(10); {
	case depth > 0 && k < 3:
		b = append(b, '{')
		ws()
		for i := range rng.IntN(6) {
			if i > 0 {
				b = append(b, ',')
				ws()
			}
			if rng.IntN(3) == 0 {
				b = append(b, []string{`"kv_hints"`, `"kv\u005fhints"`, `"\u006bv_hints"`, `"kv_hint\u0073x"`}[rng.IntN(4)]...)
			} else {
				str()
			}
			ws()
			b = append(b, ':')
			ws()
			b = genJSON(rng, b, depth-1-rng.IntN(2))
			ws()
		}
		b = append(b, '}')
	case depth > 0 && k < 6:
		if rng.IntN(8) == 0 { // a tower, past the first stacks
			n := 60 + rng.IntN(200)
			return append(append(append(b, strings.Repeat("[", n)...), "0"...), strings.Repeat("]", n)...)
		}
		b = append(b, '[')
		ws()
		for i := range rng.IntN(6) {
			if i > 0 {
				b = append(b, ',')
				ws()
			}
			b = genJSON(rng, b, depth-1)
			ws()
		}
		b = append(b, ']')
	case k < 8:
		str()
	default:
		b = append(b, []string{"0", "-1", "1.5e3", "-0.0", "12345678901234567890", "true", "false", "null", "NaN", "-Infinity", "Infinity"}[rng.IntN(11)]...)
	}
	return b
}

// TestQuickScanGenerated holds quickScan to the Go scanner on generated
// bodies (objects of many members, some of them kv_hints, around deep and
// odd values), whole, truncated and with a byte changed.
func TestQuickScanGenerated(t *testing.T) {
	rng := rand.New(rand.NewPCG(17, 19))
	valid := 0
	for range 1500 {
		b := []byte("{")
		for i := range rng.IntN(3 * hintRecords) {
			if i > 0 {
				b = append(b, ",\n "[:1+rng.IntN(3)]...)
			}
			if rng.IntN(2) == 0 {
				b = append(b, []string{`"kv_hints":`, `"kv\u005fhints" : `, `"x":`}[rng.IntN(3)]...)
			} else {
				b = append(b, `"m":`...)
			}
			b = genJSON(rng, b, 4)
		}
		b = append(b, '}')
		for _, v := range [][]byte{b, b[:rng.IntN(len(b)+1)], mutateOne(rng, b)} {
			if checkQuickScan(t, v) {
				valid++
			}
			if i := rng.IntN(len(v) + 1); i < len(v) && !isWS(v[i]) {
				checkQuickSkip(t, v, i)
			}
		}
	}
	if valid < 1500 {
		t.Fatalf("only %d valid bodies", valid)
	}
}

// mutateOne returns a copy of b with one byte replaced.
func mutateOne(rng *rand.Rand, b []byte) []byte {
	c := append([]byte(nil), b...)
	if len(c) > 0 {
		const alphabet = "\"\\{}[],: 0-eu\x00\xed\x80"
		c[rng.IntN(len(c))] = alphabet[rng.IntN(len(alphabet))]
	}
	return c
}

// TestQuickScanUTF8 runs checkQuickScan over strings of random UTF-8
// pieces: well-formed characters of every length, encoded surrogates, the
// bytes at the edges of every lead and continuation range, spaces and
// ASCII between them, in values and names, closed and cut off at the end
// of the body, so that quickScan's multibyte fast path (UTF8RUN) meets
// every sequence near and away from the body's end.
func TestQuickScanUTF8(t *testing.T) {
	pieces := []string{"é", "ж", "߿", "中", "한", "\xe0\xa0\x80", "\xef\xbf\xbf", "\xed\x9f\xbf", "\xed\xa0\x80", "\xed\xbf\xbf",
		"🚀", "\xf0\x90\x80\x80", "\xf4\x8f\xbf\xbf", " ", " ", "a", "ab cd", "0123456789abcdef", `\n`, `\"`,
		"\x80", "\x8f", "\x90", "\x9f", "\xa0", "\xbf", "\xc0", "\xc1", "\xc2", "\xdf", "\xe0", "\xe1", "\xec", "\xed",
		"\xee", "\xef", "\xf0", "\xf1", "\xf3", "\xf4", "\xf5", "\xff", "\x1f"}
	rng := rand.New(rand.NewPCG(23, 29))
	valid := 0
	for range 20000 {
		var s strings.Builder
		for n := rng.IntN(12); n >= 0; n-- {
			p := pieces[rng.IntN(len(pieces))]
			if rng.IntN(4) > 0 { // mostly well-formed text
				p = pieces[rng.IntN(20)]
			}
			s.WriteString(p)
		}
		for _, b := range []string{`{"a":"` + s.String() + `"}`, `{"a":"` + s.String(), `{"` + s.String() + `":1}`, `{"kv_hints":"` + s.String() + `" }`} {
			if checkQuickScan(t, []byte(b)) {
				valid++
			}
		}
	}
	if valid < 5000 {
		t.Fatalf("only %d valid bodies", valid)
	}
}
