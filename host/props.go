package host

import (
	"bytes"
	"encoding/binary"
	"net"
	"strconv"
	"strings"
)

// propertyKey turns a proxy-wasm property path ("request\x00path", with or
// without a trailing NUL) into a dotted key ("request.path").
func propertyKey(path []byte) string {
	path = bytes.TrimSuffix(path, []byte{0})
	return strings.ReplaceAll(string(path), "\x00", ".")
}

func propInt(v int64) []byte {
	b := make([]byte, 8)
	binary.LittleEndian.PutUint64(b, uint64(v))
	return b
}

// property answers a property in Envoy's encoding: strings as raw bytes
// without a terminator, integers as 8-byte little-endian.
func (in *instance) property(key string) ([]byte, bool) {
	o := &in.h.opts
	switch key {
	case "plugin_name":
		return []byte(o.PluginName), true
	case "plugin_root_id":
		return []byte(o.RootID), true
	case "plugin_vm_id":
		return []byte(o.VMID), true
	}
	x := in.x
	if x == nil {
		return nil, false
	}
	if v, ok := x.props[key]; ok {
		return v, true
	}
	r := x.req
	switch key {
	case "request.path":
		return []byte(r.Path), true
	case "request.url_path":
		p, _, _ := strings.Cut(r.Path, "?")
		return []byte(p), true
	case "request.query":
		_, q, _ := strings.Cut(r.Path, "?")
		return []byte(q), true
	case "request.method":
		return []byte(r.Method), true
	case "request.host":
		return []byte(r.Authority), true
	case "request.scheme":
		if r.Scheme == "" {
			return []byte("http"), true
		}
		return []byte(r.Scheme), true
	case "request.protocol":
		if r.Protocol == "" {
			return nil, false
		}
		return []byte(r.Protocol), true
	case "request.id":
		return headerProp(r, "X-Request-Id")
	case "request.useragent":
		return headerProp(r, "User-Agent")
	case "request.referer":
		return headerProp(r, "Referer")
	case "request.size":
		return propInt(int64(len(r.Body))), true
	case "source.address":
		return addrProp(r.RemoteAddr)
	case "source.port":
		return portProp(r.RemoteAddr)
	case "destination.address":
		return addrProp(r.LocalAddr)
	case "destination.port":
		return portProp(r.LocalAddr)
	}
	return nil, false
}

func headerProp(r *Request, name string) ([]byte, bool) {
	v := r.Header.Get(name)
	if v == "" {
		return nil, false
	}
	return []byte(v), true
}

func addrProp(a string) ([]byte, bool) {
	if a == "" {
		return nil, false
	}
	return []byte(a), true
}

func portProp(a string) ([]byte, bool) {
	_, p, err := net.SplitHostPort(a)
	if err != nil {
		return nil, false
	}
	n, err := strconv.ParseInt(p, 10, 64)
	if err != nil {
		return nil, false
	}
	return propInt(n), true
}
