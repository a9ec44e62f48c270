package kvhints

import (
	"encoding/json"
	"strconv"
	"strings"
	"testing"
	"time"
	"unicode/utf8"
)

// benchSizes are the body sizes of the benchmark table.
var benchSizes = []struct {
	name string
	n    int
}{{"1KiB", 1 << 10}, {"64KiB", 64 << 10}, {"1MiB", 1 << 20}, {"4MiB", 4 << 20}}

// fetchEnvelope returns an admissible kv.fetch envelope of at most n bytes
// (and within 21 bytes of it) holding pseudo-random full-width u64 hashes.
func fetchEnvelope(n int) []byte {
	encode := func(k int) []byte {
		hashes := make([]uint64, k)
		h := uint64(0x9e3779b97f4a7c15)
		for i := range hashes {
			h = h*6364136223846793005 + 1442695040888963407
			hashes[i] = h | 1<<63 // 19 or 20 digits
		}
		a, _ := NewFetchAction("a1", "tcp://10.0.0.7:23280", hashes)
		e, _ := NewEnvelope("msg-bench", []Action{a})
		b, _ := e.Encode()
		return b
	}
	k := (n - len(encode(0))) / 21
	b := encode(k)
	for len(b) > n {
		k--
		b = encode(k)
	}
	return b
}

// denseText has an escape every 27 bytes on average: a worst case for the
// string scanner, whose fast path stops at each one.
const denseText = `The quick brown fox jumps over the lazy dog; \"quoted\" words, tabs\tand newlines\n keep the scanner honest. `

// proseText is closer to a real prompt: a paragraph with one quotation and
// a blank line after it, four escapes in 620 bytes.
var proseText = strings.Repeat(`Large language model serving stacks route each request to a worker that may already hold part of its KV cache. `, 5) +
	`The router says \"fetch these blocks\" through a hint. \n\n`

// utf8Text is a prompt that is not in English: two- and three-byte UTF-8
// characters, spaces and punctuation, no escapes.
const utf8Text = `Большие языковые модели отвечают на вопросы. 大型语言模型在多个工作节点上运行。 Les modèles répondent vite. `

// multilingualText is a realistic non-English prompt: paragraphs in
// several scripts (Chinese, Japanese, Russian, Arabic, Hindi, Korean,
// accented Latin), ASCII words and numbers among them, a few newline
// escapes, and emoji (four-byte UTF-8), about 1.3 KiB per repetition.
const multilingualText = `请把下面的会议记录整理成要点，并用中文回答。上周五的讨论涉及模型部署、缓存命中率和 GPU 利用率（目前约为 73%）。 \n\n` +
	`次の文章を要約してください。推論サーバーは KV キャッシュを再利用することで、応答時間を大幅に短縮できます 🚀。\n` +
	`Пожалуйста, переведи этот абзац на английский язык. Кэш ключей и значений хранится на соседнем узле, и маршрутизатор знает об этом заранее. \n` +
	`يرجى تلخيص هذا النص باللغة العربية. يمكن للخادم إعادة استخدام ذاكرة التخزين المؤقت لتقليل زمن الاستجابة 😊. \n` +
	`कृपया इस अनुच्छेद का सारांश हिंदी में लिखें। सर्वर पहले से गणना किए गए ब्लॉक दोबारा उपयोग करता है। \n` +
	`다음 내용을 한국어로 요약해 주세요. 라우터는 캐시가 있는 작업자에게 요청을 보냅니다 👍. \n` +
	`Merci de résumer ce paragraphe : les modèles répondent plus vite quand le cache est déjà chargé, même à Zürich ou São Paulo. \n\n`

// mixedText is a chat prompt that switches script every few words, as a
// user writing to a multilingual assistant does: Chinese, Japanese,
// Russian and Arabic interleaved in one paragraph, with emoji, full-width
// and ASCII punctuation, short ASCII runs (names, numbers, code words)
// and spaces between them, and a newline escape between paragraphs,
// about 1.4 KiB per repetition.
const mixedText = `用户说：Привет! مرحبا 👋 これはテストです…请帮我翻译一下。OK, 我们开始吧 🙂 ` +
	`Сначала русский: «кэш уже на узле 7», потом 中文：缓存已经在第 7 个节点上了。مرة أخرى بالعربية: الذاكرة جاهزة ✅ \n` +
	`質問です：この API は KV キャッシュを共有できますか？Да, может — 可以的！نعم، يمكن ذلك 👍 (v1.2, 2024-05) \n` +
	`Мой друг 田中さん написал: \"ping 10.0.0.7\" не отвечает 😅 所以我换了一台机器，然后 всё заработало. شكراً جزيلاً 🙏 \n` +
	`翻訳してください：「明日の会議は 15:00 から」→ Завтра встреча в 15:00 → 明天的会议下午三点开始 → الاجتماع غداً الساعة 3 🕒 \n` +
	`今天天气很好 ☀️, сегодня хорошая погода, 今日はいい天気ですね, الطقس جميل اليوم — and in English: nice weather 🌤️! \n` +
	`Объясни, пожалуйста, 为什么 prefill 比 decode 慢？プリフィルはなぜ遅いのですか？لماذا تكون المرحلة الأولى أبطأ؟ 🤔🤔 \n\n`

