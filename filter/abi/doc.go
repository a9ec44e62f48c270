// Package abi is the proxy-wasm ABI 0.2.1 glue of the kvgate filter: the
// only place with //go:wasmexport and //go:wasmimport. It builds for
// GOOS=wasip1 only (this file documents it on every platform) and is linked
// into the module by wasm/guest. Everything else is in package filter.
//
// All pointers and sizes are i32 (wasm32 linear-memory addresses). Status
// results are proxy-wasm WasmResult codes: 0 Ok, 1 NotFound, 2 BadArgument,
// ..., 12 Unimplemented.
//
// # Host functions imported (module "env"), exactly these nine
//
// A host running this module must provide all of them; Envoy (1.33 and
// later) and the proxy-wasm-go-sdk v0.24.0 proxytest runner both do.
//
//	proxy_log(level i32, message_data i32, message_size i32) -> status i32
//	    level: 0 trace, 1 debug, 2 info, 3 warn, 4 error, 5 critical.
//	proxy_get_buffer_bytes(buffer_type i32, start i32, max_size i32,
//	                       return_buffer_data i32, return_buffer_size i32) -> status i32
//	    Used with buffer_type 0 (HttpRequestBody) and 7 (PluginConfiguration),
//	    start 0. The host copies min(max_size, available) bytes into memory it
//	    obtains from proxy_on_memory_allocate and writes that address and the
//	    length as little-endian u32 at return_buffer_data/return_buffer_size.
//	    NotFound (or Ok with nothing written) means an empty buffer.
//	proxy_set_buffer_bytes(buffer_type i32, start i32, size i32,
//	                       buffer_data i32, buffer_size i32) -> status i32
//	    Used with buffer_type 0, start 0 and size = the whole current body
//	    length: replace the whole request body by buffer_data[:buffer_size].
//	proxy_get_header_map_pairs(map_type i32, return_map_data i32, return_map_size i32) -> status i32
//	    Used with map_type 0 (HttpRequestHeaders). Returns every header,
//	    repeated names included, serialized as: u32 pair count, then per pair
//	    u32 key size and u32 value size, then per pair key bytes, NUL, value
//	    bytes, NUL (all little-endian); memory from proxy_on_memory_allocate.
//	proxy_remove_header_map_value(map_type i32, key_data i32, key_size i32) -> status i32
//	    Used with map_type 0 and key "content-length" (all values removed).
//	proxy_send_local_response(status_code i32, status_code_details_data i32,
//	                          status_code_details_size i32, body_data i32, body_size i32,
//	                          additional_headers_map_data i32, additional_headers_size i32,
//	                          grpc_status i32) -> status i32
//	    Answers the current request; headers use the map format above;
//	    grpc_status is -1 (none).
//	proxy_define_metric(metric_type i32, metric_name_data i32, metric_name_size i32,
//	                    return_metric_id i32) -> status i32
//	    Used with metric_type 0 (counter); the id is written as u32.
//	proxy_increment_metric(metric_id i32, offset i64) -> status i32
//	proxy_set_property(path_data i32, path_size i32, value_data i32, value_size i32) -> status i32
//	    Used with single-segment paths "kvgate.hint", "kvgate.hint_reason"
//	    and "kvgate.hint_detail" (no NUL) and text values, during request
//	    callbacks: what became of the request's hint, for the host's access
//	    log. Envoy stores the value as the filter state object
//	    "wasm.<path>". A failure is logged and never fails the request.
//
// WASI (module "wasi_snapshot_preview1"): whatever the Go runtime imports
// (fd_write, random_get, clock_time_get, environ_*, args_*, proc_exit,
// sched_yield, poll_oneoff, fd_close, fd_fdstat_*, fd_prestat_*). The guest
// never sleeps, starts goroutines or timers, or calls runtime.GC, so the
// scheduler never idles and poll_oneoff is not reached in practice.
//
// # Callbacks exported
//
//	_initialize()                                   Go runtime start (c-shared); hosts call it first
//	proxy_abi_version_0_2_1()
//	proxy_on_memory_allocate(size i32) -> ptr i32
//	proxy_on_context_create(context_id i32, parent_context_id i32)
//	proxy_on_vm_start(root_context_id i32, vm_configuration_size i32) -> bool i32
//	proxy_on_configure(root_context_id i32, plugin_configuration_size i32) -> bool i32
//	proxy_on_request_headers(context_id i32, num_headers i32, end_of_stream i32) -> action i32
//	proxy_on_request_body(context_id i32, body_buffer_length i32, end_of_stream i32) -> action i32
//	proxy_on_request_trailers(context_id i32, num_trailers i32) -> action i32
//	proxy_on_response_headers(context_id i32, num_headers i32, end_of_stream i32) -> action i32   (Continue)
//	proxy_on_response_body(context_id i32, body_buffer_length i32, end_of_stream i32) -> action i32 (Continue)
//	proxy_on_response_trailers(context_id i32, num_trailers i32) -> action i32   (Continue)
//	proxy_on_done(context_id i32) -> bool i32
//	proxy_on_log(context_id i32)
//	proxy_on_delete(context_id i32)
//
// Actions: 0 Continue, 1 Pause (StopIteration / StopIterationAndBuffer).
//
// # Memory
//
// proxy_on_memory_allocate carves blocks from a reusable arena
// (filter/internal/arena) that keeps each block referenced until the guest
// has read it: the arena is reset only at the start of the next host call
// that returns memory. Steady-state allocation never calls into the Go
// allocator, so it cannot start a garbage collection or reach poll_oneoff.
package abi
