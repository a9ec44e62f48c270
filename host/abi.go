package host

import (
	"context"
	"log/slog"
	"strings"
	"time"

	"github.com/tetratelabs/wazero"
	"github.com/tetratelabs/wazero/api"

	"github.com/kvgate/kvgate/proxywasm"
)

const (
	i32 = api.ValueTypeI32
	i64 = api.ValueTypeI64
)

// hostFunc is one function the host exports to the guest.
type hostFunc struct {
	name    string
	params  []api.ValueType
	results []api.ValueType
	fn      func(ctx context.Context, in *instance, s []uint64)
}

func ps(n int) []api.ValueType {
	p := make([]api.ValueType, n)
	for i := range p {
		p[i] = i32
	}
	return p
}

var r32 = []api.ValueType{i32}

func export(b wazero.HostModuleBuilder, fs []hostFunc) {
	for _, f := range fs {
		f := f
		b.NewFunctionBuilder().WithGoModuleFunction(api.GoModuleFunc(func(ctx context.Context, _ api.Module, s []uint64) {
			in, _ := ctx.Value(instKey{}).(*instance)
			if in == nil {
				panic(&hostAbort{f.name + ": called outside a host call"})
			}
			f.fn(ctx, in, s)
		}), f.params, f.results).Export(f.name)
	}
}

func u32(v uint64) uint32 { return uint32(v) }

