//go:build kvgate_abiprobe

package abi

/*
extern void envoy_dynamic_module_callback_kvgate_probe_absent(void) __attribute__((weak));

static const char* kvgate_probe_missing(void) {
  return envoy_dynamic_module_callback_kvgate_probe_absent ? 0 : "envoy_dynamic_module_callback_kvgate_probe_absent";
}
*/
import "C"

// The kvgate_abiprobe build requires a callback that no Envoy provides, so
// that a test sees what an Envoy without one of kvgate's callbacks does
// with the module (tests/e2e TestNativeABIMismatch).
func init() {
	probeMissing = func() string {
		if p := C.kvgate_probe_missing(); p != nil {
			return C.GoString(p)
		}
		return ""
	}
}
