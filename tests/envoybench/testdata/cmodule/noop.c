// A dynamic module that does nothing, in C: row n0 of tests/envoybench, the
// floor of any dynamic-module HTTP filter in Envoy (Envoy's filter, its
// calls into a shared library), without a Go runtime. It is to the native
// rows what the bare wasm module (row c0) is to the wasm rows.
//
// Configured "buffer" (row nb), it holds the headers and buffers the whole
// body before letting the request on, as the buffer filter (row b) and
// kvgate do: the floor of a dynamic module that reads whole bodies.
//
// Configured "calls" (row nk), it also makes the Envoy calls kvgate makes
// for an untrusted 4 KiB request, in C: it reads the request headers and
// removes Content-Length, and at the end of the body reads its size and
// slices, looks at every byte once (memchr for the quotes, as a scan
// would), sets kvgate's three access-log filter-state objects, counts, and
// gives the headers the body's length. It leaves the body as it came. It is
// the floor of a module that does kvgate's work in Envoy, with no Go
// runtime: what the native module (row n) costs beyond it is Go's.
//
// Configured "rewrite" (row nr), it does what "calls" does and also
// writes the body back through Envoy's callbacks as a rewriting filter
// must: it copies the body out, drains it and appends the copy, unchanged
// (kvgate would append it without the hint). What n and nw cost beyond it
// is their module's own work.
//
// Every other hook returns at once; a filter and a configuration are a
// non-NULL handle that points at nothing but says which of the three it is.

#include <stdint.h>
#include <stdio.h>
#include <string.h>

#include "abi.h"
#include "body.h"

// The ABI version of envoy/native/internal/abi/abi.h, as the Go module
// reports it (native.ABIVersion).
envoy_dynamic_module_type_abi_version_module_ptr envoy_dynamic_module_on_program_init(void) { return "v0.2.0"; }

// BUFFERS is the handle of a configuration, and of its filters, that
// buffer the body; CALLS of those that also make kvgate's calls.
#define BUFFERS 2
#define CALLS 3
#define REWRITES 4

// The counters a CALLS and a REWRITES configuration defined (one family
// each, no labels).
static size_t calls_counter, rewrites_counter;

// seen takes what a CALLS filter read, so that the compiler keeps the
// reading.
static volatile size_t seen;

static envoy_dynamic_module_type_module_buffer str(const char* s) {
  return (envoy_dynamic_module_type_module_buffer){.ptr = s, .length = strlen(s)};
}

static int holds(envoy_dynamic_module_type_http_filter_module_ptr p) {
  return (uintptr_t)p == BUFFERS || (uintptr_t)p == CALLS || (uintptr_t)p == REWRITES;
}

// calls_headers reads the request headers, as kvgate does to decide
// (content type, encoding, length), and removes Content-Length.
static void calls_headers(envoy_dynamic_module_type_http_filter_envoy_ptr f) {
  const envoy_dynamic_module_type_http_header_type t = envoy_dynamic_module_type_http_header_type_RequestHeader;
  envoy_dynamic_module_type_envoy_http_header hs[64];
  size_t n = envoy_dynamic_module_callback_http_get_headers_size(f, t);
  if (n > 0 && n <= 64 && envoy_dynamic_module_callback_http_get_headers(f, t, hs))
    for (size_t i = 0; i < n; i++) seen += hs[i].key_length + hs[i].value_length;
  envoy_dynamic_module_callback_http_set_header(f, t, str("content-length"), (envoy_dynamic_module_type_module_buffer){0});
}

// quotes counts the quotes in a body buffer's slices.
static size_t quotes(envoy_dynamic_module_type_http_filter_envoy_ptr f, envoy_dynamic_module_type_http_body_type t) {
  envoy_dynamic_module_type_envoy_buffer bufs[256];
  size_t n = envoy_dynamic_module_callback_http_get_body_chunks_size(f, t), q = 0;
  if (n == 0 || n > 256 || !envoy_dynamic_module_callback_http_get_body_chunks(f, t, bufs)) return 0;
  for (size_t i = 0; i < n; i++) {
    const char* p = bufs[i].ptr;
    const char* end = p + bufs[i].length;
    while ((p = memchr(p, '"', (size_t)(end - p))) != NULL) {
      q++;
      if (++p >= end) break;
    }
  }
  return q;
}

