//go:build wasip1

package abi

import (
	"runtime"

	"github.com/kvgate/kvgate/filter"
)

// The module exports only the callbacks the filter acts on (doc.go,
// "Callbacks exported"); the wasm package's tests hold it to that set.

// plugin is the VM's filter. Go's runtime and package initialization run in
// _initialize, before any of these callbacks.
var plugin = filter.New(wasmHost{})

func b2u(b bool) uint32 {
	if b {
		return 1
	}
	return 0
}

//go:wasmexport proxy_abi_version_0_2_1
func proxyABIVersion() {}

//go:wasmexport proxy_on_memory_allocate
func proxyOnMemoryAllocate(size uint32) uint32 {
	return uint32(mem.Alloc(int(size)))
}

//go:wasmexport proxy_on_context_create
func proxyOnContextCreate(contextID, parentContextID uint32) {
	plugin.OnContextCreate(contextID, parentContextID)
}

//go:wasmexport proxy_on_vm_start
func proxyOnVMStart(rootContextID, vmConfigurationSize uint32) uint32 {
	return b2u(plugin.OnVMStart(int(vmConfigurationSize)))
}

//go:wasmexport proxy_on_configure
func proxyOnConfigure(rootContextID, pluginConfigurationSize uint32) uint32 {
	return b2u(plugin.OnConfigure(rootContextID, int(pluginConfigurationSize)))
}

//go:wasmexport proxy_on_request_headers
func proxyOnRequestHeaders(contextID, numHeaders, endOfStream uint32) uint32 {
	return uint32(plugin.OnRequestHeaders(contextID, int(numHeaders), endOfStream != 0).Action)
}

//go:wasmexport proxy_on_request_body
func proxyOnRequestBody(contextID, bodyBufferLength, endOfStream uint32) uint32 {
	return uint32(plugin.OnRequestBody(contextID, int(bodyBufferLength), endOfStream != 0).Action)
}

//go:wasmexport proxy_on_request_trailers
func proxyOnRequestTrailers(contextID, numTrailers uint32) uint32 {
	return uint32(plugin.OnRequestTrailers(contextID, int(numTrailers)).Action)
}

//go:wasmexport proxy_on_log
func proxyOnLog(contextID uint32) {
	plugin.OnLog(contextID)
}

//go:wasmexport proxy_on_delete
func proxyOnDelete(contextID uint32) {
	plugin.OnDelete(contextID)
	// Now and then, let the garbage collector's mark worker run. The host
	// calls exports on one thread and never lets the Go scheduler run other
	// goroutines, so a collection that started (say, while buffers grew for
	// a large body) would otherwise stay in its mark phase for as long as
	// the guest stops allocating, with every pointer write paying the write
	// barrier's slow path. Gosched never idles the scheduler (this goroutine
	// stays runnable), so it never reaches WASI poll_oneoff. It costs a few
	// microseconds on wasm, hence once per yieldEvery contexts only.
	if deleted++; deleted%yieldEvery == 0 {
		runtime.Gosched()
	}
}

// deleted counts deleted contexts; yieldEvery is how often the guest
// yields.
var deleted uint32

const yieldEvery = 32
