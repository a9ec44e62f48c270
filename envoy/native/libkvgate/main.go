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

// kvgate_go_destroy is the Go half of hooks.c's destroy hook.
//
//export kvgate_go_destroy
func kvgate_go_destroy(handle C.uint64_t) {
	module.Destroy(uintptr(handle))
}
