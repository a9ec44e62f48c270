// Package instrument rewrites a WebAssembly module so that a host can stop
// it when it runs too long, cheaply.
//
// wazero can stop a running guest when its context is done
// (RuntimeConfig.WithCloseOnContextDone), but that costs on every call: a
// goroutine per guest call, and an exit from native code into Go at the
// head of every loop iteration to look at the module's state. For a filter
// that scans a body that is most of its run time (about 3x the guest's own
// cost on a 4 KiB body, +20 ms on 4 MiB).
//
// Instead the host rewrites the module once, before compiling it:
// Instrument adds a mutable i32 global (a tick counter) and imports one host
// function, Module.Func, and at every function entry and at the head of
// every loop (and before every tail call) it inserts
//
//	global.get $ticks  i32.const 1  i32.add  global.set $ticks
//	global.get $ticks  i32.const mask  i32.and  i32.eqz
//	if  call $check  end
//
// so that every Every ticks the guest calls into Go. Any run of unbounded
// length passes through function entries or loop heads, so the check comes
// at least every Every of them. The host's check traps the guest when its
// call deadline has passed (the instance is then replaced like any other
// that trapped), and being Go code it is also a point where the goroutine
// can be preempted: native code never is, and a guest that never left it
// would block the Go runtime's stop-the-world phases.
//
// Adding the import shifts the index of every function the module defines
// by one; the rewrite renumbers calls, ref.func, exports, the start
// function, element segments and the name section.
//
// The rewrite is an optimisation only: a module it cannot parse (an opcode
// or a section layout this package does not know) or whose rewritten form
// does not compile is run with wazero's own context-based termination
// instead. The input is untrusted: a malformed module is an error, never a
// panic.
package instrument

import (
	"encoding/binary"
	"errors"
	"fmt"
)

// The function the rewritten module imports, of type () -> (), and how
// often it calls it.
const (
	Module = "kvgate.host"
	Func   = "check_deadline"
	// Every is the number of ticks (function entries, loop iterations,
	// tail calls) between two calls of the check.
	Every = mask + 1

	mask = 1<<14 - 1
)