// cjkText is Chinese and Japanese as written, with no ASCII at all:
// full-width punctuation between the characters and no spaces, so that
// a string's text is one run of three-byte sequences from its first byte.
const cjkText = `请把下面的会议记录整理成要点，并用中文回答。上周五的讨论涉及模型部署、缓存命中率和显卡利用率。` +
	`次の文章を要約してください。推論サーバーはキャッシュを再利用することで、応答時間を大幅に短縮できます。` +
	`路由器知道缓存在哪个节点上，所以请求会被发送到那里。明日の会議は午後三時からです。`

// escapeText is escape-dense text: newlines, tabs, quotes and \u escapes
// of accented letters, about one escape every 9 bytes.
const escapeText = `Caf\u00e9 \"cr\u00e8me\" na\u00efve:\n\tthe r\u00e9sum\u00e9 says \"d\u00e9j\u00e0 vu\".\n\n`

// chatBody returns a string-heavy chat completion body of about n bytes,
// with a 2 KiB envelope in the middle when hint is set.
func chatBody(n int, hint bool) []byte { return chatBodyOf(n, hint, denseText) }

// chatBodyOf is chatBody with the user message made of para repeated.
func chatBodyOf(n int, hint bool, para string) []byte {
	var b strings.Builder
	b.WriteString(`{"model":"meta-llama/Llama-3.1-8B-Instruct","messages":[{"role":"system","content":"You are helpful."},{"role":"user","content":"`)
	tail := `"}],`
	if hint {
		tail += `"kv_hints":` + string(fetchEnvelope(2048)) + `,`
	}
	tail += `"max_tokens":256,"temperature":0.7,"stream":false}`
	for b.Len()+len(tail)+len(para) <= n {
		b.WriteString(para)
	}
	for b.Len()+len(tail) < n {
		b.WriteByte('.')
	}
	b.WriteString(tail)
	return []byte(b.String())
}

func BenchmarkRewrite(b *testing.B) {
	for _, mode := range []struct {
		name string
		p    Policy
	}{{"untrusted", Policy{}}, {"trusted", Policy{Trusted: true}}} {
		for _, sz := range benchSizes {
			for _, hint := range []bool{false, true} {
				body := chatBody(sz.n, hint)
				name := mode.name + "/" + sz.name + "/nohint"
				if hint {
					name = mode.name + "/" + sz.name + "/hint"
				}
				b.Run(name, func(b *testing.B) {
					benchRewrite(b, body, mode.p)
				})
			}
		}
		body := chatBodyOf(4<<20, true, proseText)
		b.Run(mode.name+"/4MiB-prose/hint", func(b *testing.B) { benchRewrite(b, body, mode.p) })
		body = chatBodyOf(4<<20, true, utf8Text)
		b.Run(mode.name+"/4MiB-utf8/hint", func(b *testing.B) { benchRewrite(b, body, mode.p) })
		body = chatBodyOf(4<<20, true, multilingualText)
		b.Run(mode.name+"/4MiB-multilingual/hint", func(b *testing.B) { benchRewrite(b, body, mode.p) })
	}
}

// BenchmarkRewriteScan is the untrusted rewrite of a 4 MiB chat body,
// the string scan's whole cost, on the portable path and, on amd64 with
// AVX2, the vectorised one, side by side: ASCII English prose,
// escape-dense text, multilingual text in paragraphs of one script each,
// mixed-script text that switches every few words, and Chinese and
// Japanese with no ASCII between the characters.
func BenchmarkRewriteScan(b *testing.B) {
	for _, text := range []struct{ name, para string }{
		{"prose", proseText}, {"escapes", escapeText}, {"multilingual", multilingualText}, {"mixed", mixedText}, {"cjk", cjkText},
	} {
		body := chatBodyOf(4<<20, true, text.para)
		for _, path := range []struct {
			name string
			vec  bool
		}{{"portable", false}, {"avx2", true}} {
			b.Run("text="+text.name+"/path="+path.name, func(b *testing.B) {
				if !setVecScan(b, path.vec) {
					b.Skip("no AVX2 path here")
				}
				benchRewrite(b, body, Policy{})
			})
		}
	}
}

