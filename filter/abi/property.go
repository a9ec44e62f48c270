//go:build wasip1

package abi

import (
	"runtime"

	"github.com/kvgate/kvgate/proxywasm"
)

// proxy_set_property(path_data i32, path_size i32, value_data i32,
// value_size i32) -> status i32: see proxywasm's package documentation.
//
//go:wasmimport env proxy_set_property
func proxySetProperty(pathData, pathSize, valueData, valueSize uint32) proxywasm.Status

func (wasmHost) SetProperty(path, value string) error {
	st := proxySetProperty(stringAddr(path), uint32(len(path)), stringAddr(value), uint32(len(value)))
	runtime.KeepAlive(path)
	runtime.KeepAlive(value)
	if st != proxywasm.StatusOK {
		return &statusError{"proxy_set_property", st}
	}
	return nil
}