// Instrument returns module with interrupt checks, or an error saying why
// it cannot be rewritten.
func Instrument(module []byte) ([]byte, error) {
	if len(module) < 8 || string(module[:4]) != "\x00asm" || binary.LittleEndian.Uint32(module[4:8]) != 1 {
		return nil, errors.New("not a WebAssembly 1.0 binary module")
	}
	r := &wreader{b: module, p: 8}
	type section struct {
		id   byte
		body []byte
	}
	var secs []section
	var numTypes, importedFuncs, importedGlobals, definedGlobals uint32
	have := map[byte]bool{}
	for r.p < len(r.b) {
		id := r.byte()
		body := r.bytes(int(r.u32()))
		if r.err != nil {
			return nil, r.err
		}
		if id != 0 && have[id] {
			return nil, fmt.Errorf("section %d twice", id)
		}
		have[id] = true
		secs = append(secs, section{id, body})
		sr := &wreader{b: body}
		switch id {
		case 1:
			numTypes = sr.u32()
		case 2:
			var err error
			if importedFuncs, importedGlobals, err = scanImports(body); err != nil {
				return nil, fmt.Errorf("import section: %w", err)
			}
		case 6:
			definedGlobals = sr.u32()
		}
		if sr.err != nil {
			return nil, sr.err
		}
	}
	ix := &renumber{from: importedFuncs}
	check := importedFuncs // the new import's function index
	ticks := importedGlobals + definedGlobals
	var probe []byte
	probe = appendU32(append(probe, 0x23), ticks) // global.get $ticks
	probe = append(probe, 0x41, 0x01, 0x6A)       // i32.const 1, i32.add
	probe = appendU32(append(probe, 0x24), ticks) // global.set $ticks
	probe = appendU32(append(probe, 0x23), ticks) // global.get $ticks
	probe = appendS32(append(probe, 0x41), mask)  // i32.const mask
	probe = append(probe, 0x71, 0x45, 0x04, 0x40) // i32.and, i32.eqz, if
	probe = appendU32(append(probe, 0x10), check) // call $check
	probe = append(probe, 0x0B)                   // end

	newType := []byte{0x60, 0x00, 0x00} // () -> ()
	var newImport []byte
	newImport = appendName(newImport, Module)
	newImport = appendName(newImport, Func)
	newImport = appendU32(append(newImport, 0x00), numTypes)
	newGlobal := []byte{0x7F, 0x01, 0x41, 0x00, 0x0B} // mut i32 = i32.const 0

	out := make([]byte, 0, len(module)+len(module)/8+64)
	out = append(out, module[:8]...)
	emit := func(id byte, body []byte) {
		out = append(out, id)
		out = appendU32(out, uint32(len(body)))
		out = append(out, body...)
	}
	// Known sections come in a fixed order (custom ones anywhere); missing
	// ones that the rewrite needs are created in place.
	order := map[byte]int{1: 1, 2: 2, 3: 3, 4: 4, 5: 5, 13: 6, 6: 7, 7: 8, 8: 9, 9: 10, 12: 11, 10: 12, 11: 13}
	create := []struct {
		id   byte
		body []byte
	}{{1, append(appendU32(nil, 1), newType...)}, {2, append(appendU32(nil, 1), newImport...)}, {6, append(appendU32(nil, 1), newGlobal...)}}
	last := 0
	for _, s := range secs {
		o, known := order[s.id]
		if s.id != 0 && !known {
			return nil, fmt.Errorf("unknown section %d", s.id)
		}
		if s.id != 0 {
			for _, c := range create {
				if !have[c.id] && last < order[c.id] && o > order[c.id] {
					emit(c.id, c.body)
					have[c.id] = true
				}
			}
			last = o
		}
		var b []byte
		var err error
		switch s.id {
		case 0:
			sr := &wreader{b: s.body}
			name := string(sr.bytes(int(sr.u32())))
			switch {
			case sr.err != nil:
				return nil, sr.err
			case len(name) >= 7 && name[:7] == ".debug_":
				continue // DWARF refers to code offsets, which the rewrite moves
			case name == "name":
				b, err = ix.nameSection(s.body, sr.p)
			default:
				b = s.body
			}
		case 1:
			b, err = appendVecEntry(s.body, newType)
		case 2:
			for _, im := range importNames(s.body) {
				if im == Module {
					return nil, fmt.Errorf("the module already imports from %q", Module)
				}
			}
			b, err = appendVecEntry(s.body, newImport)
		case 6:
			b, err = ix.globals(s.body, newGlobal)
		case 7:
			b, err = ix.exports(s.body)
		case 8:
			sr := &wreader{b: s.body}
			f := sr.u32()
			b, err = appendU32(nil, ix.fn(f)), sr.err
		case 9:
			b, err = ix.elements(s.body)
		case 10:
			b, err = ix.code(s.body, probe)
		default:
			b = s.body
		}
		if err != nil {
			return nil, fmt.Errorf("section %d: %w", s.id, err)
		}
		emit(s.id, b)
	}
	if !have[1] || !have[2] || !have[6] {
		return nil, errors.New("cannot place the new sections")
	}
	return out, nil
}

// renumber shifts defined functions' indices past the new import.
type renumber struct{ from uint32 }

func (x *renumber) fn(i uint32) uint32 {
	if i >= x.from {
		return i + 1
	}
	return i
}

// appendVecEntry adds one entry to a section that is a vector.
func appendVecEntry(body, entry []byte) ([]byte, error) {
	r := &wreader{b: body}
	n := r.u32()
	if r.err != nil {
		return nil, r.err
	}
	b := appendU32(make([]byte, 0, len(body)+len(entry)+5), n+1)
	b = append(b, body[r.p:]...)
	return append(b, entry...), nil
}

func scanImports(body []byte) (funcs, globals uint32, err error) {
	r := &wreader{b: body}
	n := r.u32()
	for i := uint32(0); i < n && r.err == nil; i++ {
		r.bytes(int(r.u32())) // module
		r.bytes(int(r.u32())) // name
		switch kind := r.byte(); kind {
		case 0x00: // func: type index
			r.u32()
			funcs++
		case 0x01: // table: reftype, limits
			r.byte()
			r.limits()
		case 0x02: // memory: limits
			r.limits()
		case 0x03: // global: valtype, mut
			r.byte()
			r.byte()
			globals++
		case 0x04: // tag: attribute, type index
			r.byte()
			r.u32()
		default:
			return 0, 0, fmt.Errorf("unknown import kind %#x", kind)
		}
	}
	if r.err == nil && r.p != len(r.b) {
		r.err = errors.New("trailing bytes")
	}
	return funcs, globals, r.err
}

