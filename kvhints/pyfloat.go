package kvhints

import (
	"math"
	"strconv"
	"unsafe"
)

// This file holds float literals as the worker reads and writes them
// (docs/spec.md, "Compact size"): the worker measures an admitted envelope
// after json.loads and json.dumps, so a float literal counts, and is
// forwarded, as Python's float.__repr__ writes the float it reads as.

// shortFloat is the longest float literal handed to strconv.ParseFloat as it
// is; a longer one goes through parseLongFloat. ParseFloat misreads some
// long literals: when its fast path cannot decide, it keeps 800 digits and
// drops the digits after them from the position of the decimal point too
// (851 digits then e-1100 read as about 1e-301, not 1e-250), and it stops
// accumulating an exponent at 10,000, which thousands of mantissa digits
// can bring back into range ("0.000…001e10005"). A literal of at most 700
// bytes has fewer than 800 digits, and an exponent of 10,000 or more puts
// its value far out of range either way.
const shortFloat = 700

// floatDigits is how many significant digits parseLongFloat keeps. A
// float64 halfway between two neighbours has at most 767 significant
// digits, so a value cut after 800 digits, plus one non-zero digit when
// anything non-zero was cut, rounds as the whole value does.
const floatDigits = 800

// parseFloatLit returns the float64 Python's float() reads the valid JSON
// number literal lit as (one with a fraction or an exponent): correctly
// rounded, ±Inf past the largest double, ±0 below the smallest. scratch
// holds the shortened literal of a long one.
func parseFloatLit(lit []byte, scratch *[floatDigits + 32]byte) float64 {
	if len(lit) > shortFloat {
		return parseLongFloat(lit, scratch)
	}
	return parseFloatText(lit)
}

// parseFloatText is strconv.ParseFloat on lit without copying it: ParseFloat
// keeps no reference to its argument (an error carries a copy), so a
// request does not allocate for its floats. A range error is the
// infinity or zero it comes with, as Python reads it.
func parseFloatText(lit []byte) float64 {
	f, _ := strconv.ParseFloat(unsafe.String(unsafe.SliceData(lit), len(lit)), 64)
	return f
}

// parseLongFloat is parseFloatLit for a literal longer than shortFloat. It
// rewrites the literal as -0.DDDe±E, with at most floatDigits significant
// digits D (and a sticky 1 after them when a non-zero digit was cut) and
// the exponent E computed without saturating, and parses that.
func parseLongFloat(lit []byte, scratch *[floatDigits + 32]byte) float64 {
	neg := lit[0] == '-'
	buf := append(scratch[:0], '-', '0', '.')
	if !neg {
		buf = buf[1:]
	}
	i := 0
	if neg {
		i = 1
	}
	// The value is 0.D × 10^exp10 once the mantissa is read.
	exp10, nd := 0, 0
	point, nonzero, sticky := false, false, false
	for ; i < len(lit) && lit[i] != 'e' && lit[i] != 'E'; i++ {
		c := lit[i]
		switch {
		case c == '.':
			point = true
			continue
		case !nonzero && c == '0':
			if point {
				exp10--
			}
			continue
		}
		nonzero = true
		if !point {
			exp10++
		}
		if nd < floatDigits {
			buf = append(buf, c)
			nd++
		} else if c != '0' {
			sticky = true
		}
	}
	if !nonzero {
		if neg {
			return math.Copysign(0, -1)
		}
		return 0
	}
	if i < len(lit) {
		i++ // the e
		esign := 1
		switch lit[i] {
		case '-':
			esign = -1
			i++
		case '+':
			i++
		}
		e := 0
		for ; i < len(lit); i++ {
			if e < 1<<40 { // past any literal's exponent10: stays decisive
				e = e*10 + int(lit[i]-'0')
			}
		}
		exp10 += esign * e
	}
	switch {
	case exp10 > 310: // at least 10^309
		return math.Inf(1 - 2*boolInt(neg))
	case exp10 < -330: // below half the smallest subnormal
		return math.Copysign(0, float64(1-2*boolInt(neg)))
	}
	if sticky {
		buf = append(buf, '1')
	}
	buf = append(buf, 'e')
	buf = strconv.AppendInt(buf, int64(exp10), 10)
	return parseFloatText(buf)
}

func boolInt(b bool) int {
	if b {
		return 1
	}
	return 0
}

// appendPyFloat appends f as Python's json.dumps writes a float:
// float.__repr__ (the shortest digits that read back as f, in fixed
// notation with ".0" on an integral value when the decimal exponent x is
// in -4 ≤ x < 16, else in scientific notation with a signed exponent of at
// least two digits: 1e+16, 1e-05), and Infinity or -Infinity for the
// infinities. NaN never comes: no number literal reads as NaN.
func appendPyFloat(dst []byte, f float64) []byte {
	switch {
	case math.IsInf(f, 1):
		return append(dst, "Infinity"...)
	case math.IsInf(f, -1):
		return append(dst, "-Infinity"...)
	case f == 0:
		if math.Signbit(f) {
			return append(dst, "-0.0"...)
		}
		return append(dst, "0.0"...)
	}
	// Go's shortest digits are Python's: both are the shortest string
	// that rounds to f, the closest to f among those.
	var buf [32]byte
	s := strconv.AppendFloat(buf[:0], f, 'e', -1, 64) // -d.ddde±dd
	if s[0] == '-' {
		dst = append(dst, '-')
		s = s[1:]
	}
	e := 0
	for s[e] != 'e' {
		e++
	}
	first, rest := s[0], s[min(2, e):e] // the digits: first, then rest
	x := 0
	for _, c := range s[e+2:] {
		x = x*10 + int(c-'0')
	}
	if s[e+1] == '-' {
		x = -x
	}
	switch {
	case x < -4 || x >= 16:
		dst = append(dst, first)
		if len(rest) > 0 {
			dst = append(dst, '.')
			dst = append(dst, rest...)
		}
		dst = append(dst, 'e')
		if x < 0 {
			dst = append(dst, '-')
			x = -x
		} else {
			dst = append(dst, '+')
		}
		if x < 10 {
			dst = append(dst, '0')
		}
		return strconv.AppendInt(dst, int64(x), 10)
	case x < 0:
		dst = append(dst, '0', '.')
		for range -x - 1 {
			dst = append(dst, '0')
		}
		dst = append(dst, first)
		return append(dst, rest...)
	}
	// 0 ≤ x < 16: x digits of rest go before the point.
	dst = append(dst, first)
	if len(rest) > x {
		dst = append(dst, rest[:x]...)
		dst = append(dst, '.')
		return append(dst, rest[x:]...)
	}
	dst = append(dst, rest...)
	for range x - len(rest) {
		dst = append(dst, '0')
	}
	return append(dst, '.', '0')
}
