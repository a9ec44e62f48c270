// Package modcheck checks, before a WebAssembly module is compiled, that
// every count and length it declares fits in the bytes that follow it.
//
// wazero's decoder sizes its buffers from what a module declares before it
// reads what they should hold: a type's parameter count, a vector's length,
// a function's locals, a string, a data segment, a custom section. A
// 40-byte file declaring 2^32 parameters makes it allocate 32 GiB, and the
// process dies out of memory instead of reporting a bad file. Every element
// of those vectors takes at least one byte of the module, so a count larger
// than the bytes left in its section is malformed, and rejecting it bounds
// what the decoder can allocate by a small multiple of the module's size.
// Locals are the exception (one entry declares any number of them), so
// they are bounded by count instead: MaxLocals per function, and all of a
// module's functions together by ModuleLocals.
//
// It also checks the one index wazero 1.12 trusts before checking it: the
// type of each function, imported or defined. Its validator looks up the
// type of a call's target by that index and panics when it lies beyond the
// type section, instead of reporting the module invalid. Compile, which
// the host and the tests compile through, turns such a panic into an
// error for the cases Check does not know.
//
// Check walks only what it must to find those fields, in the sections and
// forms wazero decodes (WebAssembly 2.0 and the name section, with the
// typed references and recursion groups of the function-references and
// GC proposals that wazero 1.12 reads in types, imports, tables, element
// segments and locals). It stops
// without error at a form it does not know: wazero, which decodes the
// module in the same order, rejects it at the same place.
package modcheck

import (
	"context"
	"encoding/binary"
	"errors"
	"fmt"

	"github.com/tetratelabs/wazero"
)

// MaxLocals is the most locals one function may declare: V8's limit, so a
// module Envoy runs passes.
const MaxLocals = 50000

// ModuleLocals is the most locals all the functions of a module of size
// bytes may declare together: 2^18 and one per byte. kvgate's module
// (2.5 MB) declares about 9,000.
func ModuleLocals(size int) uint64 { return 1<<18 + uint64(size) }

// Check returns an error naming the first declared count or length that
// does not fit in module, or nil.
func Check(module []byte) error {
	if len(module) < 8 || string(module[:4]) != "\x00asm" || binary.LittleEndian.Uint32(module[4:8]) != 1 {
		return errors.New("not a WebAssembly 1.0 binary module")
	}
	r := &reader{b: module, p: 8, end: len(module), what: "module", locals: ModuleLocals(len(module))}
	for r.p < len(module) && r.err == nil {
		id := r.byte()
		size := r.u32()
		if r.err != nil {
			break
		}
		if int64(size) > int64(r.end-r.p) {
			return fmt.Errorf("section %d declares %d bytes; %d are left", id, size, r.end-r.p)
		}
		s := &reader{b: module, p: r.p, end: r.p + int(size), what: fmt.Sprintf("section %d (%s)", id, sectionName(id)), locals: r.locals, types: r.types}
		s.section(id)
		if s.err != nil {
			return s.err
		}
		r.types = s.types
		if s.stop {
			return nil
		}
		r.p = s.end
	}
	return r.err
}

// Compile is rt.CompileModule with a panic in wazero's decoder or
// validator returned as an error: a malformed module file must not take
// the process down. wazero 1.12 panicked on one (a call to a function of
// an undeclared type), which Check now refuses before wazero sees it;
// Compile keeps the next such bug an error too.
func Compile(ctx context.Context, rt wazero.Runtime, module []byte) (cm wazero.CompiledModule, err error) {
	defer func() {
		if p := recover(); p != nil {
			cm, err = nil, fmt.Errorf("wazero failed on the module: %v", p)
		}
	}()
	return rt.CompileModule(ctx, module)
}

func sectionName(id byte) string {
	names := [...]string{"custom", "type", "import", "function", "table", "memory", "global", "export", "start", "element", "code", "data", "data count", "tag"}
	if int(id) < len(names) {
		return names[id]
	}
	return "unknown"
}

// reader reads one section, b[p:end]. The first problem is kept in err;
// stop is set at a form Check does not know.
type reader struct {
	b      []byte
	p, end int
	what   string
	err    error
	stop   bool
	// locals is how many more locals the module's functions may declare.
	locals uint64
	// types is how many types the type section declared.
	types uint64
}

