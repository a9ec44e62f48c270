//go:build kvgate_panicprobe

package main

import (
	"bytes"

	"github.com/kvgate/kvgate/envoy/native"
	"github.com/kvgate/kvgate/envoy/native/internal/abi"
)

// The kvgate_panicprobe build fails where a request asks it to, with the
// header x-kvgate-test-panic: "plugin" panics inside the Plugin's header
// callback (reading the headers; the Plugin's own recovery answers),
// "module" dereferences a nil pointer in the module's body hook before the
// Plugin runs (taking the body's size): a SIGSEGV in Go code inside Envoy,
// which the Go runtime turns into a panic and the module's recovery
// answers. For tests/e2e TestNativePanicsFailClosed only.
func init() {
	module.WrapStreams(func(s native.Stream) native.Stream { return &probe{Stream: s} })
}

type probe struct {
	native.Stream
	hdrs []abi.Header
}

var nilTarget *int

func (p *probe) asks(hs []abi.Header, where string) bool {
	for _, h := range hs {
		if bytes.EqualFold(h.Key, []byte("x-kvgate-test-panic")) && string(h.Value) == where {
			return true
		}
	}
	return false
}

func (p *probe) RequestHeaders(dst []abi.Header) ([]abi.Header, bool) {
	hs, ok := p.Stream.RequestHeaders(dst)
	if ok && p.asks(hs, "plugin") {
		panic("kvgate test panic: plugin")
	}
	return hs, ok
}

func (p *probe) RequestBodySize(inBody bool) int {
	if hs, ok := p.Stream.RequestHeaders(p.hdrs[:0]); ok {
		p.hdrs = hs
		if p.asks(hs, "module") {
			*nilTarget = 1
		}
	}
	return p.Stream.RequestBodySize(inBody)
}
