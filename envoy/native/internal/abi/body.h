// Helpers over the body callbacks, shared by the Go binding (abi.go) and
// the C hooks (libkvgate/hooks.c), so that both compute a body's size
// the same way.

#pragma once

#include <stdbool.h>
#include <stddef.h>

#include "abi.h"

// kvgate_request_body_size is the size of the whole request body received
// so far: the buffered body, and in a body hook (in_body) the hook's own
// data unless it is the buffered body itself.
static inline size_t kvgate_request_body_size(envoy_dynamic_module_type_http_filter_envoy_ptr f, bool in_body) {
  size_t n = envoy_dynamic_module_callback_http_get_body_size(f, envoy_dynamic_module_type_http_body_type_BufferedRequestBody);
  if (in_body && !envoy_dynamic_module_callback_http_received_buffered_request_body(f))
    n += envoy_dynamic_module_callback_http_get_body_size(f, envoy_dynamic_module_type_http_body_type_ReceivedRequestBody);
  return n;
}
