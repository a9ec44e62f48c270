package envoybench

import (
	"context"
	"testing"

	"github.com/tetratelabs/wazero"
)

// bareModule returns a proxy-wasm module written directly in WebAssembly,
// with no language runtime: the same callbacks and answers as
// testdata/noop (request headers go on, body data pauses until
// end_of_stream), each a few instructions. Its row is V8's and Envoy's own
// cost of calling a module, so the difference between it and the Go
// no-op is what Go's runtime adds to every callback.
func bareModule() []byte {
	const i32 = 0x7f
	type fn struct {
		name   string
		params int
		result bool
		body   []byte // instructions before `end`
	}
	ret := func(v byte) []byte { return []byte{0x41, v} } // i32.const v (v < 64)
	fns := []fn{
		{"proxy_abi_version_0_2_1", 0, false, nil},
		{"proxy_on_memory_allocate", 1, true, []byte{0x41, 0x80, 0x08}}, // i32.const 1024: never called
		{"proxy_on_context_create", 2, false, nil},
		{"proxy_on_vm_start", 2, true, ret(1)},
		{"proxy_on_configure", 2, true, ret(1)},
		{"proxy_on_request_headers", 3, true, ret(0)},
		{"proxy_on_request_body", 3, true, []byte{0x20, 0x02, 0x45}}, // local.get 2 (end_of_stream); i32.eqz: pause until the end
		{"proxy_on_request_trailers", 2, true, ret(0)},
		{"proxy_on_response_headers", 3, true, ret(0)},
		{"proxy_on_response_body", 3, true, ret(0)},
		{"proxy_on_response_trailers", 2, true, ret(0)},
		{"proxy_on_done", 1, true, ret(1)},
		{"proxy_on_log", 1, false, nil},
		{"proxy_on_delete", 1, false, nil},
	}
	section := func(id byte, content []byte) []byte {
		return append(append([]byte{id}, uleb(len(content))...), content...)
	}
	vec := func(items [][]byte) []byte {
		out := uleb(len(items))
		for _, it := range items {
			out = append(out, it...)
		}
		return out
	}
	var types, funcs, exports, codes [][]byte
	for i, f := range fns {
		t := []byte{0x60, byte(f.params)}
		for range f.params {
			t = append(t, i32)
		}
		if f.result {
			t = append(t, 1, i32)
		} else {
			t = append(t, 0)
		}
		types = append(types, t)
		funcs = append(funcs, uleb(i))
		exports = append(exports, append(append(uleb(len(f.name)), f.name...), append([]byte{0x00}, uleb(i)...)...))
		body := append([]byte{0x00}, f.body...) // no locals
		body = append(body, 0x0b)
		codes = append(codes, append(uleb(len(body)), body...))
	}
	exports = append(exports, append(append(uleb(len("memory")), "memory"...), 0x02, 0x00))
	m := []byte{0x00, 'a', 's', 'm', 0x01, 0x00, 0x00, 0x00}
	m = append(m, section(1, vec(types))...)
	m = append(m, section(3, vec(funcs))...)
	m = append(m, section(5, []byte{0x01, 0x00, 0x01})...) // one memory, at least one page
	m = append(m, section(7, vec(exports))...)
	m = append(m, section(10, vec(codes))...)
	return m
}

// uleb is n in unsigned LEB128.
func uleb(n int) []byte {
	var out []byte
	for {
		b := byte(n & 0x7f)
		n >>= 7
		if n == 0 {
			return append(out, b)
		}
		out = append(out, b|0x80)
	}
}

// TestBareModule compiles the bare module and calls its body callback.
func TestBareModule(t *testing.T) {
	ctx := context.Background()
	r := wazero.NewRuntime(ctx)
	defer r.Close(ctx)
	m, err := r.Instantiate(ctx, bareModule())
	if err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct {
		fn   string
		args []uint64
		want uint64
	}{
		{"proxy_on_vm_start", []uint64{1, 0}, 1},
		{"proxy_on_configure", []uint64{1, 0}, 1},
		{"proxy_on_request_headers", []uint64{2, 5, 0}, 0},
		{"proxy_on_request_body", []uint64{2, 100, 0}, 1},
		{"proxy_on_request_body", []uint64{2, 100, 1}, 0},
		{"proxy_on_done", []uint64{2}, 1},
	} {
		got, err := m.ExportedFunction(c.fn).Call(ctx, c.args...)
		if err != nil || len(got) != 1 || got[0] != c.want {
			t.Errorf("%s%v = %v, %v; want %d", c.fn, c.args, got, err, c.want)
		}
	}
	for _, fn := range []string{"proxy_abi_version_0_2_1", "proxy_on_context_create", "proxy_on_log", "proxy_on_delete"} {
		if _, err := m.ExportedFunction(fn).Call(ctx, make([]uint64, len(m.ExportedFunction(fn).Definition().ParamTypes()))...); err != nil {
			t.Errorf("%s: %v", fn, err)
		}
	}
	if m.ExportedMemory("memory") == nil {
		t.Error("no memory export")
	}
}
