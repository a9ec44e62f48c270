// Package abi is the proxy-wasm ABI 0.2.1 glue of the kvgate filter: the
// only place with //go:wasmexport and //go:wasmimport. It builds for
// GOOS=wasip1 only (this file documents it on every platform) and is linked
// into the module by wasm/guest. Everything else is in package filter; the
// ABI itself, to the byte, and its constants and header map codec are in
// package proxywasm.
//
// # Host functions imported
//
// Exactly the ten of proxywasm's "Host functions kvgate's guest imports",
// from module "env":
//
//	proxy_log
//	proxy_get_buffer_bytes, proxy_set_buffer_bytes
//	proxy_get_header_map_pairs, proxy_remove_header_map_value
//	proxy_send_local_response
//	proxy_define_metric, proxy_increment_metric
//	proxy_get_property, proxy_set_property
//
// A host running this module must provide all of them;
// Envoy (1.33 and later) and the proxy-wasm-go-sdk v0.24.0 proxytest runner
// both do.
//
// proxy_get_property is called only when trusted_senders is configured,
// for the paths "connection\0mtls", "connection\0uri_san_peer_certificate",
// "connection\0dns_san_peer_certificate" and "source\0address" (segments
// separated by NUL, no trailing NUL).
//
// proxy_set_property is called with the single-segment paths "kvgate.hint",
// "kvgate.hint_reason" and "kvgate.hint_detail" (no NUL) and text values,
// during request callbacks: what became of the request's hint, for the
// host's access log. Envoy stores the value as the filter state object
// "wasm.<path>". A failure is logged and never fails the request.
//
// WASI (module "wasi_snapshot_preview1"): whatever the Go runtime imports
// (fd_write, random_get, clock_time_get, environ_*, args_*, proc_exit,
// sched_yield, poll_oneoff, fd_close, fd_fdstat_*, fd_prestat_*). The guest
// never sleeps, starts goroutines or timers, or calls runtime.GC, so the
// scheduler never idles and poll_oneoff is not reached in practice.
//
// # Callbacks exported
//
// The callbacks of proxywasm's "Callbacks a guest exports" that the filter
// acts on, and no others:
//
//	proxy_abi_version_0_2_1, proxy_on_memory_allocate
//	proxy_on_context_create, proxy_on_vm_start, proxy_on_configure
//	proxy_on_request_headers, proxy_on_request_body, proxy_on_request_trailers
//	proxy_on_log, proxy_on_delete
//
// The request callbacks run the filter (filter.Plugin); proxy_on_log and
// proxy_on_delete forget the stream.
//
// A host skips a callback a module does not export, as if it had returned
// ActionContinue (or, for proxy_on_done, true): Envoy's proxy-wasm host
// and the sidecar's both do. Each callback left out is a transition into
// the VM saved on every request: the response's headers, every chunk of
// its body (one per few tokens of a streamed answer) and its trailers, and
// proxy_on_done. proxy_on_log stays: Envoy creates a stream context in the
// VM just to log a request that never reached the filter (a local reply
// from an earlier filter or the codec), and whether proxy_on_delete
// follows depends on the order in which it logs and destroys filters, so
// the stream is forgotten at whichever comes first.
//
// # Memory
//
// proxy_on_memory_allocate carves blocks from a reusable arena
// (filter/internal/arena) that keeps each block referenced until the guest
// has read it: the arena is reset only at the start of the next host call
// that returns memory. Steady-state allocation never calls into the Go
// allocator, so it cannot start a garbage collection or reach poll_oneoff.
package abi
