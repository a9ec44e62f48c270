//go:build !wasm

package kvhints

// quickScan is never called natively: bulkPlain is false, and the Go
// scanner is as fast as quickScan is on wasm.
func quickScan(b []byte, st *quickState, stack []byte) int { panic("kvhints: quickScan needs wasm") }