func (r *reader) failed() bool { return r.err != nil || r.stop }

func (r *reader) fail(format string, args ...any) {
	if r.err == nil {
		r.err = fmt.Errorf("%s: "+format, append([]any{r.what}, args...)...)
	}
}

func (r *reader) byte() byte {
	if r.failed() {
		return 0
	}
	if r.p >= r.end {
		r.fail("unexpected end")
		return 0
	}
	c := r.b[r.p]
	r.p++
	return c
}

// leb reads an unsigned LEB128 number of at most max bits.
func (r *reader) leb(max uint) uint64 {
	var v uint64
	for shift := uint(0); ; shift += 7 {
		c := r.byte()
		if r.failed() {
			return 0
		}
		if shift >= max {
			r.fail("number too long")
			return 0
		}
		v |= uint64(c&0x7f) << shift
		if c&0x80 == 0 {
			return v
		}
	}
}

func (r *reader) u32() uint32 { return uint32(r.leb(35)) }

// skip passes n bytes.
func (r *reader) skip(n int) {
	if r.failed() {
		return
	}
	if n > r.end-r.p {
		r.fail("unexpected end")
		return
	}
	r.p += n
}

// count reads a vector's length, which must not exceed the bytes left:
// each element takes at least one.
func (r *reader) count(of string) int {
	n := r.u32()
	if r.failed() {
		return 0
	}
	if int64(n) > int64(r.end-r.p) {
		r.fail("%d %s declared; %d bytes are left", n, of, r.end-r.p)
		return 0
	}
	return int(n)
}

// name passes a length-prefixed string.
func (r *reader) name(of string) { r.skip(r.count("bytes of " + of)) }

func (r *reader) section(id byte) {
	switch id {
	case 0:
		r.custom()
	case 1: // types
		for i, n := 0, r.count("types"); i < n && !r.failed(); i++ {
			if form := r.byte(); form != 0x4e {
				r.funcType(form)
				r.types++
				continue
			}
			// A recursion group (the GC proposal's), which wazero reads
			// as that many function types.
			for j, m := 0, r.count("types in a recursion group"); j < m && !r.failed(); j++ {
				r.funcType(r.byte())
				r.types++
			}
		}
	case 2: // imports
		for i, n := 0, r.count("imports"); i < n && !r.failed(); i++ {
			r.name("a module name")
			r.name("an import name")
			switch kind := r.byte(); kind {
			case 0: // function: type index
				r.typeIndex("import", i)
			case 1: // table
				r.table()
			case 2: // memory
				r.limits()
			case 3: // global: value type, mutability
				r.valType()
				r.byte()
			case 4: // tag: attribute, type index
				r.byte()
				r.u32()
			default:
				r.stop = true
			}
		}
	case 3: // functions: type indices
		for i, n := 0, r.count("entries"); i < n && !r.failed(); i++ {
			r.typeIndex("function", i)
		}
	case 4, 5, 6, 13: // tables, memories, globals, tags
		r.count("entries")
	case 7: // exports
		for i, n := 0, r.count("exports"); i < n && !r.failed(); i++ {
			r.name("an export name")
			r.byte()
			r.u32()
		}
	case 9:
		r.elements()
	case 10:
		r.code()
	case 11:
		r.data()
	}
}

// typeIndex reads the type index of the i'th function import or function,
// which must name a declared type.
func (r *reader) typeIndex(of string, i int) {
	if t := r.u32(); !r.failed() && uint64(t) >= r.types {
		r.fail("%s %d has type %d; %d types are declared", of, i, t, r.types)
	}
}

// funcType passes a function type whose form byte was read.
func (r *reader) funcType(form byte) {
	if form != 0x60 {
		r.stop = true // not a function type; wazero rejects it
		return
	}
	for _, of := range [...]string{"parameters", "results"} {
		for j, m := 0, r.count(of); j < m && !r.failed(); j++ {
			r.valType()
		}
	}
}

// valType passes a value type: one byte, or for a typed reference
// ((ref null? ht), 0x63 and 0x64) that byte and a heap type, a signed
// 33-bit LEB128 number wazero reads as such.
func (r *reader) valType() {
	if t := r.byte(); t == 0x63 || t == 0x64 {
		r.leb(35)
	}
}

