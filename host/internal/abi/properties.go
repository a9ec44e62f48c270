package abi

import (
	"bytes"
	"context"
	"strings"

	"github.com/kvgate/kvgate/filterspec"
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
			val := in.Mem.Read("proxy_set_property", uint32(s[2]), uint32(s[3]))
			x := in.Stream
			if x == nil {
				return proxywasm.StatusNotFound
			}
			if x.props == nil {
				x.props = make(map[string][]byte, 4)
			}
			// The values outlive the instance (Stream.GuestProperties), so
			// they are copied, into one slab per stream: appending to it
			// never moves what earlier values point at.
			at := len(x.vals)
			x.vals = append(x.vals, val...)
			x.props[propertyKey(path)] = x.vals[at:len(x.vals):len(x.vals)]
			return proxywasm.StatusOK
		}),
	}
}

// propertyKey turns a proxy-wasm property path ("request\x00path", with or
// without a trailing NUL) into a dotted key ("request.path"). The keys of
// the properties kvgate sets and reads come from knownKeys, without an
// allocation on every request.
func propertyKey(path []byte) string {
	path = bytes.TrimSuffix(path, []byte{0})
	if k, ok := knownKeys[string(path)]; ok {
		return k
	}
	return strings.ReplaceAll(string(path), "\x00", ".")
}

// knownKeys maps the paths of the properties the filter sets and reads
// (filterspec) to their dotted keys.
var knownKeys = func() map[string]string {
	m := map[string]string{}
	for _, p := range []string{
		filterspec.PropertyHint, filterspec.PropertyHintReason, filterspec.PropertyHintDetail,
		filterspec.PropertySenderTrusted, filterspec.PropertySenderRule, filterspec.PropertyRouterOnly,
		filterspec.PropertyMTLS, filterspec.PropertyURISAN, filterspec.PropertyDNSSAN, filterspec.PropertySourceAddress,
	} {
		m[p] = strings.ReplaceAll(p, "\x00", ".")
	}
	return m
}()

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
