package kvhints

// bulkPlain makes scanString hand long runs to plainWords, and the body
// scan and skip use quickScan.
const bulkPlain = true

// plainWords is implemented in plain_wasm.s.
//
//go:noescape
func plainWords(b []byte) int

// quickScan is implemented in value_wasm.s.
//
//go:noescape
func quickScan(b []byte, st *quickState, stack []byte) int
