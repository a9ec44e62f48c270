//go:build wasip1

// Command noop is a proxy-wasm module that does no work of its own: the
// floor under kvgate's cost in Envoy. It is built exactly as
// wasm/kvgate.wasm is (standard Go, GOOS=wasip1, -buildmode=c-shared, the
// same flags), exports the same callbacks with the same answers as
// filter/abi, and holds each request body until its end as kvgate does:
// request headers go on, body data pauses (StopIterationAndBuffer) until
// end_of_stream, then the request continues.
//
// Its plugin configuration chooses how much of kvgate's conversation with
// the host it repeats:
//
//	""       nothing: the Go runtime's own cost per callback
//	"calls"  every host call kvgate makes on a forwarded request: read the
//	         request headers, remove content-length, read the whole body,
//	         write it back, increment a counter
//
// so that the difference between "calls" and kvgate is kvgate's own code
// (the header scan, the rewrite, its bookkeeping), and the difference
// between "" and "calls" is what the host's copies cost.
//
// It lives under testdata so that it is never part of a build of the
// project; the benchmark builds it.
package main

import "unsafe"

func main() {}

// proxy-wasm ABI 0.2.1 constants, as in filter/abi.
const (
	bufferHTTPRequestBody     = 0
	bufferPluginConfiguration = 7
	mapHTTPRequestHeaders     = 0
	metricCounter             = 0

	actionContinue = 0
	actionPause    = 1
)

var (
	// calls is set by the "calls" configuration.
	calls bool
	// block is the memory handed to the host by proxy_on_memory_allocate:
	// one block, which the guest reads before its next host call.
	block []byte
	// Return slots the host writes into.
	retData, retSize, retID uint32
	counter                 uint32
)

func addr(p *uint32) uint32 { return uint32(uintptr(unsafe.Pointer(p))) }

//go:wasmimport env proxy_get_buffer_bytes
func proxyGetBufferBytes(bufferType, start, maxSize, returnBufferData, returnBufferSize uint32) uint32

//go:wasmimport env proxy_set_buffer_bytes
func proxySetBufferBytes(bufferType, start, size, bufferData, bufferSize uint32) uint32

//go:wasmimport env proxy_get_header_map_pairs
func proxyGetHeaderMapPairs(mapType, returnMapData, returnMapSize uint32) uint32

//go:wasmimport env proxy_remove_header_map_value
func proxyRemoveHeaderMapValue(mapType, keyData, keySize uint32) uint32

//go:wasmimport env proxy_define_metric
func proxyDefineMetric(metricType, nameData, nameSize, returnMetricID uint32) uint32

//go:wasmimport env proxy_increment_metric
func proxyIncrementMetric(metricID uint32, offset int64) uint32

//go:wasmexport proxy_abi_version_0_2_1
func proxyABIVersion() {}

//go:wasmexport proxy_on_memory_allocate
func proxyOnMemoryAllocate(size uint32) uint32 {
	if int(size) > len(block) {
		block = make([]byte, size)
	}
	if size == 0 {
		return 0
	}
	return uint32(uintptr(unsafe.Pointer(&block[0])))
}

//go:wasmexport proxy_on_context_create
func proxyOnContextCreate(contextID, parentContextID uint32) {}

//go:wasmexport proxy_on_vm_start
func proxyOnVMStart(rootContextID, vmConfigurationSize uint32) uint32 { return 1 }

//go:wasmexport proxy_on_configure
func proxyOnConfigure(rootContextID, size uint32) uint32 {
	retData, retSize = 0, 0
	if size > 0 && proxyGetBufferBytes(bufferPluginConfiguration, 0, size, addr(&retData), addr(&retSize)) == 0 {
		calls = retSize == 5 && string(block[:5]) == "calls"
	}
	if calls {
		name := "noop_requests_total"
		proxyDefineMetric(metricCounter, uint32(uintptr(unsafe.Pointer(unsafe.StringData(name)))), uint32(len(name)), addr(&retID))
		counter = retID
	}
	return 1
}

//go:wasmexport proxy_on_request_headers
func proxyOnRequestHeaders(contextID, numHeaders, endOfStream uint32) uint32 {
	if calls && endOfStream == 0 {
		proxyGetHeaderMapPairs(mapHTTPRequestHeaders, addr(&retData), addr(&retSize))
		name := "content-length"
		proxyRemoveHeaderMapValue(mapHTTPRequestHeaders, uint32(uintptr(unsafe.Pointer(unsafe.StringData(name)))), uint32(len(name)))
	}
	return actionContinue
}

//go:wasmexport proxy_on_request_body
func proxyOnRequestBody(contextID, bodyBufferLength, endOfStream uint32) uint32 {
	if endOfStream == 0 {
		return actionPause
	}
	if calls && bodyBufferLength > 0 {
		retData, retSize = 0, 0
		if proxyGetBufferBytes(bufferHTTPRequestBody, 0, bodyBufferLength, addr(&retData), addr(&retSize)) == 0 {
			proxySetBufferBytes(bufferHTTPRequestBody, 0, retSize, retData, retSize)
		}
		proxyIncrementMetric(counter, 1)
	}
	return actionContinue
}

//go:wasmexport proxy_on_request_trailers
func proxyOnRequestTrailers(contextID, numTrailers uint32) uint32 { return actionContinue }

//go:wasmexport proxy_on_response_headers
func proxyOnResponseHeaders(contextID, numHeaders, endOfStream uint32) uint32 { return actionContinue }

//go:wasmexport proxy_on_response_body
func proxyOnResponseBody(contextID, bodyBufferLength, endOfStream uint32) uint32 {
	return actionContinue
}

//go:wasmexport proxy_on_response_trailers
func proxyOnResponseTrailers(contextID, numTrailers uint32) uint32 { return actionContinue }

//go:wasmexport proxy_on_done
func proxyOnDone(contextID uint32) uint32 { return 1 }

//go:wasmexport proxy_on_log
func proxyOnLog(contextID uint32) {}

//go:wasmexport proxy_on_delete
func proxyOnDelete(contextID uint32) {}
