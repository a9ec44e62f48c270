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

//export envoy_dynamic_module_on_http_filter_request_headers
func envoy_dynamic_module_on_http_filter_request_headers(f C.envoy_dynamic_module_type_http_filter_envoy_ptr,
	h C.envoy_dynamic_module_type_http_filter_module_ptr, eos C.bool) C.envoy_dynamic_module_type_on_http_filter_request_headers_status {
	return C.envoy_dynamic_module_type_on_http_filter_request_headers_status(module.RequestHeaders(abi.FilterOf(unsafe.Pointer(f)), uintptr(h), bool(eos)))
}

//export envoy_dynamic_module_on_http_filter_request_body
func envoy_dynamic_module_on_http_filter_request_body(f C.envoy_dynamic_module_type_http_filter_envoy_ptr,
	h C.envoy_dynamic_module_type_http_filter_module_ptr, eos C.bool) C.envoy_dynamic_module_type_on_http_filter_request_body_status {
	return C.envoy_dynamic_module_type_on_http_filter_request_body_status(module.RequestBody(abi.FilterOf(unsafe.Pointer(f)), uintptr(h), bool(eos)))
}

//export envoy_dynamic_module_on_http_filter_request_trailers
func envoy_dynamic_module_on_http_filter_request_trailers(f C.envoy_dynamic_module_type_http_filter_envoy_ptr,
	h C.envoy_dynamic_module_type_http_filter_module_ptr) C.envoy_dynamic_module_type_on_http_filter_request_trailers_status {
	return C.envoy_dynamic_module_type_on_http_filter_request_trailers_status(module.RequestTrailers(abi.FilterOf(unsafe.Pointer(f)), uintptr(h)))
}

//export envoy_dynamic_module_on_http_filter_destroy
func envoy_dynamic_module_on_http_filter_destroy(h C.envoy_dynamic_module_type_http_filter_module_ptr) {
	module.Destroy(uintptr(h))
}
