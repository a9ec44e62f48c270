//go:build kvgate_panicprobe

package native

import "bytes"

// The kvgate_panicprobe build fails where a request asks it to, with the
// header x-kvgate-test-panic: "plugin" panics inside the Plugin's header
// callback (the Plugin's own recovery answers), "module" dereferences a nil
// pointer after the Plugin's body callback, in the module's own code: a
// SIGSEGV in Go code inside Envoy, which the Go runtime turns into a panic
// and the module's recovery answers. For tests/e2e
// TestNativePanicsFailClosed only.
func init() {
	panicProbe = func(h *host, where string) {
		for _, p := range h.hdrs {
			if bytes.EqualFold(p.Key, []byte("x-kvgate-test-panic")) && string(p.Value) == where {
				if where == "module" {
					*nilTarget = 1
				}
				panic("kvgate test panic: " + where)
			}
		}
	}
}

var nilTarget *int
