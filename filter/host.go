// Package filter is the kvgate proxy-wasm HTTP filter's logic: a per-request
// state machine that buffers each request body, applies kvhints to it and
// forwards, rewrites or rejects it (docs/spec.md, "Reading a body the way the
// worker does" through "Plugin configuration").
//
// The logic talks to the proxy only through the narrow Host interface, so it
// builds and is tested natively with a fake host. The proxy-wasm ABI glue
// (exports and host imports) lives in filter/abi and nowhere else; what
// hosts must know about the filter (its configuration, metrics,
// properties, memory) is in filterspec, which hosts import instead of this
// package.
//
// Failure policy: anything unexpected while a request is in flight (a host
// call failing, a panic) answers the request with a local 503 JSON error; if
// even that fails the guest traps, which every host turns into a 503. An
// unfiltered body is never forwarded.
package filter

import (
	"github.com/kvgate/kvgate/kvhints"
	"github.com/kvgate/kvgate/proxywasm"
)

// Host is everything the filter needs from the proxy. Byte slices returned
// by a Host are only valid until the next Host call that returns bytes; the
// filter copies what it keeps.
type Host interface {
	// Log writes a message to the proxy's log.
	Log(level proxywasm.LogLevel, msg string)
	// PluginConfig returns the plugin configuration (size bytes as
	// announced by proxy_on_configure).
	PluginConfig(size int) ([]byte, error)
	// RequestHeaders returns the current request's headers serialized in
	// the proxy-wasm map format (see proxywasm.ForEachHeader).
	RequestHeaders() ([]byte, error)
	// RemoveRequestHeader removes every value of a request header.
	RemoveRequestHeader(name string) error
	// RequestBody returns up to limit bytes of the buffered request body.
	// An absent body is an empty one.
	RequestBody(limit int) ([]byte, error)
	// ReplaceRequestBody replaces the first oldSize bytes of the buffered
	// body (the whole body) by body.
	ReplaceRequestBody(oldSize int, body []byte) error
	// SendLocalResponse answers the current request without forwarding it.
	// headers is an encoded proxy-wasm map (see proxywasm.EncodeHeaderMap).
	SendLocalResponse(status int, details string, body, headers []byte) error
	// SetProperty sets a property of the current request (path a single
	// segment, "kvgate.hint"), which the host keeps for its access log.
	SetProperty(path, value string) error
	// DefineCounter defines a counter metric and returns its id.
	DefineCounter(name string) (uint32, error)
	// IncrementCounter adds delta to a counter.
	IncrementCounter(id uint32, delta int64) error
	// GetProperty returns a host property in the host's encoding. path is
	// the property's name with its segments separated by NUL bytes
	// ("connection\x00mtls"); an absent property is nil with no error.
	GetProperty(path string) ([]byte, error)
}

// Reserver is implemented by a Host that can set aside memory for request
// bodies of up to n bytes in advance, so that the hot path does not grow it.
type Reserver interface {
	Reserve(n int)
}

// Editor is implemented by a Host that can change the buffered body where
// it lies. The filter then hands it the rewrite as edits (see
// kvhints.Rewriter.Edits) instead of a new body: EditRequestBody applies
// edits to the first oldSize bytes of the body (the whole body), as
// ReplaceRequestBody would have replaced them by the edited bytes. The
// edits and their texts are valid during the call only (the filter's
// Rewriter may run again before the callback returns, to explain a
// discarded hint), and the body the filter read must stay as it was until
// the callback returns: a host that applies them once the callback is
// over copies them first. A host that copies the
// body into the filter's memory gains nothing by it: the wasm host does
// not implement it, the native Envoy module does.
type Editor interface {
	EditRequestBody(oldSize int, edits []kvhints.Edit) error
}
