package instrument

import (
	"bytes"
	"context"
	"errors"
	"strings"
	"testing"

	"github.com/tetratelabs/wazero"
	"github.com/tetratelabs/wazero/api"

	"github.com/kvgate/kvgate/host/internal/modcheck"
	"github.com/kvgate/kvgate/wasm"
)

// A small hand-assembled module, for the tests and as fuzz seeds.

func leb(n int) []byte                 { return appendU32(nil, uint32(n)) }
func name(s string) []byte             { return appendName(nil, s) }
func section(id byte, b []byte) []byte { return append(append([]byte{id}, leb(len(b))...), b...) }

func vec(items ...[]byte) []byte {
	b := leb(len(items))
	for _, it := range items {
		b = append(b, it...)
	}
	return b
}

func cat(parts ...[]byte) []byte { return bytes.Join(parts, nil) }

// loopModule imports env.tick () -> () and defines, after it:
//
//	1 run(n i32) -> i32   counts n down in a loop, calls tick, and returns
//	                      n + rec(5), rec called through the table
//	2 start()             the start function, empty
//	3 rec(n i32) -> i32   returns n by recursion
//
// so that run(n) = n + 5. It has a table with an element segment, a
// memory, a global, exports of functions and memory, a start function and
// a name section: everything the rewrite renumbers.
func loopModule() []byte {
	const i32, void = 0x7F, 0x40
	types := vec([]byte{0x60, 0, 0}, []byte{0x60, 1, i32, 1, i32})
	imports := vec(cat(name("env"), name("tick"), []byte{0x00, 0}))
	funcs := vec(leb(1), leb(0), leb(1))
	table := vec([]byte{0x70, 0x00, 2})
	memory := vec([]byte{0x00, 1})
	global := vec([]byte{i32, 0x01, 0x41, 0, 0x0B})
	exports := vec(cat(name("run"), []byte{0x00, 1}), cat(name("rec"), []byte{0x00, 3}), cat(name("mem"), []byte{0x02, 0}))
	start := leb(2)
	elems := vec(cat([]byte{0x00, 0x41, 0, 0x0B}, vec(leb(1), leb(3))))
	run := cat(vec([]byte{1, i32}), []byte{ // one more i32 local: the count
		0x02, void, 0x03, void, // block loop
		0x20, 0, 0x45, 0x0D, 1, // local.get 0, i32.eqz, br_if 1
		0x20, 0, 0x41, 1, 0x6B, 0x21, 0, // n--
		0x20, 1, 0x41, 1, 0x6A, 0x21, 1, // count++
		0x0C, 0, 0x0B, 0x0B, // br 0, end, end
		0x10, 0, // call tick
		0x20, 1, 0x41, 5, 0x41, 1, 0x11, 1, 0, 0x6A, // count + table[1](5)
		0x0B,
	})
	startBody := []byte{0, 0x0B}
	rec := cat(vec(), []byte{
		0x20, 0, 0x45, 0x04, i32, 0x41, 0, // if n == 0: 0
		0x05, 0x20, 0, 0x41, 1, 0x6B, 0x10, 3, 0x41, 1, 0x6A, // else rec(n-1) + 1
		0x0B, 0x0B,
	})
	code := vec(cat(leb(len(run)), run), cat(leb(len(startBody)), startBody), cat(leb(len(rec)), rec))
	names := cat(name("name"), section(1, vec(cat(leb(0), name("tick")), cat(leb(1), name("run")), cat(leb(2), name("start")), cat(leb(3), name("rec")))))
	return cat([]byte("\x00asm\x01\x00\x00\x00"),
		section(1, types), section(2, imports), section(3, funcs), section(4, table), section(5, memory),
		section(6, global), section(7, exports), section(8, start), section(9, elems), section(10, code), section(0, names))
}