// rewrite replaces the buffered body by a copy of itself.
static void rewrite(envoy_dynamic_module_type_http_filter_envoy_ptr f) {
  const envoy_dynamic_module_type_http_body_type t = envoy_dynamic_module_type_http_body_type_BufferedRequestBody;
  envoy_dynamic_module_type_envoy_buffer bufs[256];
  static __thread char copy[1 << 16];
  size_t n = envoy_dynamic_module_callback_http_get_body_chunks_size(f, t), size = 0;
  if (n == 0 || n > 256 || !envoy_dynamic_module_callback_http_get_body_chunks(f, t, bufs)) return;
  for (size_t i = 0; i < n; i++) size += bufs[i].length;
  if (size > sizeof copy) return;
  for (size_t i = 0, o = 0; i < n; o += bufs[i].length, i++) memcpy(copy + o, bufs[i].ptr, bufs[i].length);
  envoy_dynamic_module_callback_http_drain_body(f, t, size);
  envoy_dynamic_module_callback_http_append_body(f, t, (envoy_dynamic_module_type_module_buffer){.ptr = copy, .length = size});
}

// calls_body does kvgate's calls at the end of the body.
static void calls_body(envoy_dynamic_module_type_http_filter_envoy_ptr f, bool rewrites) {
  size_t size = kvgate_request_body_size(f, true);
  seen += quotes(f, envoy_dynamic_module_type_http_body_type_BufferedRequestBody);
  if (!envoy_dynamic_module_callback_http_received_buffered_request_body(f))
    seen += quotes(f, envoy_dynamic_module_type_http_body_type_ReceivedRequestBody);
  envoy_dynamic_module_callback_http_set_filter_state_bytes(f, str("wasm.kvgate.hint"), str("stripped"));
  envoy_dynamic_module_callback_http_set_filter_state_bytes(f, str("wasm.kvgate.hint_reason"), str("untrusted"));
  envoy_dynamic_module_callback_http_set_filter_state_bytes(f, str("wasm.kvgate.sender_trusted"), str("false"));
  envoy_dynamic_module_callback_http_filter_increment_counter(f, rewrites ? rewrites_counter : calls_counter, NULL, 0, 1);
  if (rewrites) {
    rewrite(f);
    size = kvgate_request_body_size(f, true);
  }
  char len[24];
  int k = snprintf(len, sizeof len, "%zu", size);
  envoy_dynamic_module_callback_http_set_header(f, envoy_dynamic_module_type_http_header_type_RequestHeader,
                                                str("content-length"),
                                                (envoy_dynamic_module_type_module_buffer){.ptr = len, .length = (size_t)k});
}

envoy_dynamic_module_type_http_filter_config_module_ptr envoy_dynamic_module_on_http_filter_config_new(
    envoy_dynamic_module_type_http_filter_config_envoy_ptr filter_config_envoy_ptr,
    envoy_dynamic_module_type_envoy_buffer name, envoy_dynamic_module_type_envoy_buffer config) {
  if (config.length == 6 && memcmp(config.ptr, "buffer", 6) == 0)
    return (envoy_dynamic_module_type_http_filter_config_module_ptr)BUFFERS;
  bool rewrites = config.length == 7 && memcmp(config.ptr, "rewrite", 7) == 0;
  if (rewrites || (config.length == 5 && memcmp(config.ptr, "calls", 5) == 0)) {
    if (envoy_dynamic_module_callback_http_filter_config_define_counter(filter_config_envoy_ptr, str(rewrites ? "kvgate_bench_rewrites" : "kvgate_bench_calls"),
                                                                        NULL, 0, rewrites ? &rewrites_counter : &calls_counter) !=
        envoy_dynamic_module_type_metrics_result_Success)
      return NULL;
    return (envoy_dynamic_module_type_http_filter_config_module_ptr)(uintptr_t)(rewrites ? REWRITES : CALLS);
  }
  return (envoy_dynamic_module_type_http_filter_config_module_ptr)1;
}

void envoy_dynamic_module_on_http_filter_config_destroy(
    envoy_dynamic_module_type_http_filter_config_module_ptr filter_config_ptr) {}

envoy_dynamic_module_type_http_filter_per_route_config_module_ptr
envoy_dynamic_module_on_http_filter_per_route_config_new(envoy_dynamic_module_type_envoy_buffer name,
                                                         envoy_dynamic_module_type_envoy_buffer config) {
  return NULL;
}

