//go:build wasip1

package abi

import (
	"errors"
	"runtime"
	"strconv"
	"unsafe"

	"github.com/kvgate/kvgate/filter"
	"github.com/kvgate/kvgate/filter/internal/arena"
	"github.com/kvgate/kvgate/proxywasm"
)

// mem holds every block handed to the host until the guest has read it.
var mem arena.Arena

// Return slots the host writes into; globals, so they never move.
var retData, retSize, retID uint32

// wasmHost implements filter.Host with the imported host functions.
type wasmHost struct{}

var _ filter.Host = wasmHost{}
var _ filter.Reserver = wasmHost{}

// statusError is a host call's non-Ok result.
type statusError struct {
	call   string
	status proxywasm.Status
}

func (e *statusError) Error() string {
	return e.call + " returned status " + strconv.FormatUint(uint64(e.status), 10)
}

var errForeignMemory = errors.New("host returned memory the guest did not allocate")

func addr(p *uint32) uint32 { return uint32(uintptr(unsafe.Pointer(p))) }

func bytesAddr(b []byte) uint32 {
	if len(b) == 0 {
		return 0
	}
	return uint32(uintptr(unsafe.Pointer(&b[0])))
}

func stringAddr(s string) uint32 {
	if len(s) == 0 {
		return 0
	}
	return uint32(uintptr(unsafe.Pointer(unsafe.StringData(s))))
}

// returned resets the slots and the arena before a host call that returns
// memory; result maps the slots to the bytes the host wrote.
func returned() {
	mem.Reset()
	retData, retSize = 0, 0
}

func result(call string, st proxywasm.Status) ([]byte, error) {
	switch st {
	case proxywasm.StatusOK:
	case proxywasm.StatusNotFound:
		return nil, nil
	default:
		return nil, &statusError{call, st}
	}
	if retSize == 0 {
		return nil, nil
	}
	b, ok := mem.Lookup(uintptr(retData), int(retSize))
	if !ok {
		return nil, errForeignMemory
	}
	return b, nil
}

func (wasmHost) Log(level proxywasm.LogLevel, msg string) {
	proxyLog(level, stringAddr(msg), uint32(len(msg)))
	runtime.KeepAlive(msg)
}

func (wasmHost) PluginConfig(size int) ([]byte, error) {
	returned()
	st := proxyGetBufferBytes(proxywasm.BufferPluginConfiguration, 0, uint32(size), addr(&retData), addr(&retSize))
	return result("proxy_get_buffer_bytes", st)
}

func (wasmHost) RequestHeaders() ([]byte, error) {
	returned()
	st := proxyGetHeaderMapPairs(proxywasm.MapHTTPRequestHeaders, addr(&retData), addr(&retSize))
	return result("proxy_get_header_map_pairs", st)
}

func (wasmHost) RemoveRequestHeader(name string) error {
	st := proxyRemoveHeaderMapValue(proxywasm.MapHTTPRequestHeaders, stringAddr(name), uint32(len(name)))
	runtime.KeepAlive(name)
	if st != proxywasm.StatusOK && st != proxywasm.StatusNotFound {
		return &statusError{"proxy_remove_header_map_value", st}
	}
	return nil
}

func (wasmHost) RequestBody(limit int) ([]byte, error) {
	returned()
	st := proxyGetBufferBytes(proxywasm.BufferHTTPRequestBody, 0, uint32(limit), addr(&retData), addr(&retSize))
	return result("proxy_get_buffer_bytes", st)
}

func (wasmHost) ReplaceRequestBody(oldSize int, body []byte) error {
	st := proxySetBufferBytes(proxywasm.BufferHTTPRequestBody, 0, uint32(oldSize), bytesAddr(body), uint32(len(body)))
	runtime.KeepAlive(body)
	if st != proxywasm.StatusOK {
		return &statusError{"proxy_set_buffer_bytes", st}
	}
	return nil
}

func (wasmHost) SendLocalResponse(status int, details string, body, headers []byte) error {
	st := proxySendLocalResponse(uint32(status), stringAddr(details), uint32(len(details)),
		bytesAddr(body), uint32(len(body)), bytesAddr(headers), uint32(len(headers)), proxywasm.GRPCStatusNone)
	runtime.KeepAlive(details)
	runtime.KeepAlive(body)
	runtime.KeepAlive(headers)
	if st != proxywasm.StatusOK {
		return &statusError{"proxy_send_local_response", st}
	}
	return nil
}

func (wasmHost) DefineCounter(name string) (uint32, error) {
	retID = 0
	st := proxyDefineMetric(proxywasm.MetricCounter, stringAddr(name), uint32(len(name)), addr(&retID))
	runtime.KeepAlive(name)
	if st != proxywasm.StatusOK {
		return 0, &statusError{"proxy_define_metric", st}
	}
	return retID, nil
}

func (wasmHost) IncrementCounter(id uint32, delta int64) error {
	if st := proxyIncrementMetric(id, delta); st != proxywasm.StatusOK {
		return &statusError{"proxy_increment_metric", st}
	}
	return nil
}

func (wasmHost) GetProperty(path string) ([]byte, error) {
	returned()
	st := proxyGetProperty(stringAddr(path), uint32(len(path)), addr(&retData), addr(&retSize))
	runtime.KeepAlive(path)
	return result("proxy_get_property", st)
}

func (wasmHost) Reserve(n int) {
	mem.Reset()
	mem.Reserve(n)
}