func importNames(body []byte) []string {
	r := &wreader{b: body}
	n := r.u32()
	var mods []string
	for i := uint32(0); i < n && r.err == nil; i++ {
		mods = append(mods, string(r.bytes(int(r.u32()))))
		r.bytes(int(r.u32()))
		switch r.byte() {
		case 0x00:
			r.u32()
		case 0x01:
			r.byte()
			r.limits()
		case 0x02:
			r.limits()
		case 0x03:
			r.byte()
			r.byte()
		case 0x04:
			r.byte()
			r.u32()
		}
	}
	return mods
}

// constExpr copies a constant expression, renumbering ref.func.
func (x *renumber) constExpr(out []byte, r *wreader) []byte {
	for r.err == nil {
		start := r.p
		switch op := r.byte(); op {
		case 0x0B:
			return append(out, 0x0B)
		case 0x41, 0x42:
			r.s64()
		case 0x43:
			r.bytes(4)
		case 0x44:
			r.bytes(8)
		case 0x23:
			r.u32()
		case 0xD0:
			r.s64()
		case 0xD2:
			out = appendU32(append(out, 0xD2), x.fn(r.u32()))
			continue
		case 0x6A, 0x6B, 0x6C, 0x7C, 0x7D, 0x7E:
		case 0xFD:
			if r.u32() != 12 {
				r.fail(errors.New("unknown constant expression"))
			}
			r.bytes(16)
		default:
			r.fail(fmt.Errorf("unknown constant expression opcode %#x", op))
		}
		out = append(out, r.b[start:r.p]...)
	}
	return out
}

func (x *renumber) globals(body, newGlobal []byte) ([]byte, error) {
	r := &wreader{b: body}
	n := r.u32()
	out := appendU32(nil, n+1)
	for i := uint32(0); i < n && r.err == nil; i++ {
		out = append(out, r.bytes(2)...) // valtype, mut
		out = x.constExpr(out, r)
	}
	if r.err == nil && r.p != len(r.b) {
		r.err = errors.New("trailing bytes")
	}
	return append(out, newGlobal...), r.err
}

func (x *renumber) exports(body []byte) ([]byte, error) {
	r := &wreader{b: body}
	n := r.u32()
	out := appendU32(nil, n)
	for i := uint32(0); i < n && r.err == nil; i++ {
		out = appendName(out, string(r.bytes(int(r.u32()))))
		kind := r.byte()
		idx := r.u32()
		if kind == 0x00 {
			idx = x.fn(idx)
		}
		out = appendU32(append(out, kind), idx)
	}
	if r.err == nil && r.p != len(r.b) {
		r.err = errors.New("trailing bytes")
	}
	return out, r.err
}

func (x *renumber) elements(body []byte) ([]byte, error) {
	r := &wreader{b: body}
	n := r.u32()
	out := appendU32(nil, n)
	for i := uint32(0); i < n && r.err == nil; i++ {
		flags := r.u32()
		if flags > 7 {
			return nil, fmt.Errorf("unknown element segment flags %d", flags)
		}
		out = appendU32(out, flags)
		if flags&2 != 0 && flags&1 == 0 { // explicit table index
			out = appendU32(out, r.u32())
		}
		if flags&1 == 0 { // active: offset
			out = x.constExpr(out, r)
		}
		if flags&3 != 0 { // elemkind or reftype
			out = append(out, r.byte())
		}
		m := r.u32()
		out = appendU32(out, m)
		for j := uint32(0); j < m && r.err == nil; j++ {
			if flags&4 == 0 {
				out = appendU32(out, x.fn(r.u32()))
			} else {
				out = x.constExpr(out, r)
			}
		}
	}
	if r.err == nil && r.p != len(r.b) {
		r.err = errors.New("trailing bytes")
	}
	return out, r.err
}

