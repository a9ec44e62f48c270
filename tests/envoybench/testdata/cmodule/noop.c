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
// Configured "pages" (row np), it does what "rewrite" does and also
// touches, on every request, as many distinct memory pages as the native
// module does beyond this module's rewrite (measured from
// /proc/<envoy>/smaps' Referenced after one request, BENCHMARKS §4): it
// calls one tiny function on each of PAGES_CODE code pages and writes a
// word in each of PAGES_DATA data pages. Its own work is a few hundred
// instructions: what it costs Envoy beyond nr is what that many pages cost
// a request on this machine.
//
// Every other hook returns at once; a filter and a configuration are a
// non-NULL handle that points at nothing but says which of the five it is.

#include <stdint.h>
#include <stdio.h>
#include <string.h>

#include "abi.h"
#include "body.h"

// The ABI version of envoy/native/internal/abi/abi.h, as the Go module
// reports it (native.ABIVersion).
envoy_dynamic_module_type_abi_version_module_ptr envoy_dynamic_module_on_program_init(void) { return "v0.2.0"; }

// BUFFERS is the handle of a configuration, and of its filters, that
// buffer the body; CALLS of those that also make kvgate's calls;
// REWRITES of those that also write the body back; and PAGES of those
// that also touch the native module's pages.
#define BUFFERS 2
#define CALLS 3
#define REWRITES 4
#define PAGES 5

// makes_calls is true of the handles of CALLS, REWRITES and PAGES: those
// that make kvgate's calls.
static bool makes_calls(uintptr_t m) { return m >= CALLS && m <= PAGES; }

// The counter each of those configurations defined, by handle (one family
// each, no labels).
static size_t counters[PAGES + 1];

// seen takes what a CALLS filter read, so that the compiler keeps the
// reading.
static volatile size_t seen;

// The native module's pages per 4 KiB request beyond nr's (BENCHMARKS §4):
// its text, and its data, Go heap and stacks.
#define PAGES_CODE 72
#define PAGES_DATA 64

// page_fn is PAGES_CODE functions, each alone on a page of its own.
#define PAGE_FN(n) \
  __attribute__((noinline, aligned(4096))) static int page_fn_##n(int x) { return x * (n + 3) + 1; }
#define PAGE_FN8(n) PAGE_FN(n##0) PAGE_FN(n##1) PAGE_FN(n##2) PAGE_FN(n##3) PAGE_FN(n##4) PAGE_FN(n##5) PAGE_FN(n##6) PAGE_FN(n##7)
PAGE_FN8(1) PAGE_FN8(2) PAGE_FN8(3) PAGE_FN8(4) PAGE_FN8(5) PAGE_FN8(6) PAGE_FN8(7) PAGE_FN8(8) PAGE_FN8(9)
#define PAGE_REF8(n) page_fn_##n##0, page_fn_##n##1, page_fn_##n##2, page_fn_##n##3, page_fn_##n##4, page_fn_##n##5, page_fn_##n##6, page_fn_##n##7
static int (*const volatile page_fns[PAGES_CODE])(int) = {PAGE_REF8(1), PAGE_REF8(2), PAGE_REF8(3), PAGE_REF8(4), PAGE_REF8(5),
                                                          PAGE_REF8(6), PAGE_REF8(7), PAGE_REF8(8), PAGE_REF8(9)};
static char page_data[PAGES_DATA][4096] __attribute__((aligned(4096)));

// touch_pages runs every page function and writes a word on every data
// page.
static void touch_pages(void) {
  int x = (int)seen;
  for (int i = 0; i < PAGES_CODE; i++) x = page_fns[i](x);
  for (int i = 0; i < PAGES_DATA; i++) {
    int* w = (int*)page_data[i];
    *w += x;
    x ^= *w;
  }
  seen += (size_t)x;
}

static envoy_dynamic_module_type_module_buffer str(const char* s) {
  return (envoy_dynamic_module_type_module_buffer){.ptr = s, .length = strlen(s)};
}

static int holds(envoy_dynamic_module_type_http_filter_module_ptr p) {
  return (uintptr_t)p == BUFFERS || makes_calls((uintptr_t)p);
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
static void calls_body(envoy_dynamic_module_type_http_filter_envoy_ptr f, bool rewrites, size_t counter) {
  size_t size = kvgate_request_body_size(f, true);
  seen += quotes(f, envoy_dynamic_module_type_http_body_type_BufferedRequestBody);
  if (!envoy_dynamic_module_callback_http_received_buffered_request_body(f))
    seen += quotes(f, envoy_dynamic_module_type_http_body_type_ReceivedRequestBody);
  envoy_dynamic_module_callback_http_set_filter_state_bytes(f, str("wasm.kvgate.hint"), str("stripped"));
  envoy_dynamic_module_callback_http_set_filter_state_bytes(f, str("wasm.kvgate.hint_reason"), str("untrusted"));
  envoy_dynamic_module_callback_http_set_filter_state_bytes(f, str("wasm.kvgate.sender_trusted"), str("false"));
  // A REWRITES filter counts only the bodies it wrote back, so that the
  // row's counter shows it rewrote what it forwarded.
  if (!rewrites || rewrite(f)) envoy_dynamic_module_callback_http_filter_increment_counter(f, counter, NULL, 0, 1);
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
  static const struct {
    const char *config, *counter;
    uintptr_t handle;
  } calling[] = {{"calls", "kvgate_bench_calls", CALLS}, {"rewrite", "kvgate_bench_rewrites", REWRITES}, {"pages", "kvgate_bench_pages", PAGES}};
  for (size_t i = 0; i < sizeof calling / sizeof calling[0]; i++) {
    if (config.length != strlen(calling[i].config) || memcmp(config.ptr, calling[i].config, config.length) != 0) continue;
    uintptr_t h = calling[i].handle;
    if (envoy_dynamic_module_callback_http_filter_config_define_counter(filter_config_envoy_ptr, str(calling[i].counter), NULL, 0,
                                                                        &counters[h]) != envoy_dynamic_module_type_metrics_result_Success)
      return NULL;
    return (envoy_dynamic_module_type_http_filter_config_module_ptr)h;
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
  uintptr_t m = (uintptr_t)filter_module_ptr;
  if (makes_calls(m)) calls_headers(filter_envoy_ptr);
  if (holds(filter_module_ptr) && !end_of_stream)
    return envoy_dynamic_module_type_on_http_filter_request_headers_status_StopIteration;
  return envoy_dynamic_module_type_on_http_filter_request_headers_status_Continue;
}

envoy_dynamic_module_type_on_http_filter_request_body_status envoy_dynamic_module_on_http_filter_request_body(
    envoy_dynamic_module_type_http_filter_envoy_ptr filter_envoy_ptr,
    envoy_dynamic_module_type_http_filter_module_ptr filter_module_ptr, bool end_of_stream) {
  if (holds(filter_module_ptr) && !end_of_stream)
    return envoy_dynamic_module_type_on_http_filter_request_body_status_StopIterationAndBuffer;
  uintptr_t m = (uintptr_t)filter_module_ptr;
  if (makes_calls(m)) calls_body(filter_envoy_ptr, m != CALLS, counters[m]);
  if (m == PAGES) touch_pages();
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
