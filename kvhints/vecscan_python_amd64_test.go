//go:build !wasm

package kvhints

import (
	"bytes"
	"encoding/base64"
	"math/rand/v2"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/kvgate/kvgate/internal/envoytest"
)

// pythonScanJudge is run once by TestVectorScanAsPython. Each input line
// is a body and what kvgate forwarded for an untrusted sender, base64, or
// "-" where kvgate answered 400. It prints one line per disagreement with
// the worker: json.loads of the body must fail exactly where kvgate
// rejected, and otherwise json.loads of the forwarded bytes must be the
// body's object without its kv_hints members.
const pythonScanJudge = `
import base64, json, sys
bad = 0
with open(sys.argv[1]) as src:
    for n, line in enumerate(src):
        body, fwd = line.split()
        body = base64.b64decode(body)
        try:
            want = json.loads(body)
        except ValueError as e:
            want = e
        if fwd == "-":
            if not isinstance(want, Exception):
                bad += 1; print(n, "kvgate rejected a body json.loads reads")
            continue
        if isinstance(want, Exception):
            bad += 1; print(n, "kvgate forwarded a body json.loads refuses:", type(want).__name__); continue
        want.pop("kv_hints", None)
        try:
            got = json.loads(base64.b64decode(fwd))
        except ValueError as e:
            bad += 1; print(n, "forwarded bytes do not parse:", type(e).__name__); continue
        if got != want:
            bad += 1; print(n, "the worker reads something else than the body less kv_hints")
        elif "kv_hints" in got:
            bad += 1; print(n, "kv_hints reached the worker")
print("checked", n + 1, "bad", bad)
`

// scanPieces are what random string texts are made of: prose, the
// multilingual text the vectorised path validates, escapes, and every
// kind of byte the worker's decoder refuses or accepts only by its
// surrogatepass (encoded surrogates).
var scanPieces = []string{
	"the quick brown fox ", "jumps over the lazy dog. ", "a", " ", "0123456789",
	"é", "中文", "日本語のテキスト", "русский текст ", "نص عربي ", "🚀", "👩‍💻",
	`\n`, `\"`, `\\`, `\/`, `\t`, `\u00e9`, `\uD83D\uDE80`, `\ud800`, `\udfff`, `\u0000`,
	"\xed\xa0\x80", "\xed\xb0\x80\xed\xa0\x80",
	"\xff", "\xc0\x80", "\xe4\xb8", "\x80", "\xf4\x90\x80\x80", "\x01", "\x1f", "\x7f",
	`\x`, `\u12G4`, `"`, `\`, `kv_hints`, `"kv_hints":1,"`,
}

// scanClean is how many of scanPieces, from the first, the worker reads.
const scanClean = 24

// randomScanBody is a chat body whose strings, long enough for the
// vectorised path, are random texts of scanPieces; the key of one member
// is too, and some bodies carry a hint, under its plain name or escaped.
func randomScanBody(rng *rand.Rand) []byte {
	text := func(pieces int) string {
		var b strings.Builder
		for range pieces {
			b.WriteString(scanPieces[rng.IntN(scanClean)])
		}
		if rng.IntN(6) == 0 { // one piece of any kind, often one the worker refuses
			b.WriteString(scanPieces[rng.IntN(len(scanPieces))])
		}
		return b.String()
	}
	var b bytes.Buffer
	b.WriteString(`{"model":"m","messages":[{"role":"user","content":"` + text(rng.IntN(60)) + `"}]`)
	b.WriteString(`,"` + text(rng.IntN(8)) + `":"` + text(rng.IntN(30)) + `"`)
	switch rng.IntN(4) {
	case 1:
		b.WriteString(`,"kv_hints":{"version":1,"note":"` + text(rng.IntN(20)) + `"}`)
	case 2:
		b.WriteString(`,"kv\u005fhints":"` + text(rng.IntN(20)) + `"`)
	}
	b.WriteString("}")
	return b.Bytes()
}

// TestVectorScanAsPython judges both scan paths by the worker itself:
// random bodies whose strings mix prose, multilingual text, escapes and
// malformed UTF-8 go through Rewrite for an untrusted sender with the
// AVX2 path and the portable one, which must agree byte for byte, and
// Python's json.loads must refuse exactly the bodies kvgate answered 400
// and read each forwarded body as the request without its kv_hints. It
// needs Python ($KVGATE_PYTHON): skipped without it, failed under CI=true.
func TestVectorScanAsPython(t *testing.T) {
	python := envoytest.Python(t)
	if !cpuVec {
		t.Log("no AVX2 here: the portable path alone is judged")
	}
	rng := rand.New(rand.NewPCG(24, 3))
	var lines strings.Builder
	rejected, forwarded := 0, 0
	for range 4000 {
		body := randomScanBody(rng)
		var rv, rp Rewriter
		vecScan = cpuVec
		out, res := rv.Rewrite(body, Policy{})
		vecScan = false
		outP, resP := rp.Rewrite(body, Policy{})
		vecScan = cpuVec
		if !bytes.Equal(out, outP) || res.Outcome != resP.Outcome || res.Status != resP.Status || res.Message != resP.Message {
			t.Fatalf("Rewrite(%q): avx2 %v %q, portable %v %q", body, res, out, resP, outP)
		}
		fwd := "-"
		switch {
		case res.Outcome == OutcomeRejected && res.Status == 400:
			rejected++
		case res.Outcome == OutcomeRejected:
			t.Fatalf("Rewrite(%q): %d, want 400 or forwarded", body, res.Status)
		default:
			forwarded++
			fwd = base64.StdEncoding.EncodeToString(out)
		}
		lines.WriteString(base64.StdEncoding.EncodeToString(body) + " " + fwd + "\n")
	}
	if rejected < 500 || forwarded < 500 {
		t.Fatalf("the generator is lopsided: %d rejected, %d forwarded", rejected, forwarded)
	}
	in := filepath.Join(t.TempDir(), "bodies.txt")
	if err := os.WriteFile(in, []byte(lines.String()), 0o600); err != nil {
		t.Fatal(err)
	}
	msg, err := exec.Command(python, "-c", pythonScanJudge, in).CombinedOutput()
	if err != nil {
		t.Fatalf("%s: %v\n%s", python, err, msg)
	}
	if !strings.HasSuffix(strings.TrimSpace(string(msg)), "bad 0") {
		t.Fatalf("the worker disagrees:\n%s", msg)
	}
	t.Logf("%d rejected, %d forwarded: %s", rejected, forwarded, bytes.TrimSpace(msg))
}
