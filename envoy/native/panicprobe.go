//go:build kvgate_panicprobe

package native

import "bytes"

// The kvgate_panicprobe build panics where a request asks it to, with the
// header x-kvgate-test-panic: "plugin" inside the Plugin's header callback
// (the Plugin's own recovery answers), "module" after the Plugin's body
// callback, in the module's own code (the module's recovery answers). For
// tests/e2e TestNativePanicsFailClosed only.
func init() {
	panicProbe = func(h *host, where string) {
		for _, p := range h.hdrs {
			if bytes.EqualFold(p.Key, []byte("x-kvgate-test-panic")) && string(p.Value) == where {
				panic("kvgate test panic: " + where)
			}
		}
	}
}
