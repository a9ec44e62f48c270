package modcheck

import (
	"bytes"
	"context"
	"runtime"
	"strings"
	"testing"

	"github.com/tetratelabs/wazero"

	"github.com/kvgate/kvgate/wasm"
)

func leb(n uint64) []byte {
	var b []byte
	for {
		c := byte(n & 0x7f)
		n >>= 7
		if n == 0 {
			return append(b, c)
		}
		b = append(b, c|0x80)
	}
}

// module is the header and the sections, each given as id and payload.
func module(sections ...[]byte) []byte {
	b := []byte("\x00asm\x01\x00\x00\x00")
	for _, s := range sections {
		b = append(b, s[0])
		b = append(b, leb(uint64(len(s)-1))...)
		b = append(b, s[1:]...)
	}
	return b
}

func sec(id byte, parts ...[]byte) []byte {
	b := []byte{id}
	for _, p := range parts {
		b = append(b, p...)
	}
	return b
}

func str(s string) []byte { return append(leb(uint64(len(s))), s...) }

const huge = 1<<32 - 1

// valid is a module using every form Check walks: a type, an import of
// each kind, a table, a memory, a global, exports, element segments of all
// eight forms, code with locals, data segments of all three forms and a
// name section.
func valid() []byte {
	i32 := []byte{0x41, 0x00, 0x0b} // i32.const 0; end
	return module(
		sec(1, leb(1), []byte{0x60, 1, 0x7f, 1, 0x7f}),
		sec(2, leb(3), str("env"), str("f"), []byte{0, 0}, str("env"), str("g"), []byte{3, 0x7f, 0}, str("env"), str("t"), []byte{1, 0x70, 1, 1, 2}),
		sec(3, leb(1), leb(0)),
		sec(4, leb(1), []byte{0x70, 0, 4}),
		sec(5, leb(1), []byte{1, 1, 2}),
		sec(6, leb(1), []byte{0x7f, 0}, []byte{0x23, 0, 0x0b}),
		sec(7, leb(2), str("run"), []byte{0, 1}, str("memory"), []byte{2, 0}),
		sec(9, leb(8),
			leb(0), i32, leb(1), leb(1),
			leb(1), []byte{0}, leb(1), leb(1),
			leb(2), leb(1), i32, []byte{0}, leb(1), leb(1),
			leb(3), []byte{0}, leb(1), leb(1),
			leb(4), i32, leb(1), []byte{0xd2, 1, 0x0b},
			leb(5), []byte{0x70}, leb(1), []byte{0xd0, 0x70, 0x0b},
			leb(6), leb(1), i32, []byte{0x70}, leb(1), []byte{0xd2, 1, 0x0b},
			leb(7), []byte{0x70}, leb(1), []byte{0xd2, 1, 0x0b}),
		sec(10, leb(1), leb(8), []byte{2, 3, 0x7f, 1, 0x7e, 0x20, 0, 0x0b}),
		sec(11, leb(3), leb(0), i32, str("ab"), leb(1), str("c"), leb(2), leb(0), i32, str("d")),
		sec(0, str("name"), []byte{0}, leb(4), str("mod"), []byte{1}, leb(6), leb(1), leb(1), str("run"), []byte{2}, leb(6), leb(1), leb(1), leb(1), leb(0), str("x")),
	)
}

func TestCheckAccepts(t *testing.T) {
	for name, mod := range map[string][]byte{
		"kvgate.wasm":            wasm.Module,
		"every form":             valid(),
		"empty":                  module(),
		"unknown custom section": module(sec(0, str("producers"), []byte{0xff, 0xff, 0xff})),
		"unknown type form":      module(sec(1, leb(1), []byte{0x5e}, leb(huge))), // stops: wazero decides
	} {
		if err := Check(mod); err != nil {
			t.Errorf("%s: %v", name, err)
		}
	}
	ctx := context.Background()
	rt := wazero.NewRuntime(ctx)
	defer rt.Close(ctx)
	if _, err := rt.CompileModule(ctx, valid()); err != nil {
		t.Fatalf("the test's own module is not valid: %v", err)
	}
}

