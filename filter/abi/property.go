//go:build wasip1

package abi

import "runtime"

// proxy_set_property(path_data i32, path_size i32, value_data i32,
// value_size i32) -> status i32: see doc.go.
//
//go:wasmimport env proxy_set_property
func proxySetProperty(pathData, pathSize, valueData, valueSize uint32) uint32

func (wasmHost) SetProperty(path, value string) error {
	st := proxySetProperty(stringAddr(path), uint32(len(path)), stringAddr(value), uint32(len(value)))
	runtime.KeepAlive(path)
	runtime.KeepAlive(value)
	if st != statusOK {
		return &statusError{"proxy_set_property", st}
	}
	return nil
}