// hostileBodies returns bodies of about n bytes shaped to cost the most
// per byte, each with the policy it is meant for: a flat object of many
// small members (the yardstick), many top-level kv_hints members (plain,
// escaped, the last one null), and brackets nested past quickScan's stack
// (unclosed, so rejected; balanced; many values 100 levels deep, a depth
// Python still reads).
func hostileBodies(n int) []hostileBody {
	rep := func(head, unit, tail string) []byte {
		k := (n - len(head) - len(tail)) / len(unit)
		s := head + strings.Repeat(unit, k)
		return []byte(strings.TrimSuffix(s, ",") + tail)
	}
	hundred := strings.Repeat("[", 100) + "1" + strings.Repeat("]", 100)
	return []hostileBody{
		{"members", rep("{", `"k":1,`, "}"), Policy{}},
		{"hints", rep("{", `"kv_hints":1,`, "}"), Policy{}},
		{"hints-trusted", rep("{", `"kv_hints":1,`, "}"), Policy{Trusted: true}},
		{"hints-escaped", rep("{", `"kv\u005fhints":1,`, "}"), Policy{}},
		{"hints-null-last", rep("{", `"kv_hints":{},`, `"kv_hints":null}`), Policy{}},
		{"hints-between", rep("{", `"k":1,"kv_hints":1,`, "}"), Policy{}},
		{"unclosed", []byte(`{"kv_hints":1,"a":` + strings.Repeat("[", n)), Policy{}},
		{"balanced", []byte(`{"kv_hints":1,"a":` + strings.Repeat("[", n/2) + strings.Repeat("]", n/2) + `}`), Policy{}},
		{"depth100", []byte(`{"kv_hints":1,"a":[` + strings.Repeat(hundred+",", n/len(hundred)) + `1]}`), Policy{}},
	}
}

type hostileBody struct {
	name string
	body []byte
	p    Policy
}

// BenchmarkRewriteHostile runs the hostile 4 MiB bodies next to the prose
// chat body, which is what a real 4 MiB request looks like. The target is
// that none costs more than three times the flat object ("members").
func BenchmarkRewriteHostile(b *testing.B) {
	prose := chatBodyOf(4<<20, true, proseText)
	b.Run("prose", func(b *testing.B) { benchAny(b, prose, Policy{}) })
	for _, h := range hostileBodies(4 << 20) {
		b.Run(h.name, func(b *testing.B) { benchAny(b, h.body, h.p) })
	}
}

// BenchmarkRewriteDeep: the nested shapes of BenchmarkRewriteHostile alone.
func BenchmarkRewriteDeep(b *testing.B) {
	for _, h := range hostileBodies(4 << 20)[6:] {
		b.Run(h.name, func(b *testing.B) { benchAny(b, h.body, h.p) })
	}
}

// benchAny is benchRewrite for bodies that may be rejected.
func benchAny(b *testing.B, body []byte, p Policy) {
	var r Rewriter
	b.SetBytes(int64(len(body)))
	b.ReportAllocs()
	for i := 0; i < b.N; i++ {
		r.Rewrite(body, p)
	}
}

func benchRewrite(b *testing.B, body []byte, p Policy) {
	var r Rewriter
	b.SetBytes(int64(len(body)))
	b.ReportAllocs()
	for i := 0; i < b.N; i++ {
		if _, res := r.Rewrite(body, p); res.Outcome == OutcomeRejected {
			b.Fatal(res.Message)
		}
	}
}