// TestCheckRefuses: each module declares one count or length far beyond
// its bytes, and each made wazero's CompileModule allocate gigabytes
// before it found the module short.
func TestCheckRefuses(t *testing.T) {
	for _, c := range []struct {
		name string
		mod  []byte
		err  string
	}{
		{"not wasm", []byte("\x7fELF\x01\x00\x00\x00"), "not a WebAssembly 1.0 binary"},
		{"section past the end", append([]byte("\x00asm\x01\x00\x00\x00\x00"), leb(huge)...), "section 0 declares 4294967295 bytes; 0 are left"},
		{"parameters", module(sec(1, leb(1), []byte{0x60}, leb(huge))), "section 1 (type): 4294967295 parameters declared; 0 bytes are left"},
		{"results", module(sec(1, leb(1), []byte{0x60, 0}, leb(1<<30), []byte{0x7f})), "1073741824 results declared; 1 bytes are left"},
		{"types", module(sec(1, leb(huge))), "4294967295 types declared"},
		{"imports", module(sec(2, leb(huge))), "imports declared"},
		{"import name", module(sec(2, leb(1), str("env"), leb(huge))), "bytes of an import name declared"},
		{"functions", module(sec(3, leb(1<<28))), "268435456 entries declared"},
		{"globals", module(sec(6, leb(1<<28))), "entries declared"},
		{"export name", module(sec(7, leb(1), leb(huge))), "bytes of an export name declared"},
		{"element vector", module(sec(9, leb(1), leb(0), []byte{0x41, 0, 0x0b}, leb(huge))), "4294967295 elements declared"},
		{"expression vector", module(sec(9, leb(1), leb(5), []byte{0x70}, leb(huge))), "elements declared"},
		{"typed reference elements", module(sec(9, leb(1), leb(7), []byte{0x63, 0x70}, leb(huge))), "4294967295 elements declared"},
		{"after a typed parameter", module(sec(1, leb(1), []byte{0x60}, leb(1), []byte{0x64, 0x70}, leb(huge))), "4294967295 results declared"},
		{"after a recursion group", module(sec(1, leb(1), []byte{0x4e}, leb(1), []byte{0x60, 0, 0}), sec(10, leb(huge))), "section 10 (code): 4294967295 function bodies declared"},
		{"in a recursion group", module(sec(1, leb(1), []byte{0x4e}, leb(huge))), "types in a recursion group declared"},
		{"after a typed table import", module(sec(2, leb(1), str("env"), str("t"), []byte{1, 0x63, 0x70, 0, 1}), sec(10, leb(huge))), "function bodies declared"},
		{"after a typed global import", module(sec(2, leb(1), str("env"), str("g"), []byte{3, 0x63, 0x70, 0}), sec(10, leb(huge))), "function bodies declared"},
		{"function bodies", module(sec(10, leb(huge))), "function bodies declared"},
		{"body size", module(sec(10, leb(1), leb(huge))), "bytes of a function body declared"},
		{"locals", module(sec(10, leb(1), leb(7), leb(1), leb(huge), []byte{0x7f})), "function body 0: more than 50000 locals declared"},
		{"locals in two entries", module(sec(10, leb(1), leb(8), leb(2), leb(40000), []byte{0x7f}, leb(40000), []byte{0x7e}, []byte{0x0b})), "more than 50000 locals"},
		{"locals in the module", module(sec(10, leb(7), bytes.Repeat(append(append([]byte{6, 1}, leb(40000)...), 0x7f, 0x0b), 7))), "function body 6: more than 262204 locals declared in the module's functions together"},
		{"data", module(sec(11, leb(1), leb(1), leb(huge))), "bytes of data declared"},
		{"custom section name", module(sec(0, leb(huge))), "bytes of a custom section name declared"},
		{"function names", module(sec(0, str("name"), []byte{1}, leb(5), leb(huge))), "name subsection 1: 4294967295 names declared"},
		{"a function name", module(sec(0, str("name"), []byte{1}, leb(7), leb(1), leb(0), leb(huge))), "bytes of a name declared"},
		{"local names", module(sec(0, str("name"), []byte{2}, leb(7), leb(1), leb(0), leb(huge))), "name subsection 2: 4294967295 names declared"},
		{"name subsection", module(sec(0, str("name"), []byte{1}, leb(huge))), "bytes of a name subsection declared"},
		{"truncated", module(sec(7, leb(1), str("run"))), "section 7 (export): unexpected end"},
		{"overlong number", module(sec(3, []byte{0xff, 0xff, 0xff, 0xff, 0xff, 0x01})), "number too long"},
		{"function type", module(sec(1, leb(1), []byte{0x60, 0, 0}), sec(3, leb(2), leb(0), leb(1))), "section 3 (function): function 1 has type 1; 1 types are declared"},
		{"import type", module(sec(2, leb(1), str("env"), str("f"), []byte{0, 0})), "section 2 (import): import 0 has type 0; 0 types are declared"},
		{"type after a recursion group", module(sec(1, leb(2), []byte{0x4e}, leb(2), []byte{0x60, 0, 0, 0x60, 0, 0}, []byte{0x60, 0, 0}), sec(3, leb(1), leb(3))), "function 0 has type 3; 3 types are declared"},
	} {
		if err := Check(c.mod); err == nil || !strings.Contains(err.Error(), c.err) {
			t.Errorf("%s: err = %v, want %q", c.name, err, c.err)
		}
	}
}

