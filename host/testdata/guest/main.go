//go:build wasip1

// Command guest is a small proxy-wasm plugin used by the host tests. The
// request header x-test-action selects what it does.
package main

import (
	"bytes"
	"runtime"
	"strconv"
	"time"
	"unsafe"

	"github.com/kvgate/kvgate/proxywasm"
)

//go:wasmimport env proxy_log
func proxyLog(level proxywasm.LogLevel, ptr unsafe.Pointer, size uint32) proxywasm.Status

//go:wasmimport env proxy_get_buffer_bytes
func proxyGetBufferBytes(typ proxywasm.BufferType, start, max uint32, retPtr unsafe.Pointer, retSize unsafe.Pointer) proxywasm.Status

//go:wasmimport env proxy_set_buffer_bytes
func proxySetBufferBytes(typ proxywasm.BufferType, start, size uint32, ptr unsafe.Pointer, n uint32) proxywasm.Status

//go:wasmimport env proxy_get_header_map_value
func proxyGetHeaderMapValue(mt proxywasm.MapType, k unsafe.Pointer, kn uint32, retPtr, retSize unsafe.Pointer) proxywasm.Status

//go:wasmimport env proxy_get_header_map_pairs
func proxyGetHeaderMapPairs(mt proxywasm.MapType, retPtr, retSize unsafe.Pointer) proxywasm.Status

//go:wasmimport env proxy_replace_header_map_value
func proxyReplaceHeaderMapValue(mt proxywasm.MapType, k unsafe.Pointer, kn uint32, v unsafe.Pointer, vn uint32) proxywasm.Status

//go:wasmimport env proxy_add_header_map_value
func proxyAddHeaderMapValue(mt proxywasm.MapType, k unsafe.Pointer, kn uint32, v unsafe.Pointer, vn uint32) proxywasm.Status

//go:wasmimport env proxy_remove_header_map_value
func proxyRemoveHeaderMapValue(mt proxywasm.MapType, k unsafe.Pointer, kn uint32) proxywasm.Status

//go:wasmimport env proxy_send_local_response
func proxySendLocalResponse(status uint32, d unsafe.Pointer, dn uint32, b unsafe.Pointer, bn uint32, h unsafe.Pointer, hn uint32, grpc int32) proxywasm.Status

//go:wasmimport env proxy_define_metric
func proxyDefineMetric(typ proxywasm.MetricType, n unsafe.Pointer, nn uint32, retID unsafe.Pointer) proxywasm.Status

//go:wasmimport env proxy_increment_metric
func proxyIncrementMetric(id uint32, delta int64) proxywasm.Status

//go:wasmimport env proxy_record_metric
func proxyRecordMetric(id uint32, v uint64) proxywasm.Status

//go:wasmimport env proxy_get_metric
func proxyGetMetric(id uint32, ret unsafe.Pointer) proxywasm.Status

//go:wasmimport env proxy_get_property
func proxyGetProperty(p unsafe.Pointer, pn uint32, retPtr, retSize unsafe.Pointer) proxywasm.Status

//go:wasmimport env proxy_continue_stream
func proxyContinueStream(st proxywasm.StreamType) proxywasm.Status

//go:wasmimport env proxy_set_effective_context
func proxySetEffectiveContext(id uint32) proxywasm.Status

func main() {}

//go:wasmexport proxy_abi_version_0_2_1
func abiVersion() {}

var allocs [8][]byte
var allocN int

//go:wasmexport proxy_on_memory_allocate
func onAlloc(size uint32) unsafe.Pointer {
	b := make([]byte, size+1)
	allocs[allocN%len(allocs)] = b
	allocN++
	return unsafe.Pointer(&b[0])
}

func sptr(s string) (unsafe.Pointer, uint32) {
	if s == "" {
		return nil, 0
	}
	return unsafe.Pointer(unsafe.StringData(s)), uint32(len(s))
}

func bptr(b []byte) (unsafe.Pointer, uint32) {
	if len(b) == 0 {
		return nil, 0
	}
	return unsafe.Pointer(&b[0]), uint32(len(b))
}