void envoy_dynamic_module_on_http_filter_per_route_config_destroy(
    envoy_dynamic_module_type_http_filter_per_route_config_module_ptr filter_config_ptr) {}

envoy_dynamic_module_type_http_filter_module_ptr envoy_dynamic_module_on_http_filter_new(
    envoy_dynamic_module_type_http_filter_config_module_ptr filter_config_ptr,
    envoy_dynamic_module_type_http_filter_envoy_ptr filter_envoy_ptr) {
  return (envoy_dynamic_module_type_http_filter_module_ptr)filter_config_ptr;
}

envoy_dynamic_module_type_on_http_filter_request_headers_status envoy_dynamic_module_on_http_filter_request_headers(
    envoy_dynamic_module_type_http_filter_envoy_ptr filter_envoy_ptr,
    envoy_dynamic_module_type_http_filter_module_ptr filter_module_ptr, bool end_of_stream) {
  if ((uintptr_t)filter_module_ptr == CALLS || (uintptr_t)filter_module_ptr == REWRITES) calls_headers(filter_envoy_ptr);
  if (holds(filter_module_ptr) && !end_of_stream)
    return envoy_dynamic_module_type_on_http_filter_request_headers_status_StopIteration;
  return envoy_dynamic_module_type_on_http_filter_request_headers_status_Continue;
}

envoy_dynamic_module_type_on_http_filter_request_body_status envoy_dynamic_module_on_http_filter_request_body(
    envoy_dynamic_module_type_http_filter_envoy_ptr filter_envoy_ptr,
    envoy_dynamic_module_type_http_filter_module_ptr filter_module_ptr, bool end_of_stream) {
  if (holds(filter_module_ptr) && !end_of_stream)
    return envoy_dynamic_module_type_on_http_filter_request_body_status_StopIterationAndBuffer;
  if ((uintptr_t)filter_module_ptr == CALLS || (uintptr_t)filter_module_ptr == REWRITES)
    calls_body(filter_envoy_ptr, (uintptr_t)filter_module_ptr == REWRITES);
  return envoy_dynamic_module_type_on_http_filter_request_body_status_Continue;
}

envoy_dynamic_module_type_on_http_filter_request_trailers_status envoy_dynamic_module_on_http_filter_request_trailers(
    envoy_dynamic_module_type_http_filter_envoy_ptr filter_envoy_ptr,
    envoy_dynamic_module_type_http_filter_module_ptr filter_module_ptr) {
  return envoy_dynamic_module_type_on_http_filter_request_trailers_status_Continue;
}

envoy_dynamic_module_type_on_http_filter_response_headers_status envoy_dynamic_module_on_http_filter_response_headers(
    envoy_dynamic_module_type_http_filter_envoy_ptr filter_envoy_ptr,
    envoy_dynamic_module_type_http_filter_module_ptr filter_module_ptr, bool end_of_stream) {
  return envoy_dynamic_module_type_on_http_filter_response_headers_status_Continue;
}

envoy_dynamic_module_type_on_http_filter_response_body_status envoy_dynamic_module_on_http_filter_response_body(
    envoy_dynamic_module_type_http_filter_envoy_ptr filter_envoy_ptr,
    envoy_dynamic_module_type_http_filter_module_ptr filter_module_ptr, bool end_of_stream) {
  return envoy_dynamic_module_type_on_http_filter_response_body_status_Continue;
}

envoy_dynamic_module_type_on_http_filter_response_trailers_status envoy_dynamic_module_on_http_filter_response_trailers(
    envoy_dynamic_module_type_http_filter_envoy_ptr filter_envoy_ptr,
    envoy_dynamic_module_type_http_filter_module_ptr filter_module_ptr) {
  return envoy_dynamic_module_type_on_http_filter_response_trailers_status_Continue;
}

void envoy_dynamic_module_on_http_filter_stream_complete(
    envoy_dynamic_module_type_http_filter_envoy_ptr filter_envoy_ptr,
    envoy_dynamic_module_type_http_filter_module_ptr filter_module_ptr) {}

void envoy_dynamic_module_on_http_filter_destroy(envoy_dynamic_module_type_http_filter_module_ptr filter_module_ptr) {}

// The hooks of events a do-nothing filter never causes.
#include "unused_hooks.h"
