// The module's per-stream object, the pointer Envoy keeps for a stream
// (envoy_dynamic_module_type_http_filter_module_ptr): made in C by
// envoy_dynamic_module_on_http_filter_new, freed in C by
// envoy_dynamic_module_on_http_filter_destroy, and holding no Go pointer.

#ifndef KVGATE_STREAM_H
#define KVGATE_STREAM_H

#include <stdbool.h>
#include <stdint.h>

typedef struct kvgate_stream {
  // The stream's handle in envoy/native: slot<<48 | config<<32 | stream id.
  uint64_t handle;
  // What the next request body hook does without Go, as the last Go hook
  // left it (filter.NextBody): pass, every chunk goes on; else a
  // chunk that does not end the stream is held while the body is at most
  // limit bytes, when limit >= 0.
  bool pass;
  int64_t limit;
} kvgate_stream;

#endif
