// The event hooks kvgate answers without entering Go: each costs Envoy a
// plain C call instead of a transition into the Go runtime (main.go has the
// ones that run the filter).

#include <stdint.h>
#include <stdlib.h>

#include "abi.h"
#include "body.h"
#include "stream.h"

// The Go hooks (main.go).
extern envoy_dynamic_module_type_on_http_filter_request_body_status kvgate_go_request_body(
    envoy_dynamic_module_type_http_filter_envoy_ptr filter_envoy_ptr, kvgate_stream* s, bool end_of_stream);
extern void kvgate_go_destroy(uint64_t handle);

// Every thread that creates filters gets a slot (1, 2, …): the Go side keeps
// one filter.Plugin per slot. Stream ids count per thread.
static uint64_t kvgate_slots;
static __thread uint64_t kvgate_slot;
static __thread uint32_t kvgate_next_stream;

// A stream's object (stream.h) carries its handle: slot<<48 | config<<32 |
// stream id (config is the configuration's handle, 1…0xffff; module.go
// decodes it).
envoy_dynamic_module_type_http_filter_module_ptr envoy_dynamic_module_on_http_filter_new(
    envoy_dynamic_module_type_http_filter_config_module_ptr filter_config_ptr,
    envoy_dynamic_module_type_http_filter_envoy_ptr filter_envoy_ptr) {
  (void)filter_envoy_ptr;
  uintptr_t cfg = (uintptr_t)filter_config_ptr;
  if (cfg == 0 || cfg > 0xffff) return NULL;
  if (kvgate_slot == 0) {
    kvgate_slot = __atomic_add_fetch(&kvgate_slots, 1, __ATOMIC_RELAXED);
    if (kvgate_slot > 0xffff) {
      kvgate_slot = 0;
      return NULL;
    }
  }
  kvgate_stream* s = malloc(sizeof(*s));
  if (s == NULL) return NULL;
  uint32_t id = ++kvgate_next_stream & 0x7fffffff;
  if (id == 0) id = kvgate_next_stream = 1;
  s->handle = (kvgate_slot << 48) | ((uint64_t)cfg << 32) | id;
  s->pass = false;
  s->limit = -1;
  return s;
}

// The request body hook, in C where the last Go hook said what it would do
// (stream.h): a chunk of a body that passes goes on, and one before the end
// of a body being held, within the limit, is buffered, without entering
// Go: a 1 MiB body arrives in about 64 chunks, and each call into the Go
// runtime costs Envoy more than this check. Everything else runs the Go
// hook (main.go), which answers a body over the limit.
envoy_dynamic_module_type_on_http_filter_request_body_status envoy_dynamic_module_on_http_filter_request_body(
    envoy_dynamic_module_type_http_filter_envoy_ptr filter_envoy_ptr,
    envoy_dynamic_module_type_http_filter_module_ptr filter_module_ptr, bool end_of_stream) {
  kvgate_stream* s = (kvgate_stream*)filter_module_ptr;
  if (s != NULL && s->pass) return envoy_dynamic_module_type_on_http_filter_request_body_status_Continue;
  if (s != NULL && !end_of_stream && s->limit >= 0) {
    if (kvgate_request_body_size(filter_envoy_ptr, true) <= (uint64_t)s->limit) return envoy_dynamic_module_type_on_http_filter_request_body_status_StopIterationAndBuffer;
  }
  return kvgate_go_request_body(filter_envoy_ptr, s, end_of_stream);
}

// The stream is over: its object goes, after the Go side forgot it.
void envoy_dynamic_module_on_http_filter_destroy(envoy_dynamic_module_type_http_filter_module_ptr filter_module_ptr) {
  kvgate_stream* s = (kvgate_stream*)filter_module_ptr;
  if (s == NULL) return;
  kvgate_go_destroy(s->handle);
  free(s);
}

// Per-route configuration is not used: kvgate has none.
envoy_dynamic_module_type_http_filter_per_route_config_module_ptr
envoy_dynamic_module_on_http_filter_per_route_config_new(envoy_dynamic_module_type_envoy_buffer name,
                                                         envoy_dynamic_module_type_envoy_buffer config) {
  (void)name;
  (void)config;
  return NULL;
}

void envoy_dynamic_module_on_http_filter_per_route_config_destroy(
    envoy_dynamic_module_type_http_filter_per_route_config_module_ptr filter_config_ptr) {
  (void)filter_config_ptr;
}

// The response is never looked at.
envoy_dynamic_module_type_on_http_filter_response_headers_status envoy_dynamic_module_on_http_filter_response_headers(
    envoy_dynamic_module_type_http_filter_envoy_ptr filter_envoy_ptr,
    envoy_dynamic_module_type_http_filter_module_ptr filter_module_ptr, bool end_of_stream) {
  (void)filter_envoy_ptr;
  (void)filter_module_ptr;
  (void)end_of_stream;
  return envoy_dynamic_module_type_on_http_filter_response_headers_status_Continue;
}

envoy_dynamic_module_type_on_http_filter_response_body_status envoy_dynamic_module_on_http_filter_response_body(
    envoy_dynamic_module_type_http_filter_envoy_ptr filter_envoy_ptr,
    envoy_dynamic_module_type_http_filter_module_ptr filter_module_ptr, bool end_of_stream) {
  (void)filter_envoy_ptr;
  (void)filter_module_ptr;
  (void)end_of_stream;
  return envoy_dynamic_module_type_on_http_filter_response_body_status_Continue;
}

envoy_dynamic_module_type_on_http_filter_response_trailers_status envoy_dynamic_module_on_http_filter_response_trailers(
    envoy_dynamic_module_type_http_filter_envoy_ptr filter_envoy_ptr,
    envoy_dynamic_module_type_http_filter_module_ptr filter_module_ptr) {
  (void)filter_envoy_ptr;
  (void)filter_module_ptr;
  return envoy_dynamic_module_type_on_http_filter_response_trailers_status_Continue;
}

// The stream's state is released in envoy_dynamic_module_on_http_filter_destroy.
void envoy_dynamic_module_on_http_filter_stream_complete(
    envoy_dynamic_module_type_http_filter_envoy_ptr filter_envoy_ptr,
    envoy_dynamic_module_type_http_filter_module_ptr filter_module_ptr) {
  (void)filter_envoy_ptr;
  (void)filter_module_ptr;
}

// kvgate_config_ptr turns a configuration handle into the pointer Envoy
// keeps (main.go; in C, since Go vet rightly distrusts integer-to-pointer
// conversions).
envoy_dynamic_module_type_http_filter_config_module_ptr kvgate_config_ptr(uintptr_t handle) {
  return (envoy_dynamic_module_type_http_filter_config_module_ptr)handle;
}

// Hooks Envoy resolves for every HTTP filter module whose events kvgate
// never causes: no-ops, shared with tests/envoybench's C module.
#include "unused_hooks.h"
