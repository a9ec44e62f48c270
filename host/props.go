package host

import (
	"encoding/binary"
	"net"
	"strconv"
	"strings"
)

// requestProps answers the properties of a request, in Envoy's encoding:
// strings as raw bytes without a terminator, integers as 8-byte
// little-endian. (The plugin's own properties, and those the guest sets,
// are answered by package abi before it asks these.)
type requestProps Request

// Property returns the value of a dotted property key.
func (rp *requestProps) Property(key string) ([]byte, bool) {
	r := (*Request)(rp)
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
	case "connection.mtls":
		return mtlsProp(r.TLS), true
	case "connection.uri_san_peer_certificate":
		return sanProp(r.TLS, sanURI)
	case "connection.dns_san_peer_certificate":
		return sanProp(r.TLS, sanDNS)
	case "source.port":
		return portProp(r.RemoteAddr)
	case "destination.address":
		return addrProp(r.LocalAddr)
	case "destination.port":
		return portProp(r.LocalAddr)
	}
	return nil, false
}

func propInt(v int64) []byte {
	b := make([]byte, 8)
	binary.LittleEndian.PutUint64(b, uint64(v))
	return b
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
