package abi

import (
	"context"
	"log/slog"
	"reflect"
	"slices"
	"strings"
	"testing"

	"github.com/tetratelabs/wazero"
	"github.com/tetratelabs/wazero/api"

	"github.com/kvgate/kvgate/host/internal/hostcall"
	"github.com/kvgate/kvgate/host/internal/metrics"
	"github.com/kvgate/kvgate/proxywasm"
)

func TestSpliceAndPropertyKey(t *testing.T) {
	for _, c := range []struct {
		start, size uint64
		want        string
	}{{0, 5, "X"}, {0, 0, "Xhello"}, {5, 0, "helloX"}, {99, 99, "helloX"}, {1, 3, "hXo"}, {0, 1 << 32, "X"}} {
		if got := string(splice([]byte("hello"), c.start, c.size, []byte("X"), nil)); got != c.want {
			t.Errorf("splice(%d,%d) = %q, want %q", c.start, c.size, got, c.want)
		}
	}
	// The caller's memory is used when it is given, and never aliases the input.
	pool := make([]byte, 16)
	if got := splice([]byte("hello"), 1, 3, []byte("X"), func(n int) []byte { return pool[:n] }); string(got) != "hXo" || &got[0] != &pool[0] {
		t.Errorf("splice with alloc = %q (own memory: %v)", got, &got[0] == &pool[0])
	}
	if got := splice([]byte("hello"), 0, 0, []byte("X"), func(n int) []byte { return nil }); string(got) != "Xhello" {
		t.Errorf("splice with a failing alloc = %q", got)
	}
	for in, want := range map[string]string{"request\x00path\x00": "request.path", "request\x00path": "request.path", "plugin_name": "plugin_name"} {
		if got := propertyKey([]byte(in)); got != want {
			t.Errorf("propertyKey(%q) = %q", in, got)
		}
	}
}

// memModule is a module with one page of memory, exported, and nothing
// else: a real guest memory to call the host functions against.
var memModule = []byte("\x00asm\x01\x00\x00\x00" +
	"\x05\x04\x01\x01\x01\x01" + // memory: min 1, max 1 page
	"\x07\x07\x01\x03mem\x02\x00") // export "mem"

func guestMemory(t testing.TB) api.Memory {
	ctx := context.Background()
	rt := wazero.NewRuntimeWithConfig(ctx, wazero.NewRuntimeConfigInterpreter())
	t.Cleanup(func() { _ = rt.Close(ctx) })
	mod, err := rt.Instantiate(ctx, memModule)
	if err != nil {
		t.Fatal(err)
	}
	return mod.Memory()
}

// newInstance is an instance serving one request, with mem as its memory
// and no allocator.
func newInstance(mem api.Memory) *Instance {
	return &Instance{
		Plugin: &Plugin{Metrics: &metrics.Set{}, Logger: slog.New(slog.DiscardHandler)},
		Mem:    hostcall.NewMemory(mem), Phase: PhaseRequest, Log: func(proxywasm.LogLevel, string) {},
		Stream: &Stream{ID: 2, Headers: [][2]string{{":path", "/"}, {"a", "1"}}},
	}
}

var byName = func() map[string]hostFunc {
	m := map[string]hostFunc{}
	for _, f := range Funcs() {
		m[f.Name] = f
	}
	return m
}()

// invoke runs the named host function with args; a memory fault is returned
// as such, any other panic fails the test.
func invoke(t testing.TB, in *Instance, name string, args ...uint64) (st proxywasm.Status, fault *hostcall.Fault) {
	t.Helper()
	f, ok := byName[name]
	if !ok {
		t.Fatalf("no host function %s", name)
	}
	if len(args) != len(f.Params) {
		t.Fatalf("%s takes %d arguments", name, len(f.Params))
	}
	s := make([]uint64, max(len(args), 1)) // wazero's stack holds the result too
	copy(s, args)
	defer func() {
		if r := recover(); r != nil {
			var ok bool
			if fault, ok = r.(*hostcall.Fault); !ok {
				panic(r)
			}
		}
	}()
	f.Fn(context.Background(), in, s)
	return proxywasm.Status(s[0]), nil
}

