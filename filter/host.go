// Package filter is the kvgate proxy-wasm HTTP filter's logic: a per-request
// state machine that buffers each request body, applies kvhints to it and
// forwards, rewrites or rejects it (docs/spec.md, "Reading a body the way the
// worker does" through "Plugin configuration").
//
// The logic talks to the proxy only through the narrow Host interface, so it
// builds and is tested natively with a fake host. The proxy-wasm ABI glue
// (exports and host imports) lives in filter/abi and nowhere else.
//
// Failure policy: anything unexpected while a request is in flight (a host
// call failing, a panic) answers the request with a local 503 JSON error; if
// even that fails the guest traps, which every host turns into a 503. An
// unfiltered body is never forwarded.
package filter

import (
	"errors"
)

// Action is a proxy-wasm filter action, returned by the request callbacks.
type Action uint32

// The actions of proxy-wasm ABI 0.2.1.
const (
	// Continue lets the request go on.
	Continue Action = 0
	// Pause stops iteration (StopIteration for headers and trailers,
	// StopIterationAndBuffer for body data).
	Pause Action = 1
)

// LogLevel is a proxy-wasm log level.
type LogLevel uint32

// The log levels of proxy-wasm ABI 0.2.1.
const (
	LogTrace LogLevel = iota
	LogDebug
	LogInfo
	LogWarn
	LogError
	LogCritical
)

// Host is everything the filter needs from the proxy. Byte slices returned
// by a Host are only valid until the next Host call that returns bytes; the
// filter copies what it keeps.
type Host interface {
	// Log writes a message to the proxy's log.
	Log(level LogLevel, msg string)
	// PluginConfig returns the plugin configuration (size bytes as
	// announced by proxy_on_configure).
	PluginConfig(size int) ([]byte, error)
	// RequestHeaders returns the current request's headers serialized in
	// the proxy-wasm map format (see ForEachHeader).
	RequestHeaders() ([]byte, error)
	// RemoveRequestHeader removes every value of a request header.
	RemoveRequestHeader(name string) error
	// RequestBody returns up to max bytes of the buffered request body.
	// An absent body is an empty one.
	RequestBody(max int) ([]byte, error)
	// ReplaceRequestBody replaces the first oldSize bytes of the buffered
	// body (the whole body) by body.
	ReplaceRequestBody(oldSize int, body []byte) error
	// SendLocalResponse answers the current request without forwarding it.
	// headers is a serialized proxy-wasm map (see SerializeHeaders).
	SendLocalResponse(status int, details string, body, headers []byte) error
	// SetProperty sets a property of the current request (path a single
	// segment, "kvgate.hint"), which the host keeps for its access log.
	SetProperty(path, value string) error
	// DefineCounter defines a counter metric and returns its id.
	DefineCounter(name string) (uint32, error)
	// IncrementCounter adds delta to a counter.
	IncrementCounter(id uint32, delta int64) error
}

// Reserver is implemented by a Host that can set aside memory for request
// bodies of up to n bytes in advance, so that the hot path does not grow it.
type Reserver interface {
	Reserve(n int)
}

// ErrBadHeaderMap reports a serialized header map that does not follow the
// proxy-wasm format.
var ErrBadHeaderMap = errors.New("malformed proxy-wasm header map")

// ForEachHeader calls fn for each pair of a header map serialized in the
// proxy-wasm format: a little-endian uint32 pair count, then a key size and
// a value size (uint32 each) per pair, then each key and value followed by
// a NUL byte. fn's slices alias m.
func ForEachHeader(m []byte, fn func(key, value []byte)) error {
	if len(m) == 0 {
		return nil
	}
	if len(m) < 4 {
		return ErrBadHeaderMap
	}
	n := uint64(le32(m))
	if 4+8*n > uint64(len(m)) {
		return ErrBadHeaderMap
	}
	sizes := m[4:]
	data := uint64(4 + 8*n)
	for i := uint64(0); i < n; i++ {
		ks := uint64(le32(sizes[8*i:]))
		vs := uint64(le32(sizes[8*i+4:]))
		if data+ks+vs+2 > uint64(len(m)) || m[data+ks] != 0 || m[data+ks+1+vs] != 0 {
			return ErrBadHeaderMap
		}
		fn(m[data:data+ks], m[data+ks+1:data+ks+1+vs])
		data += ks + vs + 2
	}
	return nil
}

// SerializeHeaders encodes header pairs in the proxy-wasm map format.
func SerializeHeaders(pairs [][2]string) []byte {
	size := 4
	for _, p := range pairs {
		size += 8 + len(p[0]) + len(p[1]) + 2
	}
	b := make([]byte, 0, size)
	b = appendLE32(b, uint32(len(pairs)))
	for _, p := range pairs {
		b = appendLE32(b, uint32(len(p[0])))
		b = appendLE32(b, uint32(len(p[1])))
	}
	for _, p := range pairs {
		b = append(b, p[0]...)
		b = append(b, 0)
		b = append(b, p[1]...)
		b = append(b, 0)
	}
	return b
}

// le32 and appendLE32 read and write the ABI's little-endian u32 fields.
// They stand in for encoding/binary, which would pull reflect into the module.
func le32(b []byte) uint32 {
	_ = b[3]
	return uint32(b[0]) | uint32(b[1])<<8 | uint32(b[2])<<16 | uint32(b[3])<<24
}

func appendLE32(b []byte, v uint32) []byte {
	return append(b, byte(v), byte(v>>8), byte(v>>16), byte(v>>24))
}
