package abi

import (
	"context"

	"github.com/kvgate/kvgate/proxywasm"
)

// bufferFuncs: the request body and the configuration buffers.
func bufferFuncs() []hostFunc {
	return []hostFunc{
		fn("proxy_get_buffer_status", ps(3), func(_ context.Context, in *Instance, s []uint64) proxywasm.Status {
			b, st := in.buffer(proxywasm.BufferType(s[0]))
			if st != proxywasm.StatusOK {
				return st
			}
			in.Mem.WriteU32("proxy_get_buffer_status", uint32(s[1]), uint32(len(*b)))
			in.Mem.WriteU32("proxy_get_buffer_status", uint32(s[2]), 0)
			return proxywasm.StatusOK
		}),
		fn("proxy_get_buffer_bytes", ps(5), func(ctx context.Context, in *Instance, s []uint64) proxywasm.Status {
			b, st := in.buffer(proxywasm.BufferType(s[0]))
			if st != proxywasm.StatusOK {
				return st
			}
			start, n := uint64(uint32(s[1])), uint64(uint32(s[2]))
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
			return in.copyOut(ctx, "proxy_get_buffer_bytes", data, uint32(s[3]), uint32(s[4]))
		}),
		fn("proxy_set_buffer_bytes", ps(5), func(_ context.Context, in *Instance, s []uint64) proxywasm.Status {
			data := in.Mem.Read("proxy_set_buffer_bytes", uint32(s[3]), uint32(s[4]))
			typ := proxywasm.BufferType(s[0])
			b, st := in.buffer(typ)
			if st != proxywasm.StatusOK {
				return st
			}
			if typ != proxywasm.BufferHTTPRequestBody {
				return proxywasm.StatusBadArgument // configuration buffers are read-only
			}
			var alloc func(int) []byte
			if ba := in.Plugin.BodyAlloc; ba != nil {
				alloc = func(n int) []byte { return ba(in.Stream.Context, n) }
			}
			*b = splice(*b, uint64(uint32(s[1])), uint64(uint32(s[2])), data, alloc)
			in.Stream.BodyChanged = true
			return proxywasm.StatusOK
		}),
	}
}

// buffer returns the buffer a guest may access now.
func (in *Instance) buffer(typ proxywasm.BufferType) (*[]byte, proxywasm.Status) {
	if typ > proxywasm.BufferTypeMax {
		return nil, proxywasm.StatusBadArgument
	}
	switch {
	case typ == proxywasm.BufferHTTPRequestBody && in.Stream != nil && in.Stream.BodyReadable:
		return &in.Stream.Body, proxywasm.StatusOK
	case typ == proxywasm.BufferVMConfiguration && in.Phase == PhaseVMStart:
		return &in.Plugin.VMConfig, proxywasm.StatusOK
	case typ == proxywasm.BufferPluginConfiguration && in.Phase == PhaseConfigure:
		return &in.Plugin.PluginConfig, proxywasm.StatusOK
	}
	return nil, proxywasm.StatusNotFound
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
