//go:build kvgate_noop

package native

// The kvgate_noop build answers every request hook with Continue at once,
// after entering Go: the floor of a Go dynamic module in Envoy, measured
// beside kvgate's in tests/envoybench (as row n, with
// KVGATE_NATIVE_MODULE set to this build; row n0 is the C floor).
func init() { noopHooks = true }
