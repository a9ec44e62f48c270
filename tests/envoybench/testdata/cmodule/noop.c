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
// runtime: what the native module (row n) costs beyond it is its own.
//
// Configured "rewrite" (row nr), it does what "calls" does and also
// writes the body back through Envoy's callbacks as a rewriting filter
// must: it copies the body out, drains it and appends the copy, unchanged
// (kvgate would append it without the hint). What n and nw cost beyond it
// is their module's own work.
//
// Every other hook returns at once; a filter and a configuration are a
// non-NULL handle that points at nothing but says which of the four it is.

#include <stdint.h>
#include <stdio.h>
#include <string.h>

#include "abi.h"
#include "body.h"

// The ABI version of envoy/native/internal/abi/abi.h, as the Go module
// reports it (native.ABIVersion).
envoy_dynamic_module_type_abi_version_module_ptr envoy_dynamic_module_on_program_init(void) { return "v0.2.0"; }

// BUFFERS is the handle of a configuration, and of its filters, that
// buffer the body; CALLS of those that also make kvgate's calls, and
// REWRITES of those that also write the body back.
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

// copy_out appends the slices of one body buffer to copy (at *size, at
// most cap bytes in all) and returns how many bytes that buffer held, or
// -1 when it does not fit.
static long copy_out(envoy_dynamic_module_type_http_filter_envoy_ptr f, envoy_dynamic_module_type_http_body_type t,
                     char* copy, size_t cap, size_t* size) {
  envoy_dynamic_module_type_envoy_buffer bufs[256];
  size_t n = envoy_dynamic_module_callback_http_get_body_chunks_size(f, t), held = 0;
  if (n > 256 || (n > 0 && !envoy_dynamic_module_callback_http_get_body_chunks(f, t, bufs))) return -1;
  for (size_t i = 0; i < n; i++) {
    if (*size + bufs[i].length > cap) return -1;
    memcpy(copy + *size, bufs[i].ptr, bufs[i].length);
    *size += bufs[i].length;
    held += bufs[i].length;
  }
  return (long)held;
}

// rewrite replaces the body by a copy of itself, where it lies as the
// native module finds it (envoy/native's bodyParts): the buffered body,
// and the hook's own data when that is apart from it; the copy goes
// where the native module appends a new body. False when nothing was
// rewritten.
static bool rewrite(envoy_dynamic_module_type_http_filter_envoy_ptr f) {
  const envoy_dynamic_module_type_http_body_type bt = envoy_dynamic_module_type_http_body_type_BufferedRequestBody;
  const envoy_dynamic_module_type_http_body_type rt = envoy_dynamic_module_type_http_body_type_ReceivedRequestBody;
  static __thread char copy[1 << 16];
  size_t size = 0;
  bool apart = !envoy_dynamic_module_callback_http_received_buffered_request_body(f);
  long buffered = copy_out(f, bt, copy, sizeof copy, &size), received = 0;
  if (buffered < 0 || (apart && (received = copy_out(f, rt, copy, sizeof copy, &size)) < 0) || size == 0) return false;
  if ((buffered > 0 && !envoy_dynamic_module_callback_http_drain_body(f, bt, (size_t)buffered)) ||
      (received > 0 && !envoy_dynamic_module_callback_http_drain_body(f, rt, (size_t)received)))
    return false;
  return envoy_dynamic_module_callback_http_append_body(f, apart ? rt : bt,
                                                        (envoy_dynamic_module_type_module_buffer){.ptr = copy, .length = size});
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
  // A REWRITES filter counts only the bodies it wrote back, so that the
  // row's counter shows it rewrote what it forwarded.
  if (!rewrites || rewrite(f)) envoy_dynamic_module_callback_http_filter_increment_counter(f, rewrites ? rewrites_counter : calls_counter, NULL, 0, 1);
  if (rewrites) size = kvgate_request_body_size(f, true);
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
