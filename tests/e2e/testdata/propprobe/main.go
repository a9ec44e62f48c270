//go:build wasip1

// Command propprobe is a test-only proxy-wasm filter for
// tests/e2e/senders_test.go: on each request it logs, at info level, the
// raw bytes Envoy returns from proxy_get_property for the four properties
// the kvgate filter reads as trusted-sender inputs, and the X-Forwarded-For
// and x-forwarded-client-cert headers the filter chain sees, so the test
// can show what the host really supplies. It changes nothing.
package main

import (
	"strconv"
	"unsafe"
)

//go:wasmimport env proxy_log
func proxyLog(level uint32, p unsafe.Pointer, n uint32) uint32

//go:wasmimport env proxy_get_property
func proxyGetProperty(p unsafe.Pointer, n uint32, retPtr, retSize unsafe.Pointer) uint32

//go:wasmimport env proxy_get_header_map_value
func proxyGetHeaderMapValue(mapType uint32, k unsafe.Pointer, kn uint32, retPtr, retSize unsafe.Pointer) uint32

func main() {}

// held keeps what the host allocated until the next request.
var held [][]byte

//go:wasmexport proxy_on_memory_allocate
func onAlloc(size uint32) unsafe.Pointer {
	b := make([]byte, size+1)
	held = append(held, b)
	return unsafe.Pointer(&b[0])
}

//go:wasmexport proxy_abi_version_0_2_1
func abiVersion() {}

//go:wasmexport proxy_on_context_create
func onContextCreate(id, parent uint32) {}

//go:wasmexport proxy_on_vm_start
func onVMStart(id, size uint32) uint32 { return 1 }

//go:wasmexport proxy_on_configure
func onConfigure(id, size uint32) uint32 { return 1 }

// value returns a host answer as "absent:<status>", or the bytes, quoted
// when asHex is false and in hex otherwise.
func value(st uint32, p *byte, n uint32, asHex bool) string {
	if st != 0 {
		return "absent:" + strconv.Itoa(int(st))
	}
	b := unsafe.Slice(p, n)
	if asHex {
		const hex = "0123456789abcdef"
		out := []byte("hex:")
		for _, c := range b {
			out = append(out, hex[c>>4], hex[c&15])
		}
		return string(out)
	}
	return strconv.Quote(string(b))
}

func property(path string, asHex bool) string {
	var p *byte
	var n uint32
	st := proxyGetProperty(unsafe.Pointer(unsafe.StringData(path)), uint32(len(path)), unsafe.Pointer(&p), unsafe.Pointer(&n))
	return value(st, p, n, asHex)
}

func header(name string) string {
	var p *byte
	var n uint32
	st := proxyGetHeaderMapValue(0, unsafe.Pointer(unsafe.StringData(name)), uint32(len(name)), unsafe.Pointer(&p), unsafe.Pointer(&n))
	return value(st, p, n, false)
}

//go:wasmexport proxy_on_request_headers
func onRequestHeaders(id, n, eos uint32) uint32 {
	held = held[:0]
	msg := "kvgate-probe case=" + header("x-kvgate-case") +
		" connection.mtls=" + property("connection\x00mtls", true) +
		" connection.uri_san_peer_certificate=" + property("connection\x00uri_san_peer_certificate", false) +
		" connection.dns_san_peer_certificate=" + property("connection\x00dns_san_peer_certificate", false) +
		" source.address=" + property("source\x00address", false) +
		" x-forwarded-for=" + header("x-forwarded-for") +
		" x-forwarded-client-cert=" + header("x-forwarded-client-cert")
	proxyLog(2, unsafe.Pointer(unsafe.StringData(msg)), uint32(len(msg)))
	return 0
}

//go:wasmexport proxy_on_request_body
func onRequestBody(id, n, eos uint32) uint32 { return 0 }

//go:wasmexport proxy_on_request_trailers
func onRequestTrailers(id, n uint32) uint32 { return 0 }

//go:wasmexport proxy_on_response_headers
func onResponseHeaders(id, n, eos uint32) uint32 { return 0 }

//go:wasmexport proxy_on_response_body
func onResponseBody(id, n, eos uint32) uint32 { return 0 }

//go:wasmexport proxy_on_response_trailers
func onResponseTrailers(id, n uint32) uint32 { return 0 }

//go:wasmexport proxy_on_done
func onDone(id uint32) uint32 { return 1 }

//go:wasmexport proxy_on_log
func onLog(id uint32) {}

//go:wasmexport proxy_on_delete
func onDelete(id uint32) {}
