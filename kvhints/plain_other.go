//go:build !wasm

package kvhints

// bulkPlain is false: natively the one-word loop in scanString is already
// fast, and a call per string would only add to it; the Go scanner is as
// fast as quickScan is on wasm.
const bulkPlain = false

func plainWords(b []byte) int { return plainWordsGo(b) }

// quickScan is never called natively (bulkPlain is false).
func quickScan(b []byte, st *quickState, stack []byte) int { panic("kvhints: quickScan needs wasm") }
