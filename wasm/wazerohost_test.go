package wasm

import (
	"context"
	"crypto/rand"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/tetratelabs/wazero"
	"github.com/tetratelabs/wazero/api"
	"github.com/tetratelabs/wazero/imports/wasi_snapshot_preview1"

	"github.com/kvgate/kvgate/proxywasm"
)

// wzHost is a minimal proxy-wasm host on wazero, for the memory test and
// the benchmarks only (host/ is the real one). It provides exactly the
// nine env functions filter/abi imports, real clocks and one stream at a
// time.
type wzHost struct {
	tb  testing.TB
	ctx context.Context
	r   wazero.Runtime
	mod api.Module

	alloc, ctxCreate, onVMStart, onConfigure, onHeaders, onBody, onTrailers, onLog, onDelete api.Function
	stack                                                                                    []uint64

	config  []byte
	headers [][2]string
	body    []byte
	status  int
	reply   []byte
	ctype   string
	metrics []string
	values  map[string]int64
	logs    []string
	// props are the host properties by proxy-wasm path; propReads counts
	// proxy_get_property calls.
	props     map[string][]byte
	propReads int
	// replaces counts proxy_set_buffer_bytes calls on the request body.
	replaces int
	nextID   uint64
	// hostTime is the time spent in host functions (copies and nested
	// proxy_on_memory_allocate calls included), to tell guest work apart.
	hostTime time.Duration
}

// sharedCache keeps the module compiled once for the package's tests and
// benchmarks: a benchmark function runs several times while go test sizes
// b.N, and compiling the module each time took most of `make bench`'s
// time in this package.
var sharedCache = sync.OnceValue(wazero.NewCompilationCache)

// newWzHost compiles (once, through sharedCache) and instantiates the
// module, runs _initialize and configures the plugin with conf.
func newWzHost(tb testing.TB, ctx context.Context, conf string) *wzHost {
	cfg := wazero.NewRuntimeConfigCompiler().WithCompilationCache(sharedCache())
	h := &wzHost{tb: tb, ctx: ctx, r: wazero.NewRuntimeWithConfig(ctx, cfg), config: []byte(conf), values: map[string]int64{}, nextID: 2, stack: make([]uint64, 8)}
	wasi_snapshot_preview1.MustInstantiate(ctx, h.r)
	h.exportEnv()
	compiled, err := h.r.CompileModule(ctx, Module)
	if err != nil {
		tb.Fatal(err)
	}
	mc := wazero.NewModuleConfig().WithStartFunctions("_initialize").
		WithSysWalltime().WithSysNanotime().WithRandSource(rand.Reader)
	if h.mod, err = h.r.InstantiateModule(ctx, compiled, mc); err != nil {
		tb.Fatal(err)
	}
	for p, name := range map[*api.Function]string{
		&h.alloc: "proxy_on_memory_allocate", &h.ctxCreate: "proxy_on_context_create", &h.onVMStart: "proxy_on_vm_start",
		&h.onConfigure: "proxy_on_configure", &h.onHeaders: "proxy_on_request_headers", &h.onBody: "proxy_on_request_body",
		&h.onTrailers: "proxy_on_request_trailers", &h.onLog: "proxy_on_log", &h.onDelete: "proxy_on_delete",
	} {
		if *p = h.mod.ExportedFunction(name); *p == nil {
			tb.Fatal("missing export " + name)
		}
	}
	h.call(h.ctxCreate, 1, 0)
	if h.call(h.onVMStart, 1, 0) != 1 {
		tb.Fatal("vm start")
	}
	if h.call(h.onConfigure, 1, uint64(len(h.config))) != 1 {
		tb.Fatalf("configure: %q", h.logs)
	}
	return h
}

func (h *wzHost) close() { h.r.Close(h.ctx) }

// call invokes a guest export without allocating.
func (h *wzHost) call(f api.Function, params ...uint64) uint64 {
	copy(h.stack, params)
	if err := f.CallWithStack(h.ctx, h.stack); err != nil {
		h.tb.Fatal(err)
	}
	return h.stack[0]
}

func (h *wzHost) memSize() uint32 { return h.mod.Memory().Size() }

// give copies b into guest memory from proxy_on_memory_allocate and writes
// its address and size into the return slots.
func (h *wzHost) give(m api.Module, b []byte, retData, retSize uint32) {
	st := []uint64{uint64(len(b))}
	if err := h.alloc.CallWithStack(h.ctx, st); err != nil {
		panic(err)
	}
	p := uint32(st[0])
	if !m.Memory().Write(p, b) || !m.Memory().WriteUint32Le(retData, p) || !m.Memory().WriteUint32Le(retSize, uint32(len(b))) {
		panic("memory")
	}
}

func (h *wzHost) read(m api.Module, p, n uint32) []byte {
	if n == 0 {
		return nil
	}
	b, ok := m.Memory().Read(p, n)
	if !ok {
		panic("out of range")
	}
	return b
}