// envFuncs are the proxy-wasm ABI 0.2.1 host functions (module "env").
func envFuncs() []hostFunc {
	return []hostFunc{
		{"proxy_log", ps(3), r32, func(_ context.Context, in *instance, s []uint64) {
			msg := in.readString("proxy_log", u32(s[1]), u32(s[2]))
			lvl := proxywasm.LogLevel(s[0])
			if lvl > proxywasm.LogCritical {
				s[0] = uint64(proxywasm.StatusBadArgument)
				return
			}
			in.guestLog(lvl, msg)
			s[0] = uint64(proxywasm.StatusOK)
		}},
		{"proxy_get_log_level", ps(1), r32, func(_ context.Context, in *instance, s []uint64) {
			in.writeU32("proxy_get_log_level", u32(s[0]), uint32(in.h.guestLogLevel()))
			s[0] = uint64(proxywasm.StatusOK)
		}},
		{"proxy_get_current_time_nanoseconds", ps(1), r32, func(_ context.Context, in *instance, s []uint64) {
			in.writeU64("proxy_get_current_time_nanoseconds", u32(s[0]), uint64(time.Now().UnixNano()))
			s[0] = uint64(proxywasm.StatusOK)
		}},
		{"proxy_set_tick_period_milliseconds", ps(1), r32, func(_ context.Context, in *instance, s []uint64) {
			// Accepted as Envoy does; this host never ticks (no timers in a
			// per-request pool), which a filter that needs ticks would notice.
			if u32(s[0]) != 0 {
				in.h.tickWarn.Do(func() { in.h.log.Warn("wasm filter asked for a tick period; this host does not call proxy_on_tick") })
			}
			s[0] = uint64(proxywasm.StatusOK)
		}},
		{"proxy_get_buffer_status", ps(3), r32, func(_ context.Context, in *instance, s []uint64) {
			b, st := in.buffer(proxywasm.BufferType(s[0]))
			if st != proxywasm.StatusOK {
				s[0] = uint64(st)
				return
			}
			in.writeU32("proxy_get_buffer_status", u32(s[1]), uint32(len(*b)))
			in.writeU32("proxy_get_buffer_status", u32(s[2]), 0)
			s[0] = uint64(proxywasm.StatusOK)
		}},
		{"proxy_get_buffer_bytes", ps(5), r32, func(ctx context.Context, in *instance, s []uint64) {
			b, st := in.buffer(proxywasm.BufferType(s[0]))
			if st != proxywasm.StatusOK {
				s[0] = uint64(st)
				return
			}
			start, n := uint64(u32(s[1])), uint64(u32(s[2]))
			size := uint64(len(*b))
			if start > size {
				n = 0
			} else if start+n > size {
				n = size - start
			}
			var data []byte
			if n > 0 {
				data = (*b)[start : start+n]
			}
			s[0] = uint64(in.copyOut(ctx, "proxy_get_buffer_bytes", data, u32(s[3]), u32(s[4])))
		}},
		{"proxy_set_buffer_bytes", ps(5), r32, func(_ context.Context, in *instance, s []uint64) {
			data := in.read("proxy_set_buffer_bytes", u32(s[3]), u32(s[4]))
			typ := proxywasm.BufferType(s[0])
			b, st := in.buffer(typ)
			if st != proxywasm.StatusOK {
				s[0] = uint64(st)
				return
			}
			if typ != proxywasm.BufferHTTPRequestBody {
				s[0] = uint64(proxywasm.StatusBadArgument) // configuration buffers are read-only
				return
			}
			*b = splice(*b, uint64(u32(s[1])), uint64(u32(s[2])), data, in.x.req.NewBody)
			in.x.bodyChanged = true
			s[0] = uint64(proxywasm.StatusOK)
		}},
		{"proxy_get_header_map_size", ps(2), r32, func(_ context.Context, in *instance, s []uint64) {
			fs, _, st := in.fieldMap(proxywasm.MapType(s[0]))
			if st != proxywasm.StatusOK {
				s[0] = uint64(st)
				return
			}
			in.writeU32("proxy_get_header_map_size", u32(s[1]), uint32(proxywasm.HeaderMapSize(*fs)))
			s[0] = uint64(proxywasm.StatusOK)
		}},
		{"proxy_get_header_map_pairs", ps(3), r32, func(ctx context.Context, in *instance, s []uint64) {
			fs, _, st := in.fieldMap(proxywasm.MapType(s[0]))
			if st != proxywasm.StatusOK {
				s[0] = uint64(st)
				return
			}
			s[0] = uint64(in.copyOut(ctx, "proxy_get_header_map_pairs", proxywasm.EncodeHeaderMap(*fs), u32(s[1]), u32(s[2])))
		}},
		{"proxy_set_header_map_pairs", ps(3), r32, func(_ context.Context, in *instance, s []uint64) {
			raw := in.read("proxy_set_header_map_pairs", u32(s[1]), u32(s[2]))
			fs, changed, st := in.fieldMap(proxywasm.MapType(s[0]))
			if st != proxywasm.StatusOK {
				s[0] = uint64(st)
				return
			}
			nf, err := proxywasm.DecodeHeaderMap(raw)
			if err != nil {
				s[0] = uint64(proxywasm.StatusBadArgument)
				return
			}
			for i := range nf {
				nf[i][0] = strings.ToLower(nf[i][0])
			}
			*fs, *changed = nf, true
			s[0] = uint64(proxywasm.StatusOK)
		}},
		{"proxy_get_header_map_value", ps(5), r32, func(ctx context.Context, in *instance, s []uint64) {
			key := in.read("proxy_get_header_map_value", u32(s[1]), u32(s[2]))
			fs, _, st := in.fieldMap(proxywasm.MapType(s[0]))
			if st != proxywasm.StatusOK {
				s[0] = uint64(st)
				return
			}
			for _, f := range *fs {
				if equalFold(f[0], key) {
					s[0] = uint64(in.copyOut(ctx, "proxy_get_header_map_value", []byte(f[1]), u32(s[3]), u32(s[4])))
					return
				}
			}
			s[0] = uint64(proxywasm.StatusNotFound)
		}},
		{"proxy_add_header_map_value", ps(5), r32, func(_ context.Context, in *instance, s []uint64) {
			key := strings.ToLower(in.readString("proxy_add_header_map_value", u32(s[1]), u32(s[2])))
			val := in.readString("proxy_add_header_map_value", u32(s[3]), u32(s[4]))
			fs, changed, st := in.fieldMap(proxywasm.MapType(s[0]))
			if st != proxywasm.StatusOK {
				s[0] = uint64(st)
				return
			}
			*fs = append(*fs, [2]string{key, val})
			*changed = true
			s[0] = uint64(proxywasm.StatusOK)
		}},
		{"proxy_replace_header_map_value", ps(5), r32, func(_ context.Context, in *instance, s []uint64) {
			key := strings.ToLower(in.readString("proxy_replace_header_map_value", u32(s[1]), u32(s[2])))
			val := in.readString("proxy_replace_header_map_value", u32(s[3]), u32(s[4]))
			fs, changed, st := in.fieldMap(proxywasm.MapType(s[0]))
			if st != proxywasm.StatusOK {
				s[0] = uint64(st)
				return
			}
			out := (*fs)[:0:0]
			done := false
			for _, f := range *fs {
				if f[0] == key {
					if done {
						continue
					}
					f[1], done = val, true
				}
				out = append(out, f)
			}
			if !done {
				out = append(out, [2]string{key, val})
			}
			*fs, *changed = out, true
			s[0] = uint64(proxywasm.StatusOK)
		}},
		{"proxy_remove_header_map_value", ps(3), r32, func(_ context.Context, in *instance, s []uint64) {
			key := strings.ToLower(in.readString("proxy_remove_header_map_value", u32(s[1]), u32(s[2])))
			fs, changed, st := in.fieldMap(proxywasm.MapType(s[0]))
			if st != proxywasm.StatusOK {
				s[0] = uint64(st)
				return
			}
			out := (*fs)[:0:0]
			for _, f := range *fs {
				if f[0] != key {
					out = append(out, f)
				}
			}
			if len(out) != len(*fs) {
				*fs, *changed = out, true
			}
			s[0] = uint64(proxywasm.StatusOK)
		}},
		{"proxy_continue_stream", ps(1), r32, func(_ context.Context, in *instance, s []uint64) {
			switch st := proxywasm.StreamType(s[0]); {
			case st > proxywasm.StreamUpstream:
				s[0] = uint64(proxywasm.StatusBadArgument)
			case st != proxywasm.StreamHTTPRequest || in.x == nil:
				s[0] = uint64(proxywasm.StatusUnimplemented)
			default:
				in.x.continued = true
				s[0] = uint64(proxywasm.StatusOK)
			}
		}},
		{"proxy_close_stream", ps(1), r32, func(_ context.Context, in *instance, s []uint64) {
			switch st := proxywasm.StreamType(s[0]); {
			case st > proxywasm.StreamUpstream:
				s[0] = uint64(proxywasm.StatusBadArgument)
			case in.x == nil:
				s[0] = uint64(proxywasm.StatusNotFound)
			default:
				in.x.closed = true
				s[0] = uint64(proxywasm.StatusOK)
			}
		}},
		{"proxy_get_status", ps(3), r32, func(_ context.Context, in *instance, s []uint64) {
			// Only meaningful in HTTP/gRPC call callbacks, which never happen here.
			s[0] = uint64(proxywasm.StatusNotFound)
		}},
		{"proxy_send_local_response", ps(8), r32, func(_ context.Context, in *instance, s []uint64) {
			const fn = "proxy_send_local_response"
			details := in.readString(fn, u32(s[1]), u32(s[2]))
			body := append([]byte(nil), in.read(fn, u32(s[3]), u32(s[4]))...)
			raw := in.read(fn, u32(s[5]), u32(s[6]))
			if in.x == nil {
				s[0] = uint64(proxywasm.StatusNotFound)
				return
			}
			fs, err := proxywasm.DecodeHeaderMap(raw)
			if err != nil {
				s[0] = uint64(proxywasm.StatusBadArgument)
				return
			}
			lr := &LocalReply{Status: int(u32(s[0])), Details: details, Body: body, Header: make(map[string][]string, len(fs))}
			for _, f := range fs {
				lr.Header.Add(f[0], f[1])
			}
			in.x.local = lr
			s[0] = uint64(proxywasm.StatusOK)
		}},
		{"proxy_http_call", ps(10), r32, func(_ context.Context, in *instance, s []uint64) {
			const fn = "proxy_http_call"
			for i := 0; i < 8; i += 2 {
				in.read(fn, u32(s[i]), u32(s[i+1]))
			}
			in.read(fn, u32(s[9]), 4)
			s[0] = uint64(proxywasm.StatusBadArgument) // no upstream clusters in this host
		}},
		{"proxy_grpc_call", ps(12), r32, func(_ context.Context, in *instance, s []uint64) {
			for i := 0; i < 10; i += 2 {
				in.read("proxy_grpc_call", u32(s[i]), u32(s[i+1]))
			}
			s[0] = uint64(proxywasm.StatusBadArgument)
		}},
		{"proxy_grpc_stream", ps(9), r32, func(_ context.Context, in *instance, s []uint64) {
			for i := 0; i < 8; i += 2 {
				in.read("proxy_grpc_stream", u32(s[i]), u32(s[i+1]))
			}
			s[0] = uint64(proxywasm.StatusBadArgument)
		}},
		{"proxy_grpc_send", ps(4), r32, func(_ context.Context, in *instance, s []uint64) {
			in.read("proxy_grpc_send", u32(s[1]), u32(s[2]))
			s[0] = uint64(proxywasm.StatusNotFound)
		}},
		{"proxy_grpc_cancel", ps(1), r32, func(_ context.Context, _ *instance, s []uint64) { s[0] = uint64(proxywasm.StatusNotFound) }},
		{"proxy_grpc_close", ps(1), r32, func(_ context.Context, _ *instance, s []uint64) { s[0] = uint64(proxywasm.StatusNotFound) }},
		{"proxy_set_shared_data", ps(5), r32, func(_ context.Context, in *instance, s []uint64) {
			key := in.readString("proxy_set_shared_data", u32(s[0]), u32(s[1]))
			val := append([]byte(nil), in.read("proxy_set_shared_data", u32(s[2]), u32(s[3]))...)
			s[0] = uint64(in.h.shared.set(key, val, u32(s[4])))
		}},
		{"proxy_get_shared_data", ps(5), r32, func(ctx context.Context, in *instance, s []uint64) {
			key := in.readString("proxy_get_shared_data", u32(s[0]), u32(s[1]))
			val, cas, ok := in.h.shared.get(key)
			if !ok {
				s[0] = uint64(proxywasm.StatusNotFound)
				return
			}
			in.read("proxy_get_shared_data", u32(s[4]), 4)
			if st := in.copyOut(ctx, "proxy_get_shared_data", val, u32(s[2]), u32(s[3])); st != proxywasm.StatusOK {
				s[0] = uint64(st)
				return
			}
			in.writeU32("proxy_get_shared_data", u32(s[4]), cas)
			s[0] = uint64(proxywasm.StatusOK)
		}},
		{"proxy_register_shared_queue", ps(3), r32, func(_ context.Context, in *instance, s []uint64) {
			name := in.readString("proxy_register_shared_queue", u32(s[0]), u32(s[1]))
			in.writeU32("proxy_register_shared_queue", u32(s[2]), in.h.shared.register(in.h.opts.VMID, name))
			s[0] = uint64(proxywasm.StatusOK)
		}},
		{"proxy_resolve_shared_queue", ps(5), r32, func(_ context.Context, in *instance, s []uint64) {
			vm := in.readString("proxy_resolve_shared_queue", u32(s[0]), u32(s[1]))
			name := in.readString("proxy_resolve_shared_queue", u32(s[2]), u32(s[3]))
			id, ok := in.h.shared.resolve(vm, name)
			if !ok {
				s[0] = uint64(proxywasm.StatusNotFound)
				return
			}
			in.writeU32("proxy_resolve_shared_queue", u32(s[4]), id)
			s[0] = uint64(proxywasm.StatusOK)
		}},
		{"proxy_enqueue_shared_queue", ps(3), r32, func(_ context.Context, in *instance, s []uint64) {
			val := append([]byte(nil), in.read("proxy_enqueue_shared_queue", u32(s[1]), u32(s[2]))...)
			s[0] = uint64(in.h.shared.enqueue(u32(s[0]), val))
		}},
		{"proxy_dequeue_shared_queue", ps(3), r32, func(ctx context.Context, in *instance, s []uint64) {
			val, st := in.h.shared.dequeue(u32(s[0]))
			if st != proxywasm.StatusOK {
				s[0] = uint64(st)
				return
			}
			s[0] = uint64(in.copyOut(ctx, "proxy_dequeue_shared_queue", val, u32(s[1]), u32(s[2])))
		}},
		{"proxy_define_metric", ps(4), r32, func(_ context.Context, in *instance, s []uint64) {
			name := in.readString("proxy_define_metric", u32(s[1]), u32(s[2]))
			in.read("proxy_define_metric", u32(s[3]), 4)
			id, st := in.h.metrics.define(proxywasm.MetricType(s[0]), name)
			if st != proxywasm.StatusOK {
				in.h.log.Warn("wasm filter defined a metric this host rejects", "name", name, "status", st)
				s[0] = uint64(st)
				return
			}
			in.writeU32("proxy_define_metric", u32(s[3]), id)
			s[0] = uint64(proxywasm.StatusOK)
		}},
		{"proxy_increment_metric", []api.ValueType{i32, i64}, r32, func(_ context.Context, in *instance, s []uint64) {
			s[0] = uint64(in.h.metrics.increment(u32(s[0]), int64(s[1])))
		}},
		{"proxy_record_metric", []api.ValueType{i32, i64}, r32, func(_ context.Context, in *instance, s []uint64) {
			s[0] = uint64(in.h.metrics.record(u32(s[0]), s[1]))
		}},
		{"proxy_get_metric", ps(2), r32, func(_ context.Context, in *instance, s []uint64) {
			v, st := in.h.metrics.get(u32(s[0]))
			if st != proxywasm.StatusOK {
				s[0] = uint64(st)
				return
			}
			in.writeU64("proxy_get_metric", u32(s[1]), v)
			s[0] = uint64(proxywasm.StatusOK)
		}},
		{"proxy_get_property", ps(4), r32, func(ctx context.Context, in *instance, s []uint64) {
			path := in.read("proxy_get_property", u32(s[0]), u32(s[1]))
			v, ok := in.property(propertyKey(path))
			if !ok {
				s[0] = uint64(proxywasm.StatusNotFound)
				return
			}
			s[0] = uint64(in.copyOut(ctx, "proxy_get_property", v, u32(s[2]), u32(s[3])))
		}},
		{"proxy_set_property", ps(4), r32, func(_ context.Context, in *instance, s []uint64) {
			path := in.read("proxy_set_property", u32(s[0]), u32(s[1]))
			val := append([]byte(nil), in.read("proxy_set_property", u32(s[2]), u32(s[3]))...)
			if in.x == nil {
				s[0] = uint64(proxywasm.StatusNotFound)
				return
			}
			if in.x.props == nil {
				in.x.props = map[string][]byte{}
			}
			in.x.props[propertyKey(path)] = val
			s[0] = uint64(proxywasm.StatusOK)
		}},
		{"proxy_set_effective_context", ps(1), r32, func(_ context.Context, in *instance, s []uint64) {
			id := u32(s[0])
			if id == rootContextID || in.x != nil && id == in.x.id {
				s[0] = uint64(proxywasm.StatusOK)
			} else {
				s[0] = uint64(proxywasm.StatusBadArgument)
			}
		}},
		{"proxy_done", nil, r32, func(_ context.Context, _ *instance, s []uint64) {
			// Contexts are finalised at the end of every request anyway.
			s[0] = uint64(proxywasm.StatusNotFound)
		}},
		{"proxy_call_foreign_function", ps(6), r32, func(_ context.Context, in *instance, s []uint64) {
			in.read("proxy_call_foreign_function", u32(s[0]), u32(s[1]))
			in.read("proxy_call_foreign_function", u32(s[2]), u32(s[3]))
			s[0] = uint64(proxywasm.StatusNotFound)
		}},
	}
}

