package kvhints

// bulkPlain makes scanString hand long runs to plainWords.
const bulkPlain = true

// plainWords is implemented in plain_wasm.s.
//
//go:noescape
func plainWords(b []byte) int

// quickScan is implemented in value_wasm.s.
//
//go:noescape
func quickScan(b []byte, i int, stack []byte, out []int64) int
