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

// quickSkipValue validates the value at b[i] with quickScan; -1 means it
// declined (see value_wasm.s).
func quickSkipValue(b []byte, i int, stack []byte) int { return quickScan(b, i, stack, nil) }