// instantiate runs mod (instrumented or not) in the interpreter with env.tick
// and the check, and returns run and the number of checks so far.
func instantiate(t *testing.T, mod []byte) (run api.Function, checks *int) {
	t.Helper()
	ctx := context.Background()
	rt := wazero.NewRuntimeWithConfig(ctx, wazero.NewRuntimeConfigInterpreter())
	t.Cleanup(func() { _ = rt.Close(ctx) })
	if _, err := rt.NewHostModuleBuilder("env").NewFunctionBuilder().
		WithFunc(func() {}).Export("tick").Instantiate(ctx); err != nil {
		t.Fatal(err)
	}
	checks = new(int)
	if _, err := rt.NewHostModuleBuilder(Module).NewFunctionBuilder().
		WithFunc(func() { *checks++ }).Export(Func).Instantiate(ctx); err != nil {
		t.Fatal(err)
	}
	m, err := rt.InstantiateWithConfig(ctx, mod, wazero.NewModuleConfig())
	if err != nil {
		t.Fatal(err)
	}
	return m.ExportedFunction("run"), checks
}

// The rewritten module computes what the original does and calls the check
// once every Every ticks: function entries (start, run, rec six times)
// and loop heads (n+1).
func TestInstrumentKeepsBehaviourAndChecks(t *testing.T) {
	mod := loopModule()
	im, err := Instrument(mod)
	if err != nil {
		t.Fatal(err)
	}
	orig, _ := instantiate(t, mod)
	inst, checks := instantiate(t, im)
	for _, n := range []uint64{0, 1, 3*Every + 7} {
		*checks = 0
		a, err := orig.Call(context.Background(), n)
		if err != nil {
			t.Fatal(err)
		}
		b, err := inst.Call(context.Background(), n)
		if err != nil {
			t.Fatal(err)
		}
		if a[0] != n+5 || b[0] != a[0] {
			t.Fatalf("run(%d) = %d, instrumented %d", n, a[0], b[0])
		}
		if n > Every && *checks != int((n+9)/Every) {
			t.Fatalf("run(%d): %d checks, want %d", n, *checks, (n+9)/Every)
		}
	}
}

// The real filter module is rewritten into one that compiles, with one
// import more and every export and function name where it was, one index
// later.
func TestInstrumentKvgate(t *testing.T) {
	for name, mod := range map[string][]byte{"kvgate": wasm.Module, "loop": loopModule()} {
		im, err := Instrument(mod)
		if err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		ctx := context.Background()
		rt := wazero.NewRuntimeWithConfig(ctx, wazero.NewRuntimeConfigInterpreter()) // validates, quickly
		a, err := rt.CompileModule(ctx, mod)
		if err != nil {
			t.Fatal(err)
		}
		b, err := rt.CompileModule(ctx, im)
		if err != nil {
			t.Fatalf("%s: instrumented module does not compile: %v", name, err)
		}
		checkRewrite(t, a, b)
		_ = rt.Close(ctx)
	}
}

func checkRewrite(t *testing.T, a, b wazero.CompiledModule) {
	t.Helper()
	if len(b.ImportedFunctions()) != len(a.ImportedFunctions())+1 || len(b.ExportedFunctions()) != len(a.ExportedFunctions()) ||
		len(b.ExportedMemories()) != len(a.ExportedMemories()) {
		t.Fatalf("imports %d -> %d, exports %d -> %d", len(a.ImportedFunctions()), len(b.ImportedFunctions()),
			len(a.ExportedFunctions()), len(b.ExportedFunctions()))
	}
	for n, f := range a.ExportedFunctions() {
		g := b.ExportedFunctions()[n]
		// The new import comes after the module's own imports: an imported
		// function keeps its index, a defined one moves up by one (a
		// re-exported import: testdata/fuzz/FuzzInstrument/reexported-import).
		want := f.Index() + 1
		if _, _, imported := f.Import(); imported {
			want = f.Index()
		}
		if g == nil || g.Index() != want || !strings.HasPrefix(f.DebugName(), ".$") && g.DebugName() != f.DebugName() {
			t.Fatalf("export %s moved from %d (%s) to %v", n, f.Index(), f.DebugName(), g)
		}
	}
}

