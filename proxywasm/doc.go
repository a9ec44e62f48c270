// Package proxywasm is the contract between kvgate's proxy-wasm guest and
// its hosts: the constants and the header map codec of the proxy-wasm ABI
// 0.2.1, and (in this comment) the ABI itself, to the byte, as the guest
// (filter/abi), the Go host (host/) and the host's test guest use it. It
// imports nothing but the standard library's errors package and builds for
// every platform, wasip1 included.
//
// # Conventions
//
// A guest is a WebAssembly module with one exported memory. It imports the
// host functions from the module "env" (and WASI preview 1 from
// "wasi_snapshot_preview1") and exports the callbacks the host calls.
//
//   - Every pointer and size is an i32: an offset into the guest's linear
//     memory, or a byte count. The only i64 arguments are metric values and
//     increments.
//   - Multi-byte integers in memory (return slots, map fields) are
//     little-endian.
//   - Strings are passed as (pointer, size) without a terminator; the host
//     copies what it keeps before it returns.
//   - A host function returns a Status (an i32); StatusOK is 0.
//   - A pointer or size that reaches outside the guest's memory is the
//     guest's fault: the call returns StatusInvalidMemoryAccess, as Envoy's
//     host answers it, and does nothing else (the Go host checks every
//     range, return slots included, before it changes anything).
//
// # Returning memory to the guest
//
// A host function that returns bytes (buffers, header maps, properties)
// takes two i32 arguments, return_data and return_size: the addresses of
// two u32 slots in guest memory. The host calls the guest's export
// proxy_on_memory_allocate(size) for a block of size bytes, copies the
// bytes there, and writes the block's address into return_data and the
// size into return_size. Nothing to return is written as address 0, size 0
// without an allocation. The block is the guest's: the host never touches
// it again. An allocator that answers 0 makes the call fail with
// StatusInvalidMemoryAccess.
//
// # Statuses
//
//	0 Ok                   the call did what it says
//	1 NotFound             no such buffer, map, key, property, metric or context now
//	2 BadArgument          an enum out of range, a malformed map, a call not allowed now
//	3 SerializationFailure
//	4 ParseFailure
//	5 BadExpression
//	6 InvalidMemoryAccess  a pointer or size outside the guest's memory, or the guest's allocator gave no memory
//	7 Empty                a shared queue has nothing to dequeue
//	8 CasMismatch          shared data changed since it was read
//	9 ResultMismatch
//	10 InternalFailure
//	11 BrokenConnection
//	12 Unimplemented       the host does not do this (for example: continue a response)
//
// # Header maps
//
// A header map (request headers and trailers; the additional headers of a
// local reply) is a list of (key, value) byte strings, repeated keys
// allowed, encoded as: the pair count (u32); then, per pair, the key size
// and the value size (u32 each, not counting terminators); then, per pair,
// the key bytes, a NUL, the value bytes, a NUL. For the two pairs
// ("a", "1") and ("bc", ""), 28 bytes:
//
//	offset  bytes        field
//	0       02 00 00 00  pair count: 2
//	4       01 00 00 00  key 0 size: 1
//	8       01 00 00 00  value 0 size: 1
//	12      02 00 00 00  key 1 size: 2
//	16      00 00 00 00  value 1 size: 0
//	20      61 00        "a" NUL
//	22      31 00        "1" NUL
//	24      62 63 00     "bc" NUL
//	27      00           "" NUL
//
// The empty map is 00 00 00 00. A decoder here also takes an empty buffer
// or a single NUL byte for the empty map, and refuses (ErrBadHeaderMap) a
// count whose size fields do not fit, a pair that runs past the end or a
// missing NUL; bytes after the last pair are ignored. Hosts give header
// names in lower case, HTTP/2 pseudo-headers (":method", ":path",
// ":authority", ":scheme") first. AppendHeaderMap, EncodeHeaderMap,
// ForEachHeader and DecodeHeaderMap implement the codec.
//
// # Host functions kvgate's guest imports
//
// These ten are the whole of what filter/abi imports from "env"; Envoy
// (1.33 and later), the proxy-wasm-go-sdk proxytest runner and host/ all
// provide them.
//
//	proxy_log(level i32, message_data i32, message_size i32) -> status i32
//	    level is a LogLevel (0 trace ... 5 critical); another level is
//	    BadArgument.
//	proxy_get_buffer_bytes(buffer_type i32, start i32, max_size i32,
//	                       return_data i32, return_size i32) -> status i32
//	    buffer_type is a BufferType. Returns bytes [start, start+max_size) of
//	    the buffer, cut at its end, as described under "Returning memory".
//	    kvgate reads BufferHTTPRequestBody (in proxy_on_request_body) and
//	    BufferPluginConfiguration (in proxy_on_configure) from start 0. A
//	    buffer that does not exist now is NotFound, which kvgate reads as
//	    empty.
//	proxy_set_buffer_bytes(buffer_type i32, start i32, size i32,
//	                       data i32, data_size i32) -> status i32
//	    Replaces bytes [start, start+size) of the buffer by data (a start
//	    past the end appends). kvgate replaces the whole request body:
//	    BufferHTTPRequestBody, start 0, size = the body's current length.
//	    Configuration buffers are read-only (BadArgument).
//	proxy_get_header_map_pairs(map_type i32, return_data i32, return_size i32) -> status i32
//	    map_type is a MapType. Returns every pair of the map, encoded as
//	    under "Header maps". kvgate reads MapHTTPRequestHeaders.
//	proxy_remove_header_map_value(map_type i32, key_data i32, key_size i32) -> status i32
//	    Removes every value of the key (compared in lower case). Removing
//	    an absent key is Ok. kvgate removes "content-length" from the
//	    request headers when it changes a body.
//	proxy_send_local_response(status_code i32, details_data i32, details_size i32,
//	                          body_data i32, body_size i32,
//	                          headers_data i32, headers_size i32,
//	                          grpc_status i32) -> status i32
//	    Answers the current request with an HTTP status, a body and extra
//	    headers (a header map; size 0 for none); details is the reason
//	    Envoy logs (%RESPONSE_CODE_DETAILS%). grpc_status is GRPCStatusNone
//	    (-1) for a plain HTTP reply. Nothing is forwarded upstream; kvgate's
//	    callback then returns ActionPause.
//	proxy_define_metric(metric_type i32, name_data i32, name_size i32,
//	                    return_metric_id i32) -> status i32
//	    metric_type is a MetricType; the metric's id is written as a u32 at
//	    return_metric_id.
//	proxy_increment_metric(metric_id i32, offset i64) -> status i32
//	    Adds offset (signed) to a counter or gauge; an unknown id is
//	    NotFound.
//	proxy_get_property(path_data i32, path_size i32,
//	                   return_data i32, return_size i32) -> status i32
//	    Returns a property of the stream, the connection or the plugin, as
//	    under "Returning memory". path is the property's name in segments
//	    separated by NUL bytes ("source\0address"; host/ also takes a
//	    trailing NUL). Values come in Envoy's encoding: a string as its bytes
//	    without a terminator, an integer as 8 bytes little-endian, a bool
//	    as one byte. A property the host does not have is NotFound. kvgate
//	    reads connection.mtls, connection.uri_san_peer_certificate,
//	    connection.dns_san_peer_certificate and source.address, only when
//	    trusted_senders is configured.
//	proxy_set_property(path_data i32, path_size i32,
//	                   value_data i32, value_size i32) -> status i32
//	    Sets a property of the current stream to value. Envoy keeps it as
//	    the filter state object "wasm.<path>", which an access log prints
//	    with %FILTER_STATE(wasm.<path>:PLAIN)%; host/ hands it to the caller
//	    in Decision.Properties. kvgate sets "kvgate.hint",
//	    "kvgate.hint_reason" and "kvgate.hint_detail" (single segments)
//	    during request callbacks; a failure is never a request failure.
//
// Host functions in general: host/internal/abi lists every one the Go host
// provides, with the statuses it answers.
//
// # Callbacks a guest exports
//
//	_initialize()                                     a reactor module's start (Go: runtime and package init); called first
//	proxy_abi_version_0_2_1()                         marks the ABI version; never called
//	proxy_on_memory_allocate(size i32) -> ptr i32     a block of size bytes for the host to fill
//	proxy_on_context_create(context_id i32, parent_context_id i32)
//	    parent 0: a root (plugin) context; otherwise an HTTP stream of that root
//	proxy_on_vm_start(root_context_id i32, vm_configuration_size i32) -> ok i32
//	proxy_on_configure(root_context_id i32, plugin_configuration_size i32) -> ok i32
//	    0 rejects the configuration: the host does not start the plugin
//	proxy_on_request_headers(context_id i32, num_headers i32, end_of_stream i32) -> action i32
//	proxy_on_request_body(context_id i32, body_buffer_length i32, end_of_stream i32) -> action i32
//	proxy_on_request_trailers(context_id i32, num_trailers i32) -> action i32
//	proxy_on_response_headers(context_id i32, num_headers i32, end_of_stream i32) -> action i32
//	proxy_on_response_body(context_id i32, body_buffer_length i32, end_of_stream i32) -> action i32
//	proxy_on_response_trailers(context_id i32, num_trailers i32) -> action i32
//	proxy_on_done(context_id i32) -> done i32
//	proxy_on_log(context_id i32)
//	proxy_on_delete(context_id i32)
//
// end_of_stream is 1 on the last call for the stream's direction. The
// actions are ActionContinue (0) and ActionPause (1). A body callback that
// pauses until end_of_stream makes the host buffer the whole body, which
// proxy_get_buffer_bytes(BufferHTTPRequestBody) then returns. Each HTTP
// stream ends with proxy_on_done, proxy_on_log and proxy_on_delete.
//
// A guest exports only the callbacks it needs. A host does not call one
// that is not exported and goes on as if it had returned ActionContinue
// (true for proxy_on_done). kvgate's guest exports the list in filter/abi's
// package documentation, which leaves out the response callbacks and
// proxy_on_done.
package proxywasm
