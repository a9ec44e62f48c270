//go:build kvgate_noop

package main

/*
#cgo CFLAGS: -I${SRCDIR}/../internal/abi
#include "abi.h"
#include "stream.h"
*/
import "C"

import "github.com/kvgate/kvgate/envoy/native"

// The kvgate_noop build answers every request hook with Continue at once,
// after entering Go and doing what every hook does first
// (native.Module.Enter): the floor of a Go dynamic module in Envoy,
// measured beside kvgate's in tests/envoybench (as row nc, with
// KVGATE_NATIVE_MODULE set to this build; row n0 is the C floor). Every
// body chunk enters Go: the stream's object is never told to answer one
// in C.

//export envoy_dynamic_module_on_http_filter_request_headers
func envoy_dynamic_module_on_http_filter_request_headers(f C.envoy_dynamic_module_type_http_filter_envoy_ptr,
	h C.envoy_dynamic_module_type_http_filter_module_ptr, eos C.bool) C.envoy_dynamic_module_type_on_http_filter_request_headers_status {
	module.Enter(handleOf(streamOf(h)))
	return native.HeadersContinue
}

//export kvgate_go_request_body
func kvgate_go_request_body(f C.envoy_dynamic_module_type_http_filter_envoy_ptr, s *C.kvgate_stream, eos C.bool) C.envoy_dynamic_module_type_on_http_filter_request_body_status {
	module.Enter(handleOf(s))
	return native.BodyContinue
}

//export envoy_dynamic_module_on_http_filter_request_trailers
func envoy_dynamic_module_on_http_filter_request_trailers(f C.envoy_dynamic_module_type_http_filter_envoy_ptr,
	h C.envoy_dynamic_module_type_http_filter_module_ptr) C.envoy_dynamic_module_type_on_http_filter_request_trailers_status {
	module.Enter(handleOf(streamOf(h)))
	return native.TrailersContinue
}
