package abi

import (
	"bytes"
	"context"
	"strings"

	"github.com/kvgate/kvgate/proxywasm"
)

// propertyFuncs: properties, read in Envoy's encoding (strings as raw
// bytes without a terminator, integers as 8-byte little-endian).
func propertyFuncs() []hostFunc {
	return []hostFunc{
		fn("proxy_get_property", ps(4), func(ctx context.Context, in *Instance, s []uint64) proxywasm.Status {
			path := in.Mem.Read("proxy_get_property", uint32(s[0]), uint32(s[1]))
			v, ok := in.property(propertyKey(path))
			if !ok {
				return proxywasm.StatusNotFound
			}
			return in.copyOut(ctx, "proxy_get_property", v, uint32(s[2]), uint32(s[3]))
		}),
		fn("proxy_set_property", ps(4), func(_ context.Context, in *Instance, s []uint64) proxywasm.Status {
			path := in.Mem.Read("proxy_set_property", uint32(s[0]), uint32(s[1]))
			val := append([]byte(nil), in.Mem.Read("proxy_set_property", uint32(s[2]), uint32(s[3]))...)
			x := in.Stream
			if x == nil {
				return proxywasm.StatusNotFound
			}
			if x.props == nil {
				x.props = map[string][]byte{}
			}
			x.props[propertyKey(path)] = val
			return proxywasm.StatusOK
		}),
	}
}

// propertyKey turns a proxy-wasm property path ("request\x00path", with or
// without a trailing NUL) into a dotted key ("request.path").
func propertyKey(path []byte) string {
	path = bytes.TrimSuffix(path, []byte{0})
	return strings.ReplaceAll(string(path), "\x00", ".")
}

// property answers a property: the plugin's own, then those the guest set
// on the stream, then the request's.
func (in *Instance) property(key string) ([]byte, bool) {
	p := in.Plugin
	switch key {
	case "plugin_name":
		return []byte(p.Name), true
	case "plugin_root_id":
		return []byte(p.RootID), true
	case "plugin_vm_id":
		return []byte(p.VMID), true
	}
	x := in.Stream
	if x == nil {
		return nil, false
	}
	if v, ok := x.props[key]; ok {
		return v, true
	}
	if x.Properties == nil {
		return nil, false
	}
	return x.Properties.Property(key)
}
