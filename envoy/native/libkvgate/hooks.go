//go:build !kvgate_noop

package main

/*
#cgo CFLAGS: -I${SRCDIR}/../internal/abi
#include "abi.h"
#include "stream.h"
*/
import "C"

import (
	"unsafe"

	"github.com/kvgate/kvgate/envoy/native/internal/abi"
	"github.com/kvgate/kvgate/filter"
)

// The request hooks that run the filter (the kvgate_noop build has its
// own, noop.go).

// after records in the stream's object what its next body hook does
// without Go (hooks.c), as the hook just run said (next), after a hook
// that did not end the stream: after the end of the stream or its
// trailers no body hook follows.
func after(s *C.kvgate_stream, eos C.bool, next filter.NextBody) {
	if s == nil || bool(eos) {
		return
	}
	s.pass, s.limit = C.bool(next.Pass), C.int64_t(next.Limit)
}

//export envoy_dynamic_module_on_http_filter_request_headers
func envoy_dynamic_module_on_http_filter_request_headers(f C.envoy_dynamic_module_type_http_filter_envoy_ptr,
	h C.envoy_dynamic_module_type_http_filter_module_ptr, eos C.bool) C.envoy_dynamic_module_type_on_http_filter_request_headers_status {
	s := streamOf(h)
	st, next := module.RequestHeaders(abi.FilterOf(unsafe.Pointer(f)), handleOf(s), bool(eos))
	after(s, eos, next)
	return C.envoy_dynamic_module_type_on_http_filter_request_headers_status(st)
}

// kvgate_go_request_body is the request body hook where hooks.c's C one
// cannot answer alone.
//
//export kvgate_go_request_body
func kvgate_go_request_body(f C.envoy_dynamic_module_type_http_filter_envoy_ptr, s *C.kvgate_stream, eos C.bool) C.envoy_dynamic_module_type_on_http_filter_request_body_status {
	st, next := module.RequestBody(abi.FilterOf(unsafe.Pointer(f)), handleOf(s), bool(eos))
	after(s, eos, next)
	return C.envoy_dynamic_module_type_on_http_filter_request_body_status(st)
}

//export envoy_dynamic_module_on_http_filter_request_trailers
func envoy_dynamic_module_on_http_filter_request_trailers(f C.envoy_dynamic_module_type_http_filter_envoy_ptr,
	h C.envoy_dynamic_module_type_http_filter_module_ptr) C.envoy_dynamic_module_type_on_http_filter_request_trailers_status {
	st := module.RequestTrailers(abi.FilterOf(unsafe.Pointer(f)), handleOf(streamOf(h)))
	return C.envoy_dynamic_module_type_on_http_filter_request_trailers_status(st)
}
