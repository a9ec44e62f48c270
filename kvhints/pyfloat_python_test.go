//go:build !wasm

package kvhints

import (
	"bufio"
	"math"
	"math/big"
	"math/rand/v2"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	"github.com/kvgate/kvgate/internal/envoytest"
)

// pythonFloats is run once by TestFloatsAsPython: each line of the input
// is "h HEX" (a float64 by its bits, float.fromhex) or "d LITERAL" (a JSON
// number, json.loads), and each line of the output is json.dumps of it,
// what the worker writes back before it measures an envelope.
const pythonFloats = `
import json, sys
with open(sys.argv[1]) as src, open(sys.argv[2], "w") as dst:
    for line in src:
        kind, text = line.split()
        v = float.fromhex(text) if kind == "h" else json.loads(text)
        assert isinstance(v, float), text[:40]
        dst.write(json.dumps(v) + "\n")
`

// TestFloatsAsPython compares appendPyFloat and parseFloatLit with
// Python's own json.dumps and json.loads on many floats at once: random bit
// patterns, the neighbours of powers of ten and of the bounds where repr
// changes notation, and decimal literals at and around the midpoints
// between neighbouring doubles (where rounding decides), long ones
// included. It needs Python ($KVGATE_PYTHON): skipped without it, failed
// under CI=true.
func TestFloatsAsPython(t *testing.T) {
	python := envoytest.Python(t)
	cases := floatCases()
	dir := t.TempDir()
	in, out := filepath.Join(dir, "in.txt"), filepath.Join(dir, "out.txt")
	var b strings.Builder
	for _, c := range cases {
		b.WriteString(c.kind + " " + c.text + "\n")
	}
	if err := os.WriteFile(in, []byte(b.String()), 0o600); err != nil {
		t.Fatal(err)
	}
	if msg, err := exec.Command(python, "-c", pythonFloats, in, out).CombinedOutput(); err != nil {
		t.Fatalf("%s: %v\n%s", python, err, msg)
	}
	f, err := os.Open(out)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	var scratch [floatDigits + 32]byte
	n, bad := 0, 0
	for ; sc.Scan(); n++ {
		if n >= len(cases) {
			t.Fatalf("Python wrote more than %d lines", len(cases))
		}
		c := cases[n]
		v := c.f
		if c.kind == "d" {
			v = parseFloatLit([]byte(c.text), &scratch)
		}
		if got, want := string(appendPyFloat(nil, v)), sc.Text(); got != want {
			if bad++; bad <= 10 {
				t.Errorf("%s %.60s: %s, Python writes %s", c.kind, c.text, got, want)
			}
		}
	}
	if err := sc.Err(); err != nil || n != len(cases) {
		t.Fatalf("read %d of %d lines from Python: %v", n, len(cases), err)
	}
	t.Logf("%d floats written as Python writes them, %d differ", n, bad)
}

// floatCase is one line for Python: kind "h" with the float f as hex, or
// kind "d" with a decimal literal.
type floatCase struct {
	kind, text string
	f          float64
}

