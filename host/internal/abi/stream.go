package abi

import (
	"context"

	"github.com/kvgate/kvgate/proxywasm"
)

// streamFuncs: the HTTP stream's flow (resume, reset, answer locally) and
// its contexts.
func streamFuncs() []hostFunc {
	return []hostFunc{
		fn("proxy_continue_stream", ps(1), func(_ context.Context, in *Instance, s []uint64) proxywasm.Status {
			switch st := proxywasm.StreamType(s[0]); {
			case st > proxywasm.StreamUpstream:
				return proxywasm.StatusBadArgument
			case st != proxywasm.StreamHTTPRequest || in.Stream == nil:
				return proxywasm.StatusUnimplemented
			}
			in.Stream.Continued = true
			return proxywasm.StatusOK
		}),
		fn("proxy_close_stream", ps(1), func(_ context.Context, in *Instance, s []uint64) proxywasm.Status {
			switch st := proxywasm.StreamType(s[0]); {
			case st > proxywasm.StreamUpstream:
				return proxywasm.StatusBadArgument
			case in.Stream == nil:
				return proxywasm.StatusNotFound
			}
			in.Stream.Closed = true
			return proxywasm.StatusOK
		}),
		fn("proxy_send_local_response", ps(8), func(_ context.Context, in *Instance, s []uint64) proxywasm.Status {
			const name = "proxy_send_local_response"
			details := in.Mem.ReadString(name, uint32(s[1]), uint32(s[2]))
			body := append([]byte(nil), in.Mem.Read(name, uint32(s[3]), uint32(s[4]))...)
			raw := in.Mem.Read(name, uint32(s[5]), uint32(s[6]))
			if in.Stream == nil {
				return proxywasm.StatusNotFound
			}
			hdrs, err := proxywasm.DecodeHeaderMap(raw)
			if err != nil {
				return proxywasm.StatusBadArgument
			}
			in.Stream.Local = &LocalReply{Status: int(uint32(s[0])), Details: details, Headers: hdrs, Body: body}
			return proxywasm.StatusOK
		}),
		fn("proxy_set_effective_context", ps(1), func(_ context.Context, in *Instance, s []uint64) proxywasm.Status {
			if id := uint32(s[0]); id == RootContextID || in.Stream != nil && id == in.Stream.ID {
				return proxywasm.StatusOK
			}
			return proxywasm.StatusBadArgument
		}),
		fn("proxy_done", nil, func(context.Context, *Instance, []uint64) proxywasm.Status {
			// Contexts are finalised at the end of every request anyway.
			return proxywasm.StatusNotFound
		}),
	}
}