// TestCheckRefusesCallToUntypedFunction: FuzzInstrument's find, a module
// whose function 0 calls function 3, declared with type 48 of 2. wazero
// 1.12's validator looked the callee's type up unchecked and panicked
// (index out of range) where it should have refused the module; the host
// would have died loading such a file.
func TestCheckRefusesCallToUntypedFunction(t *testing.T) {
	mod := []byte(untypedCall)
	if err := Check(mod); err == nil || !strings.Contains(err.Error(), "function 1 has type 48; 2 types are declared") {
		t.Fatalf("err = %v", err)
	}
}

// TestCompileRecovers: past Check, a panic in wazero's compiler is an
// error, and the runtime goes on.
func TestCompileRecovers(t *testing.T) {
	ctx := context.Background()
	rt := wazero.NewRuntimeWithConfig(ctx, wazero.NewRuntimeConfigInterpreter())
	defer rt.Close(ctx)
	cm, err := Compile(ctx, rt, []byte(untypedCall))
	if err == nil || cm != nil || !strings.Contains(err.Error(), "wazero failed on the module") {
		t.Fatalf("Compile = %v, %v", cm, err)
	}
	if _, err := Compile(ctx, rt, []byte("\x00asm\x01\x00\x00\x00")); err != nil {
		t.Fatalf("after the panic: %v", err)
	}
}

const untypedCall = "\x00asm\x01\x00\x00\x00\x01\t\x02`\x00\x00`\x01\x7f\x01\x7f\x02\f\x01\x03000\x040000\x00\x00\x03\x04\x03\x0100\x05\x03\x01\x000\x06\x06\x01\x7f\x01A0\v\nF\x03+\x010\x7f\x02@A0A0A0A0A0\x10\x03000000000000000000000000A\v\x02\x00\v\x15\x00000000000000000000A\v"

// FuzzCheck: Check never panics, and a module it accepts never makes
// wazero's decoder and compiler allocate more than a bounded amount,
// whatever it declares.
func FuzzCheck(f *testing.F) {
	f.Add(valid())
	f.Add(module(sec(1, leb(1), []byte{0x60, 1, 0x7f, 1, 0x7f})))
	f.Add(module(sec(10, leb(1), leb(4), leb(1), leb(100), []byte{0x7f})))
	f.Add(module(sec(0, str("name"), []byte{1}, leb(7), leb(1), leb(0), str("f"))))
	ctx := context.Background()
	rt := wazero.NewRuntimeWithConfig(ctx, wazero.NewRuntimeConfigInterpreter())
	f.Cleanup(func() { _ = rt.Close(ctx) })
	f.Fuzz(func(t *testing.T, mod []byte) {
		if len(mod) > 1<<16 || Check(mod) != nil {
			return
		}
		var before, after runtime.MemStats
		runtime.ReadMemStats(&before)
		// A panic is wazero's to fix and Compile's to recover from; this
		// target is about memory.
		if cm, err := Compile(ctx, rt, mod); err == nil {
			_ = cm.Close(ctx)
		}
		runtime.ReadMemStats(&after)
		if grew := after.TotalAlloc - before.TotalAlloc; grew > 64<<20 {
			t.Fatalf("a %d-byte module Check accepts made wazero allocate %d MiB", len(mod), grew>>20)
		}
	})
}