// buffer returns the buffer a guest may access now.
func (in *instance) buffer(typ proxywasm.BufferType) (*[]byte, proxywasm.Status) {
	if typ > proxywasm.BufferTypeMax {
		return nil, proxywasm.StatusBadArgument
	}
	switch {
	case typ == proxywasm.BufferHTTPRequestBody && in.x != nil && in.x.bodyPhase:
		return &in.x.body, proxywasm.StatusOK
	case typ == proxywasm.BufferVMConfiguration && in.phase == phaseVMStart:
		return &in.h.vmConfig, proxywasm.StatusOK
	case typ == proxywasm.BufferPluginConfiguration && in.phase == phaseConfigure:
		return &in.h.pluginConfig, proxywasm.StatusOK
	}
	return nil, proxywasm.StatusNotFound
}

// fieldMap returns the header map a guest may access now.
func (in *instance) fieldMap(mt proxywasm.MapType) (*[][2]string, *bool, proxywasm.Status) {
	if mt > proxywasm.MapTypeMax {
		return nil, nil, proxywasm.StatusBadArgument
	}
	if in.x != nil {
		switch mt {
		case proxywasm.MapHTTPRequestHeaders:
			return &in.x.headers, &in.x.hdrChanged, proxywasm.StatusOK
		case proxywasm.MapHTTPRequestTrailers:
			return &in.x.trailers, &in.x.trlChanged, proxywasm.StatusOK
		}
	}
	return nil, nil, proxywasm.StatusNotFound
}

