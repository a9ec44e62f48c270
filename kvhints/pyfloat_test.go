package kvhints

import (
	"math"
	"math/big"
	"regexp"
	"strconv"
	"strings"
	"testing"
)

// TestAppendPyFloat checks float literals against what Python 3.11 prints
// for json.dumps(json.loads(literal)).
func TestAppendPyFloat(t *testing.T) {
	for _, c := range []struct{ lit, want string }{
		{"1.0", "1.0"}, {"1E2", "100.0"}, {"1e15", "1000000000000000.0"}, {"9999999999999998.0", "9999999999999998.0"},
		{"1e16", "1e+16"}, {"1234567890123456.0", "1234567890123456.0"}, {"12345678901234567.0", "1.2345678901234568e+16"},
		{"1e22", "1e+22"}, {"0.0001", "0.0001"}, {"1e-4", "0.0001"}, {"0.00001", "1e-05"}, {"-2.5e-5", "-2.5e-05"},
		{"0.00012345", "0.00012345"}, {"123.456", "123.456"}, {"0.10", "0.1"}, {"2.50000", "2.5"}, {"-0.0", "-0.0"},
		{"-0e5", "-0.0"}, {"0e999999", "0.0"}, {"1e-400", "0.0"}, {"-1e-400", "-0.0"}, {"1e400", "Infinity"},
		{"-1e400", "-Infinity"}, {"1.7976931348623157e308", "1.7976931348623157e+308"}, {"5e-324", "5e-324"},
		{"2.4703282292062327e-324", "0.0"}, {"2.4703282292062328e-324", "5e-324"}, {"2.5E+300", "2.5e+300"},
		{"18446744073709551616.0", "1.8446744073709552e+19"}, {"1e-7", "1e-07"}, {"1e100", "1e+100"},
		{"3." + strings.Repeat("1415926535", 10), "3.1415926535141594"},
		{"0." + strings.Repeat("0", 2000) + "1e2001", "1.0"},
		{"1" + strings.Repeat("0", 400) + ".0", "Infinity"},
		{"0." + strings.Repeat("0", 20000) + "15e20005", "15000.0"},
		// Past 800 digits strconv.ParseFloat alone loses the place of
		// the point.
		{strings.Repeat("7", 851) + "e-1100", "7.777777777777778e-250"},
		{"264713047117584435887552995496632290785645082923011241786866" + strings.Repeat("0", 10) + strings.Repeat("3", 781) + "e-1100",
			"2.6471304711758442e-250"},
		{strings.Repeat("7", 851) + ".5e-1100", "7.777777777777778e-250"},
		{"1" + strings.Repeat("0", 750) + "e-700", "1e+50"},
		{"-0." + strings.Repeat("0", 20000) + "15e-20005", "-0.0"},
	} {
		var scratch [floatDigits + 32]byte
		if got := string(appendPyFloat(nil, parseFloatLit([]byte(c.lit), &scratch))); got != c.want {
			t.Errorf("%.40s: %s, want %s", c.lit, got, c.want)
		}
	}
}

// pyShape is what float.__repr__ writes for a finite float: fixed notation
// with at least one digit after the point, or one digit, an optional
// fraction and a signed exponent of two or three digits.
var pyShape = regexp.MustCompile(`^-?(?:(0|[1-9][0-9]*)\.([0-9]+)|([1-9])(?:\.([0-9]*[1-9]))?e([+-])(0[0-9]|[1-9][0-9]{1,2}))$`)