// nameSection renumbers the function-keyed subsections (1 functions,
// 2 locals, 3 labels) of the "name" custom section and drops other ones.
func (x *renumber) nameSection(body []byte, p int) ([]byte, error) {
	out := append([]byte(nil), body[:p]...)
	r := &wreader{b: body, p: p}
	for r.p < len(r.b) && r.err == nil {
		id := r.byte()
		sub := r.bytes(int(r.u32()))
		if id < 1 || id > 3 {
			if id == 0 { // module name
				out = appendU32(append(out, 0), uint32(len(sub)))
				out = append(out, sub...)
			}
			continue
		}
		sr := &wreader{b: sub}
		n := sr.u32()
		nb := appendU32(nil, n)
		for i := uint32(0); i < n && sr.err == nil; i++ {
			nb = appendU32(nb, x.fn(sr.u32()))
			if id == 1 {
				nb = appendName(nb, string(sr.bytes(int(sr.u32()))))
				continue
			}
			m := sr.u32()
			nb = appendU32(nb, m)
			for j := uint32(0); j < m && sr.err == nil; j++ {
				nb = appendU32(nb, sr.u32())
				nb = appendName(nb, string(sr.bytes(int(sr.u32()))))
			}
		}
		if sr.err != nil {
			return nil, sr.err
		}
		out = appendU32(append(out, id), uint32(len(nb)))
		out = append(out, nb...)
	}
	return out, r.err
}

// code rewrites every function body of the code section.
func (x *renumber) code(body, probe []byte) ([]byte, error) {
	r := &wreader{b: body}
	n := r.u32()
	out := appendU32(make([]byte, 0, len(body)+len(body)/8), n)
	var fb []byte
	for i := uint32(0); i < n; i++ {
		code := r.bytes(int(r.u32()))
		if r.err != nil {
			return nil, r.err
		}
		var err error
		fb, err = x.function(fb[:0], code, probe)
		if err != nil {
			return nil, fmt.Errorf("function %d: %w", i, err)
		}
		out = appendU32(out, uint32(len(fb)))
		out = append(out, fb...)
	}
	if r.p != len(r.b) {
		return nil, errors.New("trailing bytes")
	}
	return out, nil
}

// function copies one function body with the probe at its entry, after
// every loop header and before every tail call, and function indices
// renumbered. It decodes every instruction (MVP, sign extension,
// saturating conversions, bulk memory, reference types, multi-value, SIMD,
// threads, tail calls, exceptions) so that it never mistakes an immediate
// for an opcode; anything else is an error.
var errLocalGroups = errors.New("more local declarations than the body has bytes for")

func (x *renumber) function(out, code, probe []byte) ([]byte, error) {
	r := &wreader{b: code}
	groups := r.u32()
	// Each group takes at least two bytes: a count read from the module
	// must not set the work (a 2^31 count in an 80-byte body).
	if r.err == nil && uint64(groups)*2 > uint64(len(code)-r.p) {
		return nil, errLocalGroups
	}
	for i := uint32(0); i < groups && r.err == nil; i++ {
		r.u32()
		r.byte()
	}
	if r.err != nil {
		return nil, r.err
	}
	out = append(out, code[:r.p]...)
	out = append(out, probe...)
	for r.p < len(r.b) && r.err == nil {
		start := r.p
		op := r.byte()
		switch {
		case op == 0x03: // loop bt
			r.s64()
			out = append(out, code[start:r.p]...)
			out = append(out, probe...)
			continue
		case op == 0x10 || op == 0x12 || op == 0xD2: // call, return_call, ref.func
			if op == 0x12 {
				out = append(out, probe...)
			}
			out = appendU32(append(out, op), x.fn(r.u32()))
			continue
		case op == 0x13: // return_call_indirect
			out = append(out, probe...)
			r.u32()
			r.u32()
		case op == 0x00, op == 0x01, op == 0x05, op == 0x0A, op == 0x0B, op == 0x0F, op == 0x19,
			op == 0x1A, op == 0x1B, op == 0xD1, op >= 0x45 && op <= 0xC4:
			// no immediates
		case op == 0x02, op == 0x04, op == 0x06: // block, if, try: blocktype
			r.s64()
		case op == 0x07, op == 0x08, op == 0x09, op == 0x18, op == 0x0C, op == 0x0D,
			op >= 0x20 && op <= 0x26, op == 0x3F, op == 0x40:
			r.u32()
		case op == 0x0E: // br_table
			n := r.u32()
			for j := uint32(0); j <= n && r.err == nil; j++ {
				r.u32()
			}
		case op == 0x11: // call_indirect type table
			r.u32()
			r.u32()
		case op == 0x1C: // select t*
			n := r.u32()
			for j := uint32(0); j < n && r.err == nil; j++ {
				r.byte()
			}
		case op == 0x1F: // try_table bt catches
			r.s64()
			n := r.u32()
			for j := uint32(0); j < n && r.err == nil; j++ {
				switch k := r.byte(); k {
				case 0x00, 0x01:
					r.u32()
					r.u32()
				case 0x02, 0x03:
					r.u32()
				default:
					return nil, fmt.Errorf("unknown catch kind %#x", k)
				}
			}
		case op >= 0x28 && op <= 0x3E:
			r.memarg()
		case op == 0x41, op == 0x42:
			r.s64()
		case op == 0x43:
			r.bytes(4)
		case op == 0x44:
			r.bytes(8)
		case op == 0xD0: // ref.null heaptype
			r.s64()
		case op == 0xFC:
			switch sub := r.u32(); {
			case sub <= 7:
			case sub == 8, sub == 10, sub == 12, sub == 14:
				r.u32()
				r.u32()
			case sub == 9, sub == 11, sub == 13, sub >= 15 && sub <= 17:
				r.u32()
			default:
				return nil, fmt.Errorf("unknown opcode 0xFC %d", sub)
			}
		case op == 0xFD:
			switch sub := r.u32(); {
			case sub <= 11, sub == 92, sub == 93:
				r.memarg()
			case sub == 12, sub == 13:
				r.bytes(16)
			case sub >= 21 && sub <= 34:
				r.byte()
			case sub >= 84 && sub <= 91:
				r.memarg()
				r.byte()
			case sub <= 0x113:
			default:
				return nil, fmt.Errorf("unknown opcode 0xFD %d", sub)
			}
		case op == 0xFE:
			switch sub := r.u32(); {
			case sub == 0x03:
				r.byte()
			case sub <= 0x02, sub >= 0x10 && sub <= 0x4E:
				r.memarg()
			default:
				return nil, fmt.Errorf("unknown opcode 0xFE %d", sub)
			}
		default:
			return nil, fmt.Errorf("unknown opcode %#x at %d", op, start)
		}
		out = append(out, code[start:r.p]...)
	}
	if r.err != nil {
		return nil, r.err
	}
	if len(code) == 0 || code[len(code)-1] != 0x0B {
		return nil, errors.New("body does not end with end")
	}
	return out, nil
}