func logf(level proxywasm.LogLevel, s string) {
	p, n := sptr(s)
	proxyLog(level, p, n)
}

func ret(p uint32, n uint32) []byte {
	if n == 0 {
		return nil
	}
	return unsafe.Slice((*byte)(unsafe.Pointer(uintptr(p))), n)
}

func header(name string) (string, bool) {
	var p, n uint32
	kp, kn := sptr(name)
	if proxyGetHeaderMapValue(proxywasm.MapHTTPRequestHeaders, kp, kn, unsafe.Pointer(&p), unsafe.Pointer(&n)) != proxywasm.StatusOK {
		return "", false
	}
	return string(ret(p, n)), true
}

func setHeader(name, value string) {
	kp, kn := sptr(name)
	vp, vn := sptr(value)
	proxyReplaceHeaderMapValue(proxywasm.MapHTTPRequestHeaders, kp, kn, vp, vn)
}

func property(path string) string {
	var p, n uint32
	kp, kn := sptr(path)
	if st := proxyGetProperty(kp, kn, unsafe.Pointer(&p), unsafe.Pointer(&n)); st != proxywasm.StatusOK {
		return "status" + string(rune('0'+st))
	}
	return string(ret(p, n))
}

func defineMetric(typ proxywasm.MetricType, name string) uint32 {
	var id uint32
	p, n := sptr(name)
	if st := proxyDefineMetric(typ, p, n, unsafe.Pointer(&id)); st != proxywasm.StatusOK {
		logf(proxywasm.LogError, "define_metric "+name+" failed")
		panic("define_metric failed")
	}
	return id
}

var (
	requests   uint32
	bodyBytes  uint32
	inflight   uint32
	actions    = map[uint32]string{}
	grown      [][]byte
	configured string
)

//go:wasmexport proxy_on_vm_start
func onVMStart(_ uint32, size uint32) uint32 { return 1 }

//go:wasmexport proxy_on_configure
func onConfigure(root uint32, size uint32) uint32 {
	var p, n uint32
	if proxyGetBufferBytes(proxywasm.BufferPluginConfiguration, 0, size, unsafe.Pointer(&p), unsafe.Pointer(&n)) != proxywasm.StatusOK {
		return 0
	}
	configured = string(ret(p, n))
	if configured == "bad" {
		logf(proxywasm.LogError, "guest: invalid configuration: bad")
		return 0
	}
	requests = defineMetric(proxywasm.MetricCounter, "kvtest_requests_total.kind.http")
	bodyBytes = defineMetric(proxywasm.MetricHistogram, "kvtest_body_bytes")
	inflight = defineMetric(proxywasm.MetricGauge, "kvtest_inflight")
	return 1
}

//go:wasmexport proxy_on_context_create
func onContextCreate(id, parent uint32) {}

