// A dynamic module that does nothing, in C: row n0 of tests/envoybench, the
// floor of any dynamic-module HTTP filter in Envoy (Envoy's filter, its
// calls into a shared library), without a Go runtime. It is to the native
// rows what the bare wasm module (row c0) is to the wasm rows.
//
// Configured "buffer" (row nb), it holds the headers and buffers the whole
// body before letting the request on, as the buffer filter (row b) and
// kvgate do: the floor of a dynamic module that reads whole bodies.
//
// Every hook returns at once; a filter and a configuration are a non-NULL
// handle that points at nothing but says which of the two it is.

#include <stdint.h>
#include <string.h>

#include "abi.h"

// The ABI version of envoy/native/internal/abi/abi.h, as the Go module
// reports it (native.ABIVersion).
envoy_dynamic_module_type_abi_version_module_ptr envoy_dynamic_module_on_program_init(void) { return "v0.2.0"; }

// BUFFERS is the handle of a configuration, and of its filters, that
// buffer the body.
#define BUFFERS 2

envoy_dynamic_module_type_http_filter_config_module_ptr envoy_dynamic_module_on_http_filter_config_new(
    envoy_dynamic_module_type_http_filter_config_envoy_ptr filter_config_envoy_ptr,
    envoy_dynamic_module_type_envoy_buffer name, envoy_dynamic_module_type_envoy_buffer config) {
  if (config.length == 6 && memcmp(config.ptr, "buffer", 6) == 0)
    return (envoy_dynamic_module_type_http_filter_config_module_ptr)BUFFERS;
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
  if ((uintptr_t)filter_module_ptr == BUFFERS && !end_of_stream)
    return envoy_dynamic_module_type_on_http_filter_request_headers_status_StopIteration;
  return envoy_dynamic_module_type_on_http_filter_request_headers_status_Continue;
}

envoy_dynamic_module_type_on_http_filter_request_body_status envoy_dynamic_module_on_http_filter_request_body(
    envoy_dynamic_module_type_http_filter_envoy_ptr filter_envoy_ptr,
    envoy_dynamic_module_type_http_filter_module_ptr filter_module_ptr, bool end_of_stream) {
  if ((uintptr_t)filter_module_ptr == BUFFERS && !end_of_stream)
    return envoy_dynamic_module_type_on_http_filter_request_body_status_StopIterationAndBuffer;
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