// table passes a table type, with the initialiser expression that a 0x40
// 0x00 prefix announces.
func (r *reader) table() {
	init := r.p < r.end && r.b[r.p] == 0x40
	if init {
		r.skip(2)
	}
	r.valType()
	r.limits()
	if init {
		r.expr()
	}
}

func (r *reader) limits() {
	flags := r.byte()
	r.leb(70)
	if flags&1 != 0 {
		r.leb(70)
	}
}

// expr passes a constant expression, in the instructions wazero accepts
// there.
func (r *reader) expr() {
	for !r.failed() {
		switch op := r.byte(); op {
		case 0x0b: // end
			return
		case 0x41, 0x42: // i32.const, i64.const
			r.leb(70)
		case 0x43: // f32.const
			r.skip(4)
		case 0x44: // f64.const
			r.skip(8)
		case 0x23, 0xd2: // global.get, ref.func
			r.u32()
		case 0xd0: // ref.null
			r.byte()
		case 0x6a, 0x6b, 0x6c, 0x7c, 0x7d, 0x7e: // i32/i64 add, sub, mul
		case 0xfd: // v128.const
			if r.u32() != 12 {
				r.stop = true
				return
			}
			r.skip(16)
		default:
			r.stop = true
			return
		}
	}
}

func (r *reader) elements() {
	for i, n := 0, r.count("element segments"); i < n && !r.failed(); i++ {
		flags := r.u32()
		if flags > 7 {
			r.stop = true
			return
		}
		if flags&2 != 0 && flags&1 == 0 { // an explicit table index
			r.u32()
		}
		if flags&1 == 0 { // active: an offset
			r.expr()
		}
		switch {
		case flags&3 != 0 && flags&4 != 0: // a reference type
			r.valType()
		case flags&3 != 0: // an element kind
			r.byte()
		}
		m := r.count("elements")
		for j := 0; j < m && !r.failed(); j++ {
			if flags&4 != 0 {
				r.expr()
			} else {
				r.u32()
			}
		}
	}
}

func (r *reader) code() {
	for i, n := 0, r.count("function bodies"); i < n && !r.failed(); i++ {
		r.part(r.count("bytes of a function body"), fmt.Sprintf("function body %d", i), func(body *reader) {
			var locals uint64
			for j, m := 0, body.count("local entries"); j < m && !body.failed(); j++ {
				n := uint64(body.u32())
				locals += n
				switch {
				case locals > MaxLocals:
					body.fail("more than %d locals declared", MaxLocals)
				case n > r.locals:
					body.fail("more than %d locals declared in the module's functions together", ModuleLocals(len(r.b)))
				default:
					r.locals -= n
				}
				body.valType()
			}
		})
	}
}

// part runs check on the next size bytes, named what within r, and passes
// them. size came from r.count, so it fits.
func (r *reader) part(size int, what string, check func(*reader)) {
	if r.failed() {
		return
	}
	sub := &reader{b: r.b, p: r.p, end: r.p + size, what: r.what + ", " + what}
	check(sub)
	if sub.err != nil {
		r.err = sub.err
		return
	}
	r.p += size
}

func (r *reader) data() {
	for i, n := 0, r.count("data segments"); i < n && !r.failed(); i++ {
		switch flags := r.u32(); flags {
		case 0:
			r.expr()
		case 1:
		case 2:
			r.u32()
			r.expr()
		default:
			r.stop = true
			return
		}
		r.skip(r.count("bytes of data"))
	}
}

// custom checks the name section's function and local names, which
// wazero decodes; other custom sections are taken whole, and the section
// size was checked already.
func (r *reader) custom() {
	n := r.count("bytes of a custom section name")
	if r.failed() || string(r.b[r.p:r.p+n]) != "name" {
		return
	}
	r.p += n
	for r.p < r.end && !r.failed() {
		id := r.byte()
		r.part(r.count("bytes of a name subsection"), fmt.Sprintf("name subsection %d", id), func(sub *reader) {
			switch id {
			case 0: // the module's name
				sub.name("the module name")
			case 1: // function names
				sub.nameMap()
			case 2: // local names
				for i, m := 0, sub.count("functions"); i < m && !sub.failed(); i++ {
					sub.u32()
					sub.nameMap()
				}
			}
		})
	}
}

func (r *reader) nameMap() {
	for i, n := 0, r.count("names"); i < n && !r.failed(); i++ {
		r.u32()
		r.name("a name")
	}
}