//go:wasmexport proxy_on_request_headers
func onRequestHeaders(id uint32, n uint32, eos uint32) proxywasm.Action {
	proxyIncrementMetric(requests, 1)
	proxyIncrementMetric(inflight, 1)
	action, _ := header("x-test-action")
	actions[id] = action
	switch action {
	case "trap":
		panic("trap on demand")
	case "sleep":
		time.Sleep(time.Millisecond)
	case "gc":
		runtime.GC()
	case "local":
		hdr := proxywasm.EncodeHeaderMap([][2]string{{"x-local", "yes"}, {"content-type", "text/plain"}})
		dp, dn := sptr("test_local")
		bp, bn := sptr("local reply")
		hp, hn := bptr(hdr)
		proxySendLocalResponse(418, dp, dn, bp, bn, hp, hn, proxywasm.GRPCStatusNone)
		return proxywasm.ActionPause
	case "oob":
		st := proxyLog(proxywasm.LogInfo, unsafe.Pointer(uintptr(0xFFFFFF00)), 0x1000)
		setHeader("x-status", strconv.Itoa(int(st)))
	case "oobret":
		kp, kn := sptr("x-test-action")
		st := proxyGetHeaderMapValue(proxywasm.MapHTTPRequestHeaders, kp, kn, unsafe.Pointer(uintptr(0xFFFFFFFE)), unsafe.Pointer(uintptr(0xFFFFFFFE)))
		setHeader("x-status", strconv.Itoa(int(st)))
	case "prop":
		setHeader("x-prop-path", property("request\x00path\x00"))
		setHeader("x-prop-method", property("request\x00method"))
		setHeader("x-prop-source", property("source\x00address"))
		setHeader("x-prop-missing", property("no\x00such"))
	case "hdr":
		setHeader("x-added", "1")
		kp, kn := sptr("x-remove")
		proxyRemoveHeaderMapValue(proxywasm.MapHTTPRequestHeaders, kp, kn)
		vp, vn := sptr("two")
		kp, kn = sptr("x-multi")
		proxyAddHeaderMapValue(proxywasm.MapHTTPRequestHeaders, kp, kn, vp, vn)
		var p, sz uint32
		proxyGetHeaderMapPairs(proxywasm.MapHTTPRequestHeaders, unsafe.Pointer(&p), unsafe.Pointer(&sz))
		setHeader("x-pairs-size", strconv.Itoa(int(sz)))
	case "remove":
		kp, kn := sptr("x-remove")
		proxyRemoveHeaderMapValue(proxywasm.MapHTTPRequestHeaders, kp, kn)
	case "config":
		setHeader("x-config", configured)
	case "print":
		println("guest says hello")
	case "metric":
		var v uint64
		proxyGetMetric(requests, unsafe.Pointer(&v))
		setHeader("x-requests", strconv.Itoa(int(v)))
	case "pause":
		return proxywasm.ActionPause
	case "grow":
		grown = append(grown, make([]byte, 40<<20))
	case "loop":
		for {
		}
	case "badmetric":
		var id uint32
		p, n := sptr("bad-name.x")
		st := proxyDefineMetric(proxywasm.MetricCounter, p, n, unsafe.Pointer(&id))
		setHeader("x-status", strconv.Itoa(int(st)))
	}
	return proxywasm.ActionContinue
}

//go:wasmexport proxy_on_request_body
func onRequestBody(id uint32, size uint32, eos uint32) proxywasm.Action {
	proxyRecordMetric(bodyBytes, uint64(size))
	switch actions[id] {
	case "trapbody":
		panic("trap in body")
	case "upper", "":
		if eos == 0 {
			return proxywasm.ActionPause
		}
		var p, n uint32
		if proxyGetBufferBytes(proxywasm.BufferHTTPRequestBody, 0, size, unsafe.Pointer(&p), unsafe.Pointer(&n)) != proxywasm.StatusOK {
			panic("get body")
		}
		if actions[id] == "" {
			return proxywasm.ActionContinue
		}
		up := bytes.ToUpper(ret(p, n))
		bp, bn := bptr(up)
		proxySetBufferBytes(proxywasm.BufferHTTPRequestBody, 0, size, bp, bn)
	case "bigbody":
		var p, n uint32
		proxyGetBufferBytes(proxywasm.BufferHTTPRequestBody, 0, size, unsafe.Pointer(&p), unsafe.Pointer(&n))
		b := bytes.Repeat(ret(p, n), 2)
		bp, bn := bptr(b)
		proxySetBufferBytes(proxywasm.BufferHTTPRequestBody, 0, size, bp, bn)
	case "continue":
		proxyContinueStream(proxywasm.StreamHTTPRequest)
		return proxywasm.ActionPause
	case "localbody":
		bp, bn := sptr(`{"error":"nope"}`)
		proxySendLocalResponse(400, nil, 0, bp, bn, nil, 0, proxywasm.GRPCStatusNone)
		return proxywasm.ActionPause
	}
	return proxywasm.ActionContinue
}

//go:wasmexport proxy_on_done
func onDone(id uint32) uint32 { return 1 }

//go:wasmexport proxy_on_log
func onLog(id uint32) {
	if _, ok := actions[id]; ok {
		proxyIncrementMetric(inflight, -1)
	}
}

//go:wasmexport proxy_on_delete
func onDelete(id uint32) { delete(actions, id) }