// splice replaces size bytes at start with data, as Envoy's buffer
// operations do (start past the end appends).
// The result is new memory, from alloc when it is not nil.
func splice(b []byte, start, size uint64, data []byte, alloc func(int) []byte) []byte {
	n := uint64(len(b))
	if start > n {
		start = n
	}
	end := start + size
	if end > n {
		end = n
	}
	total := int(start) + len(data) + int(n-end)
	var out []byte
	if alloc != nil {
		out = alloc(total)[:0]
	}
	if cap(out) < total {
		out = make([]byte, 0, total)
	}
	out = append(out, b[:start]...)
	out = append(out, data...)
	return append(out, b[end:]...)
}

func equalFold(name string, key []byte) bool {
	if len(name) != len(key) {
		return false
	}
	for i := 0; i < len(key); i++ {
		c := key[i]
		if 'A' <= c && c <= 'Z' {
			c += 'a' - 'A'
		}
		if name[i] != c {
			return false
		}
	}
	return true
}

func (in *instance) guestLog(level proxywasm.LogLevel, msg string) {
	var l slog.Level
	switch level {
	case proxywasm.LogTrace, proxywasm.LogDebug:
		l = slog.LevelDebug
	case proxywasm.LogInfo:
		l = slog.LevelInfo
	case proxywasm.LogWarn:
		l = slog.LevelWarn
	default:
		l = slog.LevelError
	}
	if in.phase != phaseRequest && len(in.startupLog) < 64 {
		in.startupLog = append(in.startupLog, msg)
	}
	in.h.log.Log(context.Background(), l, msg, "source", "wasm", "plugin", in.h.opts.PluginName)
}