// wreader reads a wasm binary; the first error sticks and reads past the
// end return zeros.
type wreader struct {
	b   []byte
	p   int
	err error
}

var errTruncated = errors.New("truncated module")

func (r *wreader) fail(err error) {
	if r.err == nil {
		r.err = err
	}
	r.p = len(r.b)
}

func (r *wreader) byte() byte {
	if r.p >= len(r.b) {
		r.fail(errTruncated)
		return 0
	}
	c := r.b[r.p]
	r.p++
	return c
}

func (r *wreader) bytes(n int) []byte {
	if n < 0 || n > len(r.b)-r.p {
		r.fail(errTruncated)
		return nil
	}
	b := r.b[r.p : r.p+n]
	r.p += n
	return b
}

func (r *wreader) u32() uint32 {
	var v uint32
	for shift := 0; shift < 35; shift += 7 {
		c := r.byte()
		if r.err != nil {
			return 0
		}
		v |= uint32(c&0x7F) << shift
		if c&0x80 == 0 {
			return v
		}
	}
	r.fail(errors.New("LEB128 integer too long"))
	return 0
}

// s64 skips a signed LEB128 of up to 64 bits (also block types, s33).
func (r *wreader) s64() {
	for i := 0; i < 10; i++ {
		c := r.byte()
		if r.err != nil || c&0x80 == 0 {
			return
		}
	}
	r.fail(errors.New("LEB128 integer too long"))
}

func (r *wreader) memarg() {
	if align := r.u32(); align&0x40 != 0 { // multi-memory: a memory index follows
		r.u32()
	}
	r.u32() // offset
}

func (r *wreader) limits() {
	switch flags := r.byte(); flags {
	case 0x00, 0x04:
		r.u32()
	case 0x01, 0x03, 0x05, 0x07:
		r.u32()
		r.u32()
	default:
		r.fail(fmt.Errorf("unknown limits flags %#x", flags))
	}
}

func appendU32(b []byte, v uint32) []byte {
	for v >= 0x80 {
		b = append(b, byte(v)|0x80)
		v >>= 7
	}
	return append(b, byte(v))
}

func appendS32(b []byte, v int32) []byte {
	for {
		c := byte(v & 0x7F)
		v >>= 7
		if v == 0 && c&0x40 == 0 || v == -1 && c&0x40 != 0 {
			return append(b, c)
		}
		b = append(b, c|0x80)
	}
}

func appendName(b []byte, s string) []byte {
	return append(appendU32(b, uint32(len(s))), s...)
}
