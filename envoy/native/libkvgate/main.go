// Command libkvgate is kvgate's Envoy dynamic module: built with
// -buildmode=c-shared into libkvgate.so (`make envoy-module`), loaded by
// Envoy's envoy.filters.http.dynamic_modules filter (envoy/envoy-native.yaml).
// This file exports the event hooks that run the filter (package
// envoy/native); hooks.c has the ones that need no Go.
//
// Every exported function recovers: a Go panic must never unwind into
// Envoy, which would abort the process.
package main

/*
#cgo CFLAGS: -I${SRCDIR}/../internal/abi
#include "abi.h"
#include "stream.h"

envoy_dynamic_module_type_http_filter_config_module_ptr kvgate_config_ptr(uintptr_t handle);
*/
import "C"

import (
	"os"
	"unsafe"

	"github.com/kvgate/kvgate/envoy/native"
	"github.com/kvgate/kvgate/envoy/native/internal/abi"
)

func main() {}

// module's own Env only logs: counters are defined on each
// configuration's Env.
var module = native.New(&native.EnvoyEnv{})

var abiVersion = C.CString(native.ABIVersion)

//export envoy_dynamic_module_on_program_init
func envoy_dynamic_module_on_program_init() (v C.envoy_dynamic_module_type_abi_version_module_ptr) {
	defer func() {
		if recover() != nil {
			v = nil
		}
	}()
	if why := native.CheckABI(); why != "" {
		// Envoy's log is not reachable without the callbacks: stderr.
		os.Stderr.WriteString(why + "\n")
		return nil
	}
	return abiVersion
}

//export envoy_dynamic_module_on_http_filter_config_new
func envoy_dynamic_module_on_http_filter_config_new(envoyPtr C.envoy_dynamic_module_type_http_filter_config_envoy_ptr,
	name, config C.envoy_dynamic_module_type_envoy_buffer) (h C.envoy_dynamic_module_type_http_filter_config_module_ptr) {
	defer func() {
		if recover() != nil {
			h = nil
		}
	}()
	env := &native.EnvoyEnv{Config: abi.ConfigOf(unsafe.Pointer(envoyPtr))}
	n := string(abi.EnvoyBytes(unsafe.Pointer(name.ptr), uintptr(name.length)))
	doc := abi.EnvoyBytes(unsafe.Pointer(config.ptr), uintptr(config.length))
	handle, err := module.NewConfig(env, n, doc)
	if err != nil {
		env.Log(5, "kvgate: "+err.Error())
		return nil
	}
	return C.kvgate_config_ptr(C.uintptr_t(handle))
}

//export envoy_dynamic_module_on_http_filter_config_destroy
func envoy_dynamic_module_on_http_filter_config_destroy(h C.envoy_dynamic_module_type_http_filter_config_module_ptr) {
	module.DestroyConfig(uintptr(h))
}

// streamOf returns the stream object of Envoy's module pointer (hooks.c
// made it; nil when it did not).
func streamOf(h C.envoy_dynamic_module_type_http_filter_module_ptr) *C.kvgate_stream {
	return (*C.kvgate_stream)(unsafe.Pointer(h))
}

// handleOf is the stream's handle in package native; 0, which the module
// refuses, without a stream object.
func handleOf(s *C.kvgate_stream) uintptr {
	if s == nil {
		return 0
	}
	return uintptr(s.handle)
}

// after records what the stream's next body hook does without Go
// (hooks.c), after a hook that did not end the stream: after the end of
// the stream or its trailers no body hook follows.
func after(s *C.kvgate_stream, eos C.bool) {
	if s == nil || bool(eos) {
		return
	}
	pass, limit := module.NextBody(uintptr(s.handle))
	s.pass, s.limit = C.bool(pass), C.int64_t(limit)
}

//export envoy_dynamic_module_on_http_filter_request_headers
func envoy_dynamic_module_on_http_filter_request_headers(f C.envoy_dynamic_module_type_http_filter_envoy_ptr,
	h C.envoy_dynamic_module_type_http_filter_module_ptr, eos C.bool) C.envoy_dynamic_module_type_on_http_filter_request_headers_status {
	s := streamOf(h)
	st := module.RequestHeaders(abi.FilterOf(unsafe.Pointer(f)), handleOf(s), bool(eos))
	after(s, eos)
	return C.envoy_dynamic_module_type_on_http_filter_request_headers_status(st)
}

// kvgate_go_request_body is the request body hook where hooks.c's C one
// cannot answer alone.
//
//export kvgate_go_request_body
func kvgate_go_request_body(f C.envoy_dynamic_module_type_http_filter_envoy_ptr, s *C.kvgate_stream, eos C.bool) C.envoy_dynamic_module_type_on_http_filter_request_body_status {
	st := module.RequestBody(abi.FilterOf(unsafe.Pointer(f)), handleOf(s), bool(eos))
	after(s, eos)
	return C.envoy_dynamic_module_type_on_http_filter_request_body_status(st)
}

//export envoy_dynamic_module_on_http_filter_request_trailers
func envoy_dynamic_module_on_http_filter_request_trailers(f C.envoy_dynamic_module_type_http_filter_envoy_ptr,
	h C.envoy_dynamic_module_type_http_filter_module_ptr) C.envoy_dynamic_module_type_on_http_filter_request_trailers_status {
	st := module.RequestTrailers(abi.FilterOf(unsafe.Pointer(f)), handleOf(streamOf(h)))
	return C.envoy_dynamic_module_type_on_http_filter_request_trailers_status(st)
}

// kvgate_go_destroy is the Go half of hooks.c's destroy hook.
//
//export kvgate_go_destroy
func kvgate_go_destroy(handle C.uint64_t) {
	module.Destroy(uintptr(handle))
}