// floatCases generates the floats TestFloatsAsPython compares,
// deterministically.
func floatCases() []floatCase {
	rng := rand.New(rand.NewPCG(7, 11))
	var cs []floatCase
	bitsOf := func(f float64) {
		h := strconv.FormatFloat(f, 'x', -1, 64)
		if math.IsInf(f, 0) {
			h = strings.ToLower(h[:1]) + "inf"
		}
		cs = append(cs, floatCase{kind: "h", text: h, f: f})
	}
	lit := func(s string) {
		if end, kind, err := scanNumber([]byte(s), 0); err != nil || end != len(s) || kind != numFloat {
			panic("not a JSON float literal: " + s)
		}
		cs = append(cs, floatCase{kind: "d", text: s})
	}
	// Random bit patterns, and random floats of every magnitude.
	for range 60000 {
		if f := math.Float64frombits(rng.Uint64()); !math.IsNaN(f) {
			bitsOf(f)
		}
	}
	for range 20000 {
		bitsOf(float64(rng.Int64N(1<<53)) * math.Pow(10, float64(rng.IntN(60)-30)))
	}
	for _, f := range []float64{0, math.Copysign(0, -1), math.Inf(1), math.Inf(-1), math.MaxFloat64, math.SmallestNonzeroFloat64,
		0x1p-1022, 1 << 53, 1<<53 + 2, 1 << 63, 1 << 64} {
		bitsOf(f)
		bitsOf(-f)
	}
	// Every power of ten a double reaches, its neighbours, and the
	// neighbours of the bounds where repr changes notation.
	for k := -330; k <= 310; k++ {
		p, _ := strconv.ParseFloat("1e"+strconv.Itoa(k), 64)
		for _, f := range []float64{p, math.Nextafter(p, 0), math.Nextafter(p, math.Inf(1)), 9.5 * p / 10, 1.5 * p} {
			bitsOf(f)
		}
		e := strconv.Itoa(k)
		for _, s := range []string{"1e", "9.999999999999999e", "9.9999999999999999e", "1.0000000000000001e", "-5.0e", "2.5E+"} {
			if s == "2.5E+" && k < 0 {
				continue
			}
			lit(s + strings.TrimPrefix(e, map[bool]string{true: "", false: "-"}[s != "2.5E+"]))
		}
	}
	// Decimal literals exactly at, just above and just below the midpoint
	// of a double and its next one up: round-half-even decides at the
	// midpoint. Subnormal midpoints have over a thousand digits, which
	// parseLongFloat reads.
	edges := []float64{math.SmallestNonzeroFloat64, 3 * math.SmallestNonzeroFloat64, 0x1p-1022, 1e-5, 1e-4, 0.1, 1, 1e15,
		1e16, 1 << 53, 1e22, 1e23, math.Nextafter(math.MaxFloat64, 0), math.MaxFloat64}
	for range 300 {
		edges = append(edges, math.Float64frombits(rng.Uint64()&^(1<<63)))
	}
	for _, f := range edges {
		if math.IsNaN(f) || math.IsInf(f, 0) {
			continue
		}
		lo := new(big.Rat).SetFloat64(f)
		var hi *big.Rat
		if next := math.Nextafter(f, math.Inf(1)); math.IsInf(next, 0) {
			// Past the largest double the next step would be 2^1024.
			hi = new(big.Rat).SetInt(new(big.Int).Lsh(big.NewInt(1), 1024))
		} else {
			hi = new(big.Rat).SetFloat64(next)
		}
		mid := new(big.Rat).Add(lo, hi)
		mid.Quo(mid, big.NewRat(2, 1))
		const places = 1100 // a midpoint's binary fraction ends within 1075 decimal places
		exact := mid.FloatString(places)
		tiny := new(big.Rat).SetFrac(big.NewInt(1), new(big.Int).Exp(big.NewInt(10), big.NewInt(places+5), nil))
		below := new(big.Rat).Sub(mid, tiny).FloatString(places + 5)
		lit(exact)
		lit(exact + "0001")
		lit(below)
		lit("-" + exact)
		// The same value with its point moved into the exponent.
		lit(strings.TrimLeft(strings.Replace(exact, ".", "", 1), "0") + "e-" + strconv.Itoa(places))
	}
	// Long literals: many digits, compensating exponents, zeros.
	for i := range 200 {
		n := 900 + rng.IntN(2500)
		d := make([]byte, n)
		for j := range d {
			d[j] = byte('0' + rng.IntN(10))
		}
		d[0] = byte('1' + rng.IntN(9))
		e := rng.IntN(700) - 350 - n*(i%2)
		lit(string(d[:1]) + "." + string(d[1:]) + "e" + strconv.Itoa(e))
		lit("0." + strings.Repeat("0", n) + string(d[:20]) + "e" + strconv.Itoa(n+rng.IntN(40)-20))
	}
	for _, s := range []string{"0." + strings.Repeat("0", 20000) + "15e20005", "-0." + strings.Repeat("0", 12000) + "1e11700",
		strings.Repeat("9", 5000) + ".5e-4700", "1" + strings.Repeat("0", 400) + ".0", "0." + strings.Repeat("0", 5000) + "e99999",
		"1.0", "1E2", "1e+2", "-0.0", "0e0", "-0E-0", "0.10", "1e15", "1e16", "1234567890123456.0", "12345678901234567.0"} {
		lit(s)
	}
	return cs
}
