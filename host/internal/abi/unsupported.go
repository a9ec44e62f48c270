package abi

import (
	"context"

	"github.com/kvgate/kvgate/proxywasm"
)

// unsupportedFuncs are the calls this host answers without doing the work:
// it has no upstream clusters to call, keeps no data or queues shared
// between plugins, and knows no foreign functions. Each still checks its
// pointers and answers as Envoy does when there is nothing to call or find:
// an outgoing call to an unknown cluster is BadArgument, an unknown call,
// key, queue or function is NotFound. Storing shared data or registering a
// queue, which Envoy would do, is Unimplemented.
func unsupportedFuncs() []hostFunc {
	return []hostFunc{
		fn("proxy_http_call", ps(10), func(_ context.Context, in *Instance, s []uint64) proxywasm.Status {
			for i := 0; i < 8; i += 2 {
				in.Mem.Read("proxy_http_call", uint32(s[i]), uint32(s[i+1]))
			}
			in.Mem.Read("proxy_http_call", uint32(s[9]), 4)
			return proxywasm.StatusBadArgument
		}),
		fn("proxy_grpc_call", ps(12), func(_ context.Context, in *Instance, s []uint64) proxywasm.Status {
			for i := 0; i < 10; i += 2 {
				in.Mem.Read("proxy_grpc_call", uint32(s[i]), uint32(s[i+1]))
			}
			return proxywasm.StatusBadArgument
		}),
		fn("proxy_grpc_stream", ps(9), func(_ context.Context, in *Instance, s []uint64) proxywasm.Status {
			for i := 0; i < 8; i += 2 {
				in.Mem.Read("proxy_grpc_stream", uint32(s[i]), uint32(s[i+1]))
			}
			return proxywasm.StatusBadArgument
		}),
		fn("proxy_grpc_send", ps(4), func(_ context.Context, in *Instance, s []uint64) proxywasm.Status {
			in.Mem.Read("proxy_grpc_send", uint32(s[1]), uint32(s[2]))
			return proxywasm.StatusNotFound
		}),
		fn("proxy_grpc_cancel", ps(1), notFound),
		fn("proxy_grpc_close", ps(1), notFound),
		fn("proxy_get_status", ps(3), notFound), // only meaningful in call callbacks, which never come
		fn("proxy_set_shared_data", ps(5), func(_ context.Context, in *Instance, s []uint64) proxywasm.Status {
			in.Mem.Read("proxy_set_shared_data", uint32(s[0]), uint32(s[1]))
			in.Mem.Read("proxy_set_shared_data", uint32(s[2]), uint32(s[3]))
			return proxywasm.StatusUnimplemented
		}),
		fn("proxy_get_shared_data", ps(5), func(_ context.Context, in *Instance, s []uint64) proxywasm.Status {
			in.Mem.Read("proxy_get_shared_data", uint32(s[0]), uint32(s[1]))
			return proxywasm.StatusNotFound
		}),
		fn("proxy_register_shared_queue", ps(3), func(_ context.Context, in *Instance, s []uint64) proxywasm.Status {
			in.Mem.Read("proxy_register_shared_queue", uint32(s[0]), uint32(s[1]))
			return proxywasm.StatusUnimplemented
		}),
		fn("proxy_resolve_shared_queue", ps(5), func(_ context.Context, in *Instance, s []uint64) proxywasm.Status {
			in.Mem.Read("proxy_resolve_shared_queue", uint32(s[0]), uint32(s[1]))
			in.Mem.Read("proxy_resolve_shared_queue", uint32(s[2]), uint32(s[3]))
			return proxywasm.StatusNotFound
		}),
		fn("proxy_enqueue_shared_queue", ps(3), func(_ context.Context, in *Instance, s []uint64) proxywasm.Status {
			in.Mem.Read("proxy_enqueue_shared_queue", uint32(s[1]), uint32(s[2]))
			return proxywasm.StatusNotFound
		}),
		fn("proxy_dequeue_shared_queue", ps(3), notFound),
		fn("proxy_call_foreign_function", ps(6), func(_ context.Context, in *Instance, s []uint64) proxywasm.Status {
			in.Mem.Read("proxy_call_foreign_function", uint32(s[0]), uint32(s[1]))
			in.Mem.Read("proxy_call_foreign_function", uint32(s[2]), uint32(s[3]))
			return proxywasm.StatusNotFound
		}),
	}
}

func notFound(context.Context, *Instance, []uint64) proxywasm.Status { return proxywasm.StatusNotFound }
