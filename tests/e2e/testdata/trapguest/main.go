//go:build wasip1

// Command trapguest is a test-only proxy-wasm module that traps on demand,
// so that the end-to-end tests can check what each host does after a guest
// trap (issue: one trap must not disable a worker thread for good).
//
// It buffers every request body and then lets it through unchanged, except
// when the request has the header x-trap:
//
//	x-trap: 1        trap (wasm unreachable) in the body callback, after
//	                 the headers went upstream, as a filter bug would
//	x-trap: headers  trap in the headers callback
//	x-trap: panic    an unrecovered Go panic in the body callback (the Go
//	                 runtime prints it and calls proc_exit)
//
// It needs only the proxy-wasm calls below and nothing from the project, so
// that it keeps building whatever the filter's own glue becomes.
package main

import "unsafe"

//go:wasmimport env proxy_get_header_map_value
func getHeaderMapValue(mapType uint32, key unsafe.Pointer, keySize uint32, retData, retSize unsafe.Pointer) uint32

//go:wasmimport env proxy_log
func proxyLog(level uint32, msg unsafe.Pointer, size uint32) uint32

// unreachable executes the wasm unreachable instruction (trap_wasm.s).
func unreachable()

func main() {}

//go:wasmexport proxy_abi_version_0_2_1
func abiVersion() {}

// allocs keeps the last blocks handed to the host alive until it has
// written into them and the guest has read them.
var allocs [8][]byte
var allocN int

//go:wasmexport proxy_on_memory_allocate
func onMemoryAllocate(size uint32) unsafe.Pointer {
	b := make([]byte, size+1)
	allocs[allocN%len(allocs)] = b
	allocN++
	return unsafe.Pointer(&b[0])
}

//go:wasmexport proxy_on_vm_start
func onVMStart(rootID, size uint32) uint32 { return 1 }

//go:wasmexport proxy_on_configure
func onConfigure(rootID, size uint32) uint32 {
	msg := "trapguest: configured"
	proxyLog(2, unsafe.Pointer(unsafe.StringData(msg)), uint32(len(msg)))
	return 1
}

// modes is the x-trap value of each stream in flight.
var modes = map[uint32]string{}

//go:wasmexport proxy_on_context_create
func onContextCreate(id, parent uint32) {}

//go:wasmexport proxy_on_request_headers
func onRequestHeaders(id, n, endOfStream uint32) uint32 {
	mode := header("x-trap")
	if mode == "headers" {
		unreachable()
	}
	modes[id] = mode
	return 0
}

//go:wasmexport proxy_on_request_body
func onRequestBody(id, size, endOfStream uint32) uint32 {
	if endOfStream == 0 {
		return 1 // buffer until the whole body is here
	}
	switch modes[id] {
	case "1":
		unreachable()
	case "panic":
		panic("trapguest: panic on demand")
	}
	return 0
}

//go:wasmexport proxy_on_request_trailers
func onRequestTrailers(id, n uint32) uint32 { return 0 }

//go:wasmexport proxy_on_response_headers
func onResponseHeaders(id, n, endOfStream uint32) uint32 { return 0 }

//go:wasmexport proxy_on_response_body
func onResponseBody(id, size, endOfStream uint32) uint32 { return 0 }

//go:wasmexport proxy_on_response_trailers
func onResponseTrailers(id, n uint32) uint32 { return 0 }

//go:wasmexport proxy_on_done
func onDone(id uint32) uint32 { return 1 }

//go:wasmexport proxy_on_log
func onLog(id uint32) {}

//go:wasmexport proxy_on_delete
func onDelete(id uint32) { delete(modes, id) }

// header returns a request header's value, or "".
func header(name string) string {
	var p, n uint32
	if getHeaderMapValue(0, unsafe.Pointer(unsafe.StringData(name)), uint32(len(name)), unsafe.Pointer(&p), unsafe.Pointer(&n)) != 0 || n == 0 {
		return ""
	}
	return string(unsafe.Slice((*byte)(unsafe.Pointer(uintptr(p))), n))
}