// checkPyFloat holds appendPyFloat(f) to its promises: it reads back as f,
// it has the fewest significant digits that do, and it is shaped as
// Python's repr: scientific notation exactly when the decimal exponent is
// below -4 or at least 16, no needless zeros.
func checkPyFloat(t *testing.T, f float64) {
	t.Helper()
	if math.IsNaN(f) {
		return // no literal reads as NaN
	}
	s := string(appendPyFloat(nil, f))
	if math.IsInf(f, 0) {
		if want := map[bool]string{false: "Infinity", true: "-Infinity"}[f < 0]; s != want {
			t.Fatalf("%v: %s", f, s)
		}
		return
	}
	back, err := strconv.ParseFloat(s, 64)
	if err != nil || math.Float64bits(back) != math.Float64bits(f) {
		t.Fatalf("%b: %s reads back as %v (%v)", f, s, back, err)
	}
	m := pyShape.FindStringSubmatch(s)
	if m == nil {
		t.Fatalf("%b: %s is not shaped as Python's repr", f, s)
	}
	shortest := strconv.FormatFloat(f, 'e', -1, 64)
	x, _ := strconv.Atoi(shortest[strings.IndexByte(shortest, 'e')+1:])
	digits := strings.TrimLeft(strings.ReplaceAll(strings.TrimLeft(shortest[:strings.IndexByte(shortest, 'e')], "-"), ".", ""), "0")
	if f != 0 && len(digits) > 1 {
		// One digit fewer does not read back: the digits are the fewest.
		fewer, _ := strconv.ParseFloat(strconv.FormatFloat(f, 'e', len(digits)-2, 64), 64)
		if fewer == f {
			t.Fatalf("%b: %d digits are not the fewest", f, len(digits))
		}
	}
	if scientific := m[3] != ""; scientific != (f != 0 && (x < -4 || x >= 16)) {
		t.Fatalf("%b: %s, decimal exponent %d", f, s, x)
	}
	if m[3] == "" {
		// Fixed: the significant digits, with zeros only where the point
		// needs them and a single 0 after an integral value.
		frac := m[2]
		if strings.HasSuffix(frac, "0") && frac != "0" {
			t.Fatalf("%b: %s has trailing zeros", f, s)
		}
		if sig := strings.TrimRight(strings.TrimLeft(m[1]+frac, "0"), "0"); f != 0 && sig != strings.TrimRight(digits, "0") {
			t.Fatalf("%b: %s holds the digits %s, want %s", f, s, sig, digits)
		}
	}
}

// FuzzPythonFloat checks appendPyFloat on any float64 (checkPyFloat), and
// parseFloatLit on any JSON float literal against math/big's exact
// rounding, which is how Python's float() reads one.
func FuzzPythonFloat(f *testing.F) {
	for _, s := range []string{"1e15", "1e16", "9999999999999998.0", "0.0001", "1e-5", "-0.0", "5e-324", "1.7976931348623157e308",
		"2.4703282292062328e-324", "1.7976931348623159e308", "0." + strings.Repeat("0", 1200) + "7e1200", "123456789." + strings.Repeat("9", 1100)} {
		v, _ := strconv.ParseFloat(s, 64)
		f.Add(math.Float64bits(v), s)
	}
	f.Fuzz(func(t *testing.T, bits uint64, lit string) {
		checkPyFloat(t, math.Float64frombits(bits))
		b := []byte(lit)
		if len(b) == 0 {
			return
		}
		end, kind, err := scanNumber(b, 0)
		if err != nil || end != len(b) || kind != numFloat {
			return
		}
		if e := strings.IndexAny(lit, "eE"); e >= 0 {
			if x, err := strconv.Atoi(strings.TrimPrefix(lit[e+1:], "+")); err != nil || x > 5000 || x < -5000 {
				return // big.Rat would hold 10^x
			}
		}
		var scratch [floatDigits + 32]byte
		got := parseFloatLit(b, &scratch)
		r, ok := new(big.Rat).SetString(lit)
		if !ok {
			t.Fatalf("big.Rat cannot read %q", lit)
		}
		want, _ := r.Float64()
		if r.Sign() == 0 && lit[0] == '-' {
			want = math.Copysign(0, -1)
		} else if want == 0 && r.Sign() < 0 {
			want = math.Copysign(0, -1) // underflow keeps the sign
		}
		if math.Float64bits(got) != math.Float64bits(want) {
			t.Fatalf("%.60q reads as %v, want %v", lit, got, want)
		}
		checkPyFloat(t, got)
	})
}