// The calls this host does not do still exist with their signatures and
// answer as Envoy does when there is nothing to call or find.
func TestUnsupportedAnswers(t *testing.T) {
	in := newInstance(guestMemory(t))
	for _, c := range []struct {
		name string
		want proxywasm.Status
	}{
		{"proxy_http_call", proxywasm.StatusBadArgument},
		{"proxy_grpc_call", proxywasm.StatusBadArgument},
		{"proxy_grpc_stream", proxywasm.StatusBadArgument},
		{"proxy_grpc_send", proxywasm.StatusNotFound},
		{"proxy_grpc_cancel", proxywasm.StatusNotFound},
		{"proxy_grpc_close", proxywasm.StatusNotFound},
		{"proxy_get_status", proxywasm.StatusNotFound},
		{"proxy_set_shared_data", proxywasm.StatusUnimplemented},
		{"proxy_get_shared_data", proxywasm.StatusNotFound},
		{"proxy_register_shared_queue", proxywasm.StatusUnimplemented},
		{"proxy_resolve_shared_queue", proxywasm.StatusNotFound},
		{"proxy_enqueue_shared_queue", proxywasm.StatusNotFound},
		{"proxy_dequeue_shared_queue", proxywasm.StatusNotFound},
		{"proxy_call_foreign_function", proxywasm.StatusNotFound},
		{"proxy_done", proxywasm.StatusNotFound},
	} {
		args := make([]uint64, len(byName[c.name].Params))
		if st, fault := invoke(t, in, c.name, args...); st != c.want || fault != nil {
			t.Errorf("%s = %d (fault %v), want %d", c.name, st, fault, c.want)
		}
		if c.name == "proxy_set_shared_data" || c.name == "proxy_grpc_send" {
			args[1], args[2] = 1<<16-1, 2 // a read past the end is still checked
			if c.name == "proxy_set_shared_data" {
				args[0], args[1] = 1<<16-1, 2
			}
			if st, fault := invoke(t, in, c.name, args...); fault != nil || st != proxywasm.StatusInvalidMemoryAccess {
				t.Errorf("%s: out-of-bounds read = %d (fault %v), want InvalidMemoryAccess", c.name, st, fault)
			}
		}
	}
}

// FuzzHeaderMapFromGuest: a header map read out of guest memory at any
// address and size (proxy_set_header_map_pairs, and the headers of
// proxy_send_local_response) fails exactly when it reaches past the
// memory (answered InvalidMemoryAccess, nothing changed), and otherwise is
// taken as proxywasm decodes it, names in lower case, or refused with
// BadArgument and nothing changed.
func FuzzHeaderMapFromGuest(f *testing.F) {
	f.Add(proxywasm.EncodeHeaderMap([][2]string{{"X-A", "1"}, {"b", ""}}), uint32(0), uint32(26), false)
	f.Add(proxywasm.EncodeHeaderMap([][2]string{{"k", "v"}}), uint32(0), uint32(18), true)
	f.Add([]byte{255, 255, 255, 255}, uint32(0), uint32(4), false)
	f.Add([]byte{1, 0, 0, 0}, uint32(1<<16-2), uint32(4), true)
	mem := guestMemory(f)
	size := mem.Size()
	zeros := make([]byte, size)
	written := 0 // how much of mem the last input filled
	f.Fuzz(func(t *testing.T, data []byte, ptr, n uint32, local bool) {
		mem.Write(0, zeros[:written])
		written = min(len(data), int(size))
		mem.Write(0, data[:written])
		ptr %= size + 64
		n %= uint32(len(data)) + 64
		in := newInstance(mem)
		before := in.Stream.Headers
		var st proxywasm.Status
		var fault *hostcall.Fault
		if local {
			st, fault = invoke(t, in, "proxy_send_local_response", 400, 0, 0, 0, 0, uint64(ptr), uint64(n), 0)
		} else {
			st, fault = invoke(t, in, "proxy_set_header_map_pairs", uint64(proxywasm.MapHTTPRequestHeaders), uint64(ptr), uint64(n))
		}
		outside := n > 0 && uint64(ptr)+uint64(n) > uint64(size)
		if fault != nil || outside != (st == proxywasm.StatusInvalidMemoryAccess) {
			t.Fatalf("ptr %d size %d: status %d, fault %v", ptr, n, st, fault)
		}
		if outside {
			if !reflect.DeepEqual(in.Stream.Headers, before) {
				t.Fatalf("ptr %d size %d: an out-of-bounds map changed the headers", ptr, n)
			}
			return
		}
		raw, _ := mem.Read(ptr, n)
		want, err := proxywasm.DecodeHeaderMap(raw)
		var got [][2]string
		switch {
		case local && in.Stream.Local != nil:
			got = in.Stream.Local.Headers
		case !local && in.Stream.HeadersChanged:
			got = in.Stream.Headers
		}
		if err != nil {
			if st != proxywasm.StatusBadArgument || in.Stream.Local != nil || in.Stream.HeadersChanged || !slices.Equal(in.Stream.Headers, before) {
				t.Fatalf("malformed map: status %d, stream %+v", st, in.Stream)
			}
			return
		}
		if !local {
			for i := range want {
				want[i][0] = strings.ToLower(want[i][0])
			}
		}
		if st != proxywasm.StatusOK || len(got) != len(want) || len(want) > 0 && !slices.Equal(got, want) {
			t.Fatalf("status %d, got %q, want %q", st, got, want)
		}
	})
}