// BenchmarkBaseline does the untrusted job with encoding/json: decode the
// top level into raw members, delete kv_hints, encode again. It is the
// yardstick for the ratio in BENCHMARKS.md (and is less strict: it neither
// sees duplicate members nor accepts NaN, as the worker does).
func BenchmarkBaseline(b *testing.B) {
	for _, sz := range benchSizes {
		body := chatBody(sz.n, true)
		b.Run("untrusted/"+sz.name+"/hint", func(b *testing.B) {
			b.SetBytes(int64(len(body)))
			b.ReportAllocs()
			for i := 0; i < b.N; i++ {
				var m map[string]json.RawMessage
				if err := json.Unmarshal(body, &m); err != nil {
					b.Fatal(err)
				}
				delete(m, "kv_hints")
				if _, err := json.Marshal(m); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}

func BenchmarkAdmit(b *testing.B) {
	env := fetchEnvelope(60 << 10)
	pretty := strings.ReplaceAll(string(env), ",", ",\n      ")
	for _, c := range []struct {
		name string
		raw  []byte
	}{{"60KiB", env}, {"60KiB-pretty", []byte(pretty)}, {"reference", []byte(refEnvelope)}, {"floats", floatEnvelope()}} {
		b.Run(c.name, func(b *testing.B) {
			var a Admitter
			b.SetBytes(int64(len(c.raw)))
			b.ReportAllocs()
			for i := 0; i < b.N; i++ {
				if _, r := a.Admit(c.raw, Limits{}); r != ReasonNone {
					b.Fatal(r)
				}
			}
		})
	}
}

// floatEnvelope is the reference envelope with 2,000 floats of the shapes
// a producer writes (scores, weights, timestamps) in its payload, about
// 20 KiB, each of which admission reads and writes as Python does.
func floatEnvelope() []byte {
	lits := []string{"0.5", "1e-3", "0.1234567890123", "1700000000.123456", "2.5E+10", "-0.75", "1.0", "3.141592653589793"}
	var f strings.Builder
	for i := range 2000 {
		if i > 0 {
			f.WriteByte(',')
		}
		f.WriteString(lits[i%len(lits)])
	}
	return []byte(strings.Replace(refEnvelope, `"block_hashes":[11,22]`, `"block_hashes":[11,22],"scores":[`+f.String()+`]`, 1))
}

func TestBenchInputsAreWhatTheyClaim(t *testing.T) {
	for _, sz := range benchSizes {
		for _, hint := range []bool{false, true} {
			body := chatBody(sz.n, hint)
			if len(body) < sz.n-64 || len(body) > sz.n+4096 {
				t.Errorf("%s hint=%v: %d bytes", sz.name, hint, len(body))
			}
			_, res := Rewrite(body, Policy{Trusted: true})
			want := OutcomeNoHint
			if hint {
				want = OutcomeAdmitted
			}
			if res.Outcome != want {
				t.Errorf("%s hint=%v: %v %s", sz.name, hint, res.Outcome, res.Message)
			}
		}
	}
	if body := chatBodyOf(4<<20, true, multilingualText); !utf8.Valid(body) || !json.Valid(body) || strings.Count(string(body), "🚀") < 1000 {
		t.Error("the multilingual body is not valid UTF-8 JSON with emoji")
	}
	if body := chatBodyOf(4<<20, true, mixedText); !utf8.Valid(body) || !json.Valid(body) || strings.Count(string(body), "👋") < 1000 {
		t.Error("the mixed-script body is not valid UTF-8 JSON with emoji")
	}
	if n := len(fetchEnvelope(60 << 10)); n < 59<<10 || n > 60<<10 {
		t.Errorf("60 KiB envelope is %s bytes", strconv.Itoa(n))
	}
}

// presetMembers are the member paths of the five presets
// (filterspec.Presets, which this package cannot import).
var presetMembers = []string{"kv_transfer_params", "ec_transfer_params", "bootstrap_host", "bootstrap_port", "bootstrap_room",
	"bootstrap_pair_key", "decode_tp_size", "routed_dp_rank", "disagg_prefill_dp_rank", "data_parallel_rank", "kv_router_hint",
	"disaggregated_params", "prompt_token_ids", "prompt_token_ids_b64",
	"nvext.backend_instance_id", "nvext.decode_worker_id", "nvext.prefill_worker_id", "nvext.dp_rank",
	"nvext.prefill_dp_rank", "nvext.token_data", "nvext.use_raw_prompt"}

// BenchmarkRouterOnlyPaired alternates two untrusted rewrites of a chat
// body without router-only fields, with and without every preset's member
// paths, in blocks of 64 calls, so that the machine's
// drift falls on both alike, and reports each one's time per call and
// their ratio (presets/off).
//
//	go test -run '^$' -bench RouterOnlyPaired -count 6 ./kvhints
func BenchmarkRouterOnlyPaired(b *testing.B) {
	ro, err := NewRouterOnly(presetMembers, false)
	if err != nil {
		b.Fatal(err)
	}
	for _, sz := range []struct {
		name string
		n    int
	}{{"4KiB", 4 << 10}, {"64KiB", 64 << 10}, {"1MiB", 1 << 20}} {
		for _, hint := range []bool{false, true} {
			body := chatBody(sz.n, hint)
			name := sz.name + "/nohint"
			if hint {
				name = sz.name + "/hint"
			}
			b.Run(name, func(b *testing.B) {
				var off, on Rewriter
				pOff, pOn := Policy{}, Policy{RouterOnly: ro}
				off.Rewrite(body, pOff)
				on.Rewrite(body, pOn)
				var tOff, tOn time.Duration
				b.ReportAllocs()
				b.ResetTimer()
				for done := 0; done < b.N; done += 64 {
					n := min(64, b.N-done)
					start := time.Now()
					for i := 0; i < n; i++ {
						off.Rewrite(body, pOff)
					}
					mid := time.Now()
					for i := 0; i < n; i++ {
						on.Rewrite(body, pOn)
					}
					tOff, tOn = tOff+mid.Sub(start), tOn+time.Since(mid)
				}
				b.ReportMetric(float64(tOff.Nanoseconds())/float64(b.N), "off-ns/op")
				b.ReportMetric(float64(tOn.Nanoseconds())/float64(b.N), "presets-ns/op")
				b.ReportMetric(float64(tOn)/float64(tOff), "presets/off")
			})
		}
	}
}