func (h *wzHost) exportEnv() {
	u := func(s []uint64, i int) uint32 { return uint32(s[i]) }
	fn := func(b wazero.HostModuleBuilder, name string, params int, f func(m api.Module, s []uint64) proxywasm.Status) wazero.HostModuleBuilder {
		ps := make([]api.ValueType, params)
		for i := range ps {
			ps[i] = api.ValueTypeI32
		}
		if name == "proxy_increment_metric" {
			ps[1] = api.ValueTypeI64
		}
		return b.NewFunctionBuilder().WithGoModuleFunction(api.GoModuleFunc(func(ctx context.Context, m api.Module, s []uint64) {
			t0 := time.Now()
			s[0] = uint64(f(m, s))
			h.hostTime += time.Since(t0)
		}), ps, []api.ValueType{api.ValueTypeI32}).Export(name)
	}
	b := h.r.NewHostModuleBuilder("env")
	b = fn(b, "proxy_log", 3, func(m api.Module, s []uint64) proxywasm.Status {
		h.logs = append(h.logs, string(h.read(m, u(s, 1), u(s, 2))))
		return proxywasm.StatusOK
	})
	b = fn(b, "proxy_get_buffer_bytes", 5, func(m api.Module, s []uint64) proxywasm.Status {
		var buf []byte
		switch proxywasm.BufferType(u(s, 0)) {
		case proxywasm.BufferHTTPRequestBody:
			buf = h.body
		case proxywasm.BufferPluginConfiguration:
			buf = h.config
		default:
			return proxywasm.StatusBadArgument
		}
		start, size := u(s, 1), u(s, 2)
		if len(buf) == 0 {
			return proxywasm.StatusNotFound
		}
		if int(start) > len(buf) {
			return proxywasm.StatusBadArgument
		}
		n := min(int(size), len(buf)-int(start))
		h.give(m, buf[start:int(start)+n], u(s, 3), u(s, 4))
		return proxywasm.StatusOK
	})
	b = fn(b, "proxy_set_buffer_bytes", 5, func(m api.Module, s []uint64) proxywasm.Status {
		if proxywasm.BufferType(u(s, 0)) != proxywasm.BufferHTTPRequestBody || u(s, 1) != 0 || int(u(s, 2)) < len(h.body) {
			return proxywasm.StatusBadArgument
		}
		h.body = append(h.body[:0], h.read(m, u(s, 3), u(s, 4))...)
		h.replaces++
		return proxywasm.StatusOK
	})
	b = fn(b, "proxy_get_header_map_pairs", 3, func(m api.Module, s []uint64) proxywasm.Status {
		h.give(m, proxywasm.EncodeHeaderMap(h.headers), u(s, 1), u(s, 2))
		return proxywasm.StatusOK
	})
	b = fn(b, "proxy_remove_header_map_value", 3, func(m api.Module, s []uint64) proxywasm.Status {
		k := string(h.read(m, u(s, 1), u(s, 2)))
		kept := h.headers[:0]
		for _, p := range h.headers {
			if !strings.EqualFold(p[0], k) {
				kept = append(kept, p)
			}
		}
		h.headers = kept
		return proxywasm.StatusOK
	})
	b = fn(b, "proxy_send_local_response", 8, func(m api.Module, s []uint64) proxywasm.Status {
		h.status = int(u(s, 0))
		h.reply = append([]byte(nil), h.read(m, u(s, 3), u(s, 4))...)
		_ = proxywasm.ForEachHeader(h.read(m, u(s, 5), u(s, 6)), func(k, v []byte) {
			if string(k) == "content-type" {
				h.ctype = string(v)
			}
		})
		return proxywasm.StatusOK
	})
	b = fn(b, "proxy_define_metric", 4, func(m api.Module, s []uint64) proxywasm.Status {
		name := string(h.read(m, u(s, 1), u(s, 2)))
		h.metrics = append(h.metrics, name)
		h.values[name] += 0
		m.Memory().WriteUint32Le(u(s, 3), uint32(len(h.metrics)-1))
		return proxywasm.StatusOK
	})
	b = fn(b, "proxy_increment_metric", 2, func(m api.Module, s []uint64) proxywasm.Status {
		id := u(s, 0)
		if int(id) >= len(h.metrics) {
			return proxywasm.StatusBadArgument
		}
		h.values[h.metrics[id]] += int64(s[1])
		return proxywasm.StatusOK
	})
	b = fn(b, "proxy_get_property", 4, func(m api.Module, s []uint64) proxywasm.Status {
		h.propReads++
		v, ok := h.props[string(h.read(m, u(s, 0), u(s, 1)))]
		if !ok {
			return proxywasm.StatusNotFound
		}
		if len(v) > 0 {
			h.give(m, v, u(s, 2), u(s, 3))
		}
		return proxywasm.StatusOK
	})
	b = fn(b, "proxy_set_property", 4, func(m api.Module, s []uint64) proxywasm.Status {
		return proxywasm.StatusOK // what the filter reports is checked in the filter's and the hosts' tests
	})
	if _, err := b.Instantiate(h.ctx); err != nil {
		h.tb.Fatal(err)
	}
}

// result is what wzHost did with one request.
type result struct {
	forwarded bool
	body      []byte
	status    int // local reply status, 0 if none
	reply     []byte
	ctype     string // local reply content-type
}

// request runs one request through the whole lifecycle: context create,
// headers, the body in one piece, log, delete.
func (h *wzHost) request(path string, body []byte) result {
	id := h.nextID
	h.nextID++
	h.status, h.reply, h.ctype = 0, nil, ""
	h.headers = append(h.headers[:0], [2]string{":method", "POST"}, [2]string{":path", path},
		[2]string{"content-type", "application/json"}, [2]string{"content-length", strconv.Itoa(len(body))})
	h.body = append(h.body[:0], body...)
	h.call(h.ctxCreate, id, 1)
	defer func() {
		h.call(h.onLog, id)
		h.call(h.onDelete, id)
	}()
	a := h.call(h.onHeaders, id, uint64(len(h.headers)), 0)
	if h.status != 0 {
		return result{status: h.status, reply: h.reply, ctype: h.ctype}
	}
	a = h.call(h.onBody, id, uint64(len(h.body)), 1)
	if h.status != 0 {
		return result{status: h.status, reply: h.reply, ctype: h.ctype}
	}
	if a != 0 {
		return result{}
	}
	return result{forwarded: true, body: h.body}
}