func TestInstrumentRefuses(t *testing.T) {
	for _, c := range []struct {
		name, mod, err string
	}{
		{"not wasm", "\x7fELF\x01\x00\x00\x00", "not a WebAssembly 1.0 binary"},
		{"version 2", "\x00asm\x02\x00\x00\x00", "not a WebAssembly 1.0 binary"},
		{"unknown opcode", "\x00asm\x01\x00\x00\x00\x0a\x05\x01\x03\x00\xff\x0b", "unknown opcode 0xff"},
		{"truncated body", "\x00asm\x01\x00\x00\x00\x0a\x03\x01\x01\xff", "truncated"},
		{"truncated section", "\x00asm\x01\x00\x00\x00\x01\x05\x01", "truncated"},
		{"section twice", "\x00asm\x01\x00\x00\x00\x05\x01\x00\x05\x01\x00", "section 5 twice"},
		{"unknown section", "\x00asm\x01\x00\x00\x00\x0e\x00", "unknown section 14"},
		{"already instrumented", string(mustInstrument(t, loopModule())), "already imports from"},
	} {
		if _, err := Instrument([]byte(c.mod)); err == nil || !strings.Contains(err.Error(), c.err) {
			t.Errorf("%s: err = %v, want %q", c.name, err, c.err)
		}
	}
}

func mustInstrument(t *testing.T, mod []byte) []byte {
	t.Helper()
	im, err := Instrument(mod)
	if err != nil {
		t.Fatal(err)
	}
	return im
}

// FuzzInstrument: Instrument never panics on any bytes, and a module that
// wazero compiles is rewritten, when it is rewritten, into one that
// compiles too, with one import more and its exports in place. wazero, the
// reference, is asked only about modules modcheck accepts, as in the host:
// its decoder sizes each vector by its declared count before reading it,
// so a 40-byte module declaring 2^32 parameters of one type made the
// fuzzing process allocate 32 GiB and die (testdata/fuzz/FuzzInstrument/
// param-count-2-to-the-32). Instrument itself still sees every input.
func FuzzInstrument(f *testing.F) {
	f.Add(loopModule())
	f.Add([]byte("\x00asm\x01\x00\x00\x00"))
	f.Add([]byte("\x00asm\x01\x00\x00\x00\x0a\x03\x01\x01\xff"))
	ctx := context.Background()
	rt := wazero.NewRuntimeWithConfig(ctx, wazero.NewRuntimeConfigInterpreter())
	f.Cleanup(func() { _ = rt.Close(ctx) })
	f.Fuzz(func(t *testing.T, mod []byte) {
		in := append([]byte(nil), mod...)
		im, err := Instrument(in)
		if !bytes.Equal(in, mod) {
			t.Fatal("Instrument changed its input")
		}
		if err != nil || modcheck.Check(mod) != nil {
			return // the host refuses what modcheck refuses before wazero sees it
		}
		// As the host compiles: a wazero panic on the original is an
		// error (modcheck.Compile), no module to keep valid. The
		// instrumented one is compiled without it: a panic there is a
		// module Instrument broke.
		a, err := modcheck.Compile(ctx, rt, mod)
		if err != nil {
			return // not a valid module: nothing to keep valid
		}
		defer a.Close(ctx)
		b, err := rt.CompileModule(ctx, im)
		if err != nil {
			t.Fatalf("a valid module rewritten into an invalid one: %v", err)
		}
		defer b.Close(ctx)
		checkRewrite(t, a, b)
	})
}

// A function whose local declaration count runs past its body is refused
// from the count, before any of it is read: the count came from the
// module, and looping over it took seconds (found by FuzzInstrument,
// which took it for a hang).
func TestLocalGroupsPastTheEnd(t *testing.T) {
	mod := []byte("\x00asm\x01\x00\x00\x00\nA00\x80\xff\xff\xffA00A0\x1c00000000000000000000000000000000000000000000000000000")
	if _, err := Instrument(mod); !errors.Is(err, errLocalGroups) {
		t.Fatalf("error %v, want %v", err, errLocalGroups)
	}
}
